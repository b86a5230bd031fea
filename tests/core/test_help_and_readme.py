"""The README, the manual (``docs/``) and the command line's help agree: commands, options, sessions."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tscore.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
QUICK_START = README[README.index("## Quick start") :].split("\n## ", 1)[0]
MANUAL = "\n".join(
    [README, *(page.read_text(encoding="utf-8") for page in sorted((ROOT / "docs").rglob("*.md")))]
)


def _commands() -> dict[str, object]:
    parser = build_parser()
    action = next(a for a in parser._actions if getattr(a, "choices", None) and a.dest == "command")
    return dict(action.choices)  # type: ignore[arg-type]


def _options(command: str) -> set[str]:
    parser = _commands()[command]
    return {flag for action in parser._actions for flag in action.option_strings}  # type: ignore[attr-defined]


def _nox_sessions() -> list[str]:
    """Read ``nox.options.sessions`` from the noxfile without importing nox."""
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "nox.options.sessions":
            return list(ast.literal_eval(node.value))
    raise AssertionError("the noxfile sets no nox.options.sessions")


def test_the_quick_start_names_every_session_that_nox_runs() -> None:
    comments = " ".join(line.lstrip("# ") for line in QUICK_START.splitlines() if line.startswith("#"))
    tests = comments[comments.index("2. run the tests") :]
    for session in _nox_sessions():
        assert re.search(rf"\b{session}\b", tests), (
            f"the quick start's comment does not name nox -s {session}"
        )


def test_the_quick_start_says_where_the_tscore_command_is() -> None:
    assert ".nox/example/bin/tscore" in QUICK_START
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    example = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "example")
    assert "'.'" in ast.unparse(example), "nox -s example no longer installs tscore (and its command)"


def test_every_command_has_a_description() -> None:
    for name, parser in _commands().items():
        assert getattr(parser, "description", None), f"tscore {name} --help has no description"


@pytest.mark.parametrize("command", ["compare", "ckpt-diff", "diff", "dump-compare", "convert"])
def test_every_comparing_command_takes_quiet(command: str) -> None:
    assert {"-q", "--quiet"} <= _options(command)


def _readme_synopses() -> list[tuple[str, str]]:
    """Every ``tscore COMMAND ...`` line of the README's and the manual's code blocks, continuations too."""
    found = []
    lines = MANUAL.splitlines()
    for i, line in enumerate(lines):
        match = re.match(r"tscore ([a-z-]+)\b(.*)", line)
        if match and match[1] in _commands():
            text = match[2]
            while text.rstrip().endswith("\\") or (i + 1 < len(lines) and lines[i + 1].startswith("    ")):
                i += 1
                if i >= len(lines) or not lines[i].startswith(" "):
                    break
                text += " " + lines[i]
            found.append((match[1], text.split("#", 1)[0]))
    return found


def test_every_option_the_readme_shows_is_one_the_command_takes() -> None:
    synopses = _readme_synopses()
    assert {command for command, _ in synopses} >= {"compare", "ckpt-diff", "dump-compare", "plugins", "diff"}
    for command, text in synopses:
        for flag in re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", text):
            assert flag in _options(command), (
                f"the manual shows `tscore {command} {flag}`, which it does not take"
            )


def test_the_match_strategies_are_in_the_help_and_the_readme() -> None:
    action = next(a for a in _commands()["compare"]._actions if a.dest == "match")  # type: ignore[attr-defined]
    synopsis = next(text for command, text in _readme_synopses() if command == "compare")
    shown = re.search(r"--match ([a-z|]+)", synopsis)
    assert shown is not None and set(shown[1].split("|")) == set(action.choices)
    for choice in action.choices:
        assert f"({choice}" in action.help, f"tscore compare --help does not say what --match {choice} does"
