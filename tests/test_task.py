"""The Task API's loop in one process: modes, checkpoints, resume after SIGKILL, NaN, init, best
export, serving.

In-process tests drive `generic_trainer.task.run_experiment` with a small regression Task
(tests/task_modules/linear_task.py: its own schema, label, loss and metrics); the CLI tests run
`python -m generic_trainer train --task ...` as KFP, docker and Vertex do.
"""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import REPO, cli_env, run_cli
from datagen import write_schema, write_split
from generic_trainer.errors import UserCodeError, UserInputError
from generic_trainer.fit import user_module
from generic_trainer.task import RunInputs, build_experiment, run_experiment
from generic_trainer.task.checkpoints import BestCheckpointExporter

TASK_FILE = Path(__file__).parent / "task_modules" / "linear_task.py"
N_EVAL = 50  # not a multiple of the batch size: the last batch is partial


def _rows(n: int, seed: int, nan_every: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        x1, x2 = rng.uniform(-1, 1, 2)
        y = 2 * x1 - 3 * x2 + 0.5 + rng.normal(0, 0.05)
        if nan_every and i % nan_every == 0:
            x1 = float("nan")
        rows.append({"x1": [float(x1)], "x2": [float(x2)], "target": [float(y)]})
    return rows


def _make_data(root: Path, nan_every: int = 0) -> dict:
    write_split(str(root / "examples"), "train", _rows(256, 1, nan_every))
    eval_rows = _rows(N_EVAL, 2)
    write_split(str(root / "examples"), "eval", eval_rows)
    schema = write_schema(
        str(root / "schema.pbtxt"), {"x1": "FLOAT", "x2": "FLOAT", "target": "FLOAT"}
    )
    return {"examples": root / "examples", "schema": schema, "eval_rows": eval_rows}


@pytest.fixture(scope="module")
def linear_data(tmp_path_factory) -> dict:
    return _make_data(tmp_path_factory.mktemp("linear"))


@pytest.fixture(scope="module")
def linear_module():
    return user_module.import_module(str(TASK_FILE), str(TASK_FILE))


def _experiment(module, data: dict, override: str = ""):
    inputs = RunInputs(
        train_input_path=str(data["examples"] / "Split-train" / "*"),
        eval_input_path=str(data["examples"] / "Split-eval" / "*"),
        schema_path=data["schema"],
    )
    return build_experiment(
        module.LinearTask.default_experiment(), inputs, params_override=override
    )


def _run(module, data, tmp: Path, mode: str, override: str = "", task_cls=None, **kwargs):
    experiment = _experiment(module, data, override)
    task = (task_cls or module.LinearTask)(experiment.task, experiment=experiment)
    return run_experiment(
        task, experiment, mode, str(tmp / "ckpt"), summary_dir=str(tmp / "logs"), **kwargs
    )


def _eval_arrays(data: dict) -> tuple[dict, np.ndarray]:
    rows = data["eval_rows"]
    features = {k: np.array([r[k] for r in rows], dtype="float32") for k in ("x1", "x2")}
    return features, np.array([r["target"] for r in rows], dtype="float32").reshape(
        -1
    )  # features: [n, 1]


def _summary_tags(directory: Path) -> set[str]:
    import tensorflow as tf

    tags = set()
    for path in glob.glob(str(directory / "events.out.tfevents.*")):
        for record in tf.data.TFRecordDataset(path):
            tags.update(v.tag for v in tf.compat.v1.Event.FromString(record.numpy()).summary.value)
    return tags


def _ckpt_steps(directory: Path) -> list[int]:
    return sorted(
        int(p.split("-")[-1].split(".")[0]) for p in glob.glob(str(directory / "ckpt-*.index"))
    )


def _latest_step(directory: Path) -> int | None:
    """The step of the latest complete checkpoint, as the checkpoint state (the `checkpoint` index
    file, written atomically after a checkpoint's files) names it; None before the first. File names
    alone can show a checkpoint still being written when the process was killed."""
    import tensorflow as tf

    state = tf.train.get_checkpoint_state(str(directory))
    if state is None or not state.model_checkpoint_path:
        return None
    return int(state.model_checkpoint_path.rsplit("-", 1)[-1])


@pytest.mark.slow
def test_train_and_eval_checkpoints_summaries_params_and_metrics_over_the_whole_eval_set(
    linear_module, linear_data, tmp_path
):
    result, controller = _run(
        linear_module,
        linear_data,
        tmp_path,
        "train_and_eval",
        "trainer.max_to_keep=2",
        export_dir=str(tmp_path / "serving"),
    )
    assert result.global_step == 60 and result.initial_step == 0 and result.restored_from is None
    assert [step for step, _ in result.eval_history] == [30, 60]
    assert result.eval_history[1][1]["mse"] < result.eval_history[0][1]["mse"]
    assert _ckpt_steps(tmp_path / "ckpt") == [40, 60]  # every 20 steps, max_to_keep=2
    params = yaml.safe_load((tmp_path / "ckpt" / "params.yaml").read_text())
    assert params["trainer"]["train_steps"] == 60 and params["trainer"]["max_to_keep"] == 2
    assert params["task"]["train_data"]["input_path"].endswith("Split-train/*")
    assert {"loss", "mae", "mse", "learning_rate"} <= _summary_tags(tmp_path / "logs" / "train")
    assert {"loss", "mae", "mse"} <= _summary_tags(tmp_path / "logs" / "validation")

    # the reported metrics are over every eval example, partial last batch included
    features, labels = _eval_arrays(linear_data)
    predictions = controller.state.model.predict(features, verbose=0).reshape(-1)
    assert result.eval_logs["mse"] == pytest.approx(
        float(np.mean((predictions - labels) ** 2)), rel=1e-5
    )
    assert result.eval_logs["mae"] == pytest.approx(
        float(np.mean(np.abs(predictions - labels))), rel=1e-5
    )
    assert result.eval_logs["loss"] == pytest.approx(result.eval_logs["mse"], rel=1e-5)
    assert set(result.metrics()) == {"loss", "mae", "mse", "train_loss", "train_mae", "train_mse"}

    # the default export (model.export): serving_default takes the model's inputs
    import tensorflow as tf

    served = tf.saved_model.load(str(tmp_path / "serving")).signatures["serving_default"]
    out = served(**{k: tf.constant(v) for k, v in features.items()})
    np.testing.assert_allclose(
        next(iter(out.values())).numpy().reshape(-1), predictions, rtol=1e-5, atol=1e-6
    )


@pytest.mark.slow
def test_default_export_serves_the_tasks_inference_step_and_export_when_can_skip_it(
    linear_module, linear_data, tmp_path
):
    import tensorflow as tf

    class ServingTask(linear_module.LinearTask):
        def inference_step(self, inputs, model):
            out = model(inputs, training=False)
            return {"prediction": out, "doubled": 2.0 * out}

    serving = tmp_path / "serving"
    result, controller = _run(
        linear_module,
        linear_data,
        tmp_path,
        "train",
        "trainer.train_steps=10",
        task_cls=ServingTask,
        export_dir=str(serving),
    )
    assert result.serving_model_dir == str(serving)
    features, _ = _eval_arrays(linear_data)
    predictions = controller.state.model.predict(features, verbose=0).reshape(-1)
    out = tf.saved_model.load(str(serving)).signatures["serving_default"](
        **{k: tf.constant(v) for k, v in features.items()}
    )
    assert set(out) == {"prediction", "doubled"}
    np.testing.assert_allclose(
        out["prediction"].numpy().reshape(-1), predictions, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        out["doubled"].numpy().reshape(-1), 2 * predictions, rtol=1e-5, atol=1e-6
    )
    # export_when sees the result first: the checkpoint was already finished, so it says no
    seen = []
    again, _ = _run(
        linear_module,
        linear_data,
        tmp_path,
        "train",
        "trainer.train_steps=10",
        task_cls=ServingTask,
        export_dir=str(tmp_path / "again"),
        export_when=lambda r: seen.append(r.initial_step) or False,
    )
    assert seen == [10] and again.serving_model_dir is None and not (tmp_path / "again").exists()


class _CountingInit:
    calls = 0

    def initialize(self, model):
        type(self).calls += 1
        return super().initialize(model)


@pytest.mark.slow
def test_eval_mode_and_init_checkpoint_is_restored_only_without_a_checkpoint(
    linear_module, linear_data, tmp_path
):
    import tensorflow as tf

    counting = type("CountingLinearTask", (_CountingInit, linear_module.LinearTask), {})
    trained, trained_controller = _run(
        linear_module, linear_data, tmp_path / "a", "train", "trainer.train_steps=30"
    )
    trained_controller.state.model.save_weights(str(tmp_path / "a.weights.h5"))
    evaluated, _ = _run(linear_module, linear_data, tmp_path / "a", "eval")
    assert evaluated.restored_from.endswith("ckpt-30") and evaluated.global_step == 30
    # an untrained model's checkpoint, to tell the two apart
    untrained_task = linear_module.LinearTask(_experiment(linear_module, linear_data).task)
    untrained = tf.train.Checkpoint(model=untrained_task.build_model()).write(
        str(tmp_path / "z" / "untrained")
    )

    # fresh dir + init_checkpoint: the trained weights are loaded (eval equals the trained model's)
    counting.calls = 0
    warm, _ = _run(
        linear_module,
        linear_data,
        tmp_path / "b",
        "eval",
        f"task.init_checkpoint={tmp_path / 'a' / 'ckpt'}",
        task_cls=counting,
    )
    assert counting.calls == 1 and warm.restored_from is None
    assert warm.eval_logs == pytest.approx(evaluated.eval_logs, rel=1e-6)

    # the run has its own checkpoint: init_checkpoint is ignored, Task.initialize is not called
    counting.calls = 0
    own, _ = _run(
        linear_module,
        linear_data,
        tmp_path / "a",
        "eval",
        f"task.init_checkpoint={untrained}",
        task_cls=counting,
    )
    assert counting.calls == 0 and own.eval_logs == pytest.approx(evaluated.eval_logs, rel=1e-6)
    cold, _ = _run(
        linear_module, linear_data, tmp_path / "c", "eval", f"task.init_checkpoint={untrained}"
    )
    from_h5, _ = _run(
        linear_module,
        linear_data,
        tmp_path / "h5",
        "eval",
        f"task.init_checkpoint={tmp_path / 'a.weights.h5'}",
    )
    assert from_h5.eval_logs == pytest.approx(evaluated.eval_logs, rel=1e-6)
    assert cold.eval_logs["mse"] > 2 * evaluated.eval_logs["mse"]

    # training resumes from its own checkpoint, not from init_checkpoint
    counting.calls = 0
    resumed, _ = _run(
        linear_module,
        linear_data,
        tmp_path / "a",
        "train",
        f"trainer.train_steps=40,task.init_checkpoint={untrained}",
        task_cls=counting,
    )
    assert counting.calls == 0 and resumed.initial_step == 30 and resumed.global_step == 40
    assert resumed.restored_from.endswith("ckpt-30")
    assert trained.train_logs["loss"] > 0

    with pytest.raises(UserInputError, match="task.init_checkpoint: .* is not a checkpoint"):
        _run(
            linear_module,
            linear_data,
            tmp_path / "d",
            "eval",
            f"task.init_checkpoint={tmp_path / 'z2'}x",
        )


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.slow
def test_mixed_precision_dtype_builds_the_model_in_it_and_does_not_leak(
    linear_module, linear_data, tmp_path, dtype, caplog
):
    import logging

    import keras

    caplog.set_level(logging.INFO, logger="generic_trainer.task")
    result, controller = _run(
        linear_module,
        linear_data,
        tmp_path,
        "train_and_eval",
        f"runtime.mixed_precision_dtype={dtype},trainer.train_steps=20,"
        "trainer.validation_interval=20",
        export_dir=str(tmp_path / "serving"),
    )
    dense = controller.state.model.layers[-1]
    assert (dense.compute_dtype, dense.variable_dtype) == (dtype, "float32")
    assert isinstance(controller.state.optimizer, keras.optimizers.LossScaleOptimizer) == (
        dtype == "float16"
    )
    assert result.global_step == 20 and np.isfinite(result.eval_logs["loss"])
    assert (
        keras.mixed_precision.global_policy().name == "float32"
    )  # the policy does not leak out of the run
    assert (tmp_path / "serving" / "saved_model.pb").is_file()
    assert (
        f"mixed precision: runtime.mixed_precision_dtype={dtype}, the model was built with the "
        f"mixed_{dtype} policy (compute {dtype}, variables float32)"
    ) in caplog.text


@pytest.mark.slow
def test_nan_loss_stops_the_run_with_a_clear_error(linear_module, tmp_path):
    data = _make_data(tmp_path / "data", nan_every=7)
    with pytest.raises(UserCodeError) as e:
        _run(linear_module, data, tmp_path, "train", "trainer.checkpoint_interval=10")
    message = str(e.value)
    assert "training loss is nan at step 10 (mean of steps 1-10): the run diverged" in message
    assert "check the inputs for NaN/inf" in message and "the last checkpoint is none" in message
    assert _ckpt_steps(tmp_path / "ckpt") == []  # nothing saved from the diverged loop
    # an exploding (finite) loss stops at trainer.loss_upper_bound
    clean = _make_data(tmp_path / "clean")
    with pytest.raises(UserCodeError, match=r"above trainer.loss_upper_bound=0.001"):
        _run(linear_module, clean, tmp_path / "bound", "train", "trainer.loss_upper_bound=0.001")


@pytest.mark.slow
def test_validation_data_that_repeats_forever_is_refused(linear_module, linear_data, tmp_path):
    class Repeating(linear_module.LinearTask):
        def build_inputs(self, params, input_context=None):
            return super().build_inputs(params, input_context).repeat()

    with pytest.raises(
        UserCodeError, match="Repeating.build_inputs repeats the validation data forever"
    ):
        _run(linear_module, linear_data, tmp_path, "eval", task_cls=Repeating)
    # with a step count it is fine
    result, _ = _run(
        linear_module,
        linear_data,
        tmp_path,
        "eval",
        "trainer.validation_steps=5",
        task_cls=Repeating,
    )
    assert [step for step, _ in result.eval_history] == [0]


@pytest.mark.slow
def test_the_best_checkpoint_is_exported_with_info_json_and_reproduces_its_metric(
    linear_module, linear_data, tmp_path
):
    result, _ = _run(
        linear_module,
        linear_data,
        tmp_path,
        "train_and_eval",
        "trainer.train_steps=40,trainer.validation_interval=10,trainer.best_checkpoint_export_subdir=best,"
        "trainer.best_checkpoint_eval_metric=mse,trainer.best_checkpoint_metric_comp=lower",
    )
    history = dict(result.eval_history)
    assert sorted(history) == [10, 20, 30, 40]
    best_step = min(history, key=lambda s: history[s]["mse"])
    info = json.loads((tmp_path / "ckpt" / "best" / "info.json").read_text())
    assert info["best_ckpt_global_step"] == best_step
    assert (
        info["mse"] == pytest.approx(history[best_step]["mse"])
        and info["best_ckpt_metric"] == "mse"
    )
    assert sorted(
        os.path.basename(p)
        for p in glob.glob(str(tmp_path / "ckpt" / "best" / "best_ckpt-*.index"))
    ) == [f"best_ckpt-{best_step}.index"]
    # the exported best checkpoint holds that model: warm-starting from the export dir reproduces
    # the metric
    again, _ = _run(
        linear_module,
        linear_data,
        tmp_path / "from_best",
        "eval",
        f"task.init_checkpoint={tmp_path / 'ckpt' / 'best'}",
    )
    assert again.eval_logs["mse"] == pytest.approx(info["mse"], rel=1e-6)


def test_best_checkpoint_exporter_compares_and_keeps_one(tmp_path):
    import tensorflow as tf

    var = tf.Variable(0.0)
    ckpt = tf.train.Checkpoint(v=var)
    higher = BestCheckpointExporter(str(tmp_path / "h"), "auc", "higher")
    for step, auc in [(1, 0.5), (2, 0.7), (3, 0.6), (4, float("nan"))]:
        var.assign(float(step))
        higher.maybe_export(ckpt, {"auc": auc, "loss": 1.0 / step}, step)
    info = json.loads((tmp_path / "h" / "info.json").read_text())
    assert (
        info["best_ckpt_global_step"] == 2
        and info["auc"] == 0.7
        and info["best_ckpt_path"] == "best_ckpt-2"
    )
    assert len(glob.glob(str(tmp_path / "h" / "best_ckpt-*.index"))) == 1
    restored = tf.Variable(0.0)
    tf.train.Checkpoint(v=restored).read(str(tmp_path / "h" / "best_ckpt-2")).assert_consumed()
    assert restored.numpy() == 2.0
    # a restarted run knows the best so far
    again = BestCheckpointExporter(str(tmp_path / "h"), "auc", "higher")
    assert not again.maybe_export(ckpt, {"auc": 0.65}, 5) and again.maybe_export(
        ckpt, {"auc": 0.8}, 6
    )
    lower = BestCheckpointExporter(str(tmp_path / "l"), "loss", "lower")
    assert lower.maybe_export(ckpt, {"loss": 2.0}, 1) and not lower.maybe_export(
        ckpt, {"loss": 3.0}, 2
    )
    with pytest.raises(
        UserInputError, match="'accuracy' is not a validation metric; there are: loss"
    ):
        BestCheckpointExporter(str(tmp_path / "x"), "accuracy", "higher").maybe_export(
            ckpt, {"loss": 1.0}, 1
        )


@pytest.mark.slow
def test_a_damaged_newest_task_checkpoint_restores_the_one_before_it(
    linear_module, linear_data, tmp_path, caplog
):
    """Truncated, garbled or missing checkpoint files: the newest readable one is restored, the
    damaged one named; the `checkpoint` state file is never followed out of the dir; none readable
    is exit 2 naming them."""
    import logging
    import shutil

    caplog.set_level(logging.INFO, "generic_trainer.task")
    every10 = "trainer.checkpoint_interval=10,trainer.steps_per_loop=10,trainer.max_to_keep=5"
    trained, _ = _run(
        linear_module, linear_data, tmp_path / "a", "train", "trainer.train_steps=30," + every10
    )
    ckpt = tmp_path / "a" / "ckpt"
    assert _ckpt_steps(ckpt) == [10, 20, 30]
    reference, _ = _run(linear_module, linear_data, tmp_path / "a", "eval")
    shutil.copytree(ckpt, tmp_path / "upto20" / "ckpt", ignore=shutil.ignore_patterns("ckpt-30.*"))
    before, _ = _run(linear_module, linear_data, tmp_path / "upto20", "eval")  # ckpt-20's model
    damages = {
        "truncated data": lambda d: (d / "ckpt-30.data-00000-of-00001").write_bytes(
            (d / "ckpt-30.data-00000-of-00001").read_bytes()[:10]
        ),
        "truncated index": lambda d: (d / "ckpt-30.index").write_bytes(
            (d / "ckpt-30.index").read_bytes()[:9]
        ),
        "zeroed data": lambda d: (d / "ckpt-30.data-00000-of-00001").write_bytes(b"\0" * 64),
        "data deleted": lambda d: (d / "ckpt-30.data-00000-of-00001").unlink(),
    }
    for name, damage in damages.items():
        run = tmp_path / name.replace(" ", "-")
        shutil.copytree(ckpt, run / "ckpt")
        damage(run / "ckpt")
        caplog.clear()
        evaluated, _ = _run(linear_module, linear_data, run, "eval")
        assert (
            evaluated.restored_from == str(run / "ckpt" / "ckpt-20") and evaluated.global_step == 20
        ), name
        assert f"checkpoint {run / 'ckpt' / 'ckpt-30'} cannot be restored" in caplog.text, name
        assert evaluated.eval_logs == pytest.approx(before.eval_logs, rel=1e-6), name
    resumed, _ = _run(
        linear_module,
        linear_data,
        tmp_path / "data-deleted",
        "train",
        "trainer.train_steps=40," + every10,
    )
    assert resumed.initial_step == 20 and resumed.global_step == 40

    # the `checkpoint` state file garbled, or naming a path outside: the checkpoints on disk count
    for text in ('model_checkpoint_path: "../../elsewhere/ckpt-99"\n', "garbage {{{"):
        (ckpt / "checkpoint").write_text(text)
        evaluated, _ = _run(linear_module, linear_data, tmp_path / "a", "eval")
        assert evaluated.restored_from == str(ckpt / "ckpt-30")
        assert evaluated.eval_logs == pytest.approx(reference.eval_logs, rel=1e-6)

    for step in (10, 20, 30):
        (ckpt / f"ckpt-{step}.index").write_bytes(b"not an index")
    with pytest.raises(
        UserInputError,
        match=rf"^--checkpoint-dir: no checkpoint in {re.escape(str(ckpt))} can be "
        rf"restored \({re.escape(str(ckpt))}/ckpt-30: ",
    ):
        _run(linear_module, linear_data, tmp_path / "a", "eval")
    assert trained.global_step == 30


def test_a_damaged_best_checkpoint_info_json_is_forgotten_and_refused_as_init(tmp_path, caplog):
    import tensorflow as tf
    from generic_trainer.task.checkpoints import resolve_checkpoint

    (tmp_path / "best").mkdir()
    for text in ('{"mse": 0.5, "best_ckpt_pa', "[1]", '{"mse": "x", "best_ckpt_path": 5}'):
        (tmp_path / "best" / "info.json").write_text(text)
        exporter = BestCheckpointExporter(
            str(tmp_path / "best"), "mse", "lower"
        )  # the best so far is unknown
        assert exporter.best is None
        if text.startswith('{"mse": "x"'):
            with pytest.raises(UserInputError, match="holds no checkpoint"):
                resolve_checkpoint(str(tmp_path / "best"))
        else:
            with pytest.raises(UserInputError, match=r"^task.init_checkpoint: .*info.json"):
                resolve_checkpoint(str(tmp_path / "best"))
    assert "the best checkpoint so far is not known" in caplog.text
    assert exporter.maybe_export(tf.train.Checkpoint(v=tf.Variable(1.0)), {"mse": 0.9}, 3)


def _task_args(data: dict, tmp: Path, mode: str, override: str) -> list:
    return [
        "train",
        "--task",
        f"{TASK_FILE}:LinearTask",
        "--examples",
        data["examples"],
        "--schema",
        data["schema"],
        "--model-dir",
        tmp / "model",
        "--checkpoint-dir",
        tmp / "ckpt",
        "--mode",
        mode,
        "--params-override",
        override,
    ]


@pytest.mark.slow
def test_continuous_eval_follows_a_training_process(linear_module, linear_data, tmp_path):
    """The evaluator waits for checkpoints, evaluates each new one, and stops at
    trainer.train_steps.

    Training runs as a separate process in two legs (to step 150, then resumed to 300); the second
    leg starts once the evaluator has reported step 150, so both checkpoints are seen.
    """
    import logging
    import threading

    seen_150 = threading.Event()

    class Watch(logging.Handler):
        def emit(self, record):
            if "validation at step 150:" in record.getMessage():
                seen_150.set()

    legs: list[subprocess.CompletedProcess] = []

    def train_legs():
        for steps in (150, 300):
            legs.append(
                run_cli(
                    _task_args(
                        linear_data,
                        tmp_path,
                        "train",
                        f"trainer.train_steps={steps},"
                        "trainer.steps_per_loop=10,trainer.checkpoint_interval=150",
                    ),
                    timeout=240,
                )
            )
            if legs[-1].returncode != 0 or not seen_150.wait(timeout=240):
                return

    handler = Watch()
    progress = logging.getLogger("generic_trainer.progress")
    level = progress.level
    progress.setLevel(logging.INFO)
    progress.addHandler(handler)
    trainer = threading.Thread(target=train_legs, daemon=True)
    trainer.start()
    try:
        result, _ = _run(
            linear_module,
            linear_data,
            tmp_path,
            "continuous_eval",
            "trainer.train_steps=300,trainer.continuous_eval_timeout=240",
            eval_poll_s=0.2,
        )
    finally:
        progress.removeHandler(handler)
        progress.setLevel(level)
        trainer.join(timeout=300)
    assert [leg.returncode for leg in legs] == [0, 0], legs[-1].stderr[-3000:]
    assert [step for step, _ in result.eval_history] == [150, 300]
    (_, first), (_, last) = result.eval_history
    assert first != last and first["mse"] < 0.05 and last["mse"] < 0.05  # two trained checkpoints
    assert "loss" in _summary_tags(tmp_path / "logs" / "validation")


@pytest.mark.slow
def test_continuous_eval_times_out_without_checkpoints(linear_module, linear_data, tmp_path):
    with pytest.raises(
        UserInputError,
        match="no checkpoint appeared in .* within trainer.continuous_eval_timeout=1 s",
    ):
        _run(
            linear_module,
            linear_data,
            tmp_path,
            "continuous_eval",
            "trainer.continuous_eval_timeout=1",
            eval_poll_s=0.2,
        )


def _wait_for(predicate, proc: subprocess.Popen, what: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, (
            f"the training process ended (rc {proc.returncode}) before {what}"
        )
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.e2e
def test_a_restart_after_sigkill_or_sigterm_resumes_from_the_saved_checkpoint(
    linear_data, tmp_path
):
    """SIGKILL: the restart resumes from the last periodic checkpoint. SIGTERM (preemption): the run
    saves a checkpoint at the end of the current loop and exits 143; the restart resumes exactly
    there."""
    ckpt = tmp_path / "ckpt"
    args = _task_args(
        linear_data,
        tmp_path,
        "train",
        "trainer.train_steps=1000000,trainer.steps_per_loop=10,trainer.checkpoint_interval=50",
    )
    command = [sys.executable, "-m", "generic_trainer", *map(str, args)]
    log1 = open(tmp_path / "first.log", "w")  # noqa: SIM115 - closed below
    first = subprocess.Popen(command, env=cli_env(), stdout=subprocess.DEVNULL, stderr=log1)
    try:
        _wait_for(lambda: _latest_step(ckpt) is not None, first, "a first checkpoint")
    finally:
        first.send_signal(
            signal.SIGKILL
        )  # wherever it is: the restart resumes from the latest complete checkpoint
        first.wait(timeout=30)
        log1.close()
    assert first.returncode == -signal.SIGKILL
    killed_at = _latest_step(ckpt)
    assert not (tmp_path / "model" / "Format-Serving").exists()

    second_log = tmp_path / "second.log"
    with open(second_log, "w") as log2:
        second = subprocess.Popen(command, env=cli_env(), stdout=subprocess.DEVNULL, stderr=log2)
        try:
            _wait_for(
                lambda: f"training from step {killed_at} to" in second_log.read_text(),
                second,
                "the resume",
            )
            _wait_for(
                lambda: _latest_step(ckpt) > killed_at, second, "a checkpoint after the resume"
            )
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=120)
        finally:
            if second.poll() is None:
                second.kill()
                second.wait()
    stderr = second_log.read_text()
    assert f"restored checkpoint {ckpt}/ckpt-{killed_at} (step {killed_at})" in stderr
    assert second.returncode == 143, stderr[-3000:]
    saved = re.search(
        r"preempted: SIGTERM received; checkpoint saved at step (\d+); a restart resumes from the "
        r"latest checkpoint in ",
        stderr,
    )
    assert saved, stderr[-3000:]
    preempted_at = int(saved.group(1))
    assert (
        preempted_at > killed_at and preempted_at % 10 == 0 and _latest_step(ckpt) == preempted_at
    )

    target = preempted_at + 30
    args[-1] = (
        f"trainer.train_steps={target},trainer.steps_per_loop=10,trainer.checkpoint_interval=50"
    )
    done = run_cli(args, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert f"restored checkpoint {ckpt}/ckpt-{preempted_at} (step {preempted_at})" in done.stderr
    assert f"training from step {preempted_at} to {target}" in done.stderr
    assert _latest_step(ckpt) == target
    assert (tmp_path / "model" / "Format-Serving" / "saved_model.pb").is_file()
    assert (
        "differs from this run's config in trainer.train_steps" in done.stderr
    )  # params.yaml of the first run


@pytest.mark.slow
def test_task_missing_methods_fails_before_training(linear_data, tmp_path):
    args = _task_args(linear_data, tmp_path, "train_and_eval", "trainer.train_steps=5")
    args[2] = f"{TASK_FILE}:IncompleteTask"
    done = run_cli(args, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "--task: Task IncompleteTask does not define build_losses" in done.stderr
    assert "resolved strategy" not in done.stderr  # refused before any TensorFlow work
    assert not (tmp_path / "model").exists() and not (tmp_path / "ckpt").exists()


@pytest.mark.slow
def test_task_on_vertex_copies_the_live_tensorboard_logs_into_the_model_run_artifact(
    linear_data, tmp_path
):
    """AIP_TENSORBOARD_LOG_DIR (read live by Vertex AI TensorBoard) differs from --model-run-dir
    (the KFP artifact): the loop writes its summaries to the former, the artifact gets a copy at the
    end."""
    args = _task_args(
        linear_data,
        tmp_path,
        "train_and_eval",
        "trainer.train_steps=4,trainer.steps_per_loop=2,trainer.validation_steps=1",
    )
    done = run_cli(
        [*args, "--model-run-dir", tmp_path / "run"],
        env={"AIP_TENSORBOARD_LOG_DIR": str(tmp_path / "tb")},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    live = sorted(
        str(p.relative_to(tmp_path / "tb"))
        for p in (tmp_path / "tb").rglob("events.out.tfevents.*")
    )
    assert live, "the loop wrote no summaries where Vertex AI TensorBoard reads"
    copied = sorted(
        str(p.relative_to(tmp_path / "run"))
        for p in (tmp_path / "run").rglob("events.out.tfevents.*")
    )
    assert copied == live


@pytest.mark.slow
def test_kfp_executor_input_with_task_and_config_serves_tf_examples(penguin, tmp_path):
    """The KFP component's `task`, `experiment` and `config` parameters; the served model takes
    tf.Example."""
    import tensorflow as tf
    from generic_trainer.records.example_files import split_file_patterns

    config = "trainer:\n  train_steps: 40\n  steps_per_loop: 20\n  validation_interval: 40\n"
    artifact = {
        "model": ("system.Model", tmp_path / "model"),
        "model_run": ("system.Artifact", tmp_path / "run"),
        "metrics": ("system.Metrics", tmp_path / "metrics"),
    }
    executor_input = {
        "inputs": {
            "parameterValues": {
                "task": str(penguin / "task.py") + ":PenguinTask",
                "experiment": "penguin",
                "config": config,
                "params_override": "task.validation_data.global_batch_size=16",
            },
            "artifacts": {
                "examples": {"artifacts": [{"name": "e", "uri": str(penguin / "data")}]},
                "schema": {"artifacts": [{"name": "s", "uri": str(penguin / "schema.pbtxt")}]},
            },
        },
        "outputs": {
            "artifacts": {
                name: {"artifacts": [{"name": name, "uri": str(uri), "type": {"schemaTitle": t}}]}
                for name, (t, uri) in artifact.items()
            },
            "outputFile": str(tmp_path / "executor_output.json"),
        },
    }
    done = run_cli(
        [
            "train",
            "--executor-input",
            json.dumps(executor_input),
            "--report-file",
            tmp_path / "report.html",
        ],
        timeout=300,
        cwd=str(REPO),
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = (tmp_path / "report.html").read_text()
    assert (
        "macro_f1" in report and "CollectiveAllReduce" not in report
    )  # the run report, one process
    output = json.loads((tmp_path / "executor_output.json").read_text())
    metrics = output["artifacts"]["metrics"]["artifacts"][0]["metadata"]
    model_meta = output["artifacts"]["model"]["artifacts"][0]["metadata"]
    assert model_meta["signature_names"] == ["serving_default"] and model_meta["train_steps"] == 40
    assert {"accuracy", "auc", "macro_f1", "loss", "train_loss"} <= set(metrics)
    params = yaml.safe_load((tmp_path / "run" / "checkpoints" / "params.yaml").read_text())
    assert params["trainer"]["train_steps"] == 40  # from `config`
    assert params["trainer"]["checkpoint_interval"] == 250  # from the `penguin` experiment
    assert params["task"]["validation_data"]["global_batch_size"] == 16  # from params_override
    assert params["task"]["schema_path"].endswith(
        "schema.pbtxt"
    )  # TFX input reached the task's params

    # serve every serialized tf.Example of the eval split: the accuracy matches the reported one
    serve = tf.saved_model.load(str(tmp_path / "model" / "Format-Serving")).signatures[
        "serving_default"
    ]
    files = tf.io.gfile.glob(split_file_patterns(str(penguin / "data"), ["eval"])[0])
    serialized = [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]
    labels = np.array(
        [
            tf.train.Example.FromString(s).features.feature["species"].int64_list.value[0]
            for s in serialized
        ]
    )
    probabilities = serve(examples=tf.constant(serialized))["outputs"].numpy()
    assert probabilities.shape == (len(serialized), 3)
    assert float(np.mean(probabilities.argmax(-1) == labels)) == pytest.approx(
        metrics["accuracy"], abs=1e-6
    )


# ---- Model Garden's trainer keys: loss blow-up recovery, EMA, the learning-rate summary
# --------------------


def _scalars(directory: Path, tag: str) -> dict[int, float]:
    import tensorflow as tf

    out = {}
    for path in glob.glob(str(directory / "events.out.tfevents.*")):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                if value.tag == tag:
                    out[event.step] = (
                        float(tf.make_ndarray(value.tensor))
                        if value.HasField("tensor")
                        else value.simple_value
                    )
    return out


def _exploding_task(module, always: bool = False):
    """LinearTask whose reported loss blows up once at the 25th update (or at every update from then
    on)."""
    import tensorflow as tf

    class ExplodingTask(module.LinearTask):
        def build_model(self):
            self.blown = tf.Variable(False, trainable=False)
            return super().build_model()

        def train_step(self, inputs, model, optimizer, metrics=None):
            logs = super().train_step(inputs, model, optimizer, metrics)
            hit = (
                tf.greater_equal(optimizer.iterations, 25)
                if always
                else tf.equal(optimizer.iterations, 25)
            )
            explode = tf.logical_and(hit, tf.logical_not(self.blown)) if not always else hit
            self.blown.assign(tf.logical_or(self.blown, explode))
            return {"loss": tf.where(explode, tf.constant(1e12), logs["loss"])}

    return ExplodingTask


@pytest.mark.slow
def test_loss_blow_up_restores_the_last_checkpoint_and_retries(
    linear_module, linear_data, tmp_path, caplog
):
    import logging

    caplog.set_level(logging.WARNING, "generic_trainer.task")
    task_cls = _exploding_task(linear_module)
    result, controller = _run(
        linear_module,
        linear_data,
        tmp_path,
        "train",
        "trainer.recovery_max_trials=2,trainer.checkpoint_interval=20",
        task_cls=task_cls,
    )
    # the loop of steps 21-30 reported 1e12 (> loss_upper_bound 1e6): back to ckpt-20, then on to
    # the end
    assert controller.recoveries == 1 and result.global_step == 60
    assert re.search(
        r"training loss is .* at step 30 .*restored .*ckpt-20 \(step 20\) and training again "
        r"\(recovery 1 of trainer.recovery_max_trials=2\)",
        caplog.text,
    )
    assert _ckpt_steps(tmp_path / "ckpt")[-1] == 60
    assert np.isfinite(result.train_logs["loss"]) and result.train_logs["loss"] < 1e6
    # a loss that stays above the bound: recovered up to recovery_max_trials times, then the run
    # stops
    always = _exploding_task(linear_module, always=True)
    with pytest.raises(
        UserCodeError,
        match=r"diverged \(above trainer.loss_upper_bound=1e\+06\) after 2 recoveries",
    ):
        _run(
            linear_module,
            linear_data,
            tmp_path / "always",
            "train",
            "trainer.recovery_max_trials=2",
            task_cls=always,
        )
    # before trainer.recovery_begin_steps a loss above the bound is not a blow-up
    result, controller = _run(
        linear_module,
        linear_data,
        tmp_path / "late",
        "train",
        "trainer.recovery_begin_steps=40",
        task_cls=_exploding_task(linear_module),
    )
    assert controller.recoveries == 0 and result.global_step == 60


@pytest.mark.slow
def test_ema_weights_are_validated_and_exported_and_the_learning_rate_is_logged(
    linear_module, linear_data, tmp_path
):
    import tensorflow as tf
    from generic_trainer.artifacts import report

    override = (
        "trainer.optimizer_config.optimizer.type=sgd,trainer.optimizer_config.learning_rate.type=stepwise,"
        "trainer.optimizer_config.learning_rate.stepwise.boundaries=[30],"
        "trainer.optimizer_config.learning_rate.stepwise.values=[0.05,0.005],"
        "trainer.optimizer_config.warmup.type=linear,trainer.optimizer_config.warmup.linear.warmup_steps=20,"
        "trainer.optimizer_config.warmup.linear.warmup_learning_rate=0.01,"
        "trainer.optimizer_config.ema.average_decay=0.9,trainer.optimizer_config.ema.dynamic_decay=false"
    )
    result, controller = _run(
        linear_module,
        linear_data,
        tmp_path,
        "train_and_eval",
        override,
        export_dir=str(tmp_path / "serving"),
    )
    # learning_rate every summary interval (10): the schedule's value after that many updates
    # (warm-up: 0.01 + step / 20 * (0.05 - 0.01); then 0.05 up to step 30, 0.005 after)
    logged = _scalars(tmp_path / "logs" / "train", "learning_rate")
    expected = {
        10: 0.01 + 10 / 20 * (0.05 - 0.01),
        20: 0.05,
        30: 0.05,
        40: 0.005,
        50: 0.005,
        60: 0.005,
    }
    assert sorted(logged) == sorted(expected)
    for step, value in expected.items():
        assert logged[step] == pytest.approx(value, rel=1e-6), step
    assert "learning_rate" in report.curves(str(tmp_path / "logs"))  # the HTML report charts it

    kernel_ema, bias_ema = (a.numpy() for a in controller.state.ema.averages)
    kernel, bias = (
        controller.state.model.layers[-1].kernel.numpy(),
        controller.state.model.layers[-1].bias.numpy(),
    )
    assert not np.allclose(kernel_ema, kernel)  # the model keeps training on its raw weights
    features, labels = _eval_arrays(linear_data)
    x = np.concatenate([features["x1"], features["x2"]], axis=1)
    ema_predictions = (x @ kernel_ema + bias_ema).reshape(-1)
    served = tf.saved_model.load(str(tmp_path / "serving")).signatures["serving_default"]
    out = (
        next(iter(served(**{k: tf.constant(v) for k, v in features.items()}).values()))
        .numpy()
        .reshape(-1)
    )
    np.testing.assert_allclose(
        out, ema_predictions, rtol=1e-5, atol=1e-6
    )  # the export holds the averages
    assert not np.allclose(out, (x @ kernel + bias).reshape(-1), rtol=1e-4)
    # validation used the averages too
    assert result.eval_logs["mse"] == pytest.approx(
        float(np.mean((ema_predictions - labels) ** 2)), rel=1e-5
    )
    # the averages are checkpointed: a resumed run restores them instead of starting over
    reader = tf.train.load_checkpoint(str(tmp_path / "ckpt"))
    assert any(name.startswith("ema/") for name in reader.get_variable_to_shape_map())


@pytest.mark.slow
def test_a_model_garden_experiment_file_with_overrides_trains_the_penguin_task(penguin, tmp_path):
    """An experiment file in Model Garden's shape, a second --config-file, --params-override;
    --strategy wins."""
    steps = tmp_path / "steps.yaml"
    steps.write_text("trainer:\n  train_steps: 30\n")
    done = run_cli(
        [
            "train",
            "--task",
            f"{penguin / 'task.py'}:PenguinTask",
            "--examples",
            penguin / "data",
            "--schema",
            penguin / "schema.pbtxt",
            "--model-dir",
            tmp_path / "model",
            "--config-file",
            Path(__file__).parent / "task_modules" / "model_garden_gpu.yaml",
            "--config-file",
            steps,
            "--params-override",
            "trainer.validation_interval=30",
            "--strategy",
            "one_device",
        ],
        timeout=400,
        cwd=str(REPO),
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "--strategy one_device wins over runtime.distribution_strategy mirrored" in done.stderr
    assert "all_reduce_alg='nccl'" in done.stderr  # read, logged as not acted on
    run_dir = tmp_path / "model" / "logs"
    params = yaml.safe_load(next(run_dir.rglob("params.yaml")).read_text())
    assert params["trainer"]["train_steps"] == 30 and params["trainer"]["validation_interval"] == 30
    assert (
        params["runtime"]["distribution_strategy"] == "one_device"
        and params["runtime"]["loss_scale"] == "dynamic"
    )
    assert params["trainer"]["optimizer_config"]["optimizer"]["sgd"]["momentum"] == 0.9
    logged = _scalars(run_dir / "train", "learning_rate")
    # linear warm-up 0 -> schedule(20) = 0.4 over 20 steps; stepwise 0.4 up to 25, 0.04 up to 35
    assert logged[10] == pytest.approx(10 / 20 * 0.4, rel=1e-6)
    assert logged[20] == pytest.approx(0.4, rel=1e-6) and logged[30] == pytest.approx(
        0.04, rel=1e-6
    )


_EMA_MIRRORED = """
import sys
import numpy as np
import tensorflow as tf
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
sys.path.insert(0, sys.argv[2])
from pathlib import Path
import test_task as t
from generic_trainer.fit import user_module
from generic_trainer.task import run_experiment
tmp = Path(sys.argv[1])
data = t._make_data(tmp / "data")
module = user_module.import_module(str(t.TASK_FILE), str(t.TASK_FILE))
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
experiment = t._experiment(module, data, "trainer.optimizer_config.ema.average_decay=0.9,"
                                         "trainer.train_steps=20,trainer.validation_interval=20")
task = module.LinearTask(experiment.task, experiment=experiment)
result, controller = run_experiment(task, experiment, "train_and_eval", str(tmp / "ckpt"),
                                    strategy=strategy, export_dir=str(tmp / "serving"))
kernel, bias = (a.numpy() for a in controller.state.ema.averages)
features, labels = t._eval_arrays(data)
predictions = (np.concatenate([features["x1"], features["x2"]], axis=1) @ kernel + bias).reshape(-1)
served = tf.saved_model.load(str(tmp / "serving")).signatures["serving_default"]
out = next(iter(served(
    **{k: tf.constant(v) for k, v in features.items()}).values())).numpy().reshape(-1)
np.testing.assert_allclose(out, predictions, rtol=1e-5, atol=1e-6)
assert abs(result.eval_logs["mse"] - float(np.mean((predictions - labels) ** 2))) < 1e-4
print("EMA OK replicas", strategy.num_replicas_in_sync)
"""


@pytest.mark.slow
def test_ema_weights_under_two_mirrored_replicas_are_served_and_evaluated(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", _EMA_MIRRORED, str(tmp_path), str(Path(__file__).parent)],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0 and "EMA OK replicas 2" in done.stdout, done.stderr[-4000:]


@pytest.mark.slow
def test_a_task_whose_constructor_raises_leaves_no_sigterm_watcher(
    linear_data, tmp_path, monkeypatch
):
    from generic_trainer import train
    from generic_trainer.intake.fit_request import build_train_request

    for var in ("TF_CONFIG", "CLUSTER_SPEC"):
        monkeypatch.delenv(var, raising=False)
    request = build_train_request(
        {
            "task": f"{TASK_FILE}:RaisingInitTask",
            "examples": str(linear_data["examples"]),
            "schema": str(linear_data["schema"]),
            "model_dir": str(tmp_path / "model"),
            "checkpoint_dir": str(tmp_path / "ckpt"),
            "params_override": "trainer.train_steps=5",
        },
        environ={},
    )
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(UserCodeError, match="the Task's constructor failed"):
        train.run(request)
    assert signal.getsignal(signal.SIGTERM) is before
    assert not (tmp_path / "model").exists()
