"""The ``tscore`` command line.

``tscore plugins`` lists the plugins found, their versions, the framework
each serves and the hooks each implements (``--json`` for a program). Exit
status: 0 on success, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from tabulate import tabulate

from tscore import __version__
from tscore.plugins import get_plugin_manager


def plugin_rows() -> list[dict[str, Any]]:
    """Describe every plugin found: name, status, versions, framework and hooks."""
    pm = get_plugin_manager()
    rows = []
    for name, record in sorted(pm.records.items()):
        plugin = pm.get_plugin(name)
        framework = None
        if plugin is not None and hasattr(plugin, "ts_framework_info"):
            framework = plugin.ts_framework_info()
        rows.append(
            {
                "name": name,
                "status": record.status,
                "distribution": record.distribution,
                "version": record.version,
                "framework": framework.name if framework else None,
                "framework_version": framework.version if framework else None,
                "framework_imported": framework.imported if framework else None,
                "hooks": record.hooks,
                "reason": record.reason,
            }
        )
    return rows


def _render_plugins(rows: list[dict[str, Any]]) -> str:
    table = [
        [
            row["name"],
            row["status"] + (f" ({row['reason']})" if row["reason"] else ""),
            f"{row['distribution'] or '-'} {row['version'] or ''}".strip(),
            f"{row['framework'] or '-'} {row['framework_version'] or ''}".strip(),
            ", ".join(h.removeprefix("ts_") for h in row["hooks"]) or "-",
        ]
        for row in rows
    ]
    return tabulate(table, headers=["plugin", "status", "package", "framework", "hooks"], tablefmt="simple")


def _cmd_plugins(args: argparse.Namespace) -> int:
    rows = plugin_rows()
    if args.json:
        print(json.dumps({"tscore": __version__, "plugins": rows}, indent=2))
    else:
        print(_render_plugins(rows))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of the ``tscore`` command."""
    parser = argparse.ArgumentParser(
        prog="tscore", description="Find where two runs of a deep-learning model stop agreeing."
    )
    parser.add_argument("--version", action="version", version=f"tscore {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what tscore does")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    plugins = commands.add_parser("plugins", help="list plugins, their versions and hooks")
    plugins.add_argument("--json", action="store_true", help="print JSON for a program")
    plugins.set_defaults(run=_cmd_plugins)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tscore`` command; return its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not hasattr(args, "run"):
        parser.print_help(sys.stderr)
        return 2
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
