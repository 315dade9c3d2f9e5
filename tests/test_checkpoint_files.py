"""checkpoint_files: listing complete checkpoints, removing the ones not kept, reading the JSON beside them."""

from __future__ import annotations

import json

from generic_trainer.fit.checkpoint_files import checkpoint_steps, read_json, remove_checkpoints


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
        "best_ckpt-10.data-00000-of-00001", "best_ckpt-10.index", "ckpt-10.data-00000-of-00001", "ckpt-10.index",
        "ckpt-40.data-00000-of-00001", "ckpt-40.index", "ckpt-7_temp", "state.json"]
    assert read_json(str(tmp_path / "state.json")) == {"prefix": "ckpt-40"}
    assert read_json(str(tmp_path / "nope.json")) is None
