"""``--html FILE`` and ``--html-metric M`` on every ``tscore`` command that compares."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tscore.npy_files import writable_target

METRICS = ("max_rel", "cosine_distance", "max_abs")


def add_html_options(parser: argparse.ArgumentParser, metrics: tuple[str, ...] = METRICS) -> None:
    """Add ``--html FILE`` and ``--html-metric`` (one of ``metrics``) to a command's parser."""
    parser.add_argument(
        "--html", metavar="FILE", help="also write the report as one self-contained HTML page to FILE"
    )
    parser.add_argument(
        "--html-metric",
        choices=metrics,
        default=None,
        help=f"the error metric the page charts first (default {metrics[0]}; the page switches)",
    )


def check_html_target(args: argparse.Namespace) -> None:
    """Fail before any work when ``--html`` names a file that cannot be created.

    :raises TargetPathError: naming ``--html``, the path and what to do.
    :raises ValueError: for ``--html-metric`` with ``--no-values``: there is no metric to chart.
    """
    if args.html:
        writable_target(args.html, "--html")
    if getattr(args, "no_values", False) and getattr(args, "html_metric", None):
        raise ValueError(
            "--html-metric charts values, which --no-values leaves out: drop one of the two options"
        )


def write_html_report(args: argparse.Namespace, report: Any) -> None:
    """Write the page ``--html`` asks for and say where it went (on stderr when stdout carries JSON)."""
    if not args.html:
        return
    path = report.to_html(args.html, metric=args.html_metric)
    stream = sys.stderr if getattr(args, "json", None) == "-" else sys.stdout
    print(f"HTML report: {path}", file=stream)
