"""The finder on real HuggingFace transformers models and their MindSpore ports (issue: transformer ports).

HF calls its attention and block modules with keyword arguments (masks, a
cache, flags) and they return tuples or output objects; the port's take one
tensor and return one. The finder lines up their tensors by role, compares
what both have, says what one side alone has, and names the module whose own
code differs, never an ancestor of it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tscore as ts
from tests.cross.dumping import dump_step
from tests.cross.transformer_ports import (
    GPT2_INPUT,
    GPT2_MISTAKES,
    LLAMA_INPUT,
    LLAMA_MISTAKES,
    hf_gpt2,
    hf_llama,
    ms_gpt2,
    ms_llama,
)
from tscore.cli import main
from tscore.netdiff.report import LayerStatus


def find(orig: object, target: object, locate: bool | None = True) -> ts.migrator.NetDiffReport:
    return ts.migrator.NetDifferenceFinder(orig, target, print_level=0).compare(
        auto_inputs=GPT2_INPUT, locate=locate
    )


def test_a_correct_gpt2_port_agrees_and_every_attention_call_is_compared() -> None:
    report = find(hf_gpt2(), ms_gpt2())
    assert report.passed and report.first_divergence is None, report.verdict()
    assert report.weights is not None and report.weights.passed
    rows = {row.orig_path: row for row in report.layers}
    for path in ("h.0.attn", "h.1.attn", "h.0", "h.1"):
        row = rows[path]
        assert row.status is LayerStatus.OK and row.output is not None and row.inherited_error is not None, (
            report.layer_table()
        )
    assert "only torch (cpu) passes cache_position, attention_mask (not compared)" in rows["h.0.attn"].note
    assert "output out_1 has no mindspore (CPU) counterpart" in rows["h.0.attn"].note
    assert "not compared: past_key_values (DynamicCache)" in rows[""].note
    assert report.settings_differ == []


@pytest.mark.parametrize("mistake", ["no_attention_scaling", "swapped_qk", "ln_eps"])
def test_a_planted_mistake_in_the_port_is_named_at_its_module(mistake: str) -> None:
    report = find(hf_gpt2(), ms_gpt2(mistake), locate=None)
    first = report.first_divergence
    assert first is not None and first.orig_path == first.target_path == GPT2_MISTAKES[mistake], (
        report.verdict()
    )
    if mistake == "ln_eps":
        assert [s.name for s in first.settings] == ["eps"]
    else:  # the attention's own code, between the projection that agrees and the next layer
        assert first.where == "before h.0.attn.attn_dropout, after h.0.attn.c_attn", report.verdict()


def test_an_exact_gelu_for_gelu_new_is_reported_as_a_setting_although_the_outputs_agree() -> None:
    report = find(hf_gpt2(), ms_gpt2("exact_gelu"), locate=None)
    differ = {
        row.orig_path: [(s.name, s.orig, s.target) for s in row.settings] for row in report.settings_differ
    }
    assert differ == {"h.1.mlp.act": [("approximate", "tanh", "none")]}, report.verdict()
    assert "approximate torch (cpu) tanh, mindspore (CPU) none" in report.verdict()


def test_eager_against_sdpa_attention_is_a_correct_pair() -> None:
    orig, target = hf_gpt2("eager"), hf_gpt2("sdpa")
    report = find(orig, target)
    assert report.passed and report.first_divergence is None, report.verdict()
    rows = {row.orig_path: row for row in report.layers}
    assert rows["h.0.attn"].status is LayerStatus.OK and rows["h.0.attn"].output is not None
    assert rows["h.0.attn.attn_dropout"].status is LayerStatus.NOT_CALLED  # sdpa drops inside its kernel


def test_attention_scaling_off_in_one_eager_model_is_named_in_that_attention() -> None:
    target = hf_gpt2("eager")
    target.h[1].attn.scale_attn_weights = False
    report = find(hf_gpt2("sdpa"), target, locate=None)
    first = report.first_divergence
    assert first is not None and first.orig_path == "h.1.attn", report.verdict()
    assert first.where.endswith("after h.1.attn.c_attn")


def test_replaying_a_cached_attention_leaves_the_run_as_it_was() -> None:
    """HF's default use_cache=True hands each attention a DynamicCache it appends to; replays copy it."""
    orig = hf_gpt2()
    target = hf_gpt2()
    target.h[0].attn.scale_attn_weights = False
    report = find(orig, target, locate=True)
    assert report.first_divergence is not None and report.first_divergence.orig_path == "h.0.attn"
    failed = [
        row.note
        for row in report.layers
        if "not replayed:" in row.note.replace("not replayed: its inputs", "")
    ]
    assert failed == [], failed
    again = find(orig, target, locate=True)
    assert again.first_divergence == report.first_divergence


def test_tscore_diff_exits_0_on_the_correct_port_and_1_on_a_mistake(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nets = tmp_path / "gpt2_twins.py"
    nets.write_text(
        "from tests.cross.transformer_ports import hf_gpt2, ms_gpt2\n"
        "def port(): return ms_gpt2()\n"
        "def mistaken(): return ms_gpt2('no_attention_scaling')\n"
    )
    args = ["--input", "2,16:int64:0:100", "-q"]
    assert main(["diff", f"{nets}:hf_gpt2", f"{nets}:port", *args]) == 0
    assert capsys.readouterr().out.strip() == "outputs agree: no divergence"
    assert main(["diff", f"{nets}:hf_gpt2", f"{nets}:mistaken", *args]) == 1
    assert capsys.readouterr().out.startswith("first divergence: h.0.attn (GPT2Attention / GPT2Attention)")


def test_a_correct_llama_port_agrees_with_its_rotary_tables_and_attention_compared() -> None:
    report = ts.migrator.NetDifferenceFinder(hf_llama(), ms_llama(), print_level=0).compare(
        auto_inputs=LLAMA_INPUT, locate=True
    )
    assert report.passed and report.first_divergence is None, report.verdict()
    rows = {row.orig_path: row for row in report.layers}
    for path in ("rotary_emb", "layers.0.self_attn", "layers.1.post_attention_layernorm", "layers.0.mlp"):
        assert rows[path].status is LayerStatus.OK and rows[path].output is not None, report.layer_table()
    assert rows["layers.0.self_attn"].inherited_error is not None  # hidden states and cos/sin lined up
    assert (
        "only torch (cpu) passes attention_mask, position_ids, cache_position"
        in rows["layers.0.self_attn"].note
    )


LLAMA_SETTINGS = {"rotary_base": ("base", 10000.0, 1000.0), "rms_eps": ("eps", 1e-6, 1e-2)}


@pytest.mark.parametrize("mistake", sorted(LLAMA_MISTAKES))
def test_a_planted_mistake_in_the_llama_port_is_named_at_its_module(mistake: str) -> None:
    report = ts.migrator.NetDifferenceFinder(hf_llama(), ms_llama(mistake), print_level=0).compare(
        auto_inputs=LLAMA_INPUT
    )
    first = report.first_divergence
    path = LLAMA_MISTAKES[mistake]
    assert first is not None and first.orig_path == first.target_path == path, report.verdict()
    if mistake in LLAMA_SETTINGS:
        assert [(s.name, s.orig, s.target) for s in first.settings] == [LLAMA_SETTINGS[mistake]]
    else:
        assert first.where == f"before {path}.o_proj, after {path}.v_proj", report.verdict()


def _dumps(tmp_path: Path, mistake: str | None, model: str = "gpt2") -> ts.dump_compare.DumpCompareReport:
    """Dump one forward and backward of an HF model (orig) and its port (target), statistics; compare them."""
    import mindspore as ms
    import numpy as np
    import torch

    ms.set_context(mode=ms.PYNATIVE_MODE)
    orig, port = (hf_gpt2(), ms_gpt2(mistake)) if model == "gpt2" else (hf_llama(), ms_llama(mistake))
    ts.migrator.NetDifferenceFinder(orig, port, print_level=0).compare(auto_inputs=GPT2_INPUT, locate=False)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 100, (2, 16)).astype(np.int64)
    projection = rng.standard_normal((2, 16, 64)).astype(np.float32)  # a loss whose gradients are not ~0

    def torch_step() -> None:
        (orig(torch.from_numpy(ids)).last_hidden_state * torch.from_numpy(projection)).sum().backward()

    def ms_step() -> None:
        loss = ms.value_and_grad(
            lambda x: (port(x) * ms.Tensor(projection)).sum(), None, port.trainable_params()
        )
        loss(ms.Tensor(ids))

    orig_dump = dump_step(orig, torch_step, tmp_path / "torch", "L1", "statistics")
    port_dump = dump_step(port, ms_step, tmp_path / "ms", "L1", "statistics")
    (tmp_path / "out").mkdir(parents=True)
    return ts.dump.compare_dumps(port_dump, orig_dump, str(tmp_path / "out"))


def test_the_dump_compare_pairs_the_calls_of_hf_gpt2_and_its_port_as_a_person_would(tmp_path: Path) -> None:
    report = _dumps(tmp_path, None)
    pairs = {(v.target_call, v.orig_call): v for v in report.calls}
    expected = [
        ("Functional_split_0_forward", "Tensor_split_0_forward"),  # one operation in two namespaces
        ("Primitive_Gather_0_forward", "Functional_embedding_0_forward"),  # MindSpore's embedding
        ("Functional_matmul_0_forward", "Torch_addmm_0_forward"),  # matmul + a bias add = addmm
        ("Tensor___truediv___0_forward", "Tensor_div_0_forward"),
        ("Functional_matmul_0_backward", "Torch_addmm_0_backward"),
    ]
    for key in expected:
        assert key in pairs and pairs[key].status == "ok", (key, pairs.get(key))
    by_values = [v for v in report.calls if v.how == "values"]
    assert len(by_values) >= 6 and all(v.status == "ok" for v in by_values)  # q, k and v never cross
    differ = [v.label for v in report.calls if v.status in ("own", "inherited", "weights")]
    assert differ == [] and report.first_error is None and report.passed, (differ, report.summary())


@pytest.mark.parametrize(
    ("mistake", "module", "call"),
    [
        ("ln_eps", "h.1.ln_2", "Primitive_LayerNorm_3_forward"),
        (
            "no_attention_scaling",
            "h.0.attn",
            "Functional_softmax_0_forward",
        ),  # the first the division changes
        ("swapped_qk", "h.0.attn", "Tensor_transpose_3_forward"),  # k's transpose is given q
    ],
)
def test_the_dump_compare_names_the_call_where_a_planted_mistake_shows_first(
    tmp_path: Path, mistake: str, module: str, call: str
) -> None:
    report = _dumps(tmp_path, mistake)
    first = report.first_error
    assert first is not None and (first.module, first.target_call) == (module, call), report.summary()
    assert not report.passed
    if mistake == "no_attention_scaling":  # the division only HF makes is named with it
        assert "Tensor_div_0_forward (orig only)" in first.reason


def test_the_dump_compare_finds_a_correct_llama_port_correct(tmp_path: Path) -> None:
    """Dense's MatMul against linear (its backward's passed-on gradient not compared), rotate_half's
    halves taken in other orders, gradients one run lists as None."""
    report = _dumps(tmp_path, None, "llama")
    differ = [v.label for v in report.calls if v.status in ("own", "inherited", "weights")]
    assert differ == [] and report.first_error is None and report.passed, (differ, report.summary())
    halves = [v for v in report.calls if v.how == "values" and "getitem" in v.label]
    assert len(halves) >= 4 and all(v.status == "ok" for v in halves)  # each half with its twin
    pairs = {(v.target_call, v.orig_call): v for v in report.calls}
    for layer in range(14):  # every bias-free Dense (Reshape, MatMul, Reshape) against torch's linear
        pair = pairs.get((f"Primitive_MatMul_{layer}_forward", f"Functional_linear_{layer}_forward"))
        assert pair is not None and pair.status == "ok", (layer, pair)


@pytest.mark.parametrize(
    ("mistake", "call"),
    [
        ("rotary_base", "Functional_cat_0_forward"),  # the first the inverse frequencies reach
        ("rms_eps", "Tensor___add___10_forward"),  # variance + eps
        ("swapped_qk", "Tensor_transpose_3_forward"),  # k's transpose is given q
        ("no_attention_scaling", "Functional_softmax_1_forward"),
    ],
)
def test_the_dump_compare_names_the_call_where_a_planted_llama_mistake_shows_first(
    tmp_path: Path, mistake: str, call: str
) -> None:
    report = _dumps(tmp_path, mistake, "llama")
    first = report.first_error
    module = LLAMA_MISTAKES[mistake]
    assert first is not None and (first.module, first.target_call) == (module, call), report.summary()
    assert not report.passed


def _torch_dumps(tmp_path: Path, target: object, orig: object) -> ts.dump_compare.DumpCompareReport:
    """Dump one forward and backward of two torch GPT-2s, statistics; compare them."""
    import numpy as np
    import torch

    ids = torch.from_numpy(np.random.default_rng(0).integers(0, 100, (2, 16)))

    def step(net: Any) -> Callable[[], None]:
        return lambda: net(ids).last_hidden_state.square().sum().backward()

    target_dump = dump_step(target, step(target), tmp_path / "target", "L1", "statistics")
    return ts.dump.compare_dumps(
        target_dump, dump_step(orig, step(orig), tmp_path / "orig", "L1", "statistics")
    )


def test_the_dump_compare_compares_sdpa_with_the_calls_of_an_eager_attention_as_one(tmp_path: Path) -> None:
    """Same weights, other kernels: sdpa's one call against eager's matmul ... softmax ... matmul."""
    report = _torch_dumps(tmp_path, hf_gpt2("sdpa"), hf_gpt2("eager"))
    whole = [v for v in report.calls if v.how == "composite" and v.module in ("h.0.attn", "h.1.attn")]
    assert [v.target_call for v in whole] == [
        "Functional_scaled_dot_product_attention_0_forward",
        "Functional_scaled_dot_product_attention_1_forward",
    ]
    assert all(v.status == "ok" and v.output_error is not None for v in whole), whole
    assert report.passed and report.first_error is None, report.summary()


def test_attention_scaling_off_in_an_eager_model_is_named_against_sdpa_by_the_dump_compare(
    tmp_path: Path,
) -> None:
    target = hf_gpt2("eager")
    target.h[1].attn.scale_attn_weights = False
    report = _torch_dumps(tmp_path, target, hf_gpt2("sdpa"))
    first = report.first_error
    assert first is not None and first.module == "h.1.attn" and first.how == "composite", report.summary()
    assert first.orig_call == "Functional_scaled_dot_product_attention_1_forward"
    # the user's line, and the line of HF's code that made the call under it
    assert first.where is not None and first.where.startswith(f"{__file__}:"), first.where
    assert "(in transformers/models/gpt2/modeling_gpt2.py:" in first.where, first.where


def test_an_exact_gelu_for_gelu_new_is_compared_with_hfs_eight_calls_as_one(tmp_path: Path) -> None:
    """HF's NewGELUActivation computes in eight calls; the port's gelu is compared with them as one."""
    correct, exact = _dumps(tmp_path / "correct", None), _dumps(tmp_path / "exact", "exact_gelu")
    errors = []
    for report in (correct, exact):
        act = next(v for v in report.calls if v.how == "composite" and v.module == "h.1.mlp.act")
        assert act.target_call == "Functional_gelu_1_forward" and act.orig_call.endswith("(8 calls)")
        errors.append(act.output_error)
    assert errors[1] > 100 * errors[0]  # the tanh approximation's difference shows, within tolerance


def test_a_mask_filled_with_another_spelling_of_the_largest_float_is_no_inherited_error() -> None:
    """mindtorch fills HF's causal mask with -3.40282e38 where torch writes -3.4028235e38 (issue 48)."""
    import torch

    def refill(module: object, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        mask = kwargs.get("attention_mask")
        if mask is not None:
            kwargs["attention_mask"] = torch.where(mask < -1e38, torch.tensor(-3.40282e38), mask)
        return args, kwargs

    target = hf_gpt2("eager")
    target.h[1].attn.scale_attn_weights = False
    for block in target.h:
        block.attn.register_forward_pre_hook(refill, with_kwargs=True)
    report = find(hf_gpt2("eager"), target, locate=None)
    first = report.first_divergence
    assert first is not None and first.orig_path == "h.1.attn", report.verdict()
    assert first.inherited_error is not None and first.inherited_error < 1e-3, report.verdict()
    masks = [r for r in report.layers if r.orig_path == "h.0.attn"]
    assert masks and masks[0].status is LayerStatus.OK, masks
