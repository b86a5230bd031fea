"""Write ``ts_msadapter/torch_functional_calls.json``: how REAL torch's functional API names its arguments.

A dump on real torch records a call of ``torch.nn.functional`` as that function hands it to
``__torch_function__``: ``F.layer_norm(x, shape, w, b)`` arrives as ``(x, shape)`` and
``weight=w, bias=b, eps=1e-05``, whatever the caller wrote. mindtorch's functions have torch's
signatures but no such hand-over, so the MSAdapter capture rearranges each call the same way
before recording it, and the two dumps pair value by value. Run where real torch is installed::

    .nox/torch/bin/python tests/msadapter/make_torch_conventions.py
"""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
import types
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "plugins" / "ts_msadapter" / "ts_msadapter" / "torch_functional_calls.json"


def _hand_over(function: types.FunctionType) -> dict[str, list[str]] | None:
    """Return the names ``function`` hands ``handle_torch_function`` by position and by keyword (or None)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "handle_torch_function":
            positional = node.args[2:]
            if not all(isinstance(a, ast.Name) for a in positional):
                return None
            if not all(
                k.arg and isinstance(k.value, ast.Name) and k.value.id == k.arg for k in node.keywords
            ):
                return None
            return {"positional": [a.id for a in positional], "keyword": [k.arg for k in node.keywords]}  # type: ignore[attr-defined,misc]
    return None


def main() -> None:
    """Read every Python function of torch.nn.functional and write what each hands over."""
    table: dict[str, dict[str, list[str]]] = {}
    for name, value in vars(F).items():
        if isinstance(value, types.FunctionType) and value.__module__ == "torch.nn.functional":
            found = _hand_over(value)
            if found is not None:
                table[name] = found
    for name in dir(F):  # boolean_dispatch (max_pool2d): the call goes through its private variant
        if not name.startswith("_") and name not in table and f"_{name}" in table:
            table[name] = table[f"_{name}"]
    public = {name: table[name] for name in sorted(table) if not name.startswith("_")}
    document = {"torch": torch.__version__.split("+")[0], "functional": public}
    TARGET.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"{len(public)} functions -> {TARGET}")


if __name__ == "__main__":
    main()
