"""The dump's statistics of one GPU tensor: the Triton kernel against ATen's two reductions, side by side.

    python benchmarks/bench_stats_kernel.py [--device cuda] [--repeat 2000]

For tensors from 1 KiB to 205 MB (ResNet-50's first activation at batch 64), prints the host's
microseconds per tensor (the launches as the training thread pays them, synchronised only at the
end of each run) and the device's (CUDA events around the same launches), for ts_torch's fused
kernel (``fused_stats.launch``) and for ``aminmax`` + ``var_mean`` (``device_copies.device_stats``),
then checks both against float64 on the host. bench_dump.py gives what a whole step pays.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    """Time both ways for each size and dtype and print one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    import torch

    from ts_torch import fused_stats
    from ts_torch.device_copies import device_stats, stats_to_host

    if not fused_stats.enabled():
        raise SystemExit(
            "the Triton kernel is not available here (no Triton, or TSCORE_DUMP_STATS_KERNEL=aten)"
        )
    shapes = [(256,), (64, 1024), (64, 256, 28, 28), (64, 64, 112, 112)]
    print(f"{'shape':>20} {'dtype':9} {'fused host':>11} {'aten host':>10} {'fused dev':>10} {'aten dev':>9}")
    for shape in shapes:
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.randn(shape, device=args.device).to(dtype)
            repeat = max(20, min(args.repeat, int(2e10 // (x.numel() * 4 + 1))))
            times = {}
            for name, fn in (
                ("fused", fused_stats.launch),
                ("aten", lambda t: device_stats(t if t.dtype == torch.float32 else t.float())),
            ):
                for _ in range(5):
                    fn(x)
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                began = time.perf_counter()
                start.record()
                for _ in range(repeat):
                    fn(x)
                end.record()
                host = (time.perf_counter() - began) / repeat * 1e6
                torch.cuda.synchronize()
                times[name] = (host, start.elapsed_time(end) * 1e3 / repeat)
            (fused_host, fused_device), (aten_host, aten_device) = times["fused"], times["aten"]
            print(
                f"{tuple(shape)!s:>20} {str(dtype)[6:]:9} {fused_host:9.1f}µs {aten_host:8.1f}µs"
                f" {fused_device:8.1f}µs {aten_device:7.1f}µs"
            )
    # the numbers: both ways against float64 on the host
    cases = [torch.randn(3, 1000, 17) * 100, torch.tensor([float("inf"), 1.0]), torch.tensor([3e38, 3e38])]
    worst = 0.0
    for case in cases:
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            x = case.to(dtype).to(args.device)
            found = stats_to_host([fused_stats.launch(x)])()[0]  # type: ignore[list-item]
            d = x.double().cpu()
            want = [d.max().item(), d.min().item(), d.mean().item(), d.norm().item()]
            for got, ref in zip(found, want, strict=True):
                if ref == ref and abs(ref) != float("inf") and abs(ref) < 1e300:
                    worst = max(worst, abs(got - ref) / max(abs(ref), 1e-30))
                elif not (got == ref or (got != got and ref != ref)):
                    raise SystemExit(f"fused statistics {found} differ from float64's {want} ({dtype})")
    print(f"fused against float64: largest relative difference {worst:.2e}")


if __name__ == "__main__":
    main()
