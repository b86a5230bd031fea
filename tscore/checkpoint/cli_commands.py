"""The ``tscore convert`` and ``tscore ckpt-diff`` commands."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from tscore.checkpoint.ckpt_diff import diff_checkpoints, through_map
from tscore.checkpoint.convert import convert_checkpoint
from tscore.checkpoint.files import KIND_FRAMEWORK, SUFFIX_KINDS, load_checkpoint
from tscore.checkpoint.weight_map import WeightMap, load_weight_map
from tscore.html_report.cli_options import add_html_options, check_html_target, write_html_report


def _identity_map(params: dict[str, Any], source_kind: str, target_path: str) -> WeightMap:
    source = KIND_FRAMEWORK.get(source_kind, "")
    target_kind = SUFFIX_KINDS.get(os.path.splitext(target_path)[1].lower(), "")
    return WeightMap({n: n for n in params}, {}, source, KIND_FRAMEWORK.get(target_kind) or source)


def _emit(args: argparse.Namespace, text: str, as_json: str) -> None:
    if args.json == "-":
        print(as_json)
        return
    if args.json:
        with open(args.json, "w", encoding="utf-8") as stream:
            stream.write(as_json)
    if not args.quiet:
        print(text)


def _cmd_convert(args: argparse.Namespace) -> int:
    weight_map = load_weight_map(args.map) if args.map else None
    if weight_map is not None and args.reverse:
        weight_map = weight_map.inverse()
    contents = load_checkpoint(args.source, trust_pickle=args.trust_pickle)
    if weight_map is None:
        weight_map = _identity_map(contents.params, contents.format, args.target)
    report = convert_checkpoint(
        contents, args.target, weight_map, format=args.format, strict=not args.non_strict
    )
    _emit(args, report.table(), report.model_dump_json(indent=2))
    return 0


def add_convert(commands: Any) -> None:
    """Add ``tscore convert SRC DST [--map MAP] [--reverse]``."""
    parser = commands.add_parser(
        "convert",
        help="convert a checkpoint through a weight map (.pth -> .ckpt/.safetensors, or back)",
        description="Convert a checkpoint as ts.migrator.convert_weight does. Without --map the names are "
        "kept (a change of file format only).",
    )
    parser.add_argument("source", metavar="SRC", help="checkpoint to read (.pth/.pt, .ckpt, .safetensors)")
    parser.add_argument("target", metavar="DST", help="file to write; its suffix picks the format")
    parser.add_argument(
        "--map", metavar="MAP", help="weight map JSON from get_weight_map (tscore or TroubleShooter)"
    )
    parser.add_argument(
        "--reverse", action="store_true", help="apply the map backwards: its target framework to its source"
    )
    parser.add_argument(
        "--format", choices=("ckpt", "safetensors", "pth"), help="output format (default: DST suffix)"
    )
    parser.add_argument(
        "--trust-pickle",
        action="store_true",
        help="let a pickled file (.pth, .pdparams) run code (trusted files)",
    )
    parser.add_argument("--non-strict", action="store_true", help="skip entries the map does not name")
    parser.add_argument(
        "--json", metavar="FILE", help="also write the conversion table as JSON ('-': stdout only)"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print no table")
    parser.set_defaults(run=_cmd_convert)


def _cmd_ckpt_diff(args: argparse.Namespace) -> int:
    check_html_target(args)
    orig = load_checkpoint(args.orig, trust_pickle=args.trust_pickle)
    target = load_checkpoint(args.target)
    names: dict[str, str] = {}
    labels = ("original ckpt", "target ckpt")
    dropped: list[str] = []
    if args.map:
        weight_map = load_weight_map(args.map)
        orig, names, dropped = through_map(orig, weight_map)
        labels = (weight_map.source, weight_map.target)
    diff = diff_checkpoints(
        orig,
        target,
        orig_names=names,
        labels=labels,
        compare_value=not args.no_values,
        rtol=args.rtol,
        atol=args.atol,
        equal_nan=args.equal_nan,
        progress=not args.quiet,
        dropped=dropped,
    )
    _emit(args, diff.table(only_diff=args.only_failed), diff.to_json())
    write_html_report(args, diff)
    return 0 if diff.passed else 1


def add_ckpt_diff(commands: Any, non_negative: Callable[[str], float]) -> None:
    """Add ``tscore ckpt-diff A B [--map MAP]``."""
    parser = commands.add_parser(
        "ckpt-diff",
        help="compare two checkpoints' shapes and values (exit 0: all agree, 1: not)",
        description="Compare two checkpoints as ts.migrator.compare_ms_ckpt does; with --map, checkpoints "
        "of two frameworks (the map's source, then its target) as compare_pth_and_ckpt does.",
    )
    parser.add_argument(
        "orig", metavar="A", help="first checkpoint (with --map: of the map's source framework)"
    )
    parser.add_argument("target", metavar="B", help="second checkpoint")
    parser.add_argument("--map", metavar="MAP", help="weight map JSON: rename A's entries before pairing")
    parser.add_argument("--no-values", action="store_true", help="compare names and shapes only")
    parser.add_argument("--rtol", type=non_negative, default=1e-4, help="relative tolerance (default 1e-4)")
    parser.add_argument("--atol", type=non_negative, default=1e-4, help="absolute tolerance (default 1e-4)")
    parser.add_argument("--equal-nan", action="store_true", help="count NaN against NaN as equal")
    parser.add_argument("--only-failed", action="store_true", help="print only the differences")
    parser.add_argument(
        "--trust-pickle",
        action="store_true",
        help="let a pickled file (.pth, .pdparams) run code (trusted files)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the comparison as JSON ('-': stdout only)")
    add_html_options(parser)
    parser.add_argument("-q", "--quiet", action="store_true", help="print no table")
    parser.set_defaults(run=_cmd_ckpt_diff)
