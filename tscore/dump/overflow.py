"""The overflow check: every API call's outputs looked at for inf and NaN, where it started named.

With ``task="overflow_check"`` (``ts.dump.Debugger``, or ptdbg's
``register_hook(model, overflow_check)``) the recorder asks the backend, after
each API call and each backward, for one number per floating output, computed
on the tensor's device: a sum for float32 and float64 (``ts_tensor_finite_probe``,
finite exactly when no inf or NaN is there, unless the sum itself overflowed),
the largest magnitude for half types and for a sum that was not finite
(``ts_tensor_abs_max``). Nothing else is computed while the values stay finite.

When an output holds inf or NaN, the inputs are looked at too. A call whose
inputs were finite made the overflow itself (``own``); one whose inputs
already held inf or NaN only passed it on (``passed_on``). Both get a record
in the dump (statistics and stack); an own overflow also gets, as ptdbg
writes it, ``Overflow_info_{timestamp}.pkl`` (the names, dtypes and shapes of
its tensors) and the folder ``Overflow_info_{timestamp}/`` with every input
and output as ``.npy``, written before the call returns. After
``overflow_nums`` own overflows (``-1``: never) the step is stopped with
ptdbg's ``ValueError: [overflow N times]: dump file is saved in '...pkl'.``;
each rank counts its own. Float16 and bfloat16 outputs that come within
``overflow_factor`` of their dtype's largest value are listed as near misses.
``overflow_summary.json`` in the step's folder says all of it.

On a device that runs behind the host (a GPU), reading a probe is a wait for
the device: the backend leaves the probe there instead (``wait=False``), and
the check reads :data:`WINDOW` calls' probes at once (``ts_read_scalars``:
one copy), then checks those calls in the order they ran, as above; a call
checked at once (several outputs, a filter) that overflows first settles the
calls before it. An overflow is then found, and the step stopped, up to that
many calls later; the tensors written for it, and the inputs that tell an own
overflow from one passed on, are those of that moment (an in-place call since
may have changed them), and its stack is the one taken at the call. Until
then the waiting calls' inputs and outputs are kept alive.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from tscore.contract.recorders import STACK_HERE
from tscore.dump.recorder import INTEGER_DTYPES, CallToken, DumpRecorder
from tscore.dump_format.names import CallName, tensor_name
from tscore.dump_format.stacks import where_in_user_code
from tscore.errors import StepStopped, TscoreError
from tscore.npy_files import write_atomic, write_npy
from tscore.plugins import hook

log = logging.getLogger(__name__)

SUMMARY_FILE = "overflow_summary.json"
LARGEST = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38}  # the half types' largest finite values
MAX_EVENTS = 1_000  # overflow events the summary lists at most (every one has its record)
MAX_NEAR = 200  # near misses the summary lists at most
WINDOW = 64  # calls whose probes wait on their device before one read settles them all
# APIs that hand back memory nobody has written yet: whatever it holds (NaN often) is no overflow
UNINITIALIZED = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})
# APIs whose outputs are finite whenever their inputs are, forward and backward (they select, move,
# compare or clamp values, never compute new magnitudes): an overflow cannot start in one of them, so
# they are not looked at. An inf they pass on is seen at the next call that computes. torch's and
# MindSpore's names (Primitive classes as they are spelled).
CANNOT_OVERFLOW = frozenset(
    {
        "relu",
        "relu_",
        "relu6",
        "hardtanh",
        "hardtanh_",
        "threshold",
        "threshold_",
        "max_pool1d",
        "max_pool2d",
        "max_pool3d",
        "adaptive_max_pool1d",
        "adaptive_max_pool2d",
        "flatten",
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "permute",
        "transpose",
        "t",
        "contiguous",
        "squeeze",
        "unsqueeze",
        "expand",
        "expand_as",
        "narrow",
        "select",
        "__getitem__",
        "cat",
        "concat",
        "stack",
        "split",
        "chunk",
        "unbind",
        "clone",
        "detach",
        "abs",
        "neg",
        "__neg__",
        "clamp",
        "clamp_",
        "clip",
        "masked_fill",
        "masked_fill_",
        "where",
        "gather",
        "index_select",
        "embedding",
        "sort",
        "topk",
        "argmax",
        "argmin",
        "max",
        "min",
        "zeros_like",
        "ones_like",
        "zero_",
        "fill_",
        "copy_",
        "roll",
        "flip",
        "repeat",
        "tile",
        "ReLU",
        "ReLU6",
        "Reshape",
        "Transpose",
        "ExpandDims",
        "Squeeze",
        "Concat",
        "Stack",
        "StridedSlice",
        "MaxPool",
        "Gather",
        "Identity",
        "Flatten",
    }
)


class OverflowLimitError(StepStopped, ValueError):
    """``overflow_nums`` own overflows were found: the step stops, as ptdbg stops it."""


class OverflowEvent(BaseModel):
    """One call whose outputs held inf or NaN."""

    name: str = Field(description="ptdbg's name: Functional_linear_1_forward")
    call: str = Field(description="msprobe's name: Functional.linear.1.forward")
    kind: str = Field(
        description="own: finite inputs, non-finite outputs; passed_on: the inputs already were"
    )
    module: str
    where: str | None = Field(default=None, description="the innermost line of the user's code")
    outputs: dict[str, str] = Field(description="each non-finite output: 'inf' or 'nan'")
    inputs: dict[str, str] = Field(default_factory=dict, description="each non-finite input")
    dtypes: list[str] = Field(default_factory=list)
    files: str | None = Field(default=None, description="Overflow_info_{timestamp}: the .pkl and its folder")


class NearMiss(BaseModel):
    """A half-precision output that came within the factor of its dtype's largest value."""

    name: str
    tensor: str
    dtype: str
    abs_max: float
    largest: float


class OverflowSummary(BaseModel):
    """What the overflow check found in one step of one rank."""

    step: int
    rank: int
    overflow_nums: int
    own: int = 0
    passed_on: int = 0
    stopped: bool = False
    first_own: OverflowEvent | None = None
    events: list[OverflowEvent] = Field(default_factory=list)
    near_misses: list[NearMiss] = Field(default_factory=list)

    def line(self) -> str:
        """One sentence a person acts on: where the overflow started, or that none happened."""
        near = f"; {len(self.near_misses)} half-precision output(s) near overflow" if self.near_misses else ""
        if self.first_own is None:
            if self.passed_on:
                return (
                    f"{self.passed_on} call(s) received inf or NaN but none made it: the step's inputs or "
                    f"weights already held them{near}"
                )
            return f"no overflow in step {self.step} (rank {self.rank}){near}"
        first = self.first_own
        where = f" at {first.where}" if first.where else ""
        module = f" in module {first.module!r}" if first.module and first.module != "(outside)" else ""
        outputs = ", ".join(f"{name} {value}" for name, value in first.outputs.items())
        return (
            f"overflow started at {first.call}{module}{where} (outputs {outputs}); {self.own} own "
            f"overflow(s), {self.passed_on} call(s) passed it on{near}"
        )


def _leaves(value: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Yield every value inside tuples, lists and dicts with its path, as the records name them."""
    if isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, str(index)))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _leaves(item, (*path, str(key)))
    elif value is not None and not isinstance(value, (bool, int, float, str)):
        yield path, value


Leaves = list[tuple[tuple[str, ...], Any]]
LazyLeaves = Callable[[], Leaves]
Describe = Callable[[], list[dict[str, Any]]]  # the side's entries for the record
# a probe left on its device: the value, the path of its tensor, its dtype's largest value (half types)
Probe = tuple[Any, tuple[str, ...], "float | None"]


@dataclass
class _Waiting:
    """A call whose probes are still on their device: what its check needs once they are read."""

    token: CallToken
    name: CallName
    inputs: tuple[LazyLeaves, Describe]
    outputs: tuple[LazyLeaves, Describe]
    probes: list[Probe]
    where: tuple[tuple[Any, ...], Any] | None  # the stack at the call (forward), for the record


def _argument_leaves(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Leaves:
    found = list(_leaves(tuple(args), ()))
    for key, value in kwargs.items():
        found += _leaves(value, (str(key),))
    return found


def _spelled(value: float) -> str:
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


class OverflowRecorder(DumpRecorder):
    """A :class:`DumpRecorder` that records only the calls whose outputs hold inf or NaN."""

    # a step without overflow writes no module tree (29 lines a step of a small ResNet cost its
    # writer thread 0.7 ms, 5% of the step)
    tree_waits_for_a_record = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Count nothing yet; ``config.overflow_nums`` and ``config.overflow_factor`` set the rules."""
        super().__init__(*args, **kwargs)
        self.stack_at_begin = False  # taken only for a call that overflows: most never do
        self.summary = OverflowSummary(
            step=self.step, rank=self.rank, overflow_nums=self.config.overflow_nums
        )
        self._near_seen: set[tuple[str, str]] = set()
        self._waiting: list[_Waiting] = []  # calls whose probes are still on their device, oldest first
        # a device that saturates instead of writing inf keeps a flag: lower it now, read it after each call
        flags = hook().ts_device_overflow
        self._flagged = bool(flags.get_hookimpls()) and flags() is not None

    # ------------------------------------------------------------ the recorder's events

    @property
    def takes_described(self) -> bool:
        """False: the check reads the tensors themselves, at the call."""
        return False

    def begin(
        self,
        prefix: str,
        api: str,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        *,
        stack: Any = STACK_HERE,
    ) -> CallToken | None:
        """Count every call; follow only those that can overflow (no token, no backward hook for the rest)."""
        if api in CANNOT_OVERFLOW or api in UNINITIALIZED:
            self.count(prefix, api)
            return None
        return super().begin(prefix, api, args, kwargs, stack=stack)

    def _keep_inputs(self, token: CallToken, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """Hold the arguments (no work, no copy): they are looked at only if the outputs overflow."""
        token.held = (args, kwargs)

    def end(self, token: CallToken, output: Any) -> None:
        """Look at a call's outputs; record it when they hold inf or NaN."""
        held, token.held = token.held, None
        if not token.record or not self.active:
            return
        look = self._first_look((output,), indexed=False)
        if look is True:
            return
        args, kwargs = held if held is not None else ((), {})
        call = token.name.ptdbg
        inputs = (
            lambda: _argument_leaves(args, kwargs),
            lambda: self._arguments(call, "input", args, kwargs),
        )
        outputs = (lambda: list(_leaves(output, ())), lambda: self._outputs(call, output))
        if look is False:
            self._check(token, token.name, inputs, outputs)
            return
        # the frames of this and of the backend's call: the stack is taken now, stored only if recorded
        where = self._stack_snapshot(2) if self.config.stack else None
        self._wait(_Waiting(token, token.name, inputs, outputs, look, where))

    def backward(self, token: CallToken, grad_outputs: Any, grad_inputs: Any) -> None:
        """Look at the gradients a backward passed on (its inputs: the gradients into the call's outputs)."""
        if not self.active or not self._direction_wanted("backward"):
            return
        out = tuple(grad_inputs or ())
        look: bool | list[Probe] = False
        if self._filter.everything:
            look = self._first_look(out, indexed=True)
            if look is True:
                return
        name = CallName(token.name.prefix, token.name.api, token.name.index, "backward")
        if not self._filter.wants(name):
            return
        into = tuple(grad_outputs or ())
        call = name.ptdbg
        inputs = (lambda: list(_leaves(into, ())), lambda: self._values(call, "input", into))
        outputs = (lambda: list(_leaves(out, ())), lambda: self._values(call, "output", out))
        if isinstance(look, list):
            self._wait(_Waiting(token, name, inputs, outputs, look, None))
        else:
            self._check(token, name, inputs, outputs)

    # ------------------------------------------------------------ the check

    def _first_look(self, values: Sequence[Any], indexed: bool) -> bool | list[Probe]:
        """Probe tensors (or None): True when all are plainly finite, else False or probes to wait for.

        False: the values need :meth:`_check` now; a list: the probes a backend left on its device.
        The common case is settled with one probe per tensor and nothing else built: no names, no
        leaves. A float32/float64 tensor gets a sum (``ts_tensor_finite_probe``; on a device, an
        exact probe the backend chooses), a half type its largest magnitude
        (``ts_tensor_abs_max``: its near misses need it); integer and bool
        tensors, which hold no inf or NaN, need none. A probe that is not finite, a half type near
        its largest value, anything else, and a device that keeps an overflow flag, go through
        :meth:`_check` at once.

        :param indexed: the values are a backward's gradients, named by their index (else the
            call's output itself).
        """
        if self._flagged:
            return False
        waiting: list[Probe] = []
        self.busy += 1
        try:
            for index, value in enumerate(values):
                if value is None:
                    continue
                ops = self._ops.of(value)
                if ops is None:
                    return False
                largest = None
                probe = ops.finite_probe(value, wait=False)
                if probe is None:
                    dtype = ops.dtype(value)
                    if dtype in INTEGER_DTYPES:  # no inf, no NaN: nothing to look at
                        continue
                    largest = LARGEST.get(dtype)
                    probe = None if largest is None else ops.abs_max(value, wait=False)
                    if probe is None:
                        return False
                if type(probe) is not float:  # on its device: named as the record names the tensor
                    waiting.append((probe, (str(index),) if indexed else (), largest))
                elif not math.isfinite(probe) or (
                    largest is not None and probe * self.config.overflow_factor >= largest
                ):
                    return False
        except Exception:  # a meta or sparse tensor: the careful path says what it skips
            return False
        finally:
            self.busy -= 1
        return waiting or True

    def _wait(self, waiting: _Waiting) -> None:
        """Keep a call whose probes are on their device; read them all once :data:`WINDOW` calls wait."""
        self._waiting.append(waiting)
        if len(self._waiting) >= WINDOW:
            self.settle()

    def settle(self) -> None:
        """Read the probes still on their devices in one go and check their calls, in the order they ran.

        Called every :data:`WINDOW` calls, when a call checked at once turns out to overflow, and
        by the debugger's ``stop()``. Raises :class:`OverflowLimitError` as :meth:`_check` does; the calls
        after the one that reached the limit are dropped, and nothing of theirs is kept.
        """
        if not self._waiting:
            return
        waiting, self._waiting = self._waiting, []
        if not self.active:
            return
        item: _Waiting | None = None
        try:
            probes = [probe for item in waiting for probe, _, _ in item.probes]
            values = _read_probes(self._ops, probes)
            del probes
            factor = self.config.overflow_factor
            at = 0
            for item in waiting:
                found = values[at : at + len(item.probes)]
                at += len(item.probes)
                if all(
                    math.isfinite(value) and (largest is None or value * factor < largest)
                    for value, (_, _, largest) in zip(found, item.probes, strict=True)
                ):
                    continue
                # a probe on a device is exact (finite values never make it inf or NaN): an output
                # an in-place call changed since the call (relu_) still counts
                probed = {
                    tensor_name(item.name.ptdbg, "output", path): _spelled(value)
                    for value, (_, path, _) in zip(found, item.probes, strict=True)
                    if not math.isfinite(value)
                }
                self._check(item.token, item.name, item.inputs, item.outputs, item.where, probed)
        finally:  # an OverflowLimitError's traceback holds this frame: it must hold no tensor
            waiting.clear()
            item = None

    def _magnitudes(
        self, call: str, side: str, leaves: Leaves
    ) -> tuple[dict[str, str], list[tuple[str, Any, Any, float]]]:
        """Return the non-finite tensors by name, and every floating tensor with a finite-or-not number.

        The number is the backend's cheap probe (a sum) where it answers and the sum is finite, else
        the largest magnitude (half types, whose near misses need it, and sums that overflowed).
        """
        bad: dict[str, str] = {}
        seen: list[tuple[str, Any, Any, float]] = []
        self.busy += 1
        try:
            for path, value in leaves:
                ops = self._ops.of(value)
                if ops is None:
                    continue
                try:
                    largest = ops.finite_probe(value)
                    if largest is None or not math.isfinite(largest):
                        largest = ops.abs_max(value)
                except Exception as exc:  # a meta or sparse tensor: nothing to look at, the step goes on
                    log.debug("overflow check skips %s: %s", tensor_name(call, side, path), exc)
                    continue
                if largest is None:
                    continue
                name = tensor_name(call, side, path)
                if not math.isfinite(largest):
                    bad[name] = _spelled(largest)
                seen.append((name, value, ops, largest))
        finally:
            self.busy -= 1
        return bad, seen

    def _check(
        self,
        token: CallToken,
        name: CallName,
        inputs: tuple[LazyLeaves, Describe],
        outputs: tuple[LazyLeaves, Describe],
        where: tuple[tuple[Any, ...], Any] | None = None,
        probed: Mapping[str, str] | None = None,
    ) -> None:
        """Record the call when an output holds inf or NaN; count an own overflow, stop at the limit.

        ``inputs`` and ``outputs``: the tensors by path, and how to describe the side for the record.
        A call checked after its probes were read later (:meth:`settle`) brings the stack taken at
        the call (``where``) and the outputs its probes found not finite (``probed``): an output
        changed in place since (``relu_``) still counts.
        """
        call = name.ptdbg
        flag = self._flagged and bool(hook().ts_device_overflow())
        bad_out, seen_out = self._magnitudes(call, "output", outputs[0]())
        for tensor, value in (probed or {}).items():
            bad_out.setdefault(tensor, f"{value} (changed in place after the call)")
        if flag and not bad_out:  # saturated: finite values, but the device saw the overflow
            bad_out = {tensor: "overflow flag" for tensor, *_ in seen_out} or {
                f"{call}_output": "overflow flag"
            }
        if not bad_out:
            self._near_misses(call, seen_out)
            return
        # calls still waiting for their probes ran before this one (its own forward, maybe): they are
        # checked first, so that the first overflow, the limit and a backward's kind stay right
        self.settle()
        bad_in, seen_in = self._magnitudes(call, "input", inputs[0]())
        backward = name.direction == "backward"
        # a backward also computes with what its forward saw: inf there is passed on, not made here
        kind = "passed_on" if bad_in or (backward and token.nonfinite) else "own"
        if not backward:
            token.nonfinite = True
            if where is not None:
                token.stack = self._stack_id(where)
            elif self.config.stack:  # the frames of end(), _check() and this: the backend's call is 3 up
                token.stack = self._stack(depth=3)
        event = OverflowEvent(
            name=call,
            call=name.msprobe,
            kind=kind,
            module=token.module,
            where=self._where(token.stack),
            outputs=bad_out,
            inputs=bad_in,
            dtypes=sorted({ops.dtype(value) for _, value, ops, _ in seen_out}),
        )
        wants = self.config.wants
        record_inputs = inputs[1]() if wants(name.direction, "input") else []
        record_outputs = outputs[1]() if wants(name.direction, "output") else []
        if kind == "own":
            event.files = self._write_overflow_files(seen_in + seen_out)
        self._emit(
            token, name, record_inputs, record_outputs, extra={"overflow": kind, "overflow_info": event.files}
        )
        self._count(event)

    def _near_misses(self, call: str, seen: list[tuple[str, Any, Any, float]]) -> None:
        factor = self.config.overflow_factor
        for name, value, ops, largest in seen:
            dtype = ops.dtype(value)
            limit = LARGEST.get(dtype)
            if limit is None or largest * factor < limit:
                continue
            api = call.rsplit("_", 2)[0]  # once per API and dtype: a loop of them would repeat it
            if (api, dtype) in self._near_seen:
                continue
            self._near_seen.add((api, dtype))
            log.warning(
                "%s: %s reached %g, within a factor %g of %s's largest value %g",
                call,
                name,
                largest,
                factor,
                dtype,
                limit,
            )
            if len(self.summary.near_misses) < MAX_NEAR:
                self.summary.near_misses.append(
                    NearMiss(name=call, tensor=name, dtype=dtype, abs_max=largest, largest=limit)
                )

    def _where(self, stack: int | None) -> str | None:
        lines = self.stack_lines.get(stack) if stack is not None else None
        return where_in_user_code(lines) if lines else None

    def _write_overflow_files(self, tensors: list[tuple[str, Any, Any, float]]) -> str | None:
        """Write ptdbg's ``Overflow_info_{timestamp}.pkl`` and the call's tensors, before the call returns."""
        stamp = f"Overflow_info_{time.strftime('%Y%m%d%H%M%S')}_{time.time_ns() % 1_000_000_000:09d}"
        folder = os.path.join(self.writer.folder, stamp)
        lines = []
        self.busy += 1
        try:
            os.makedirs(folder, exist_ok=True)
            for name, value, ops, _ in tensors:
                dtype = ops.dtype(value)
                shape = [int(d) for d in value.shape]
                lines.append(json.dumps([name, self.step, [], dtype, shape, []]) + "\n")
                write_npy(os.path.join(folder, f"{name}.npy"), ops.to_numpy(value, True))
            data = "".join(lines).encode("utf-8")
            write_atomic(os.path.join(self.writer.folder, f"{stamp}.pkl"), lambda stream: stream.write(data))
        except Exception as exc:  # the check must not be what stops the training
            log.warning("overflow files not written in %s: %s", folder, exc)
            return None
        finally:
            self.busy -= 1
        return stamp

    def _count(self, event: OverflowEvent) -> None:
        summary = self.summary
        if len(summary.events) < MAX_EVENTS:
            summary.events.append(event)
        if event.kind == "passed_on":
            summary.passed_on += 1
            return
        summary.own += 1
        if summary.first_own is None:
            summary.first_own = event
            log.warning("overflow: %s", summary.line())
        limit = self.config.overflow_nums
        if limit != -1 and summary.own >= limit:
            summary.stopped = True
            self.enabled = False  # nothing more is recorded; the debugger's stop() takes the hooks off
            pkl = (
                os.path.join(self.writer.folder, f"{event.files}.pkl") if event.files else self.writer.folder
            )
            raise OverflowLimitError(f"[overflow {summary.own} times]: dump file is saved in '{pkl}'.")

    def write_summary(self) -> None:
        """Write ``overflow_summary.json`` beside the records."""
        data = (self.summary.model_dump_json(indent=2) + "\n").encode("utf-8")
        try:
            write_atomic(os.path.join(self.writer.folder, SUMMARY_FILE), lambda stream: stream.write(data))
        except TscoreError as exc:
            log.warning("overflow summary not written: %s", exc)


def _read_probes(ops: Any, probes: Sequence[Any]) -> list[float]:
    """Read probes left on their devices, one copy per backend (the probes of a window share one mostly)."""
    values: list[float] = [math.nan] * len(probes)
    by_ops: dict[int, tuple[Any, list[int]]] = {}
    for index, probe in enumerate(probes):
        owner = ops.of(probe)
        by_ops.setdefault(id(owner), (owner, []))[1].append(index)
    for owner, indices in by_ops.values():
        read = (
            owner.read_scalars([probes[i] for i in indices])
            if owner is not None
            else [float(probes[i]) for i in indices]
        )
        for index, value in zip(indices, read, strict=True):
            values[index] = value
    return values


def read_overflow_summary(folder: str | os.PathLike[str]) -> OverflowSummary:
    """Read what the overflow check wrote in one step/rank folder.

    :raises FileNotFoundError: naming the folder, when no overflow check ran there.
    """
    path = os.path.join(os.fspath(folder), SUMMARY_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{os.fspath(folder)!r} holds no {SUMMARY_FILE}: no overflow check wrote there"
        )
    with open(path, encoding="utf-8") as stream:
        return OverflowSummary.model_validate_json(stream.read())
