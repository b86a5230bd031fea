"""The HTML report: how big the file is and how long a browser takes to open it, at 1,000 and 200,000 rows.

Two kinds of report at each size: a dump comparison (``compare_dumps`` on two
msprobe-format statistics dumps written here, forward and backward calls, the
second run drifting from 60 % of the calls on) and a folder comparison (a
``CompareReport`` of that many pairs, built as ``compare_npy_dir`` fills it;
writing 200,000 ``.npy`` files would measure the file system, not the page).
For each: the seconds ``to_html`` takes, the file's size, and the time from
asking for the page to its table drawn in headless Chromium (``performance.now()``
when the page says it is ready, median of three fresh tabs).

    python benchmarks/bench_html.py [--rows 1000 200000] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]


def write_dump(folder: Path, calls: int, drift_from: int | None, seed: int) -> None:
    """Write a statistics dump.json of ``calls`` calls (two inputs, one output), the second half backward."""
    rnd = random.Random(seed)
    folder.mkdir(parents=True)
    data: dict[str, Any] = {}
    apis = ("conv2d", "relu", "linear", "add")
    for index in range(calls):
        drift = 1.0 + (0.05 * rnd.random() if drift_from is not None and index >= drift_from else 0.0)

        def tensor(scale: float) -> dict[str, Any]:
            return {
                "type": "torch.Tensor",
                "dtype": "torch.float32",
                "shape": [8, 16, 32, 32],
                "Max": 1.0 * scale,
                "Min": -1.0 * scale,
                "Mean": 0.01 * scale,
                "Norm": 100.0 * scale,
                "requires_grad": False,
            }

        direction = "forward" if index < calls // 2 else "backward"
        data[f"Functional.{apis[index % 4]}.{index // 4}.{direction}"] = {
            "input_args": [tensor(1.0), tensor(1.0)],
            "input_kwargs": {},
            "output": [tensor(drift)],
        }
    document = {
        "task": "statistics",
        "level": "L1",
        "framework": "pytorch",
        "dump_data_dir": None,
        "data": data,
    }
    (folder / "dump.json").write_text(json.dumps(document), encoding="utf-8")
    (folder / "stack.json").write_text("{}", encoding="utf-8")


def dump_report(root: Path, rows: int) -> Any:
    """Compare two statistics dumps of ``rows`` rows (three per call)."""
    from tscore.dump_compare import compare_dumps

    calls = max(rows // 3, 2)
    write_dump(root / "npu", calls, int(calls * 0.6), 1)
    write_dump(root / "bench", calls, None, 0)
    return compare_dumps(str(root / "npu"), str(root / "bench"))


def folder_report(rows: int) -> Any:
    """A folder comparison of ``rows`` pairs, the last 40 % out of tolerance."""
    from tscore.compare.pairs import PairResult, PairStatus
    from tscore.compare.report import CompareReport

    rnd = random.Random(0)
    pairs = []
    for index in range(rows):
        bad = index >= rows * 0.6
        diff = rnd.random() * (1e-2 if bad else 1e-7)
        pairs.append(
            PairResult.model_construct(
                orig_name=f"{index}_layer{index % 97}.conv.output.npy",
                target_name=f"{index}_layer{index % 97}.conv.output.npy",
                status=PairStatus.MISMATCH if bad else PairStatus.OK,
                message="",
                orig_shape=(8, 16, 32, 32),
                target_shape=(8, 16, 32, 32),
                orig_dtype="float32",
                target_dtype="float32",
                elements=131072,
                allclose=not bad,
                ratio_close=0.97 if bad else 1.0,
                cosine=1.0 - diff,
                mean_abs_diff=diff / 3,
                max_abs_diff=diff,
                max_rel_diff=diff * 10,
                orig_nan=0,
                orig_inf=0,
                target_nan=0,
                target_inf=0,
            )
        )
    failed = sum(1 for p in pairs if not p.allclose)
    counts = {status.value: 0 for status in PairStatus}
    counts.update(ok=rows - failed, mismatch=failed, passed=rows - failed, failed=failed)
    return CompareReport(
        orig_dir="run_a",
        target_dir="run_b",
        rtol=1e-4,
        atol=1e-4,
        equal_nan=False,
        match="name",
        kernel="numpy",
        total=rows,
        counts=counts,
        pairs=pairs,
    )


def open_times(chromium: str, path: Path, repeat: int = 3) -> list[float]:
    """Milliseconds from asking for the page to its table drawn, in fresh tabs of headless Chromium."""
    from playwright.sync_api import sync_playwright

    times = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=FLAGS)
        for _ in range(repeat):
            context = browser.new_context()
            page = context.new_page()
            page.goto(path.resolve().as_uri(), timeout=120_000)
            page.wait_for_selector("body[data-ready='1']", timeout=120_000)
            times.append(float(page.evaluate("Number(document.body.dataset.readyMs)")))
            context.close()
        browser.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000, 200_000])
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "html.json"))
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="tscore-bench-html-") as temp:
        for rows in args.rows:
            for kind in ("dump", "folders"):
                root = Path(temp) / f"{kind}-{rows}"
                root.mkdir()
                report = dump_report(root, rows) if kind == "dump" else folder_report(rows)
                page = root / "report.html"
                start = time.perf_counter()
                report.to_html(page)
                seconds = time.perf_counter() - start
                times = open_times(args.chromium, page)
                row = {
                    "kind": kind,
                    "rows": rows,
                    "to_html_s": round(seconds, 2),
                    "mb": round(page.stat().st_size / 1e6, 2),
                    "open_ms_median": round(statistics.median(times)),
                    "open_ms": [round(t) for t in times],
                }
                results.append(row)
                print(json.dumps(row), flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as stream:
        json.dump({"python": sys.version.split()[0], "results": results}, stream, indent=2)
    print(f"{'kind':8} {'rows':>8} {'to_html s':>10} {'MB':>7} {'open ms':>8}")
    for row in results:
        cells = (row["kind"], row["rows"], row["to_html_s"], row["mb"], row["open_ms_median"])
        print("{:8} {:>8} {:>10} {:>7} {:>8}".format(*cells))


if __name__ == "__main__":
    main()
