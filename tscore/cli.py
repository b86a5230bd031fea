"""The ``tscore`` command line.

``tscore plugins`` lists the plugins found, their versions, the framework
each serves and the hooks each implements (``--json`` for a program).

``tscore compare DIR_A DIR_B`` compares two folders of ``.npy`` files as
``ts.migrator.compare_npy_dir`` does, so it can gate a CI job.

``tscore convert SRC DST --map MAP`` converts a checkpoint through a weight
map (``.pth`` to ``.ckpt``/``.safetensors``, or back with ``--reverse``).

``tscore ckpt-diff A B [--map MAP]`` compares two checkpoints' shapes and
values (a torch file against a MindSpore one through ``--map``).

``tscore diff TORCH_REF MS_REF --input 8,3,32,32`` runs a torch network and
its MindSpore twin as ``ts.migrator.NetDifferenceFinder`` does and names the
first layer that differs (exit 2 also when a network fails to run).

``tscore dump-info DIR`` says what a dump holds: steps, ranks, records,
APIs, tensor files and bytes.

``tscore clean DIR`` removes the temporary files that a killed save left
(the next ``ts.save`` into the folder does it too).

Exit status: 0 on success (for ``compare`` and ``ckpt-diff``: everything
within tolerance), 1 when a comparison found a difference, 2 on a usage error
or bad input that stopped the command, 3 when ``compare`` could not read some
of the files (named in the table's notes, or on stderr with ``-q``) and compared
the rest; 3 wins over 1, since the comparison is then incomplete.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from tabulate import tabulate

from tscore import folder_writers
from tscore.checkpoint import cli_commands
from tscore.compare.engine import MATCH_STRATEGIES, compare_npy_dir
from tscore.compare.kernels import KERNEL_NAMES
from tscore.compare.pairs import PairStatus
from tscore.dump import cli_command as dump_cli
from tscore.dump_compare import cli_command as dump_compare_cli
from tscore.errors import TscoreError
from tscore.html_report.cli_options import add_html_options, check_html_target, write_html_report
from tscore.netdiff import cli_command
from tscore.plugins import get_plugin_manager
from tscore.terminal import terminal_width, wrap_text
from tscore.version import __version__

EXIT_DIFFER = 1  # a comparison found a difference
EXIT_BAD_INPUT = 2  # a usage error, or input that stopped the command
EXIT_UNREADABLE = 3  # some input files could not be read; the rest were compared


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
    """Render the plugins as a table; at a terminal, long statuses and the hook lists wrap to fit it."""
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
    headers = ["plugin", "status", "package", "framework", "hooks"]
    width = terminal_width()
    if width is None:
        return tabulate(table, headers=headers, tablefmt="simple")
    # The columns but status and hooks keep their width; those two share the rest (hooks first).
    kept = tabulate([[row[0], row[2], row[3]] for row in table], headers=["plugin", "package", "framework"])
    room = width - len(kept.splitlines()[1]) - 4  # the rule under the headers; two more separators
    longest = max((len(row[1]) for row in table), default=6)
    status = min(longest, max(12, min(30, room - 24)))
    hooks = max(12, room - max(status, len("status") + 2))  # tabulate pads a header by two

    def render(hooks: int) -> str:
        wrapped = [[*row[:4], "\n".join(wrap_text(row[4], hooks))] for row in table]  # never inside a name
        return tabulate(
            wrapped, headers=headers, tablefmt="simple", maxcolwidths=[None, status, None, None, None]
        )

    text = render(hooks)
    excess = len(text.splitlines()[1]) - width
    return render(max(12, hooks - excess)) if excess > 0 else text


def _cmd_plugins(args: argparse.Namespace) -> int:
    rows = plugin_rows()
    if args.json:
        print(json.dumps({"tscore": __version__, "plugins": rows}, indent=2))
    else:
        print(_render_plugins(rows))
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    json_to_stdout = args.json == "-"
    quiet = args.quiet or json_to_stdout
    check_html_target(args)
    report = compare_npy_dir(
        args.orig_dir,
        args.target_dir,
        args.rtol,
        args.atol,
        args.equal_nan,
        compare_shape=args.compare_shape or args.match == "shape",
        num_processes=args.processes,
        print_level=0 if quiet else (2 if args.only_failed else 1),
        match=args.match,
        kernel=args.kernel,
    )
    if args.csv:
        report.write(_with_suffix(args.csv, ".csv"))
    if json_to_stdout:
        print(report.to_json())
    elif args.json:
        report.write(_with_suffix(args.json, ".json"))
    write_html_report(args, report)
    if report.counts.get(PairStatus.UNREADABLE.value):
        if quiet:  # the table's notes name them otherwise
            for pair in report.iter_pairs():
                if pair.status is PairStatus.UNREADABLE:
                    print(f"tscore compare: unreadable: {pair.message}", file=sys.stderr)
        return EXIT_UNREADABLE
    return 0 if report.passed else EXIT_DIFFER


def _with_suffix(path: str, suffix: str) -> str:
    """``report.write`` picks the format from the suffix: make sure the file gets the one asked for."""
    return path if path.lower().endswith(suffix) else path + suffix


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def _add_compare(commands: Any) -> None:
    compare = commands.add_parser(
        "compare",
        help="compare two folders of .npy files (exit 0: all within tolerance, 1: not, 3: unreadable files)",
        description="Compare the .npy files of two folders pair by pair, as ts.migrator.compare_npy_dir. "
        "Exit status: 0 every pair within tolerance; 1 some pair differs; 2 a bad argument or folder; "
        "3 some files could not be read (named in the table's notes, or on stderr with -q), the others "
        "compared; 3 wins over 1, since the comparison is then incomplete.",
    )
    compare.add_argument("orig_dir", metavar="DIR_A", help="folder of the original run")
    compare.add_argument("target_dir", metavar="DIR_B", help="folder of the run to check against it")
    compare.add_argument(
        "--match",
        choices=MATCH_STRATEGIES,
        default="name",
        help="pair files by identical name, then the rest by the name and key they saved (name, the "
        "default); by the saved name and key alone (key); by the numbers in their names (number); or by "
        "shape edit distance (shape, for gradients)",
    )
    compare.add_argument("--rtol", type=_non_negative, default=1e-4, help="relative tolerance (default 1e-4)")
    compare.add_argument("--atol", type=_non_negative, default=1e-4, help="absolute tolerance (default 1e-4)")
    compare.add_argument("--equal-nan", action="store_true", help="count NaN against NaN as equal")
    compare.add_argument("--compare-shape", action="store_true", help="show the shape columns")
    compare.add_argument("--csv", metavar="FILE", help="also write every metric to a CSV file")
    compare.add_argument("--json", metavar="FILE", help="also write the report as JSON ('-': to stdout only)")
    compare.add_argument("--only-failed", action="store_true", help="print only the pairs that failed")
    add_html_options(compare)
    compare.add_argument("-q", "--quiet", action="store_true", help="print no table")
    compare.add_argument("--processes", type=_positive_int, help="worker processes (default: automatic)")
    compare.add_argument(
        "--kernel", choices=KERNEL_NAMES, help="compare kernel (default: the fastest one installed)"
    )
    compare.set_defaults(run=_cmd_compare)


def _cmd_clean(args: argparse.Namespace) -> int:
    """Remove (or, with ``--dry-run``, list) what saves that never finished left under each folder."""
    status = 0
    for folder in args.folders:
        if not os.path.isdir(folder):
            print(f"tscore clean: {folder!r} is not a folder", file=sys.stderr)
            status = EXIT_BAD_INPUT
            continue
        for root, _dirs, _files in os.walk(folder):
            for item in folder_writers.clean(root, dry_run=args.dry_run):
                verb = "would remove" if args.dry_run else "removed"
                print(f"{verb} {item.path}: {item.reason} (writer {item.writer})")
    return status


def _add_clean(commands: Any) -> None:
    clean = commands.add_parser(
        "clean",
        help="remove the temporary files of saves that never finished (their process is gone)",
        description="Walk each folder and remove the hidden .tmp files and lock files that a killed "
        "ts.save or report writer left; files of processes still running are kept.",
    )
    clean.add_argument("folders", nargs="+", metavar="FOLDER", help="folders to clean, with their subfolders")
    clean.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    clean.set_defaults(run=_cmd_clean)


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of the ``tscore`` command."""
    parser = argparse.ArgumentParser(
        prog="tscore", description="Find where two runs of a deep-learning model stop agreeing."
    )
    parser.add_argument("--version", action="version", version=f"tscore {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what tscore does")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    plugins = commands.add_parser(
        "plugins",
        help="list plugins, their versions and hooks",
        description="List the tscore plugins found (the built-in numpy one and every installed backend "
        "package), whether each loaded (and why not), its package's version, the framework it serves "
        "and the hooks it implements. At a terminal the table fits its width; --json gives all of it to "
        "a program.",
    )
    plugins.add_argument("--json", action="store_true", help="print JSON for a program")
    plugins.set_defaults(run=_cmd_plugins)
    _add_compare(commands)
    _add_clean(commands)
    cli_commands.add_convert(commands)
    cli_commands.add_ckpt_diff(commands, _non_negative)
    cli_command.add_diff(commands, _non_negative, _positive_int)
    dump_cli.add_dump_info(commands)
    dump_compare_cli.add_dump_compare(commands, _non_negative)
    for command in commands.choices.values():
        command.set_defaults(cli_names=_shown_names(command))
    return parser


def _shown_names(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Map each argument's Python name to the name the command's help shows (``orig_dir`` -> ``DIR_A``).

    A subcommand whose library function calls an argument otherwise (``dump-compare``'s ``target``
    is the command's ``NPU``) says so with ``set_defaults(api_names={...})``.
    """
    names = dict(parser.get_default("api_names") or {})
    for action in parser._actions:
        shown = max(action.option_strings, key=len) if action.option_strings else action.metavar
        if isinstance(shown, str) and shown != action.dest and action.dest != "help":
            names.setdefault(action.dest, shown)
    return names


def _in_cli_words(message: str, names: Mapping[str, str]) -> str:
    """Spell the argument names in a library error as the command's help does.

    A Python name with an underscore is replaced wherever it stands as a word (not as ``name=``,
    which is advice about the Python call); a plain word (``target``) only where it starts the
    message as its subject (``target: no dump in ...``).
    """
    for python_name, shown in names.items():
        if "_" in python_name:
            # not inside a path or a file name ('orig_dir/x', 'pt_params.pth'), nor as advice ``name=``
            message = re.sub(rf"(?<![\w/.\\-]){re.escape(python_name)}(?![\w/.=\\-])", shown, message)
        elif re.match(rf"{re.escape(python_name)}[: ]", message):
            message = shown + message[len(python_name) :]
    return message


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
        return EXIT_BAD_INPUT
    try:
        return int(args.run(args))
    except (TscoreError, TypeError, ValueError) as exc:
        message = _in_cli_words(str(exc), getattr(args, "cli_names", {}))
        print(f"tscore {args.command}: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
