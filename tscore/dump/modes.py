"""ptdbg's dump modes (``all``, ``list``, ``range``, ``stack``, ``api_list``, ``api_stack``, ``acl``).

ptdbg's ``set_dump_switch`` and TroubleShooter's ``api_dump_start`` name what
to dump by a mode and a scope; :func:`mode_filters` turns those into the
fields of a :class:`~tscore.dump.config.DumpConfig`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tscore.dump.config import DumpConfigError


def mode_filters(
    mode: str, scope: Sequence[str], api_list: Sequence[str], acl_config: str | None = None
) -> dict[str, Any]:
    """Translate a ``set_dump_switch`` mode (``api_dump_start``'s are the same) into the config's filters.

    :param acl_config: the ``dump.json`` that ``register_hook(..., dump_mode='acl')`` gave,
        for ``mode='acl'``.
    :raises DumpConfigError: naming the mode and what its ``scope`` or ``api_list`` needs.
    """
    if mode == "all":
        return {}
    if mode == "list":
        if not scope:
            raise DumpConfigError("set_dump_switch(mode='list') needs scope=[names of the calls to dump]")
        return {"list": list(scope)}
    if mode == "range":
        if len(scope) != 2:
            raise DumpConfigError(
                f"set_dump_switch(mode='range') needs scope=[first call, last call], got {list(scope)!r}"
            )
        return {"scope": list(scope)}
    if mode == "stack":  # no scope: every call; one name: the calls it begins; two: a range
        if len(scope) > 2:
            raise DumpConfigError(
                f"set_dump_switch(mode='stack') takes up to two names in scope, got {list(scope)!r}"
            )
        chosen = {"scope": list(scope)} if len(scope) == 2 else {"list": list(scope)}
        return {**chosen, "stack_only": True}
    if mode == "api_list":
        if not api_list:
            raise DumpConfigError(
                "set_dump_switch(mode='api_list') needs api_list=[API names, such as 'relu']"
            )
        return {"apis": list(api_list)}
    if mode == "api_stack":
        return {"stack": True}
    if acl_config is None:
        raise DumpConfigError(
            "set_dump_switch(mode='acl') needs register_hook(model, acc_cmp_dump, dump_mode='acl', "
            "dump_config='dump.json') first (an Ascend NPU with torch_npu); elsewhere use mode='list'"
        )
    if not scope:
        raise DumpConfigError("set_dump_switch(mode='acl') needs scope=[names of the calls to dump]")
    backward = [name for name in scope if name.endswith("backward")]
    if backward:
        raise DumpConfigError(
            f"set_dump_switch(mode='acl'): {', '.join(backward)}: an ACL dump of a backward call replays it "
            "from set_backward_input's files, which this version does not do; dump the forward call, or "
            "the backward call with mode='list'"
        )
    return {"list": list(scope), "acl_config": acl_config}
