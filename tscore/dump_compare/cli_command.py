"""``tscore dump-compare A B``: compare two dumps of any format (exit 0: they agree, 1: not, 2: error)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from tscore.dump_compare.compare import DEFAULT_TOLERANCE, compare_dumps
from tscore.html_report.cli_options import METRICS, add_html_options, check_html_target, write_html_report


def _cmd_dump_compare(args: argparse.Namespace) -> int:
    check_html_target(args)
    output = args.output
    if output is not None:
        os.makedirs(output, exist_ok=True)
    report = compare_dumps(
        args.npu,
        args.bench,
        output,
        stack_mode=args.stack,
        auto_analyze=True,
        tolerance=args.tolerance,
    )
    if args.json == "-":
        print(report.model_dump_json(indent=2))
    else:
        if args.json:
            with open(args.json, "w", encoding="utf-8") as stream:
                stream.write(report.model_dump_json(indent=2))
        if not args.quiet:
            print(report.summary())
            for path in report.files:
                print(f"wrote {path}")
    write_html_report(args, report)
    return 0 if report.passed else 1


def add_dump_compare(commands: Any, non_negative: Callable[[str], float]) -> None:
    """Add ``tscore dump-compare NPU BENCH [-o DIR] [--stack] [--tolerance T] [--json FILE] [-q]``."""
    parser = commands.add_parser(
        "dump-compare",
        help="compare two dumps (tscore, msprobe or ptdbg); name the first API with its own error",
        description="Compare two dumps API by API: tscore's, msprobe's (dump.json) or ptdbg_ascend's "
        "(.pkl), in any combination. Exit 0 when every paired call agrees, 1 when not, 2 on bad input.",
    )
    parser.add_argument(
        "npu", metavar="NPU", help="the run to check: a dump folder (step/rank) or records file"
    )
    parser.add_argument("bench", metavar="BENCH", help="the run it is checked against")
    parser.add_argument(
        "-o", "--output", metavar="DIR", help="write compare_result_*.csv and advisor_*.txt here"
    )
    parser.add_argument("--stack", action="store_true", help="add the NPU_Stack_Info column")
    parser.add_argument(
        "--tolerance",
        type=non_negative,
        default=DEFAULT_TOLERANCE,
        help=f"relative error above which a value differs (default {DEFAULT_TOLERANCE})",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON ('-': to stdout only)")
    add_html_options(parser, ("error", *METRICS))
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="print nothing; the exit status and the files tell"
    )
    parser.set_defaults(run=_cmd_dump_compare, api_names={"target": "NPU", "orig": "BENCH"})
