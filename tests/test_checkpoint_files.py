"""checkpoint_files: listing complete checkpoints, removing the ones not kept, reading the JSON
beside them."""

from __future__ import annotations

import json
import os

import pytest
from generic_trainer.fit.backup_state import state_problem
from generic_trainer.fit.checkpoint_files import (
    DamagedState,
    checkpoint_steps,
    read_json,
    remove_checkpoints,
)


def _checkpoint(directory, prefix: str, complete: bool = True) -> None:
    (directory / f"{prefix}.data-00000-of-00001").write_bytes(b"x")
    if complete:
        (directory / f"{prefix}.index").write_bytes(b"i")


def test_steps_count_complete_checkpoints_only_and_remove_keeps_what_it_is_told(tmp_path):
    for step in (5, 10, 40):
        _checkpoint(tmp_path, f"ckpt-{step}")
    _checkpoint(tmp_path, "ckpt-50", complete=False)  # being written (or killed while writing)
    _checkpoint(tmp_path, "best_ckpt-10")  # another name in the same dir
    (tmp_path / "ckpt-7_temp").mkdir()  # TensorFlow's temp dir while saving: not a checkpoint file
    (tmp_path / "state.json").write_text(json.dumps({"prefix": "ckpt-40"}))
    assert checkpoint_steps(str(tmp_path), "ckpt") == [5, 10, 40]
    assert checkpoint_steps(str(tmp_path), "best_ckpt") == [10]
    assert checkpoint_steps(str(tmp_path / "missing"), "ckpt") == []

    remove_checkpoints(str(tmp_path), "ckpt", keep=["ckpt-40", str(tmp_path / "ckpt-10")])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "best_ckpt-10.data-00000-of-00001",
        "best_ckpt-10.index",
        "ckpt-10.data-00000-of-00001",
        "ckpt-10.index",
        "ckpt-40.data-00000-of-00001",
        "ckpt-40.index",
        "ckpt-7_temp",
        "state.json",
    ]
    assert read_json(str(tmp_path / "state.json")) == {"prefix": "ckpt-40"}
    assert read_json(str(tmp_path / "nope.json")) is None


@pytest.mark.parametrize(
    "content, why",
    [
        (b'{"prefix": "ckpt-4', "not valid JSON"),
        (b"", "not valid JSON"),
        (b"[1]", "holds a list, expected a JSON object"),
        (b"\xff\xfe", "is not UTF-8 text"),
        (b"[" * 5000 + b"]" * 5000, "nested deeper than the limit"),
        (b" " * (2 * 1024 * 1024), "over the limit of 1048576 bytes"),
    ],
)
def test_a_damaged_json_file_is_named_never_a_crash(tmp_path, content, why):
    path = tmp_path / "state.json"
    path.write_bytes(content)
    with pytest.raises(DamagedState, match=why) as raised:
        read_json(str(path))
    assert str(path) in str(raised.value)
    os.remove(path)
    path.mkdir()  # not a file
    with pytest.raises(DamagedState, match="is a directory, not a regular file"):
        read_json(str(path))
    os.rmdir(path)
    os.symlink("/dev/zero", path)  # read with a bound, never for ever
    with pytest.raises(DamagedState):
        read_json(str(path))


def test_state_problem_names_what_is_wrong(tmp_path):
    _checkpoint(tmp_path, "ckpt-7")
    good = {"prefix": "ckpt-7", "global_step": 7, "epoch": 1, "step_in_epoch": 2, "fit_index": 0}
    assert state_problem(good, str(tmp_path), epochs=3, steps=5) is None
    assert (
        state_problem({k: v for k, v in good.items() if k != "fit_index"}, str(tmp_path)) is None
    )  # older form
    cases = {
        "global_step is -1": {"global_step": -1},
        "epoch is None": {"epoch": None},
        "step_in_epoch is 2.5": {"step_in_epoch": 2.5},
        "fit_index is -3": {"fit_index": -3},
        "prefix is '../ckpt-7', expected ckpt-7": {"prefix": "../ckpt-7"},
        "prefix is 'ckpt-7/../../x'": {"prefix": "ckpt-7/../../x"},
        "ckpt-8.index is missing": {"prefix": "ckpt-8", "global_step": 8},
        "epoch 4 step 0 is past the fit's 3 epochs": {"epoch": 4, "step_in_epoch": 0},
        "step_in_epoch 6 is past the fit's 5 steps per epoch": {"step_in_epoch": 6},
    }
    for why, edit in cases.items():
        assert why in state_problem({**good, **edit}, str(tmp_path), epochs=3, steps=5), why
    assert "holds a str" in state_problem("x", str(tmp_path))
