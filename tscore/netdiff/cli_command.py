"""``tscore diff NET_A NET_B --input SHAPE[:DTYPE]``: the difference finder on the command line.

A reference is ``package.module:Name`` or ``path/to/file.py:Name``; ``Name``
may be a class or a function called with no arguments, or a network object.
The current folder is importable, as with ``python -m``. NET_A may also be a
folder written by ``tscore diff NET_A --record DIR`` in another process (two
frameworks that cannot share one: real torch and mindtorch).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from tscore.errors import TscoreError
from tscore.html_report.cli_options import add_html_options, check_html_target, write_html_report
from tscore.plugins import hook


class ReferenceError_(TscoreError, ValueError):
    """A ``module:Name`` reference that does not lead to a network."""


def _module(spec: str) -> Any:
    if spec.endswith(".py") or os.sep in spec or "/" in spec:
        if not os.path.isfile(spec):
            raise ReferenceError_(f"{spec!r} is not a file; write module:Name or path/to/file.py:Name")
        name = "_tscore_diff_" + os.path.splitext(os.path.basename(spec))[0]
        loader = importlib.util.spec_from_file_location(name, spec)
        if loader is None or loader.loader is None:
            raise ReferenceError_(f"cannot import {spec!r}")
        module = importlib.util.module_from_spec(loader)
        sys.modules[name] = module
        folder = os.path.dirname(os.path.abspath(spec))
        if folder not in sys.path:  # the file imports its neighbours, as it does when run as a script
            sys.path.insert(0, folder)
        try:
            loader.loader.exec_module(module)
        except Exception as exc:  # the user's file failed: say which, exit 2 as for any bad argument
            raise ReferenceError_(f"cannot import {spec!r}: {type(exc).__name__}: {exc}") from exc
        return module
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(spec)
    except ImportError as exc:
        raise ReferenceError_(f"cannot import {spec!r}: {exc}") from exc


def load_reference(reference: str) -> object:
    """Import ``module:Name`` and return the network it names (calling a class or factory).

    What a plugin claims as a network (``ts_model_info``) is used as it is, whatever it can do;
    anything else is called with no arguments, and what that returns must be a network.

    A folder written by :func:`tscore.netdiff.recorded.record_network` gives the recorded network.
    """
    from tscore.netdiff.recorded import JSON_NAME, load_recorded_network

    if os.path.isfile(os.path.join(reference, JSON_NAME)):
        return load_recorded_network(reference)
    spec, sep, name = reference.rpartition(":")
    if not sep or not spec or not name:
        raise ReferenceError_(f"{reference!r} is not module:Name (for example models.resnet:ResNet18)")
    target: Any = _module(spec)
    for part in name.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ReferenceError_(f"{spec!r} has no {name!r}") from None
    if hook().ts_model_info(model=target) is not None:  # a network already: its plugin claims it
        return target
    if not callable(target):
        raise ReferenceError_(
            f"{reference!r} is a {type(target).__name__}, which no loaded plugin takes for a network and "
            "which cannot be called; name a network, its class, or a function that returns one"
        )
    try:
        inspect.signature(target).bind()
    except TypeError as exc:
        raise ReferenceError_(
            f"{reference!r} is neither a network a loaded plugin knows nor callable with no arguments "
            f"({exc}); name a network, its class, or a function that returns one"
        ) from exc
    except ValueError:  # no signature to read (a builtin): call it and see
        pass
    try:
        network = target()
    except Exception as exc:
        raise ReferenceError_(
            f"building the network {reference!r} raised {type(exc).__name__}: {exc}"
        ) from exc
    if hook().ts_model_info(model=network) is None:
        raise ReferenceError_(
            f"{reference!r}() returned a {type(network).__module__}.{type(network).__name__}, which no "
            "loaded plugin takes for a network; install its framework's plugin (tscore plugins lists them)"
        )
    return network


def parse_input(text: str) -> tuple[tuple[int, ...], np.dtype, tuple[float, float] | None]:
    """``8,3,32,32``, ``8,3,32,32:float16`` or ``2,6:int64:0:32`` -> (shape, dtype, range)."""
    parts = text.split(":")
    try:
        shape = tuple(int(d) for d in parts[0].split(",") if d.strip())
        dtype = np.dtype(parts[1] if len(parts) > 1 and parts[1] else "float32")
        bounds = (float(parts[2]), float(parts[3])) if len(parts) == 4 else None
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(
            f"{text!r}: write SHAPE[:DTYPE[:LOW:HIGH]], like 8,3,32,32:float32 ({exc})"
        ) from None
    if len(parts) not in (1, 2, 4):
        raise argparse.ArgumentTypeError(f"{text!r}: write SHAPE[:DTYPE[:LOW:HIGH]], like 2,6:int64:0:32")
    return shape, dtype, bounds


def _record(args: argparse.Namespace, auto: object) -> int:
    """``tscore diff NET_A --record DIR``: NET_A with its checkpoint loaded, recorded for another process."""
    from tscore.models import model_info
    from tscore.netdiff.recorded import record_network
    from tscore.netdiff.weights import load_file_into

    if args.net_b is not None or args.map or args.ms_params:
        print("tscore diff --record: give NET_A only (no NET_B, --map or --ms-params)", file=sys.stderr)
        return 2
    net = load_reference(args.net_a)
    if args.pt_params:
        loaded = load_file_into(net, args.pt_params, model_info(net, "NET_A").label(), "--pt-params")
        if not loaded.complete:
            print(f"tscore diff --record: {loaded.summary()}", file=sys.stderr)
    print(record_network(net, args.record, auto_inputs=auto, fix_seed=args.seed))
    return 0


def _cmd_diff(args: argparse.Namespace) -> int:
    from tscore.netdiff.finder import NetDifferenceFinder

    specs = tuple(
        (shape, dtype) if bounds is None else (shape, dtype, bounds) for shape, dtype, bounds in args.input
    )
    auto: object = specs if args.cases == 1 else {"input": specs, "num": args.cases}
    if args.record:
        return _record(args, auto)
    if args.net_b is None:
        print("tscore diff: give NET_B, the network to compare NET_A with, or --record DIR", file=sys.stderr)
        return 2
    pt_net = load_reference(args.net_a)
    ms_net = load_reference(args.net_b)
    json_to_stdout = args.json == "-"
    check_html_target(args)
    finder = NetDifferenceFinder(
        pt_net,
        ms_net,
        print_level=0 if (args.quiet or json_to_stdout) else (2 if args.only_failed else 1),
        pt_params_path=args.pt_params,
        ms_params_path=args.ms_params,
        auto_conv_ckpt=args.auto_conv,
        compare_params=not args.no_compare_params,
        weight_map=args.map,
        fix_seed=args.seed,
        locate=True if args.locate else None,
    )
    report = finder.compare(auto_inputs=auto, rtol=args.rtol, atol=args.atol, equal_nan=args.equal_nan)
    if json_to_stdout:
        print(report.to_json())
    elif args.json:
        from tscore.npy_files import write_atomic

        text = report.to_json().encode("utf-8")
        write_atomic(args.json, lambda stream: stream.write(text))
    elif args.quiet:
        print(report.verdict())
    write_html_report(args, report)
    if any(case.failure is not None for case in report.cases):
        return 2
    return 0 if report.passed else 1


def add_diff(commands: Any, non_negative: Callable[[str], float], positive_int: Callable[[str], int]) -> None:
    """Add ``tscore diff NET_A NET_B --input SHAPE[:DTYPE] ...``."""
    parser = commands.add_parser(
        "diff",
        help="run two networks (any installed frameworks) on the same inputs; name the first differing layer",
        description="Run ts.migrator.NetDifferenceFinder: give NET_B the weights of NET_A (converted "
        "where their frameworks store them differently), compare the weights, run both on random inputs, "
        "compare the outputs and, when they differ, every layer. "
        "Exit 0: outputs agree; 1: they differ; 2: bad input or a network failed.",
    )
    parser.add_argument(
        "net_a",
        metavar="NET_A",
        help="module:Name or file.py:Name of the first network (a torch one, say), or a --record folder",
    )
    parser.add_argument(
        "net_b",
        metavar="NET_B",
        nargs="?",
        help="module:Name or file.py:Name of the second network (its port, say)",
    )
    parser.add_argument(
        "--record",
        metavar="DIR",
        help="run NET_A on the inputs and write what the finder needs of it to DIR, for a later "
        "`tscore diff DIR NET_B` in a process where NET_A's framework cannot be (real torch and mindtorch)",
    )
    parser.add_argument(
        "--input",
        action="append",
        type=parse_input,
        required=True,
        metavar="SHAPE[:DTYPE[:LOW:HIGH]]",
        help="one network input (repeat for several): 8,3,32,32 or 2,6:int64:0:32 (integers in [0, 32))",
    )
    parser.add_argument("--cases", type=positive_int, default=1, help="random input cases to run (default 1)")
    parser.add_argument(
        "--seed", type=int, default=16, help="seed for inputs and both frameworks (default 16)"
    )
    parser.add_argument(
        "--locate", action="store_true", help="compare every layer even when the outputs agree"
    )
    parser.add_argument("--pt-params", metavar="FILE", help="checkpoint to load into NET_A")
    parser.add_argument(
        "--ms-params", metavar="FILE", help="checkpoint for NET_B (then nothing is converted)"
    )
    parser.add_argument(
        "--map",
        metavar="MAP",
        help="weight map JSON instead of the one built for the two networks (where names differ, "
        "their layers are aligned by structure without it)",
    )
    parser.add_argument(
        "--auto-conv",
        type=int,
        choices=(0, 1, 2),
        default=1,
        help="1: through the weight map (default), 2: same names (MSAdapter), 0: keep each net's weights",
    )
    parser.add_argument("--no-compare-params", action="store_true", help="skip the weight comparison")
    parser.add_argument("--rtol", type=non_negative, default=1e-4, help="relative tolerance (default 1e-4)")
    parser.add_argument("--atol", type=non_negative, default=1e-4, help="absolute tolerance (default 1e-4)")
    parser.add_argument("--equal-nan", action="store_true", help="count NaN against NaN as equal")
    parser.add_argument("--only-failed", action="store_true", help="print only the differences")
    parser.add_argument("--json", metavar="FILE", help="write the report as JSON ('-': to stdout only)")
    add_html_options(parser)
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the verdict line")
    parser.set_defaults(
        run=_cmd_diff, api_names={"pt_params_path": "--pt-params", "ms_params_path": "--ms-params"}
    )
