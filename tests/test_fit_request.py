"""The part train and tune share: FitRequest's fields checked by one function, FnArgs built by one
function."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from conftest import PENGUIN
from generic_trainer.errors import UserInputError
from generic_trainer.fit.requests import FitRequest, TrainRequest, TuneRequest
from generic_trainer.intake.fit_request import build_train_request, build_tune_request

# FitRequest fields that each verb resolves its own way (train: its strategies and the model-run
# dir's
# checkpoints; tune: per-replica strategies and checkpoints beside best_hyperparameters).
OWN = {"checkpoint_dir", "strategy"}


def _shared(tmp_path: Path) -> dict[str, object]:
    """Every input of FitRequest, given as flags would give them (gs:// under a fake mount)."""
    (tmp_path / "hp").mkdir()
    (tmp_path / "hp" / "best_hyperparameters.txt").write_text(json.dumps({"units": 8, "lr": 0.01}))
    base = tmp_path / "base" / "Format-Serving"
    base.mkdir(parents=True)
    return {
        "examples": str(PENGUIN / "data"),
        "module_file": str(PENGUIN / "module.py"),
        "schema": str(PENGUIN),
        "transform_graph": str(PENGUIN / "transform_graph"),
        "hyperparameters": str(tmp_path / "hp"),
        "base_model": str(tmp_path / "base"),
        "train_steps": "12",
        "eval_steps": "0",
        "train_splits": "train",
        "eval_splits": ["eval"],
        "custom_config": '{"epochs": 2, "api_key": "s3cret"}',
        "metrics_file": "gs://bkt/metrics.json",
        "report_file": "gs://bkt/report.html",
        "gcs_root": str(tmp_path / "gcs"),
    }


def _requests(tmp_path: Path, **changes: object) -> tuple[TrainRequest, TuneRequest]:
    values = {**_shared(tmp_path), **changes}
    train = build_train_request({**values, "model_dir": str(tmp_path / "model")}, environ={})
    tune = build_tune_request(
        {**values, "best_hyperparameters_dir": str(tmp_path / "best")}, environ={}
    )
    return train, tune


def test_train_and_tune_resolve_the_inputs_they_share_alike(tmp_path):
    train, tune = _requests(tmp_path)
    assert isinstance(train, FitRequest) and isinstance(tune, FitRequest)
    shared = [f.name for f in dataclasses.fields(FitRequest) if f.name not in OWN]
    assert {n: getattr(train, n) for n in shared} == {n: getattr(tune, n) for n in shared}
    assert (
        train.hyperparameters == {"units": 8, "lr": 0.01}
        and train.train_steps == 12
        and train.eval_steps is None
    )
    assert train.metrics_file == str(tmp_path / "gcs" / "bkt" / "metrics.json")
    assert (
        train.redacted_custom_config()
        == tune.redacted_custom_config()
        == {"epochs": 2, "api_key": "***"}
    )
    assert train.checkpoint_dir == str(tmp_path / "model" / "logs" / "checkpoints")
    assert tune.checkpoint_dir == str(tmp_path / "best") + ".checkpoints"
    # Every FitRequest field is the same attribute on both, so verbs and reports read either alike.
    assert set(shared) | OWN == {f.name for f in dataclasses.fields(FitRequest)}


@pytest.mark.parametrize(
    ("key", "value", "flag"),
    [
        ("custom_config", "[1, 2]", "--custom-config"),
        ("hyperparameters", "/no/such/file", "--hyperparameters"),
        ("train_steps", "-1", "--train-steps"),
        ("eval_splits", "a/../b", "--eval-splits"),
        ("schema", "/no/such/schema", "--schema"),
    ],
)
def test_a_bad_shared_input_is_refused_the_same_way_by_both(tmp_path, key, value, flag):
    values = {**_shared(tmp_path), key: value}
    messages = []
    for build, own in (
        (build_train_request, {"model_dir": str(tmp_path / "m")}),
        (build_tune_request, {"best_hyperparameters_dir": str(tmp_path / "b")}),
    ):
        with pytest.raises(UserInputError) as caught:
            build({**values, **own}, environ={})
        messages.append(str(caught.value))
    assert messages[0] == messages[1] and messages[0].startswith(flag)


def test_fn_args_of_train_and_tune_come_from_one_builder(tmp_path):
    import tensorflow as tf
    from generic_trainer import data
    from generic_trainer.fit import inputs, sharding

    train, tune = _requests(tmp_path)
    strategy = tf.distribute.get_strategy()
    examples = inputs.check_examples_and_schema(train)
    assert examples == inputs.check_examples_and_schema(tune)
    assert examples.schema_file == str(PENGUIN / "schema.pbtxt")  # the one .pbtxt of the schema dir
    chief = inputs.build_fn_args(
        train,
        examples,
        working_dir=str(tmp_path / "run"),
        strategy=strategy,
        num_gpus=0,
        is_chief=True,
        task_type="chief",
        task_index=0,
        num_workers=2,
        shard_data=True,
        serving_model_dir=str(tmp_path / "stage" / "Format-Serving"),
    )
    searcher = inputs.build_fn_args(
        tune,
        examples,
        working_dir=tune.working_dir,
        strategy=strategy,
        num_gpus=0,
        is_chief=False,
        task_type="worker",
        task_index=1,
        num_workers=3,
    )
    for fn_args in (chief, searcher):
        assert fn_args.train_files == [str(PENGUIN / "data" / "Split-train" / "*")]
        assert fn_args.eval_files == [str(PENGUIN / "data" / "Split-eval" / "*")]
        assert (fn_args.train_steps, fn_args.eval_steps) == (12, None)
        assert fn_args.schema_file == str(PENGUIN / "schema.pbtxt")
        assert fn_args.transform_output == str(PENGUIN / "transform_graph")
        assert fn_args.base_model == str(
            tmp_path / "base" / "Format-Serving"
        )  # the SavedModel inside
        assert fn_args.hyperparameters == {"units": 8, "lr": 0.01}
        assert fn_args.custom_config == {
            "epochs": 2,
            "api_key": "s3cret",
        }  # the module gets the real value
        assert fn_args.checkpoint_dir in (train.checkpoint_dir, tune.checkpoint_dir)
        assert fn_args.strategy is strategy
    # A module changing its dicts changes nothing in the request.
    chief.hyperparameters["units"] = 99
    chief.custom_config["epochs"] = 99
    assert train.hyperparameters["units"] == 8 and train.custom_config["epochs"] == 2
    # Several training workers: datasets shard by example when files are few; the tuner's replicas
    # do not shard.
    assert (
        isinstance(chief.data_accessor, sharding.ShardingDataAccessor)
        and chief.data_accessor.num_workers == 2
    )
    assert chief.data_accessor.transform_graph == str(PENGUIN / "transform_graph")
    assert type(searcher.data_accessor) is data.DataAccessor
    assert searcher.data_accessor.raw_schema == str(PENGUIN / "schema.pbtxt")
    assert (searcher.is_chief, searcher.task_type, searcher.task_index, searcher.num_workers) == (
        False,
        "worker",
        1,
        3,
    )
    assert (
        searcher.working_dir == os.path.join(tune.checkpoint_dir, "tuner")
        and searcher.serving_model_dir == ""
    )
    assert chief.export_dir() == str(tmp_path / "stage" / "Format-Serving")
