"""The tune verb: real keras-tuner searches from a module's tuner_fn, their TFX outputs, resume, bad
input.

Searches run for real (2-3 trials of a few steps). The KFP form, the tune -> train hand-over and
the killed-and-resumed search run the CLI as a subprocess; the other cases call the CLI in this
process (TensorFlow loaded once) on a module and data set other than the bundled example.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import PENGUIN, cli_env, run_cli
from datagen import write_schema, write_split
from generic_trainer import cli
from generic_trainer.artifacts import kfp_io
from generic_trainer.errors import UserInputError
from generic_trainer.intake.fit_options import TUNE
from generic_trainer.intake.fit_request import build_tune_request
from generic_trainer.intake.options import artifact_maps

ARTIFACTS = artifact_maps(TUNE)  # the tune verb's own executor-input maps

# --------------------------------------------------------------------------------------------
# The request (no TensorFlow)
# --------------------------------------------------------------------------------------------


def _values(tmp_path: Path, **kw):
    base = {
        "examples": str(PENGUIN / "data"),
        "module_file": str(PENGUIN / "module.py"),
        "best_hyperparameters_dir": str(tmp_path / "best"),
    }
    base.update(kw)
    return base


def test_request_defaults_keep_the_search_state_stable(tmp_path):
    req = build_tune_request(_values(tmp_path), environ={})
    assert req.tuner_fn == "tuner_fn" and req.max_trials is None and req.worker_timeout == 600
    assert req.checkpoint_dir == str(tmp_path / "best") + ".checkpoints"
    assert req.working_dir == os.path.join(req.checkpoint_dir, "tuner")
    # Same request, same working dir: what makes a re-run resume.
    assert build_tune_request(_values(tmp_path), environ={}).working_dir == req.working_dir
    env = {
        "AIP_CHECKPOINT_DIR": "gs://b/job/checkpoints/",
        "GENERIC_TRAINER_GCS_ROOT": str(tmp_path / "gcs"),
    }
    working_dir = build_tune_request(_values(tmp_path), environ=env).working_dir
    assert working_dir == str(tmp_path / "gcs/b/job/checkpoints/tuner")
    req = build_tune_request(_values(tmp_path, max_trials="0", worker_timeout="2.5"), environ={})
    assert req.max_trials is None and req.worker_timeout == 2.5


@pytest.mark.parametrize(
    "key,value,needle",
    [
        ("best_hyperparameters_dir", None, "--best-hyperparameters-dir: required"),
        ("max_trials", "-1", "--max-trials: expected a whole number of trials"),
        ("max_trials", "many", "--max-trials: expected a whole number of trials"),
        ("worker_timeout", "0", "--worker-timeout: expected a number of seconds > 0"),
        (
            "strategy",
            "multi_worker_mirrored",
            "--strategy: expected one of auto, default, one_device, mirrored",
        ),
        ("keras", "tf_keras", "--keras: keras-tuner searches Keras 3 models only"),
        ("module_file", None, "--module-file: required"),
    ],
)
def test_request_bad_values_name_the_input(tmp_path, key, value, needle):
    with pytest.raises(UserInputError) as e:
        build_tune_request(_values(tmp_path, **{key: value}), environ={})
    assert needle in str(e.value)


def test_metrics_and_report_files_on_gcs_map_to_the_mount(tmp_path):
    env = {"GENERIC_TRAINER_GCS_ROOT": str(tmp_path / "gcs")}
    req = build_tune_request(
        _values(tmp_path, metrics_file="gs://b/t/metrics.json", report_file="gs://b/t/report.html"),
        environ=env,
    )
    assert req.metrics_file == str(tmp_path / "gcs/b/t/metrics.json")
    assert req.report_file == str(tmp_path / "gcs/b/t/report.html")


def test_kfp_outputs_map_to_the_request(tmp_path):
    def artifact(name, title):
        return {
            "artifacts": [
                {
                    "name": name,
                    "type": {"schemaTitle": title},
                    "uri": f"gs://b/run/{name}",
                    "metadata": {},
                }
            ]
        }

    executor_input = {
        "inputs": {
            "parameterValues": {
                "tuner_fn": "my_tuner_fn",
                "max_trials": 3.0,
                "worker_timeout": 30,
                "train_args": {"num_steps": 20},
            },
            "artifacts": {"examples": {"artifacts": [{"uri": str(PENGUIN / "data")}]}},
        },
        "outputs": {
            "artifacts": {
                "best_hyperparameters": artifact("best_hyperparameters", "system.Artifact"),
                "tuner_results": artifact("tuner_results", "system.Artifact"),
                "metrics": artifact("metrics", "system.Metrics"),
                "report": artifact("report", "system.HTML"),
            },
            "outputFile": str(tmp_path / "executor_output.json"),
        },
    }
    values, kfp = kfp_io.parse(
        artifacts=ARTIFACTS, executor_input=executor_input, gcs_root=str(tmp_path)
    )
    req = build_tune_request(
        {**values, "module_file": str(PENGUIN / "module.py")}, environ={}, kfp=kfp
    )
    assert req.best_hyperparameters_dir == str(tmp_path / "b/run/best_hyperparameters")
    assert req.tuner_results_file == str(tmp_path / "b/run/tuner_results/tuner_results.json")
    assert req.report_file == str(tmp_path / "b/run/report")
    assert (req.tuner_fn, req.max_trials, req.worker_timeout, req.train_steps) == (
        "my_tuner_fn",
        3,
        30.0,
        20,
    )


def test_importing_fnargs_and_tunerfnresult_loads_no_tensorflow():
    code = (
        "import sys, generic_trainer; assert 'generic_trainer.fit.fn_args' not in sys.modules; "
        "from generic_trainer import FnArgs, TunerFnResult; "
        "assert TunerFnResult._fields == ('tuner', 'fit_kwargs'); assert 'tensorflow' not in "
        "sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=cli_env())


# --------------------------------------------------------------------------------------------
# The bundled example through KFP, then the trainer with the result
# --------------------------------------------------------------------------------------------


def _hidden_layers(serving_dir: Path) -> tuple[int, int]:
    """(hidden Dense layers, their units) of the penguin model, read back from its SavedModel."""
    import tensorflow as tf

    kernels = [
        v
        for v in tf.saved_model.load(str(serving_dir)).trainable_variables
        if v.name.endswith("kernel:0")
    ]
    return len(kernels) - 1, int(kernels[0].shape[1])


@pytest.mark.slow
@pytest.mark.e2e
def test_kfp_tune_then_train_on_the_bundled_example(tmp_path):
    import keras_tuner

    out = tmp_path / "outputs"

    def artifact(name, title):
        return {
            "artifacts": [
                {
                    "name": name,
                    "type": {"schemaTitle": title},
                    "uri": str(out / name),
                    "metadata": {},
                }
            ]
        }

    executor_input = {
        "inputs": {
            "parameterValues": {
                "module_file": str(PENGUIN / "module.py"),
                "tuner_fn": "tuner_fn",
                "max_trials": 3,
                "train_args": {"num_steps": 20},
                "eval_args": {"num_steps": 5},
                "custom_config": {"batch_size": 16, "api_token": "s3cret"},
            },
            "artifacts": {
                "examples": {"artifacts": [{"uri": str(PENGUIN / "data")}]},
                "schema": {"artifacts": [{"uri": str(PENGUIN / "schema.pbtxt")}]},
            },
        },
        "outputs": {
            "artifacts": {
                "best_hyperparameters": artifact("best_hyperparameters", "system.Artifact"),
                "tuner_results": artifact("tuner_results", "system.Artifact"),
                "metrics": artifact("metrics", "system.Metrics"),
                "report": artifact("report", "system.HTML"),
            },
            "outputFile": str(tmp_path / "executor_output.json"),
        },
    }
    proc = run_cli(["tune", "--executor-input", json.dumps(executor_input)])
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "s3cret" not in proc.stderr and "s3cret" not in proc.stdout

    # TFX's formats: one file, json.dumps(best_hp.get_config()); results best first.
    assert os.listdir(out / "best_hyperparameters") == ["best_hyperparameters.txt"]
    config = json.loads((out / "best_hyperparameters" / "best_hyperparameters.txt").read_text())
    best_hp = keras_tuner.HyperParameters.from_config(config)
    results = json.loads((out / "tuner_results" / "tuner_results.json").read_text())
    assert len(results) == 3 and {r["trial_id"] for r in results} == {"0", "1", "2"}
    assert all(
        set(r) == {"trial_id", "score", "learning_rate", "units", "num_layers"} for r in results
    )
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)  # val_accuracy: higher is better
    assert best_hp.values == {k: v for k, v in results[0].items() if k not in ("trial_id", "score")}

    executor_output = json.loads((tmp_path / "executor_output.json").read_text())["artifacts"]
    assert set(executor_output) == {"best_hyperparameters", "tuner_results", "metrics", "report"}
    metrics = executor_output["metrics"]["artifacts"][0]["metadata"]
    assert metrics["best_score"] == metrics["best_val_accuracy"] == scores[0]
    assert metrics["trials_completed"] == 3 and metrics["trials_failed"] == 0
    best_meta = executor_output["best_hyperparameters"]["artifacts"][0]["metadata"]
    assert best_meta["objective"] == "val_accuracy" and best_meta["values"] == best_hp.values
    report = (out / "report").read_text()
    assert "<svg" in report and "<table" in report and report.count("<title>trial score: ") == 3
    assert all(f"<td>{r['trial_id']}</td>" in report for r in results)

    # The trainer consumes the result: the model it trains has the best trial's layers.
    model = tmp_path / "model"
    proc = run_cli(
        [
            "train",
            "--examples",
            PENGUIN / "data",
            "--module-file",
            PENGUIN / "module.py",
            "--schema",
            PENGUIN / "schema.pbtxt",
            "--hyperparameters",
            out / "best_hyperparameters",
            "--model-dir",
            model,
            "--train-steps",
            "20",
            "--eval-steps",
            "5",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert _hidden_layers(model / "Format-Serving") == (
        best_hp.get("num_layers"),
        best_hp.get("units"),
    )


# --------------------------------------------------------------------------------------------
# A killed search resumes
# --------------------------------------------------------------------------------------------


def _trial_states(project: Path) -> dict[str, dict]:
    states = {}
    for f in project.glob("trial_*/trial.json"):
        try:
            states[f.parent.name] = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):  # being written right now
            pass
    return states


@pytest.mark.slow
@pytest.mark.e2e
def test_killed_search_resumes_without_redoing_completed_trials(tmp_path):
    args = [
        "tune",
        "--examples",
        PENGUIN / "data",
        "--module-file",
        PENGUIN / "module.py",
        "--schema",
        PENGUIN / "schema.pbtxt",
        "--best-hyperparameters-dir",
        tmp_path / "best",
        "--tuner-results-file",
        tmp_path / "results.json",
        "--train-steps",
        "40",
        "--eval-steps",
        "5",
        "--max-trials",
        "3",
    ]
    project = tmp_path / "best.checkpoints" / "tuner" / "penguin_tuning"
    first = subprocess.Popen(
        [sys.executable, "-m", "generic_trainer", *map(str, args)],
        env=cli_env(),
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "first.log", "w"),
    )
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and first.poll() is None:
            if any(s["status"] == "COMPLETED" for s in _trial_states(project).values()):
                break
            time.sleep(0.05)
        assert first.poll() is None, (
            "the search ended before it could be killed:\n"
            + (tmp_path / "first.log").read_text()[-3000:]
        )
        first.send_signal(signal.SIGKILL)  # no chance to clean up, as on a lost machine
        first.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
    before = _trial_states(project)
    completed = {name: s for name, s in before.items() if s["status"] == "COMPLETED"}
    assert completed and len(completed) < 3 and not (tmp_path / "best").exists()

    second = run_cli(args)
    assert second.returncode == 0, second.stderr[-4000:]
    after = _trial_states(project)
    assert len(after) == 3 and all(s["status"] == "COMPLETED" for s in after.values())
    for name, state in completed.items():  # untouched: neither re-run nor re-scored
        assert after[name] == state
    rerun = {
        line.split("trial ", 1)[1].split()[0]
        for line in second.stderr.splitlines()
        if " started on " in line
    }
    assert rerun and not rerun & {s["trial_id"] for s in completed.values()}
    assert "resuming" in second.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert sorted(r["trial_id"] for r in results) == ["0", "1", "2"]
    assert (tmp_path / "best" / "best_hyperparameters.txt").is_file()


# --------------------------------------------------------------------------------------------
# Another module, other data and schema; bad tuner_fns (in this process: TensorFlow loads once)
# --------------------------------------------------------------------------------------------

REGRESSION_MODULE = '''
"""A regression tuner module that shares nothing with the penguin example."""
import keras
import keras_tuner
import tensorflow as tf

from generic_trainer import FnArgs, TunerFnResult
from generic_trainer.data import DatasetOptions


def _dataset(fn_args, files):
    options = DatasetOptions(batch_size=8, label_key="target")
    ds = fn_args.data_accessor.tf_dataset_factory(files, options, fn_args.schema_path)
    return ds.map(lambda f, y: (tf.concat([f["a"], f["b"]], axis=-1), y))


def build(hp):
    model = keras.Sequential([keras.Input((2,)),
                              keras.layers.Dense(hp.Choice("width", [3, 7]), activation="relu"),
                              keras.layers.Dense(1)])
    model.compile(optimizer=hp.Choice("optimizer", ["adam", "sgd"]), loss="mse")
    return model


def fit_kwargs(fn_args):
    return {"x": _dataset(fn_args, fn_args.train_files),
            "validation_data": _dataset(fn_args, fn_args.eval_files),
            "steps_per_epoch": fn_args.train_steps, "validation_steps": fn_args.eval_steps,
            "epochs": fn_args.custom_config["epochs"]}


def tuner_fn(fn_args: FnArgs) -> TunerFnResult:
    tuner = keras_tuner.GridSearch(build, objective="val_loss", max_trials=10,
                                   directory=fn_args.working_dir, project_name="regression")
    return TunerFnResult(tuner=tuner, fit_kwargs=fit_kwargs(fn_args))


def random_tuner_fn(fn_args: FnArgs) -> TunerFnResult:
    tuner = keras_tuner.RandomSearch(build, objective="val_loss", max_trials=10,
                                     directory=fn_args.working_dir,
                                     project_name="regression_random", seed=1)
    return TunerFnResult(tuner=tuner, fit_kwargs=fit_kwargs(fn_args))


def run_fn(fn_args: FnArgs):
    # no defaults: tuned values only
    hp = keras_tuner.HyperParameters.from_config(fn_args.hyperparameters)
    model = build(hp)
    model.fit(**fit_kwargs(fn_args))
    model.export(fn_args.serving_model_dir)
    return {"used_width": hp.get("width"), "used_sgd": float(hp.get("optimizer") == "sgd")}
'''


@pytest.fixture(scope="module")
def regression(tmp_path_factory) -> Path:
    """Examples in splits `fit`/`holdout` with features a, b (FLOAT) and a float target, plus a
    schema."""
    import random

    root = tmp_path_factory.mktemp("regression")
    rng = random.Random(0)
    for split, n in (("fit", 160), ("holdout", 40)):
        rows = []
        for _ in range(n):
            a, b = rng.uniform(-1, 1), rng.uniform(-1, 1)
            rows.append({"a": [a], "b": [b], "target": [2 * a - b + 0.1 * rng.gauss(0, 1)]})
        write_split(str(root / "data"), split, rows)
    write_schema(str(root / "schema.pbtxt"), {"a": "FLOAT", "b": "FLOAT", "target": "FLOAT"})
    (root / "regression_tuning.py").write_text(REGRESSION_MODULE)
    return root


def _tune_in_process(
    capsys, data: Path, module: Path, out: Path, *extra: str
) -> tuple[int, str, str]:
    code = cli.main(
        [
            "tune",
            "--examples",
            str(data / "data"),
            "--schema",
            str(data / "schema.pbtxt"),
            "--module-file",
            str(module),
            "--train-splits",
            "fit",
            "--eval-splits",
            "holdout",
            "--best-hyperparameters-dir",
            str(out / "best"),
            "--tuner-results-file",
            str(out / "results.json"),
            "--metrics-file",
            str(out / "metrics.json"),
            "--report-file",
            str(out / "report.html"),
            "--train-steps",
            "10",
            "--eval-steps",
            "3",
            "--custom-config",
            '{"epochs": 1}',
            *extra,
        ]
    )
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.slow
def test_other_module_and_schema_tune_then_train(regression, tmp_path, capsys):
    code, stdout, stderr = _tune_in_process(
        capsys, regression, regression / "regression_tuning.py", tmp_path, "--max-trials", "2"
    )
    assert code == 0, stderr[-4000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert len(results) == 2  # --max-trials overrides the tuner_fn's 10
    assert results[0]["score"] <= results[1]["score"]  # val_loss: lower is better, best first
    assert all(set(r) == {"trial_id", "score", "width", "optimizer"} for r in results)
    summary = json.loads(
        stdout[stdout.rindex("\n{\n") if "\n{\n" in stdout else stdout.index("{") :]
    )
    assert summary["objective"] == "val_loss" and summary["direction"] == "min"
    assert summary["best_trial_id"] == results[0]["trial_id"]
    assert [t["tuner_id"] for t in summary["trials"]] == ["tuner0", "tuner0"]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["best_val_loss"] == results[0]["score"] and metrics["trials_completed"] == 2

    # The trainer with the result: run_fn has no defaults, so what it used came from the file.
    code = cli.main(
        [
            "train",
            "--examples",
            str(regression / "data"),
            "--schema",
            str(regression / "schema.pbtxt"),
            "--module-file",
            str(regression / "regression_tuning.py"),
            "--train-splits",
            "fit",
            "--eval-splits",
            "holdout",
            "--hyperparameters",
            str(tmp_path / "best"),
            "--model-dir",
            str(tmp_path / "model"),
            "--train-steps",
            "10",
            "--eval-steps",
            "3",
            "--custom-config",
            '{"epochs": 1}',
            "--metrics-file",
            str(tmp_path / "train_metrics.json"),
        ]
    )
    assert code == 0, capsys.readouterr().err[-4000:]
    used = json.loads((tmp_path / "train_metrics.json").read_text())
    assert used["used_width"] == results[0]["width"]
    assert used["used_sgd"] == float(results[0]["optimizer"] == "sgd")


@pytest.mark.slow
def test_resume_survives_a_cut_oracle_file_and_a_missing_tuner_file(regression, tmp_path, capsys):
    module = regression / "regression_tuning.py"
    args = ("--tuner-fn", "random_tuner_fn")
    code, _, stderr = _tune_in_process(
        capsys, regression, module, tmp_path, *args, "--max-trials", "2"
    )
    assert code == 0, stderr[-4000:]
    project = tmp_path / "best.checkpoints" / "tuner" / "regression_random"
    first = {t: json.loads((project / f"trial_{t}" / "trial.json").read_text()) for t in ("0", "1")}
    # What a kill at the wrong moment leaves: oracle.json cut to nothing, the tuner's file not yet
    # written.
    (project / "oracle.json").write_text("")
    (project / "tuner0.json").unlink()

    code, stdout, stderr = _tune_in_process(
        capsys, regression, module, tmp_path, *args, "--max-trials", "3"
    )
    assert code == 0, stderr[-4000:]
    assert "restoring its last good copy" in stderr and "resuming: 2 trial(s) done" in stderr
    started = [
        line.split("trial ", 1)[1].split()[0]
        for line in stderr.splitlines()
        if " started on " in line
    ]
    assert started == ["2"], stderr[-3000:]
    assert {
        t: json.loads((project / f"trial_{t}" / "trial.json").read_text()) for t in ("0", "1")
    } == first
    assert len(json.loads((tmp_path / "results.json").read_text())) == 3


BAD_MODULES = {
    "missing": (
        "def run_fn(fn_args):\n    pass\n",
        [],
        2,
        ["--tuner-fn:", "has no function 'tuner_fn'", "run_fn"],
    ),
    "returns_none": (
        "def tuner_fn(fn_args):\n    return None\n",
        [],
        3,
        ["tuner_fn returned NoneType", "expected TunerFnResult(tuner="],
    ),
    "not_a_tuner": (
        "import keras\nfrom generic_trainer import TunerFnResult\n"
        "def tuner_fn(fn_args):\n    return TunerFnResult(tuner=keras.Sequential(), "
        "fit_kwargs={})\n",
        [],
        3,
        ["returned a tuner of type Sequential"],
    ),
    "bad_fit_kwargs": (
        "import keras_tuner\nfrom regression_tuning import build\n"
        "def tuner_fn(fn_args):\n"
        "    t = keras_tuner.RandomSearch(build, objective='val_loss', max_trials=2,\n"
        "                                 directory=fn_args.working_dir)\n"
        "    return t, ['x', 'y']\n",
        [],
        3,
        ["returned fit_kwargs of type list"],
    ),
    "search_space": (
        "import keras_tuner\nfrom regression_tuning import build\n"
        "def tuner_fn(fn_args):\n"
        "    hp = keras_tuner.HyperParameters()\n    hp.Int('depth', 1, 3)\n"
        "    return keras_tuner.RandomSearch(build, objective='val_loss', max_trials=2,\n"
        "        hyperparameters=hp, allow_new_entries=False, directory=fn_args.working_dir), {}\n",
        [],
        3,
        ["tuner_fn raised RuntimeError", "allow_new_entries", "search space"],
    ),
    "all_trials_fail": (
        "import keras_tuner\nfrom regression_tuning import build, fit_kwargs\n"
        "class Broken(keras_tuner.HyperModel):\n"
        "    def build(self, hp):\n        return build(hp)\n"
        "    def fit(self, hp, model, *args, **kwargs):\n"
        "        raise ValueError('boom: this model cannot train')\n"
        "def tuner_fn(fn_args):\n"
        "    return keras_tuner.RandomSearch(Broken(), objective='val_loss', max_trials=2,\n"
        "        directory=fn_args.working_dir), fit_kwargs(fn_args)\n",
        ["--max-trials", "2"],
        3,
        [
            "no trial completed (2 trial(s) run, 2 failed)",
            "ValueError: boom: this model cannot train",
        ],
    ),
    "consecutive_failures": (
        "import keras_tuner\nfrom regression_tuning import build, fit_kwargs\n"
        "class Broken(keras_tuner.HyperModel):\n"
        "    def build(self, hp):\n        return build(hp)\n"
        "    def fit(self, hp, model, *args, **kwargs):\n"
        "        raise ValueError('boom again')\n"
        "def tuner_fn(fn_args):\n"
        "    return keras_tuner.RandomSearch(Broken(), objective='val_loss', max_trials=4,\n"
        "        directory=fn_args.working_dir), fit_kwargs(fn_args)\n",
        [],
        3,
        [
            "the search stopped: Number of consecutive failures exceeded the limit of 3",
            "ValueError: boom again",
        ],
    ),
    "tf_keras_model": (
        "import keras_tuner, tf_keras\nfrom regression_tuning import fit_kwargs\n"
        "def build(hp):\n"
        "    m = tf_keras.Sequential([tf_keras.layers.Dense(hp.Int('u', 1, 2), "
        "input_shape=(2,))])\n"
        "    m.compile(loss='mse')\n    return m\n"
        "def tuner_fn(fn_args):\n"
        "    return keras_tuner.RandomSearch(build, objective='val_loss', max_trials=2,\n"
        "        directory=fn_args.working_dir), fit_kwargs(fn_args)\n",
        [],
        3,
        ["keras-tuner searches Keras 3 models"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_MODULES))
def test_a_bad_tuner_fn_exits_with_its_code_naming_the_fault_and_writes_nothing(
    regression, tmp_path, capsys, case
):
    source, extra, exit_code, needles = BAD_MODULES[case]
    module = tmp_path / f"bad_{case}.py"
    module.write_text(textwrap.dedent(source))
    sys.path.insert(0, str(regression))  # the bad modules reuse the regression module's helpers
    try:
        code, stdout, stderr = _tune_in_process(capsys, regression, module, tmp_path, *extra)
    finally:
        sys.path.remove(str(regression))
    assert code == exit_code, stderr[-4000:]
    for needle in needles:
        assert needle in stderr, stderr[-4000:]
    for output in ("best", "results.json", "metrics.json", "report.html"):
        assert not (tmp_path / output).exists(), output


@pytest.mark.parametrize(
    "content",
    ['{"t1": {"status": "RUNNING"', "[1, 2]", '{"t1": 5}', "[" * 5000 + "]" * 5000, "\udcff"],
)
def test_a_damaged_trial_log_is_ignored_with_a_warning(tmp_path, caplog, content):
    """The search's own trial log, truncated by a kill or edited: ignored (warned), never a crash of
    the search."""
    from generic_trainer.tuning import trial_log

    path = tmp_path / trial_log.FILE_NAME
    path.write_bytes(content.encode("utf-8", "surrogateescape"))
    assert trial_log.TrialLog(str(tmp_path)).records == {}
    assert str(path) in caplog.text
    path.write_text('{"t1": {"status": "COMPLETED", "attempts": 1}}')
    assert trial_log.TrialLog(str(tmp_path)).records == {
        "t1": {"status": "COMPLETED", "attempts": 1}
    }
