#!/usr/bin/env bash
# Every GPU check in one go, on a machine with CUDA, a CUDA build of torch as `python3`, and no package
# index: the wheels tscore, nox and msprobe need lie in .whl (the README's Development section says how to
# fetch them). Runs the GPU tests (`nox -s gpu`) and the dump benchmark against msprobe 26.2 on the GPU;
# logs and the benchmark's JSON go to $OUT (default ./gpu_results).
#
#   bash benchmarks/gpu_checks.sh            STEPS=10 TASKS="statistics tensor overflow_check" BENCH_SECONDS=420
#                                            BENCH_EXTRA=--also-aten PROFILE_SECONDS=60 GC_SECONDS=90
set -uo pipefail
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
# the statistics kernel alone: host and device microseconds per tensor, Triton against ATen
python3 -m pip install -q --no-index --find-links .whl -e . -e plugins/ts_torch 2>&1 | tail -3
timeout 120 python3 benchmarks/bench_stats_kernel.py 2>&1 | tee "$out/stats_kernel.txt"
TSCORE_WHEELS=.whl timeout "${TEST_SECONDS:-240}" python3 -m nox -s gpu -- tests/gpu -q -rfE 2>&1 \
    | tee "$out/gpu_tests.log" | tail -30
# shellcheck disable=SC2086
timeout "${BENCH_SECONDS:-420}" python3 benchmarks/bench_dump.py --device cuda \
    --msprobe-python /tmp/msprobe_python --steps "${STEPS:-10}" --tensor-steps 1 \
    --tasks ${TASKS:-statistics tensor overflow_check} ${BENCH_EXTRA:-} --json "$out/bench_dump_cuda.json" 2>&1 \
    | tee "$out/bench_dump_cuda.log" | tail -25
if [ "${PROFILE_SECONDS:-60}" != 0 ]; then
    # the device's time by operator: how much the statistics' reductions add to a dumped ResNet-50 step
    timeout "${PROFILE_SECONDS:-60}" python3 benchmarks/profile_dump_step.py --model resnet50 --device cuda \
        --kernels >"$out/kernels_resnet50_cuda.txt" 2>&1
    head -40 "$out/kernels_resnet50_cuda.txt"
    # the host's side by part and thread: statistics' launches, the records, backward on autograd's thread
    timeout "${PROFILE_SECONDS:-60}" python3 benchmarks/profile_dump_parts.py --model resnet50 --device cuda \
        2>&1 | tee "$out/parts_resnet50_cuda.txt"
fi
if [ "${GC_SECONDS:-90}" != 0 ]; then
    # what a dumped ResNet-50 step moves to the oldest generation, whose full collections cost 10% of the mean
    timeout "${GC_SECONDS:-90}" python3 benchmarks/gc_promotions.py --model resnet50 --device cuda --steps 12 \
        2>&1 | tee "$out/gc_promotions_resnet50_cuda.txt"
fi
