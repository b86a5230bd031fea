"""``ts.widget.loss_compare``: two training logs' losses by step, TroubleShooter's files, pictures to look at.

The two Megatron-style logs and TroubleShooter 1.0.18's own ``statistic.csv`` and per-log CSVs
for them are committed (``tests/data/make_loss_logs.py``, run in TroubleShooter's venv); the NPU
log drifts from step 31 on and stops 5 steps early.
"""

from __future__ import annotations

import csv
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import tscore as ts
from tscore.loss_compare import LossLogError

LOGS = Path(__file__).parents[1] / "data" / "troubleshooter_1.0.18" / "logs"
SVG = "{http://www.w3.org/2000/svg}"


def _spec(name: str, tag: str = "lm loss:") -> dict:
    return {"path": str(LOGS / f"{name}.log"), "loss_tag": tag, "label": name}


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


@pytest.fixture
def compared(tmp_path):
    return ts.widget.loss_compare(
        _spec("gpu"), _spec("npu"), "GPU vs NPU", output_path=tmp_path, print_level=0, tolerance=5e-4
    )


def test_the_steps_align_and_the_first_divergence_is_named(compared, tmp_path):
    assert compared.aligned_by == "step"
    assert compared.steps == list(range(1, 56)) and compared.left_only == list(range(56, 61))
    assert compared.right_only == []
    assert compared.first_divergence == 31 and not compared.passed
    assert all(d == 0.0 for d in compared.abs_diff[:30]) and compared.abs_diff[30] > 0
    assert "diverge from step 31" in compared.summary()
    # the drift is 0.1% at step 31, 0.2% at 32: the default tolerance (0.1%) is first exceeded at 32
    default = ts.widget.loss_compare(_spec("gpu"), _spec("npu"), output_path=tmp_path / "d", print_level=0)
    assert default.first_divergence == 32


def test_the_statistics_are_troubleshooters(compared, tmp_path):
    (theirs,) = _read_csv(LOGS / "statistic.csv")
    (ours,) = _read_csv(tmp_path / "statistic.csv")
    assert list(ours) == list(theirs)
    for column, value in theirs.items():
        assert float(ours[column]) == pytest.approx(float(value), rel=1e-12), column


@pytest.mark.parametrize("name", ["gpu", "npu"])
def test_each_logs_losses_are_written_as_troubleshooter_writes_them(compared, tmp_path, name):
    theirs = _read_csv(LOGS / f"{name}.log.csv")
    ours = _read_csv(tmp_path / f"{name}.log.csv")
    assert [(row[""], float(row["loss"])) for row in ours] == [
        (row[""], float(row["loss"])) for row in theirs
    ]


def test_the_curves_csv_holds_every_step_of_either_log(compared, tmp_path):
    rows = _read_csv(tmp_path / "loss_compare.csv")
    assert [int(r["step"]) for r in rows] == list(range(1, 61))
    assert rows[-1]["npu"] == "" and float(rows[-1]["gpu"]) > 0
    assert float(rows[30]["rel_diff"]) == pytest.approx(0.001, rel=1e-3)


def test_the_pictures_show_both_curves_and_their_difference(compared, tmp_path):
    curves = ET.parse(tmp_path / "loss_compare.svg").getroot()
    texts = [t.text for t in curves.iter(f"{SVG}text")]
    assert "GPU vs NPU" in texts and "gpu" in texts and "npu" in texts
    lines = list(curves.iter(f"{SVG}polyline"))
    assert len(lines) == 2
    assert [len(line.get("points").split()) for line in lines] == [60, 55]
    error = ET.parse(tmp_path / "error.svg").getroot()
    assert any("tolerance" in (t.text or "") for t in error.iter(f"{SVG}text"))
    assert {p.name for p in tmp_path.iterdir()} == {
        "loss_compare.svg",
        "error.svg",
        "loss_compare.csv",
        "statistic.csv",
        "gpu.log.csv",
        "npu.log.csv",
    }


def test_the_default_folder_is_troubleshooters_and_the_summary_prints(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    report = ts.widget.loss_compare(_spec("gpu"), _spec("gpu"))
    assert report.passed and report.max_abs_error == 0.0
    assert (tmp_path / "loss_compare" / "statistic.csv").is_file()
    out = capsys.readouterr().out
    assert "losses agree" in out and str(tmp_path / "loss_compare") in out


def test_logs_without_step_numbers_align_by_order(tmp_path):
    (tmp_path / "a.log").write_text("epoch 0 loss: 2.5\nloss: 2.0\nother line\nloss: 1.5\n")
    (tmp_path / "b.log").write_text("loss: 2.5\nloss: 2.0\n")
    report = ts.widget.loss_compare(
        tmp_path / "a.log", tmp_path / "b.log", output_path=tmp_path / "o", print_level=0
    )
    assert report.aligned_by == "order" and report.steps == [0, 1] and report.left_only == [2]
    assert report.left == [2.5, 2.0] and report.first_divergence is None


def test_a_loss_that_becomes_nan_is_kept_and_is_the_divergence(tmp_path):
    (tmp_path / "a.log").write_text("".join(f"step {i} loss: {1 / (i + 1)}\n" for i in range(5)))
    (tmp_path / "b.log").write_text(
        "".join(f"step {i} loss: {'nan' if i == 3 else 1 / (i + 1)}\n" for i in range(5))
    )
    report = ts.widget.loss_compare(
        tmp_path / "a.log", tmp_path / "b.log", output_path=tmp_path / "o", print_level=0
    )
    assert math.isnan(report.right[3]) and report.first_divergence == 3
    assert report.abs_diff[3] is None and report.abs_diff[4] == 0.0
    marks = [t.text for t in ET.parse(tmp_path / "o" / "loss_compare.svg").getroot().iter(f"{SVG}text")]
    assert "\u00d7" in marks  # where the curve broke


def test_bad_logs_are_clear_errors_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the default folder would be written
    (tmp_path / "no_tag.log").write_text("iteration 1 | loss 3.0\n")
    with pytest.raises(LossLogError, match=r"no_tag\.log.*'lm loss:'"):
        ts.widget.loss_compare(_spec("gpu"), {"path": tmp_path / "no_tag.log", "loss_tag": "lm loss:"})
    with pytest.raises(LossLogError, match=r"missing\.log.*cannot be read"):
        ts.widget.loss_compare(_spec("gpu"), tmp_path / "missing.log")
    with pytest.raises(LossLogError, match="loss_tag"):
        ts.widget.loss_compare(_spec("gpu"), {"path": str(LOGS / "npu.log")})
    (tmp_path / "words.log").write_text("loss: n/a\nloss: pending\n")
    with pytest.raises(LossLogError, match="2 lines hold it with no number"):
        ts.widget.loss_compare(_spec("gpu"), tmp_path / "words.log")
    assert not (tmp_path / "loss_compare").exists()


def test_a_step_counter_that_restarts_each_epoch_aligns_by_order(tmp_path, caplog):
    def log(losses):
        return "".join(f"epoch: {1 + i // 3} step: {1 + i % 3}, loss is {v}\n" for i, v in enumerate(losses))

    (tmp_path / "a.log").write_text(log([9.0, 8.0, 7.0, 2.0, 1.5, 1.0]))
    (tmp_path / "b.log").write_text(log([2.2, 8.0, 7.0, 2.0, 1.5, 1.0]))  # epoch 1, step 1 differs
    report = ts.widget.loss_compare(
        {"path": tmp_path / "a.log", "loss_tag": "loss is"},
        {"path": tmp_path / "b.log", "loss_tag": "loss is"},
        output_path=tmp_path / "o",
        print_level=0,
    )
    assert report.aligned_by == "order" and len(report.steps) == 6 and report.first_divergence == 0
    assert "go back" in caplog.text


def test_what_only_looks_like_a_step_is_not_one_and_losses_are_found_as_troubleshooter_finds_them(tmp_path):
    (tmp_path / "a.log").write_text(
        "loss: tensor(2.5, grad_fn=<NllLossBackward0>) | time/step: 0.15s | tokens per step 4096\n"
        "loss: [2.0] | time/step: 0.15s\n"
        "loss:1.5\n"
    )
    report = ts.widget.loss_compare(
        tmp_path / "a.log", tmp_path / "a.log", output_path=tmp_path / "o", print_level=0
    )
    assert report.aligned_by == "order" and report.left == [2.5, 2.0, 1.5] and report.passed


def test_logs_with_no_step_in_common_do_not_read_as_agreeing(tmp_path):
    (tmp_path / "a.log").write_text("step 1 loss: 1.0\nstep 2 loss: 0.5\n")
    (tmp_path / "b.log").write_text("step 10 loss: 1.0\nstep 20 loss: 0.5\n")
    report = ts.widget.loss_compare(
        tmp_path / "a.log", tmp_path / "b.log", output_path=tmp_path / "o", print_level=0
    )
    assert not report.passed and "no step in common" in report.summary()


def test_identical_logs_and_odd_tolerances_still_draw(tmp_path):
    for tolerance in (0.0, float("inf")):
        report = ts.widget.loss_compare(
            _spec("gpu"),
            _spec("gpu"),
            output_path=tmp_path / str(tolerance),
            print_level=0,
            tolerance=tolerance,
        )
        error = ET.parse(tmp_path / str(tolerance) / "error.svg").getroot()
        assert any("120 values of 0" in (t.text or "") for t in error.iter(f"{SVG}text")) and report.passed
