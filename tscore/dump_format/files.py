"""The files of one dump folder, ``{dump_path}/step{k}/rank{r}/`` (written by :mod:`tscore.dump.writer`).

* ``dump.jsonl``: one record per call and direction, appended and flushed as it goes;
* ``stack.jsonl``: each distinct call stack once;
* ``construct.jsonl``: the module tree;
* ``dump_info.json``: what was dumped, and how;
* ``tensors/``: with ``task="tensor"``, one ``.npy`` per tensor.
"""

RECORDS_FILE = "dump.jsonl"
STACKS_FILE = "stack.jsonl"
CONSTRUCT_FILE = "construct.jsonl"
TENSORS_FOLDER = "tensors"
INFO_FILE = "dump_info.json"
OUTSIDE = "(outside)"  # the module of a call made outside every module of the model
