"""The dump's on-disk format, shared by the dump (:mod:`tscore.dump`) and the dump comparison.

The files of a ``step{k}/rank{r}`` folder (:mod:`~tscore.dump_format.files`), the names of
calls in tscore's, ptdbg's and msprobe's spellings (:mod:`~tscore.dump_format.names`), reading
the records back (:mod:`~tscore.dump_format.reading`) and the stacks they hold
(:mod:`~tscore.dump_format.stacks`). Neither side imports the other's package for these: the
comparison reads a dump without loading the debugger.
"""
