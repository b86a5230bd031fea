#!/usr/bin/env bash
# Every GPU check, on a machine with CUDA, a CUDA build of torch as `python3`, and no package index: the
# wheels tscore, nox and msprobe need lie in .whl (docs/development.md says how to fetch
# them). Runs the statistics kernel's timing, the GPU tests (`nox -s gpu`), the dump benchmark against
# msprobe 26.2 on the GPU (statistics, tensor mode, the overflow check), what a dumped ResNet-50 step
# hands to Python's oldest generation and, when asked, two profiles; logs and the benchmark's JSON go
# to $OUT (default ./gpu_results).
#
# One command may run 600 s on the lent machine and a session has 900 s of it in all, start included:
# run the parts in two calls, back to back while the machine is warm,
#
#   PARTS="kernel tests" bash benchmarks/gpu_checks.sh     # about 260 s at most
#   PARTS="bench gc" bash benchmarks/gpu_checks.sh         # about 360 s at most
#
# and add "profile" to PARTS for the two profiles. Time limits in seconds: KERNEL_SECONDS=60
# TEST_SECONDS=200 BENCH_SECONDS=300 GC_SECONDS=60 PROFILE_SECONDS=60; STEPS=8,
# TASKS="statistics tensor overflow_check", BENCH_EXTRA=--also-aten.
set -uo pipefail
parts=" ${PARTS:-kernel tests bench gc} "
want() { [[ "$parts" == *" $1 "* ]]; }
out=${OUT:-gpu_results}
mkdir -p "$out"
export PIP_CONFIG_FILE=/dev/null PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())" | tee -a "$out/gpu.txt"
python3 -m pip install -q --no-index --find-links .whl nox 2>&1 | tail -3
# msprobe in a folder of its own, so that its packages and tscore's never meet in one interpreter
python3 -m pip install -q --no-index --no-deps --target /tmp/msprobe_site .whl/mindstudio_probe-*.whl \
    .whl/openpyxl-*.whl .whl/et_xmlfile-*.whl .whl/pytz-*.whl .whl/skl2onnx-*.whl 2>&1 | tail -3
printf '#!/bin/sh\nPYTHONPATH=/tmp/msprobe_site exec python3 "$@"\n' >/tmp/msprobe_python
chmod +x /tmp/msprobe_python
python3 -m pip install -q --no-index --find-links .whl -e . -e plugins/ts_torch 2>&1 | tail -3
if want kernel; then
    # the statistics kernel alone: host and device microseconds per tensor, Triton against ATen
    timeout "${KERNEL_SECONDS:-60}" python3 benchmarks/bench_stats_kernel.py 2>&1 | tee "$out/stats_kernel.txt"
fi
if want tests; then
    TSCORE_WHEELS=.whl timeout "${TEST_SECONDS:-200}" python3 -m nox -s gpu -- tests/gpu -q -rfE 2>&1 \
        | tee "$out/gpu_tests.log" | tail -30
fi
if want bench; then
    # shellcheck disable=SC2086
    timeout "${BENCH_SECONDS:-300}" python3 benchmarks/bench_dump.py --device cuda \
        --msprobe-python /tmp/msprobe_python --steps "${STEPS:-8}" --tensor-steps 1 \
        --tasks ${TASKS:-statistics tensor overflow_check} ${BENCH_EXTRA:-} --json "$out/bench_dump_cuda.json" \
        2>&1 | tee "$out/bench_dump_cuda.log" | tail -25
fi
if want profile; then
    # the device's time by operator: how much the statistics' reductions add to a dumped ResNet-50 step
    timeout "${PROFILE_SECONDS:-60}" python3 benchmarks/profile_dump_step.py --model resnet50 --device cuda \
        --kernels >"$out/kernels_resnet50_cuda.txt" 2>&1
    head -40 "$out/kernels_resnet50_cuda.txt"
    # the host's side by part and thread: statistics' launches, the records, backward on autograd's thread
    timeout "${PROFILE_SECONDS:-60}" python3 benchmarks/profile_dump_parts.py --model resnet50 --device cuda \
        2>&1 | tee "$out/parts_resnet50_cuda.txt"
fi
if want gc; then
    # what a dumped ResNet-50 step moves to the oldest generation, whose full collections cost 10% of the mean
    timeout "${GC_SECONDS:-60}" python3 benchmarks/gc_promotions.py --model resnet50 --device cuda --steps 12 \
        2>&1 | tee "$out/gc_promotions_resnet50_cuda.txt"
fi
