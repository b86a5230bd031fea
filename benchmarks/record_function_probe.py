"""What torch's own per-operator callback costs a step: the other way a compiled capture could see calls.

The dump's torch capture is a ``TorchFunctionMode`` whose handler is compiled code
(``ts_torch/csrc/capture.cpp``): it sees the calls as the user made them (``Functional.conv2d``,
``Tensor.add``), the names msprobe's dumps pair by. ATen's ``RecordFunction`` callbacks see every
operator below Python instead, by dispatcher name (``aten::conv2d``), with no Python in between.
This builds a throwaway callback (``torch.utils.cpp_extension.load_inline``, about 30 s the first
time) that counts the top-level operators of each step, and times one torch thread's step (forward,
backward, SGD step; ``bench_dump.py``'s models) plain and with the callback added at the step's
start and removed at its end, interleaved, three ways beside the plain step:

* ``names``: the callback reads the operator's name alone;
* ``outputs``: the outputs are handed to it (``needsOutputs``) and it reads each tensor's size;
* ``inputs``: the inputs are handed to it (``needsInputs``) and it reads each tensor's size.

It reads no values: what a capture's statistics would add is in ``dump_floor.py``'s last column.

    python benchmarks/record_function_probe.py [--models resnet encoder gpt2] [--steps 40]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_dump import MODELS, _model, interleaved

SOURCE = r"""
#include <torch/extension.h>
#include <ATen/record_function.h>

namespace {
at::CallbackHandle handle = 0;
thread_local int depth = 0;  // > 0 inside an operator: only top-level operators are counted
int64_t operators = 0;
int64_t elements = 0;
bool read_inputs = false, read_outputs = false;

std::unique_ptr<at::ObserverContext> enter(const at::RecordFunction& fn) {
  if (depth++ == 0) {
    operators += fn.name() != nullptr;
    if (read_inputs)
      for (const c10::IValue& value : fn.inputs())
        if (value.isTensor()) elements += value.toTensor().numel();
  }
  return nullptr;
}

void leave(const at::RecordFunction& fn, at::ObserverContext*) {
  if (--depth == 0 && read_outputs)
    for (const c10::IValue& value : fn.outputs())
      if (value.isTensor()) elements += value.toTensor().numel();
}
}  // namespace

void add_callback(bool inputs, bool outputs) {
  read_inputs = inputs;
  read_outputs = outputs;
  auto callback = at::RecordFunctionCallback(enter, leave)
                      .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION});
  callback.needsInputs(inputs);
  callback.needsOutputs(outputs);
  handle = at::addGlobalCallback(callback);
}

void remove_callback() {
  at::removeCallback(handle);
  handle = 0;
}

int64_t counted() { return operators; }
"""
WAYS = ("plain", "names", "outputs", "inputs")


def probe(built: Any, model_name: str, steps: int) -> dict[str, Any]:
    """Time the ways for one model, interleaved; return medians, ratios and top-level operators a step."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    net, x, y = _model(model_name)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)

    def step(way: str) -> float:
        began = time.perf_counter()
        if way != "plain":
            built.add_callback(way == "inputs", way == "outputs")
        try:
            optimizer.zero_grad()
            F.cross_entropy(net(x), y).backward()
            optimizer.step()
        finally:
            if way != "plain":
                built.remove_callback()
        return time.perf_counter() - began

    before = built.counted()
    warmup = 3
    medians = interleaved(step, WAYS, steps, warmup)
    rounds = (steps + warmup) * (len(WAYS) - 1)  # the steps run with the callback
    return {"model": model_name, "operators_per_step": (built.counted() - before) / rounds, **medians}


def main() -> None:
    """Build the callback, run every model and print one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    from torch.utils import cpp_extension

    from ts_torch.compiled_capture import build_folder

    folder = str(build_folder().parent.parent / "record-function-probe")  # beside the capture's builds
    os.makedirs(folder, exist_ok=True)
    built = cpp_extension.load_inline(
        name="tscore_record_function_probe_ndebug",
        cpp_sources=[SOURCE],
        functions=["add_callback", "remove_callback", "counted"],
        build_directory=folder,
        extra_cflags=["-O2", "-DNDEBUG"],  # as torch is built: inputs() asserts nothing then
    )
    rows = [probe(built, model, args.steps) for model in args.models]
    print(f"{'model':8} {'operators':>9} " + " ".join(f"{way:>16}" for way in WAYS))
    for row in rows:
        cells = " ".join(f"{row[w]['ms']:8.2f}ms {row[w]['ratio']:5.2f}x" for w in WAYS)
        print(f"{row['model']:8} {row['operators_per_step']:9.0f} {cells}")


if __name__ == "__main__":
    main()
