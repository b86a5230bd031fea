"""The plugin system: discovery, selection, skipping, a third framework, the CLI."""

import importlib.util
import json
import logging
import re
import textwrap

import numpy as np
import pytest

import tscore as ts
from tests.conftest import npy_names
from tscore import cli, hookimpl
from tscore.contract.tensors import TensorMeta
from tscore.plugins import create_plugin_manager, get_plugin_manager


class Box:
    """A third framework's tensor: values in a flat list plus a shape."""

    def __init__(self, values, shape):
        self.values = list(values)
        self.shape = tuple(shape)


class BoxPlugin:
    """What a `ts_box` package would ship: conversion hooks for Box."""

    @hookimpl
    def ts_is_tensor(self, obj):
        return True if isinstance(obj, Box) else None

    @hookimpl
    def ts_to_numpy(self, obj):
        if not isinstance(obj, Box):
            return None
        return np.array(obj.values, dtype=np.float32).reshape(obj.shape)

    @hookimpl
    def ts_tensor_meta(self, obj):
        if not isinstance(obj, Box):
            return None
        return TensorMeta(framework="box", dtype="f32", shape=obj.shape, device="abacus")

    @hookimpl
    def ts_from_numpy(self, array, framework):
        if framework != "box":
            return None
        return Box(array.ravel().tolist(), array.shape)


@pytest.fixture()
def box_plugin():
    name = ts.register_plugin(BoxPlugin(), "box")
    yield name
    ts.unregister_plugin(name)


def test_a_third_framework_saves_and_converts_with_no_core_change(tmp_path, box_plugin):
    b = Box([1, 2, 3, 4, 5, 6], (2, 3))
    assert ts.is_tensor(b)
    np.testing.assert_array_equal(ts.to_numpy(b), np.arange(1, 7, dtype=np.float32).reshape(2, 3))
    assert ts.tensor_meta(b).device == "abacus"
    ts.save(tmp_path / "box", {"a": b, "b": [b]})
    assert npy_names(tmp_path) == ["0_box_a.npy", "0_box_b_0.npy"]
    np.testing.assert_array_equal(np.load(tmp_path / "0_box_a.npy"), ts.to_numpy(b))
    back = ts.from_numpy(np.ones((2, 2)), "box")
    assert isinstance(back, Box) and back.shape == (2, 2)


def test_unregistered_framework_is_a_type_error_naming_it(tmp_path):
    with pytest.raises(TypeError, match=r"tests\.core\.test_plugins\.Box"):
        ts.to_numpy(Box([1], (1,)))
    with pytest.raises(TypeError, match="Box"):
        ts.save(tmp_path / "x", Box([1], (1,)))
    with pytest.raises(TypeError, match="no loaded tscore plugin can hook the gradient of"):
        ts.save_grad(tmp_path / "x", np.ones(2))


def test_misspelt_hook_is_refused():
    class Typo:
        @hookimpl
        def ts_to_numpyy(self, obj):
            return None

    with pytest.raises(ts.PluginError, match="ts_to_numpyy"):
        ts.register_plugin(Typo(), "typo")
    assert "typo" not in get_plugin_manager().loaded_names()


@pytest.fixture()
def fake_distribution(tmp_path, monkeypatch):
    """An installed distribution with three tscore entry points: good, broken, crashing."""
    (tmp_path / "fake_good.py").write_text(
        textwrap.dedent("""
        from tscore import hookimpl
        from tscore.contract.tensors import FrameworkInfo

        @hookimpl
        def ts_framework_info():
            return FrameworkInfo(name="goodfw", version="9.9")
    """)
    )
    (tmp_path / "fake_broken.py").write_text("import framework_that_is_not_installed\n")
    (tmp_path / "fake_crash.py").write_text("raise RuntimeError('plugin bug')\n")
    info = tmp_path / "ts_fake-1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ts_fake\nVersion: 1.2\n")
    (info / "entry_points.txt").write_text(
        "[tscore]\ngood = fake_good\nbroken = fake_broken\ncrash = fake_crash\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    return tmp_path


def test_entry_points_load_and_broken_plugins_are_skipped_with_one_warning(
    fake_distribution, monkeypatch, caplog
):
    monkeypatch.delenv("TSCORE_PLUGINS", raising=False)
    with caplog.at_level(logging.WARNING, logger="tscore.plugins"):
        pm = create_plugin_manager()
    assert pm.records["good"].status == "loaded"
    assert pm.records["good"].distribution == "ts_fake" and pm.records["good"].version == "1.2"
    assert pm.records["broken"].status == "skipped"
    assert "framework_that_is_not_installed" in pm.records["broken"].reason
    assert pm.records["crash"].status == "failed"
    warnings = [r.getMessage() for r in caplog.records]
    assert sum("'broken'" in w for w in warnings) == 1
    assert sum("'crash'" in w for w in warnings) == 1
    # The core still works with the rest.
    assert pm.hook.ts_to_numpy(obj=np.ones(2), copy=True) is not None


def test_tscore_plugins_variable_narrows_loading(fake_distribution, monkeypatch, caplog):
    monkeypatch.setenv("TSCORE_PLUGINS", "good, nosuch")
    with caplog.at_level(logging.WARNING, logger="tscore.plugins"):
        pm = create_plugin_manager()
    assert pm.records["good"].status == "loaded"
    assert pm.records["broken"].status == "not selected"
    assert "good" in pm.loaded_names() and "broken" not in pm.loaded_names()
    assert any("'nosuch'" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("plugin", "package", "framework", "hook"),
    [
        ("torch", "ts_torch", "torch", "ts_attach_grad_hook"),
        ("mindspore", "ts_mindspore", "mindspore", "ts_attach_grad_hook"),
        ("paddle", "ts_paddle", "paddle", "ts_attach_grad_hook"),
        ("npu", "ts_npu", "torch_npu", "ts_kernel_dump"),
    ],
)
def test_installed_backends_load_exactly_when_their_framework_is_installed(plugin, package, framework, hook):
    """A backend loads where its framework is installed, else is skipped; it never crashes tscore."""
    record = get_plugin_manager().records.get(plugin)
    if importlib.util.find_spec(package) is None:
        assert record is None
    elif importlib.util.find_spec(framework) is None:
        assert record.status == "skipped" and "not installed" in record.reason
    else:
        assert record.status == "loaded"
        assert hook in record.hooks


def test_cli_lists_plugins_as_table_and_json(fake_distribution, monkeypatch, capsys):
    monkeypatch.delenv("TSCORE_PLUGINS", raising=False)
    monkeypatch.setattr("tscore.plugins._manager", None)
    assert cli.main(["plugins"]) == 0
    table = capsys.readouterr().out
    assert "good" in table and "ts_fake 1.2" in table and "goodfw 9.9" in table
    assert "framework_info" in table and "skipped" in table
    assert cli.main(["plugins", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)["plugins"]}
    assert rows["good"]["framework"] == "goodfw" and rows["good"]["hooks"] == ["ts_framework_info"]
    assert rows["numpy"]["status"] == "loaded" and "ts_to_numpy" in rows["numpy"]["hooks"]
    assert rows["broken"]["status"] == "skipped"
    monkeypatch.setattr("tscore.plugins._manager", None)


def test_cli_plugins_fits_the_terminal_and_keeps_one_line_per_plugin_in_a_pipe(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "100")
    assert cli.main(["plugins"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= 100
    out = "\n".join(lines)
    for row in cli.plugin_rows():  # every hook name whole, wrapped between names, never inside one
        for name in row["hooks"]:
            assert re.search(rf"(^|[ ,]){name.removeprefix('ts_')}(,|$)", out, flags=re.MULTILINE), name
    monkeypatch.delenv("COLUMNS")  # pytest's capture is no terminal: one plugin a line, as for a program
    assert cli.main(["plugins"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 + len(cli.plugin_rows())


def test_cli_usage_errors_exit_2(capsys):
    assert cli.main([]) == 2
    with pytest.raises(SystemExit) as err:
        cli.main(["nosuchcommand"])
    assert err.value.code == 2
