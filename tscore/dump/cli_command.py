"""``tscore dump-info DIR``: what a dump holds: steps, ranks, records, APIs, tensor files and bytes."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tabulate import tabulate

from tscore.dump_format.reading import summarise


def _cmd_dump_info(args: argparse.Namespace) -> int:
    try:
        summary = summarise(args.path)
    except FileNotFoundError as exc:
        raise ValueError(str(exc)) from None
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    rows = [
        [
            f["step"],
            f["rank"],
            ", ".join(f"{k} {v}" for k, v in f["frameworks"].items()),
            f["records"],
            f["forward"],
            f["backward"],
            f["apis"],
            f["modules"],
            f["tensor_files"],
            f"{f['bytes'] / 1e6:.1f} MB",
            f["folder"],
        ]
        for f in summary["folders"]
    ]
    headers = [
        "step",
        "rank",
        "framework",
        "records",
        "forward",
        "backward",
        "APIs",
        "modules",
        "tensors",
        "size",
        "folder",
    ]
    print(tabulate(rows, headers=headers, tablefmt="simple"))
    return 0


def add_dump_info(commands: Any) -> None:
    """Add ``tscore dump-info DIR [--json]``."""
    parser = commands.add_parser(
        "dump-info",
        help="what a dump holds: steps, ranks, records, APIs, tensors, bytes",
        description="Summarise a dump written by ts.dump.Debugger or tscore.ptdbg, folder by folder. "
        "Exit 2 when the path holds no dump.",
    )
    parser.add_argument("path", metavar="DIR", help="the dump_path (or one step/rank folder)")
    parser.add_argument("--json", action="store_true", help="print JSON for a program")
    parser.set_defaults(run=_cmd_dump_info)
