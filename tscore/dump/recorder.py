"""The dump recorder: what a backend reports every API and module call to.

A backend (``ts_install_api_hooks``) calls, for every API call it sees at the
top level (a call made inside a captured call is not reported, ptdbg's rule):

* :meth:`DumpRecorder.begin` before the call, with the prefix (``Functional``),
  the API name (``conv2d``) and the arguments. The recorder numbers the call
  (``Functional_conv2d_0``, one counter per API and step), decides whether it
  is dumped, and takes what it needs of the inputs before the call can change
  them. It returns a :class:`CallToken`, or ``None`` when the call is not dumped;
* :meth:`DumpRecorder.end` after it, with the output;
* :meth:`DumpRecorder.backward` when backward reaches the call, with the
  gradients that flowed into its outputs and those it passed to its inputs.

Module calls arrive through the recorder's ``enter``/``leave`` (it is a
:class:`tscore.contract.layers.ModuleRecorder`): they give every record its
provenance key (the enclosing module's path and call, and the call's index
within it, which an unrelated call elsewhere does not shift) and, at level
``L0``/``mix``, records of their own.

The recorder names, filters and formats; the backend computes nothing but the
statistics (on the tensor's own device, ``ts_tensor_stats``); the writer writes.
"""

from __future__ import annotations

import linecache
import logging
import math
import sys
import weakref
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tscore.array_stats import compiled_kernel
from tscore.contract.recorders import STACK_HERE
from tscore.contract.transfers import StagedEntry, StagedStats
from tscore.dump.call_filter import CallFilter, inside
from tscore.dump.config import DumpConfig
from tscore.dump.tensor_ops import TensorDispatch, TensorOps
from tscore.dump.writer import DumpWriter
from tscore.dump_format.files import CONSTRUCT_FILE, OUTSIDE, STACKS_FILE, TENSORS_FOLDER
from tscore.dump_format.names import MODULE_PREFIX, CallName, tensor_name
from tscore.plugins import hook, plugin_packages
from tscore.tensors import to_numpy

log = logging.getLogger(__name__)

_PLAIN = (bool, int, float, str, type(None))


def _plain_bound(bound: Any) -> Any:
    """Return a slice's start, stop or step as a plain value (a 0-d tensor's number; else its text)."""
    if isinstance(bound, _PLAIN):
        return bound
    try:
        return int(bound)
    except (TypeError, ValueError, RuntimeError):
        return str(bound)


# how many recent tensors the recorder remembers, to reuse their statistics and files
# a list or tuple argument of more plain values than this is recorded by its length, not value by value
LONGEST_PLAIN_LIST = 16
INTEGER_DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})
_MISSING = object()
_STACK_CACHE_LIMIT = 100_000  # distinct stacks kept across steps, at most
_PRUNE_AT = 4096  # entries before the dead ones are swept


def _no_ref() -> None:
    """Stand for a weak reference to a tensor the recorder cannot keep track of."""
    return None


class _Seen:
    """A tensor seen in this step (held weakly), with its statistics and file once they exist."""

    __slots__ = ("file", "ref", "stats")

    def __init__(self, ref: Any) -> None:
        """Hold a weak reference to the tensor (or a function returning None when it has none)."""
        self.ref = ref
        self.stats: Any = _MISSING
        self.file: str | None = None


@dataclass
class CallToken:
    """A call being dumped: its name, where it ran, and what is kept for its record."""

    name: CallName
    key: str
    module: str
    stack: int | None
    inputs: list[dict[str, Any]]
    record: bool = True  # False: only counted (its backward may still be dumped)
    held: Any = None  # the arguments themselves, when a recorder looks at them only after the call
    nonfinite: bool = False  # the overflow check found inf or NaN in the forward call's values
    kernel: Any = None  # the device's kernel-level dump, entered for this call (config.acl_config)
    framework: str = ""  # whose tensors a compiled capture described (begin_described)


@dataclass
class _ModuleFrame:
    path: str
    call: int
    counts: dict[str, int] = field(default_factory=dict)
    token: CallToken | None = None  # set when the module call itself is dumped (L0, mix)


class DumpRecorder:
    """Turn a backend's call events into records for one step and rank, and hand them to the writer.

    :param config: what to dump.
    :param writer: where the records go.
    :param step: the step number, for the records.
    :param rank: the rank, for the records.
    """

    # True: ``construct.jsonl`` is written only once the step has a record (the overflow check's
    # steps mostly have none)
    tree_waits_for_a_record = False

    def __init__(self, config: DumpConfig, writer: DumpWriter, *, step: int = 0, rank: int = 0) -> None:
        """Start with no calls counted."""
        self.config = config
        self.writer = writer
        self.step = step
        self.rank = rank
        self.enabled = True
        self.stats_only = config.task != "tensor"
        self.md5 = config.summary_mode == "md5"
        self.stack_only = config.stack_only
        self.calls = 0
        self.dumped = 0
        self._counts: dict[str, int] = {}
        self._filter = CallFilter(config)
        # data_mode, looked up per call: which sides of each direction are kept, and whether anything is
        self._keeps = {
            (d, r): config.wants(d, r) for d in ("forward", "backward") for r in ("input", "output")
        }
        self._directions = {
            d: self.stack_only or self._keeps[d, "input"] or self._keeps[d, "output"]
            for d in ("forward", "backward")
        }
        self._modules: list[_ModuleFrame] = []
        self._outside = _ModuleFrame(OUTSIDE, 0)  # calls made outside every module of the model
        self._module_calls: dict[str, int] = {}
        self._module_tree: set[str] = set()
        # the modules entered before the step's first record, when the tree waits for one; None: written
        self._tree_waiting: list[dict[str, Any]] | None = [] if self.tree_waits_for_a_record else None
        self._stacks: dict[tuple[tuple[str, int, str], ...], int] = {}
        self.stack_lines: dict[int, list[str]] = {}  # each stored stack's lines, by its id
        # by the ids of the frames' code objects and their lines
        self._stack_ids: dict[tuple[tuple[int, int], ...], tuple[int, tuple[Any, ...]]] = {}
        # tensors seen in this step by content key, held weakly: a call's input is very often an
        # earlier call's output, whose statistics and file are reused while it is alive and unchanged
        self._seen: dict[Any, _Seen] = {}
        # the keys each memory is known under: one key, or a set of them once there are several
        # (the common case allocates no set: every object that lives through the step is one
        # more for Python's full garbage collections, which then come sooner)
        self._by_memory: dict[Any, Any] = {}
        self._prune_at = _PRUNE_AT
        self._ops = TensorDispatch()
        self._devices: set[str] = set()  # every device a recorded tensor lived on
        self._noted: set[str] = set()  # the devices whose settings were read since the model's call began
        # the settings that change numbers, by framework and device ("torch cuda:0"), as backends report them
        self.settings: dict[str, list[dict[str, Any]]] = {}
        self.busy = 0  # > 0 while the recorder itself runs framework code: backends report none of it
        self.stack_at_begin = True  # False: a subclass takes the stack itself, when it needs it
        self._kernels: list[Any] = []  # kernel-level dumps entered and not yet left
        self.native_note = ""  # what the framework's own dump gave this step (dump_info.json)
        # stacks worked out (frames shown, their lines), by frame codes and lines: a debugger hands
        # the same dict to every step's recorder, so a step does not work out its stacks again
        self.stack_cache: dict[tuple[tuple[int, int], ...], Any] = {}
        # frames of tscore and of its loaded plugins are left out of the stacks users read
        self._internal = plugin_packages() | {__name__.partition(".")[0]}
        # what compiled captures call to report the calls they hold (ApiRecorder.add_pending)
        self._pending: list[Callable[[], None]] = []
        # settings a compiled capture had read at a call, by device, until a recorded entry is there
        self._settings_read: dict[str, tuple[str, list[dict[str, Any]]]] = {}
        compiled_kernel()  # the statistics' kernel loaded now, not inside the step's first statistics

    # ------------------------------------------------------------ switches

    @property
    def frameworks(self) -> list[str]:
        """The frameworks whose tensors this step recorded (one, unless a step mixes them)."""
        return sorted(self._ops.frameworks)

    @property
    def devices(self) -> list[str]:
        """The devices of the tensors this step recorded, accelerators first (``cuda:0``, then ``cpu``)."""
        return sorted(self._devices, key=lambda d: (d == "cpu", d))

    @property
    def wants_parameter_gradients(self) -> bool:
        """Whether ``parameters_grad`` records are written (``L0``, ``mix``): hook parameters only then."""
        return self.config.level != "L1"

    @property
    def reads_values(self) -> bool:
        """Whether records need tensors' values on the host beyond their statistics (tensor files, md5).

        A backend that can summarise a tensor without waiting for its device gains nothing when
        the values are read all the same.
        """
        return not self.stats_only or self.md5

    @property
    def takes_described(self) -> bool:
        """Whether a compiled capture may describe this dump's calls itself and report them late.

        True when the records need the statistics alone (no tensor files, no md5, no kernel-level
        dump entered around each call); the overflow check reads the tensors itself and says False.
        """
        return self.stats_only and not self.md5 and not self.config.acl_config

    def entry_rules(self) -> dict[str, Any]:
        """Say how entries are made, for a capture that makes them: dtypes left out, the longest list."""
        return {
            "skipped_dtypes": set(INTEGER_DTYPES) if self.config.filter_int else set(),
            "longest_plain_list": LONGEST_PLAIN_LIST,
        }

    @property
    def backward_wanted(self) -> bool:
        """Whether any backward record may be written (backends skip their backward hooks otherwise)."""
        return self._direction_wanted("backward")

    @property
    def active(self) -> bool:
        """True while the recorder dumps: enabled and its writer still working."""
        return self.enabled and self.writer.failed is None

    def unmatched_scope(self) -> list[str]:
        """Names of the config's scope and list that no call of this step had."""
        wanted = [*self._filter.scope, *self._filter.names]
        return [name for name in wanted if name not in self._filter.seen]

    # ------------------------------------------------------------ API calls

    def begin(
        self,
        prefix: str,
        api: str,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        *,
        stack: Any = STACK_HERE,
    ) -> CallToken | None:
        """Count a call before it runs; keep what its record needs of the inputs (None: not dumped).

        :param stack: what :meth:`stack_here` gave at the call, when a capture took it then; by
            default the recorder reads the stack itself.
        """
        if self._pending and isinstance(stack, str):  # reported as it goes: the held calls came first
            self.report_pending()
        token = self._open(prefix, api, stack)
        if token is not None and token.record:
            if not self.stack_only and self._keeps["forward", "input"]:
                self._keep_inputs(token, args, kwargs)
            if self.config.acl_config:  # last: the recorder's own work stays out of that dump
                token.kernel = self._kernel_dump()
        return token

    def _open(self, prefix: str, api: str, stack: Any) -> CallToken | None:
        """Count a call and make its token (None: not dumped, neither forward nor backward)."""
        index = self.count(prefix, api)
        if not self.active:
            return None
        name = CallName(prefix, api, index, "forward")
        wanted = self._filter.wants(name) and self._directions["forward"]
        if not wanted and not (
            self._directions["backward"] and self._filter_peek(CallName(prefix, api, index, "backward"))
        ):
            return None
        module, key = self._provenance(f"{prefix}.{api}")
        if isinstance(stack, str):
            stack = self._stack(3) if self.stack_at_begin else None
        elif stack is not None:  # what stack_here took at the call: stored now that the call is dumped
            stack = self._stack_id(stack)
        return CallToken(name, key, module, stack, [], record=wanted)

    def begin_described(
        self, prefix: str, api: str, inputs: list[dict[str, Any]], *, stack: Any, framework: str
    ) -> CallToken | None:
        """:meth:`begin` for a call a compiled capture described at the call and reports now.

        :param inputs: the entries of its arguments as :meth:`_describe` makes them, each named by
            what follows the call's name (``"_input.0"``).
        :param stack: what :meth:`stack_here` gave at the call.
        :param framework: the framework whose tensors these were (its settings are recorded).
        """
        token = self._open(prefix, api, stack)
        if token is not None:
            token.framework = framework
            if token.record:
                self._ops.frameworks.add(framework)  # a recorded call: its tensors are this framework's
                if not self.stack_only and self._keeps["forward", "input"]:
                    token.inputs = self._named(token.name.ptdbg, inputs, framework)
        return token

    def record_described(
        self,
        prefix: str,
        api: str,
        inputs: list[dict[str, Any]],
        outputs: list[dict[str, Any]] | None,
        *,
        stack: Any,
        framework: str,
    ) -> CallToken | None:
        """:meth:`begin_described` and :meth:`end_described` at once, for a call that has returned.

        :param outputs: the entries of its output; None when the call raised (counted, its inputs'
            devices noted, not recorded).
        :param stack: what :meth:`stack_here` gave at the call, or None.
        :return: the token for :meth:`backward_described`, or None when the call is not dumped.
        """
        token = self.begin_described(prefix, api, inputs, stack=stack, framework=framework)
        if token is not None and outputs is not None:
            self.end_described(token, outputs)
        return token

    def end_described(self, token: CallToken, outputs: list[dict[str, Any]]) -> None:
        """:meth:`end` for a call :meth:`begin_described` opened; ``outputs`` named as its inputs."""
        if not token.record or not self.active:
            return
        if self.stack_only or not self._keeps["forward", "output"]:
            outputs = []
        else:
            outputs = self._named(token.name.ptdbg, outputs, token.framework)
        inputs, token.inputs = token.inputs, []
        self._emit(token, token.name, inputs, outputs)

    def backward_described(
        self, token: CallToken, into_outputs: list[dict[str, Any]], into_inputs: list[dict[str, Any]]
    ) -> None:
        """:meth:`backward` for a call :meth:`begin_described` opened, its gradients described."""
        self._record_backward(token, into_outputs, into_inputs, described=True)

    def describe_value(self, side: str, path: tuple[str, ...], value: Any) -> list[dict[str, Any]]:
        """Return the entries of one argument or output, named by what follows the call's name.

        What a compiled capture asks of the recorder for a value it does not describe itself.
        """
        out: list[dict[str, Any]] = []
        self._describe("", side, path, value, out)
        return out

    def _named(self, call: str, entries: list[dict[str, Any]], framework: str) -> list[dict[str, Any]]:
        """Prefix described entries' names with the call's; keep the settings read for their devices."""
        for entry in entries:
            entry["name"] = call + entry["name"]
            if "error" in entry:  # a tensor it could not read: where it was, for the settings alone
                device = entry.pop("_device", None)
                if device is not None and device in self._settings_read:
                    self._keep_settings(device, *self._settings_read.pop(device))
        if self._settings_read:  # kept, as the Python capture keeps them, once a recorded tensor is there
            for entry in entries:
                read = self._settings_read.pop(entry.get("device"), None)  # type: ignore[arg-type]
                if read is not None:
                    self._keep_settings(entry["device"], *read)
        return entries

    @property
    def noted_devices(self) -> set[str]:
        """The devices whose settings were read since the model's call began (the set itself, kept)."""
        return self._noted

    def note_device(self, framework: str, device: str) -> None:
        """Read the settings of ``device`` now, at a call a compiled capture saw first there.

        They are kept once a recorded entry has a tensor there (a call the filters leave out
        records none).
        """
        self._noted.add(device)
        self._settings_read[device] = self._read_settings(self._ops.for_framework(framework), device)

    def count(self, prefix: str, api: str) -> int:
        """Count one call of ``prefix_api`` and return its index (the names stay those of the whole run)."""
        base = f"{prefix}_{api}"
        index = self._counts.get(base, 0)
        self._counts[base] = index + 1
        self.calls += 1
        return index

    def _kernel_dump(self) -> Any:
        """Enter the device's kernel-level dump for the call about to run; None when it cannot start."""
        manager = hook().ts_kernel_dump(config_path=self.config.acl_config)
        if manager is None:
            return None
        try:
            manager.__enter__()
        except Exception as exc:  # a dump must never stop the training
            log.warning("kernel-level dump not started: %s", exc)
            return None
        self._kernels.append(manager)
        return manager

    def close_kernels(self) -> None:
        """Leave every kernel-level dump still entered (a dumped call raised before its end)."""
        while self._kernels:
            self._leave(self._kernels.pop())

    def _leave(self, manager: Any) -> None:
        try:
            manager.__exit__(None, None, None)
        except Exception as exc:
            log.warning("kernel-level dump not finished: %s", exc)

    def _keep_inputs(self, token: CallToken, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """Take what the record needs of a call's inputs before the call can change them."""
        token.inputs = self._arguments(token.name.ptdbg, "input", args, kwargs)

    def _direction_wanted(self, direction: str) -> bool:
        """Whether ``data_mode`` keeps anything of a call's ``direction`` (stacks alone: always)."""
        known = self._directions.get(direction)
        if known is None:
            return (
                self.stack_only
                or self.config.wants(direction, "input")
                or self.config.wants(direction, "output")
            )
        return known

    def _filter_peek(self, name: CallName) -> bool:
        """Whether a call's backward is listed (a list or API filter names it), without moving a range."""
        if self._filter.scope:  # a range may begin or end at a backward call: let backward() decide
            return self._filter.in_range or not self._filter.range_done
        return self._filter.listed(name, name.ptdbg)

    def end(self, token: CallToken, output: Any) -> None:
        """Record a call that returned ``output``."""
        if self._pending:  # another capture reports as it goes: the held calls came first
            self.report_pending()
        if token.kernel is not None:
            self._kernels.remove(token.kernel)
            self._leave(token.kernel)
            token.kernel = None
        if not token.record or not self.active:
            return
        outputs: list[dict[str, Any]] = []
        if not self.stack_only and self._keeps["forward", "output"]:
            outputs = self._outputs(token.name.ptdbg, output)
        inputs, token.inputs = token.inputs, []  # the token lives on until backward: its record is gone
        self._emit(token, token.name, inputs, outputs)

    def backward(self, token: CallToken, grad_outputs: Any, grad_inputs: Any) -> None:
        """Record the backward of a dumped call.

        :param grad_outputs: the gradients that flowed into the call's outputs: the backward's inputs.
        :param grad_inputs: the gradients the call passed to its inputs: the backward's outputs.
        """
        if self._pending:
            self.report_pending()
        self._record_backward(token, grad_outputs, grad_inputs, described=False)

    def _record_backward(
        self, token: CallToken, into_outputs: Any, into_inputs: Any, *, described: bool
    ) -> None:
        """Write a call's backward record: gradients as values, or as a compiled capture described them."""
        if not self.active:
            return
        name = CallName(token.name.prefix, token.name.api, token.name.index, "backward")
        if not self._direction_wanted("backward") or not self._filter.wants(name):
            return
        inputs = outputs = []
        if not self.stack_only:
            for side, grads in (("input", into_outputs), ("output", into_inputs)):
                if not self._keeps["backward", side]:
                    continue
                entries = (
                    self._named(name.ptdbg, grads, token.framework)
                    if described
                    else self._values(name.ptdbg, side, grads)
                )
                if side == "input":
                    inputs = entries
                else:
                    outputs = entries
        self._emit(token, name, inputs, outputs)

    def stack_here(self) -> Any:
        """Take the stack that called the caller (a compiled capture asks once per new stack); None if none.

        What it returns is handed back as ``begin_described``'s ``stack``: the stack is stored, and
        given its id, only for a call that is dumped. The caller is the capture the framework called
        from the user's code, with no Python frame between.
        """
        if not self.config.stack:
            return None
        return self._stack_snapshot(2)

    def add_pending(self, report: Callable[[], None]) -> None:
        """Call ``report()`` (a compiled capture's) before a module is entered or left, and at the end."""
        self._pending.append(report)

    def remove_pending(self, report: Callable[[], None]) -> None:
        """Stop calling ``report`` (see :meth:`add_pending`)."""
        if report in self._pending:
            self._pending.remove(report)

    def report_pending(self) -> None:
        """Have every compiled capture report the calls it holds, in their order."""
        for report in self._pending:
            report()

    # ------------------------------------------------------------ module calls (ModuleRecorder)

    def enter(self, path: str, layer: object, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """Open a module call: the provenance of the calls inside it; at L0/mix a record of its own."""
        if self._pending:  # the calls made before it belong to the module around it
            self.report_pending()
        if path == "":  # the model's own call: its settings (autocast) are read again inside it
            self._noted.clear()
        call = self._module_calls.get(path, 0)
        self._module_calls[path] = call + 1
        # a module that raised never left: drop its frame once a module outside it starts
        while self._modules and not inside(path, self._modules[-1].path):
            self._modules.pop()
        self._modules.append(_ModuleFrame(path, call))
        if path not in self._module_tree and self.active:
            self._module_tree.add(path)
            parent = next((f.path for f in reversed(self._modules[:-1])), None)
            self._tree_entry({"module": path, "type": type(layer).__name__, "parent": parent})
        if self.config.level != "L1" and self.active:
            label = f"{path}.{type(layer).__name__}" if path else type(layer).__name__
            name = CallName(MODULE_PREFIX, label, call, "forward")
            if self._filter.wants(name):
                inputs = [] if self.stack_only else self._arguments(name.msprobe, "input", args, kwargs)
                self._modules[-1].token = CallToken(name, f"{path}#{call}", path, self._stack(), inputs)

    def _tree_entry(self, entry: dict[str, Any]) -> None:
        """Write one module of the tree (``construct.jsonl``) the first time the step enters it."""
        if self._tree_waiting is None:
            self.writer.submit_record(entry, CONSTRUCT_FILE)
        else:
            self._tree_waiting.append(entry)

    def leave(self, path: str, layer: object, output: object) -> None:
        """Close the innermost call of module ``path``."""
        if self._pending:
            self.report_pending()
        while self._modules and self._modules[-1].path != path:
            self._modules.pop()
        if not self._modules:
            return
        token = self._modules.pop().token
        if token is not None and self.active:
            outputs = [] if self.stack_only else self._outputs(token.name.msprobe, output)
            self._emit(token, token.name, token.inputs, outputs)

    def parameter_gradients(self, path: str, type_name: str, grads: Mapping[str, Any]) -> None:
        """Record one module's parameter gradients: ``Module.{path}.{Class}.parameters_grad.0``."""
        if self._pending:
            self.report_pending()
        if not self.active or self.config.level == "L1":
            return
        label = f"{path}.{type_name}" if path else type_name
        name = CallName(MODULE_PREFIX, label, 0, "parameters_grad")
        outputs: list[dict[str, Any]] = []
        for local, grad in grads.items():
            self._describe(name.msprobe, "output", (local,), grad, outputs)
        token = CallToken(name, f"{path}#grad", path, None, [])
        self._emit(token, name, [], outputs)

    def _provenance(self, api: str) -> tuple[str, str]:
        frame = self._modules[-1] if self._modules else self._outside
        index = frame.counts.get(api, 0)
        frame.counts[api] = index + 1
        return frame.path, f"{frame.path}#{frame.call}/{api}#{index}"

    # ------------------------------------------------------------ values

    def _stack(self, depth: int = 2) -> int | None:
        """Return the id of the calling stack, stored once per distinct stack.

        :param depth: frames to pass over: 2 from :meth:`begin` reaches the backend's frame.
        """
        if not self.config.stack:
            return None
        return self._stack_id(self._stack_snapshot(depth + 1))

    def _stack_snapshot(self, depth: int) -> tuple[tuple[Any, ...], Any]:
        """Return the calling stack's key and, the first time this dump meets it, its frames worked out.

        The stack is told apart by its frames' code objects and instruction offsets alone (cheap
        to gather per call); the frames shown to users, without tscore's and the framework's own, are
        worked out once per distinct stack. :meth:`_stack_id` stores it, now or once a deferred
        check finds the call worth a record.
        """
        where = []
        frame: Any = sys._getframe(depth)
        while frame is not None:
            # a code object's own hash reads its bytecode, and f_lineno decodes the line table on each
            # read: the instruction's offset tells the call sites apart as well, at no cost
            where.append((id(frame.f_code), frame.f_lasti))
            frame = frame.f_back
        key = tuple(where)
        if key in self._stack_ids:
            return key, None
        worked_out = self.stack_cache.get(key)  # the same stack in an earlier step of this debugger
        if worked_out is None:
            worked_out = self._work_out_stack(depth + 1, self._internal)
            if len(self.stack_cache) >= _STACK_CACHE_LIMIT:
                self.stack_cache.clear()
            self.stack_cache[key] = worked_out
        return key, worked_out

    def _stack_id(self, snapshot: tuple[tuple[Any, ...], Any]) -> int:
        """Store a stack taken by :meth:`_stack_snapshot` (once per distinct stack) and return its id."""
        key, worked_out = snapshot
        known = self._stack_ids.get(key)
        if known is not None:
            return int(known[0])
        shown, lines, codes = worked_out
        found = self._stacks.get(shown)
        if found is None:
            found = len(self._stacks)
            self._stacks[shown] = found
            self.writer.submit_record({"id": found, "stack": lines}, STACKS_FILE)
            self.stack_lines[found] = lines
        self._stack_ids[key] = (found, codes)  # the codes held, so that no id is reused
        return found

    @staticmethod
    def _work_out_stack(
        depth: int, internal: frozenset[str]
    ) -> tuple[tuple[Any, ...], list[str], tuple[Any, ...]]:
        """Return the frames users read (without tscore's and the framework's), their lines, every code.

        :param internal: the packages and modules whose frames are left out (tscore, its plugins).
        """
        frames = []
        codes = []
        frame: Any = sys._getframe(depth)
        while frame is not None:
            codes.append(frame.f_code)
            module = str(frame.f_globals.get("__name__", ""))
            if (
                module.partition(".")[0] not in internal
                and module not in internal
                and not module.startswith("torch")
            ):
                frames.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
            frame = frame.f_back
        lines = [  # a frame a JIT runs (MindSpore's bytecode capture) may have no line: None
            f"File {f}, line {n}, in {name}\n  {linecache.getline(f, n).strip() if n else ''}".rstrip()
            for f, n, name in reversed(frames)
        ]
        return tuple(frames), lines, tuple(codes)

    def _arguments(
        self, call: str, side: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        for index, value in enumerate(args):
            self._describe(call, side, (str(index),), value, entries)
        for key, value in kwargs.items():
            self._describe(call, side, (str(key),), value, entries)
        return entries

    def _outputs(self, call: str, output: Any) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        if isinstance(output, (tuple, list)):
            for index, value in enumerate(output):
                self._describe(call, "output", (str(index),), value, entries)
        else:
            self._describe(call, "output", (), output, entries)
        return entries

    def _values(self, call: str, side: str, values: Any) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        for index, value in enumerate(values or ()):
            self._describe(call, side, (str(index),), value, entries)
        return entries

    def _describe(
        self, call: str, side: str, path: tuple[str, ...], value: Any, out: list[dict[str, Any]]
    ) -> None:
        name = tensor_name(call, side, path)
        if isinstance(value, _PLAIN):
            out.append({"name": name, "type": type(value).__name__, "value": value})
            return
        if isinstance(value, slice):  # an index: compared as values, as msprobe spells it
            self.busy += 1  # a tensor bound's number is read by a call no capture may see
            try:
                bounds = [_plain_bound(b) for b in (value.start, value.stop, value.step)]
            finally:
                self.busy -= 1
            out.append({"name": name, "type": "slice", "value": bounds})
            return
        if value is Ellipsis:
            out.append({"name": name, "type": "ellipsis", "value": "..."})
            return
        if isinstance(value, (tuple, list)):
            if len(value) > LONGEST_PLAIN_LIST and all(isinstance(v, _PLAIN) for v in value):
                out.append({"name": name, "type": type(value).__name__, "length": len(value)})
                return
            for index, item in enumerate(value):
                self._describe(call, side, (*path, str(index)), item, out)
            return
        if isinstance(value, Mapping):
            for key, item in value.items():
                self._describe(call, side, (*path, str(key)), item, out)
            return
        ops = self._ops.of(value)
        if ops is None:
            out.append({"name": name, "type": type(value).__name__})
            return
        entry = self._tensor(name, value, ops, side)
        if entry is not None:
            out.append(entry)

    def _tensor(self, name: str, tensor: Any, ops: TensorOps, side: str) -> dict[str, Any] | None:
        self.busy += 1
        try:
            dtype = ops.dtype(tensor)
            if self.config.filter_int and dtype in INTEGER_DTYPES:
                return None
            device = ops.device(tensor)
            entry: dict[str, Any] = {
                "name": name,
                "type": "tensor",
                "dtype": dtype,
                # a tuple of ints: an entry of numbers and strings only is one the garbage collector
                # stops tracking, where a list would keep it tracked until the writer has it
                "shape": tuple(map(int, tensor.shape)),
                "device": device,
            }
            if device not in self._noted:
                self._note_settings(ops, device)
            grad = ops.requires_grad(tensor)
            if grad is not None:
                entry["requires_grad"] = grad
            known = self._seen_entry(tensor, ops, written=side == "output")
            if known.stats is _MISSING:
                known.stats = ops.stats(tensor)
            entry["stats"] = known.stats
            if self.md5:
                values = ops.to_numpy(tensor, False)
                entry["md5"] = f"{zlib.crc32(values.reshape(-1).view(np.uint8)):08x}"
            if not self.stats_only:
                if known.file is None:
                    known.file = f"{TENSORS_FOLDER}/{name}.npy"
                    self.writer.submit_tensor(known.file, ops.host_copy(tensor))
                entry["file"] = known.file
            return entry
        except Exception as exc:  # a meta or sparse tensor: the record says so, the dump goes on
            return {"name": name, "type": "tensor", "error": f"{type(exc).__name__}: {exc}"}
        finally:
            self.busy -= 1

    def _note_settings(self, ops: TensorOps, device: str) -> None:
        """Record the settings that change numbers on a device, the first time a tensor there is seen.

        Taken inside the step, so a setting that holds only there (autocast) shows.
        """
        self._noted.add(device)
        self._keep_settings(device, *self._read_settings(ops, device))

    @staticmethod
    def _read_settings(ops: TensorOps, device: str) -> tuple[str, list[dict[str, Any]]]:
        """Read the settings that change numbers on ``device``; return where (``torch cpu``) and them."""
        where = f"{ops.framework} {device}".strip()
        try:
            return where, ops.settings(device)
        except Exception as exc:  # a backend that cannot say: the dump goes on without them
            log.warning("dump: the settings of %s could not be read: %s", where, exc)
            return where, []

    def _keep_settings(self, device: str, where: str, found: list[dict[str, Any]]) -> None:
        """Count ``device`` among the recorded ones and keep its settings (none: nothing to keep)."""
        self._devices.add(device)
        if found:
            self.settings[where] = found

    def _seen_entry(self, tensor: Any, ops: TensorOps, written: bool) -> _Seen:
        """Find what was computed for the same unchanged tensor earlier in the step.

        An entry counts while its tensor is alive (so no other tensor can have its memory) and
        its key is unchanged (torch's version counter moves on every in-place change). A call's
        output written into memory that an entry names under another key (``x.data.add_``, whose
        counter is not ``x``'s) ends every entry for that memory. Entries hold their tensors
        weakly: the dump keeps no activation alive.

        :param written: the tensor is a call's output (it may have just changed memory others name).
        """
        key = ops.key(tensor)
        if key is None:
            return _Seen(_no_ref)
        memory = key[0] if isinstance(key, tuple) and key else key
        if written:
            others = self._by_memory.pop(memory, None)
            for other in others if type(others) is set else (others,):
                if other is not None and other != key:
                    self._seen.pop(other, None)
        found = self._seen.get(key)
        if found is not None and found.ref() is not None:
            self._remember_memory(memory, key)
            return found
        try:
            ref = weakref.ref(tensor)
        except TypeError:
            return _Seen(_no_ref)
        found = _Seen(ref)
        self._seen[key] = found
        self._remember_memory(memory, key)
        if len(self._seen) > self._prune_at:
            self._prune()
        return found

    def _remember_memory(self, memory: Any, key: Any) -> None:
        """Note that ``memory`` is known under ``key`` (a set only when it is known under several)."""
        known = self._by_memory.get(memory)
        if known is None:
            self._by_memory[memory] = key
        elif type(known) is set:
            known.add(key)
        elif known != key:
            self._by_memory[memory] = {known, key}

    def _prune(self) -> None:
        """Forget the entries whose tensors are gone."""
        dead = [key for key, seen in self._seen.items() if seen.ref() is None]
        for key in dead:
            del self._seen[key]
        by_memory: dict[Any, Any] = {}
        for memory, keys in self._by_memory.items():
            kept = [k for k in (keys if type(keys) is set else (keys,)) if k in self._seen]
            if kept:
                by_memory[memory] = kept[0] if len(kept) == 1 else set(kept)
        self._by_memory = by_memory
        # many tensors alive at once (a big model's activations): sweep again only once as many
        # more have come, so that the sweeps cost a constant per tensor, not the live count each
        self._prune_at = max(_PRUNE_AT, 2 * len(self._seen))

    # ------------------------------------------------------------ kernels a framework dumped itself

    def wants_kernel(self, name: CallName) -> bool:
        """Whether a kernel call of a compiled step is recorded (the config's filters, as for an API call)."""
        if self._pending:
            self.report_pending()
        self.calls += 1
        if not self.active or not self._direction_wanted(name.direction):
            return False
        return self._filter.wants(name)

    def add_framework(self, name: str) -> None:
        """Count ``name`` among the frameworks this step recorded (kernel records carry no tensor)."""
        self._ops.frameworks.add(name)

    def config_wants(self, direction: str, role: str) -> bool:
        """Whether ``data_mode`` keeps the ``role`` ("input", "output") of ``direction`` calls."""
        return not self.stack_only and self.config.wants(direction, role)

    def emit_kernel(
        self,
        name: CallName,
        module: str,
        inputs: list[dict[str, Any]],
        outputs: list[dict[str, Any]],
        extra: Mapping[str, Any],
    ) -> None:
        """Write the record of one kernel call (:mod:`tscore.dump.native`): no stack, its graph's names."""
        if self._pending:
            self.report_pending()
        key = f"{module or OUTSIDE}#0/{name.prefix}.{name.api}#{name.index}"
        self._emit(CallToken(name, key, module or OUTSIDE, None, []), name, inputs, outputs, extra)

    def _emit(
        self,
        token: CallToken,
        name: CallName,
        inputs: list[dict[str, Any]],
        outputs: list[dict[str, Any]],
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        record = {
            "name": name.ptdbg,
            "call": name.msprobe,
            "prefix": name.prefix,
            "api": name.api,
            "index": name.index,
            "direction": name.direction,
            "module": token.module,
            "key": token.key,
            "stack": token.stack,
            "step": self.step,
            "rank": self.rank,
            "inputs": inputs,
            "outputs": outputs,
            **(extra or {}),
        }
        if self._tree_waiting is not None:  # the modules entered so far, before the step's first record
            waiting, self._tree_waiting = self._tree_waiting, None
            for entry in waiting:
                self.writer.submit_record(entry, CONSTRUCT_FILE)
        self.dumped += 1
        self.writer.submit_record(record)


def _json_number(value: Any) -> Any:
    """Spell a float as JSON holds it: inf, -inf and nan, which JSON has no numbers for, as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    return value


def finish_record(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """Turn the statistics a backend left on its device into numbers (run by the writer's thread)."""
    for side in ("inputs", "outputs"):
        for entry in record.get(side, ()):
            stats = entry.pop("stats", _MISSING)
            if stats is _MISSING:
                value = entry.get("value")
                if type(value) is float and value - value != 0.0:  # inf or NaN
                    entry["value"] = _json_number(value)
                continue
            try:
                found = stats if type(stats) is tuple and len(stats) == 4 else _stats_values(stats)
            except Exception as exc:  # the device's copy failed: this entry says so, the record is kept
                entry["error"] = f"{type(exc).__name__}: {exc}"
                continue
            if len(found) != 4:
                found = (list(found) + [None] * 4)[:4]
            entry["max"], entry["min"], entry["mean"], entry["norm"] = map(_finished, found)
    return record


def _finished(value: Any) -> Any:
    """One statistic as JSON holds it: a float, a string for inf and NaN, or None."""
    if value is None:
        return None
    number = float(value)
    return number if number - number == 0.0 else _json_number(number)


def _stats_values(stats: Any) -> Sequence[Any]:
    """Return the four numbers of one entry's statistics, however its backend left them."""
    if stats is None:
        return []
    if isinstance(stats, StagedEntry):
        return stats.values()
    if type(stats) in (list, tuple):
        return [None if v is None else float(v) for v in stats]
    staged = hook().ts_stats_to_host(stats=[stats])  # an object only its backend reads
    if staged is not None:
        return staged()[0]  # type: ignore[no-any-return]
    if callable(getattr(stats, "tolist", None)):  # torch, Paddle, MindSpore, numpy: one call
        return stats.tolist()  # type: ignore[no-any-return]
    return np.asarray(to_numpy(stats, copy=False), np.float64).ravel().tolist()  # type: ignore[no-any-return]


_PLAIN_STATS = (list, tuple, type(None), StagedEntry)


def stage_statistics(batch: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    """Start one copy to the host of the statistics a batch of records left on their devices.

    Run on the training thread when the writer takes a batch of lines: the backend
    (``ts_stats_to_host``) gathers them on the device and copies them asynchronously; the
    writer's thread waits for that copy in :func:`finish_record`. Statistics of a backend
    without the hook stay as they are and are read one by one there.
    """
    pending: list[Any] = []
    slots: dict[int, int] = {}
    places: list[tuple[dict[str, Any], int]] = []
    for _, record in batch:
        for side in ("inputs", "outputs"):
            for entry in record.get(side, ()):
                stats = entry.get("stats")
                if type(stats) in _PLAIN_STATS:
                    continue
                slot = slots.get(id(stats))
                if slot is None:
                    slot = slots[id(stats)] = len(pending)
                    pending.append(stats)
                places.append((entry, slot))
    if not pending:
        return
    try:
        wait = hook().ts_stats_to_host(stats=pending)
    except Exception as exc:  # left as they are: finish_record reads them one by one
        log.debug("dump: statistics not gathered for one copy: %s", exc)
        return
    if wait is None:
        return
    staged = StagedStats(wait)
    for entry, slot in places:
        entry["stats"] = StagedEntry(staged, slot)
