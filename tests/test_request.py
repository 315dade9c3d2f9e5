"""The request edge: raw flag / executor-input values -> a validated TrainRequest, without
TensorFlow."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import PENGUIN
from generic_trainer.artifacts import kfp_io, storage
from generic_trainer.artifacts.redaction import redact
from generic_trainer.errors import UserInputError
from generic_trainer.fit.requests import RunFnProgram
from generic_trainer.intake.fit_options import TRAIN
from generic_trainer.intake.fit_request import build_train_request
from generic_trainer.intake.options import artifact_maps
from generic_trainer.intake.values import (
    ints_from_floats,
)

ARTIFACTS = artifact_maps(TRAIN)  # the train verb's own executor-input maps


def _values(tmp_path: Path, **kw):
    base = {
        "examples": str(PENGUIN / "data"),
        "module_file": str(PENGUIN / "module.py"),
        "model_dir": str(tmp_path / "model"),
    }
    base.update(kw)
    return base


def test_unset_inputs_take_tfxs_defaults_and_the_model_dir_layout(tmp_path):
    req = build_train_request(_values(tmp_path), environ={})
    assert req.program == RunFnProgram(module_file=req.program.module_file, run_fn="run_fn")
    assert req.task is None and req.train_splits == ("train",) and req.eval_splits == ("eval",)
    assert req.train_steps is None and req.eval_steps is None and req.custom_config == {}
    assert req.model_run_dir == str(tmp_path / "model" / "logs")
    assert req.checkpoint_dir == str(tmp_path / "model" / "logs" / "checkpoints")
    # --keras auto: penguin's module.py imports tensorflow_transform and tfx_bsl, so TFX would give
    # it tf_keras
    assert req.keras == "tf_keras" and req.strategy == "auto"
    assert req.keras_reason.startswith("--keras auto: module.py imports tensorflow_transform")


def _examples(tmp_path: Path, *splits: str) -> str:
    """An examples dir in TFX's layout with a file in each split (not read at intake)."""
    for split in splits:
        (tmp_path / "examples" / f"Split-{split}").mkdir(parents=True)
        (tmp_path / "examples" / f"Split-{split}" / "data.gz").write_bytes(b"")
    return str(tmp_path / "examples")


def test_zero_train_steps_means_no_limit_and_other_steps_stay(tmp_path):
    req = build_train_request(_values(tmp_path, train_steps="0", eval_steps="7"), environ={})
    assert req.train_steps is None and req.eval_steps == 7


def test_splits_parse_from_a_comma_separated_string_or_a_list(tmp_path):
    examples = _examples(tmp_path, "a", "b", "c")
    values = _values(tmp_path, train_splits="a, b", eval_splits=["c"], examples=examples)
    req = build_train_request(values, environ={})
    assert req.train_splits == ("a", "b") and req.eval_splits == ("c",)
    # resolved once, as TFX's trainer executor writes FnArgs.train_files: os.path.join(uri, "*")
    assert req.train_files == (f"{examples}/Split-a/*", f"{examples}/Split-b/*")
    assert req.eval_files == (f"{examples}/Split-c/*",)


def test_a_split_missing_or_empty_is_an_examples_error_at_intake(tmp_path):
    examples = _examples(tmp_path, "train")
    (tmp_path / "examples" / "Split-eval").mkdir()
    values = {**_values(tmp_path), "examples": examples}
    with pytest.raises(UserInputError, match=r"^--examples: split 'eval' .* holds no files"):
        build_train_request(values, environ={})
    with pytest.raises(UserInputError, match=r"^--examples: .* has no split 'test'"):
        build_train_request({**values, "eval_splits": "test"}, environ={})


def test_vertex_aip_dirs_fill_the_output_dirs_and_flags_win(tmp_path):
    env = {
        "AIP_MODEL_DIR": "gs://bkt/base/model/",
        "AIP_CHECKPOINT_DIR": "gs://bkt/base/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": "gs://bkt/base/logs/",
        "GENERIC_TRAINER_GCS_ROOT": str(tmp_path),
    }
    values = _values(tmp_path)
    del values["model_dir"]
    req = build_train_request(values, environ=env)
    assert req.model_dir == str(tmp_path / "bkt/base/model")
    assert req.checkpoint_dir == str(tmp_path / "bkt/base/checkpoints")
    assert req.model_run_dir == str(tmp_path / "bkt/base/logs")
    # Explicit flags win over the environment.
    req = build_train_request(_values(tmp_path, checkpoint_dir=str(tmp_path / "ck")), environ=env)
    assert req.model_dir == str(tmp_path / "model") and req.checkpoint_dir == str(tmp_path / "ck")


def test_metrics_and_report_files_on_gcs_map_to_the_mount(tmp_path):
    """--metrics-file / --report-file as gs:// URIs are written through the Cloud Storage mount, as
    evaluate's are."""
    env = {"GENERIC_TRAINER_GCS_ROOT": str(tmp_path / "gcs")}
    req = build_train_request(
        _values(
            tmp_path, metrics_file="gs://b/run/metrics.json", report_file="gs://b/run/report.html"
        ),
        environ=env,
    )
    assert req.metrics_file == str(tmp_path / "gcs/b/run/metrics.json")
    assert req.report_file == str(tmp_path / "gcs/b/run/report.html")
    local = build_train_request(
        _values(tmp_path, metrics_file=str(tmp_path / "m.json")), environ=env
    )
    assert local.metrics_file == str(tmp_path / "m.json") and local.report_file is None


def test_tf_use_legacy_keras_chooses_keras_unless_keras_is_given(tmp_path):
    legacy = build_train_request(_values(tmp_path), environ={"TF_USE_LEGACY_KERAS": "1"})
    assert legacy.keras == "tf_keras" and legacy.keras_reason == "TF_USE_LEGACY_KERAS=1 is set"
    explicit = build_train_request(
        _values(tmp_path, keras="keras3"), environ={"TF_USE_LEGACY_KERAS": "1"}
    )
    assert explicit.keras == "keras3" and explicit.keras_reason == "--keras keras3"
    # Set to 0 (as an image may), the variable decides as well: Keras 3 even for a module that
    # imports TFX.
    zero = build_train_request(_values(tmp_path), environ={"TF_USE_LEGACY_KERAS": "0"})
    assert zero.keras == "keras3" and "TF_USE_LEGACY_KERAS=0" in zero.keras_reason


def test_a_hyperparameters_dir_with_one_file_is_read_and_with_two_refused(tmp_path):
    hp = {
        "space": [{"class_name": "Fixed", "config": {"name": "units", "value": 3}}],
        "values": {"units": 3},
    }
    d = tmp_path / "hp"
    d.mkdir()
    (d / "best_hyperparameters.txt").write_text(json.dumps(hp))
    assert (
        build_train_request(_values(tmp_path, hyperparameters=str(d)), environ={}).hyperparameters
        == hp
    )
    (d / "second.txt").write_text("{}")
    with pytest.raises(
        UserInputError,
        match=r"--hyperparameters: directory .* holds 2 files .*; expected exactly one",
    ):
        build_train_request(_values(tmp_path, hyperparameters=str(d)), environ={})


@pytest.mark.parametrize(
    "key,value,needle",
    [
        ("examples", None, "--examples: required"),
        ("module_file", "", "--module-file: required"),
        ("model_dir", None, "--model-dir: required"),
        ("keras", "keras2", "--keras: expected one of"),
        ("eval_steps", "1.5", "--eval-steps: expected a whole number"),
        (
            "schema",
            "/nonexistent/schema.pbtxt",
            "--schema: /nonexistent/schema.pbtxt does not exist",
        ),
        ("base_model", "gs://b/none", "--base-model: gs://b/none does not exist (looked at"),
        ("custom_config", "3", "--custom-config: expected a JSON object"),
    ],
)
def test_bad_values_name_the_input(tmp_path, key, value, needle):
    with pytest.raises(UserInputError) as info:
        build_train_request(_values(tmp_path, **{key: value}), environ={})
    assert needle in str(info.value)


def test_secrets_are_redacted_recursively():
    config = {
        "epochs": 3,
        "db_password": "p",
        "nested": {"API_KEY": "k", "ok": 1},
        "x": "s",
        "secret_keys": ["x"],
    }
    assert redact(config) == {
        "epochs": 3,
        "db_password": "***",
        "nested": {"API_KEY": "***", "ok": 1},
        "x": "***",
        "secret_keys": ["x"],
    }


def test_kfp_whole_floats_become_ints_at_any_depth_and_strings_stay():
    converted = ints_from_floats({"a": [64.0, 2.5], "b": {"c": 3.0}, "d": "4.0"})
    assert converted == {"a": [64, 2.5], "b": {"c": 3}, "d": "4.0"}


def _executor_input(tmp_path: Path, params: dict, inputs: dict | None = None) -> dict:
    def art(uri, title):
        return {
            "artifacts": [
                {"name": title, "type": {"schemaTitle": title}, "uri": uri, "metadata": {}}
            ]
        }

    return {
        "inputs": {
            "parameterValues": params,
            "artifacts": {k: art(v, "system.Artifact") for k, v in (inputs or {}).items()},
        },
        "outputs": {
            "artifacts": {
                "model": art("gs://b/run/model", "system.Model"),
                "model_run": art("gs://b/run/model_run", "system.Artifact"),
                "metrics": art("gs://b/run/metrics", "system.Metrics"),
            },
            "outputFile": str(tmp_path / "executor_output.json"),
        },
    }


def test_executor_input_becomes_the_same_request(tmp_path):
    gcs = tmp_path / "gcs"
    for split in ("train", "eval"):
        (gcs / "b" / "ex" / f"Split-{split}").mkdir(parents=True)
        (gcs / "b" / "ex" / f"Split-{split}" / "data.gz").write_bytes(b"")
    ei = _executor_input(
        tmp_path,
        {
            "module_file": "gs://b/m.py",
            "train_args": {"num_steps": 100.0, "splits": ["train"]},
            "eval_args": {"num_steps": 5.0},
            "custom_config": {"layers": [64.0, 32.0], "lr": 0.1},
        },
        inputs={"examples": "gs://b/ex"},
    )
    values, kfp = kfp_io.parse(artifacts=ARTIFACTS, executor_input=ei, gcs_root=str(gcs))
    req = build_train_request(values, environ={"GENERIC_TRAINER_GCS_ROOT": str(gcs)}, kfp=kfp)
    assert req.examples == str(gcs / "b" / "ex")
    assert req.train_files == (str(gcs / "b/ex/Split-train/*"),)  # train_args.splits
    assert req.train_steps == 100 and req.eval_steps == 5
    assert req.custom_config == {"layers": [64, 32], "lr": 0.1}
    assert req.model_dir == str(gcs / "b/run/model") and req.model_run_dir == str(
        gcs / "b/run/model_run"
    )
    assert kfp.path("metrics") == str(gcs / "b/run/metrics")


def test_executor_input_that_is_not_json_is_refused_naming_the_flag():
    with pytest.raises(UserInputError, match="--executor-input: not valid JSON"):
        kfp_io.load("{not json")


def test_unknown_train_args_keys_are_refused(tmp_path):
    with pytest.raises(UserInputError, match="train_args: unknown keys"):
        kfp_io.parse(
            artifacts=ARTIFACTS,
            executor_input=_executor_input(tmp_path, {"train_args": {"steps": 3}}),
        )


def test_executor_output_lists_every_artifact(tmp_path):
    _, kfp = kfp_io.parse(
        artifacts=ARTIFACTS, executor_input=_executor_input(tmp_path, {}), gcs_root=str(tmp_path)
    )
    kfp_io.write_executor_output(kfp, {"metrics": {"accuracy": 0.9}})
    out = json.loads((tmp_path / "executor_output.json").read_text())
    assert set(out["artifacts"]) == {"model", "model_run", "metrics"}
    assert out["artifacts"]["metrics"]["artifacts"][0] == {
        "name": "system.Metrics",
        "uri": "gs://b/run/metrics",
        "metadata": {"accuracy": 0.9},
    }
    assert out["artifacts"]["model"]["artifacts"][0]["metadata"] == {}


def test_gs_and_s3_uris_map_to_their_mounts_and_local_paths_stay():
    assert storage.local_path("gs://b/x/y", "/mnt/gcs") == "/mnt/gcs/b/x/y"
    assert (
        storage.local_path("s3://b/x") == "/s3/b/x" and storage.local_path("/local/x") == "/local/x"
    )


def test_publish_dir_replaces_the_published_dir_whole_and_leaves_no_staging(tmp_path):
    final = tmp_path / "out" / "Format-Serving"
    for version in ("v1", "v2"):
        staging = storage.staging_dir_for(str(final))
        Path(staging).mkdir(parents=True)
        (Path(staging) / "f").write_text(version)
        storage.publish_dir(staging, str(final))
        assert (final / "f").read_text() == version
    assert sorted(p.name for p in final.parent.iterdir()) == ["Format-Serving"]


def test_request_building_does_not_import_tensorflow():
    import subprocess

    code = (
        "import sys, generic_trainer.intake.request, generic_trainer.artifacts.kfp_io, "
        "generic_trainer.cli\n"
        "assert 'tensorflow' not in sys.modules\n"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_vertex_tensorboard_gets_the_live_logs_and_the_artifact_a_copy(tmp_path):
    env = {"AIP_TENSORBOARD_LOG_DIR": "gs://bkt/tb/", "GENERIC_TRAINER_GCS_ROOT": str(tmp_path)}
    req = build_train_request(
        _values(tmp_path, model_run_dir=str(tmp_path / "artifact")), environ=env
    )
    assert req.model_run_dir == str(tmp_path / "bkt/tb")
    assert req.model_run_copy_dir == str(tmp_path / "artifact")
    assert req.checkpoint_dir == str(
        tmp_path / "artifact" / "checkpoints"
    )  # the model-run artifact, not TB's
    # Without Vertex TensorBoard the given dir is used directly.
    req = build_train_request(
        _values(tmp_path, model_run_dir=str(tmp_path / "artifact")), environ={}
    )
    assert req.model_run_dir == str(tmp_path / "artifact") and req.model_run_copy_dir is None


def test_tft_keras2_warning_is_dropped_other_absl_warnings_kept():
    import logging

    from generic_trainer import cli

    def record(msg):
        return logging.LogRecord("absl", logging.WARNING, __file__, 1, msg, None, None)

    assert not cli._drop_tft_keras_warning(
        record(
            "TF_USE_LEGACY_KERAS is set to 0, which will not use Keras 2. Tensorflow Transform is "
            "only compatible "
            "with Keras 2. Please set TF_USE_LEGACY_KERAS=1."
        )
    )
    assert cli._drop_tft_keras_warning(record("something else went wrong"))


def test_storage_settings_are_read_from_the_environment_at_the_edge(tmp_path):
    """The request carries what the storage helpers need; they read no environment themselves."""
    from generic_trainer.artifacts.storage_settings import DEFAULT_MINIO_ENDPOINT, StorageSettings
    from generic_trainer.intake.environment import storage_settings
    from generic_trainer.intake.fit_request import build_train_request

    env = {
        "GENERIC_TRAINER_GCS_TIMEOUT": "7",
        "STORAGE_EMULATOR_HOST": "http://127.0.0.1:1",
        "GENERIC_TRAINER_MINIO_ENDPOINT": "http://minio:9000",
    }
    assert storage_settings(env) == StorageSettings(7.0, "http://127.0.0.1:1", "http://minio:9000")
    assert storage_settings(env).gcs_endpoint == "http://127.0.0.1:1"
    assert storage_settings({"GENERIC_TRAINER_GCS_TIMEOUT": "nan"}) == StorageSettings(
        20.0, None, DEFAULT_MINIO_ENDPOINT
    )
    request = build_train_request(
        {
            "examples": str(PENGUIN / "data"),
            "module_file": "m.py",
            "model_dir": str(tmp_path / "m"),
        },
        environ=env,
    )
    assert request.storage == storage_settings(env)
