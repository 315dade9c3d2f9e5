"""fit_hooks: progress logs, history capture and speed options applied to a module's own Keras
calls."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from generic_trainer.fit import fit_hooks


def _model():
    import keras

    inputs = keras.Input(shape=(3,))
    model = keras.Model(
        inputs, keras.layers.Dense(2, activation="softmax")(keras.layers.Dense(4)(inputs))
    )
    return model


def _data(n=64):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 3)).astype("float32")
    return x, (x[:, 0] > 0).astype("int64")


@pytest.mark.slow
def test_history_and_progress_logged_without_progress_bars(caplog, capsys):
    x, y = _data()
    with caplog.at_level(logging.INFO, logger="generic_trainer.progress"):
        with fit_hooks.recording_fit(interval_s=0.0) as record:
            model = _model()
            model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
            model.fit(x, y, batch_size=16, epochs=2, validation_data=(x, y))
    metrics = record.final_metrics()
    assert set(metrics) == {"loss", "accuracy", "train_loss", "train_accuracy"}
    assert record.epochs_run == 2 and record.steps_per_epoch == 4 and record.train_steps == 8
    text = caplog.text
    assert "first training step done" in text and "steps/s" in text and "ETA" in text
    assert "epoch 2/2 done" in text
    assert "━" not in capsys.readouterr().out  # verbose defaulted to 0: no Keras progress bar


@pytest.mark.slow
def test_speed_options_reach_the_modules_compile_and_are_undone():
    import keras

    x, y = _data()
    speed = fit_hooks.SpeedOptions(
        jit_compile=True, steps_per_execution=4, mixed_precision="mixed_bfloat16"
    )
    batches = []
    with fit_hooks.recording_fit(speed=speed):
        model = _model()
        model.compile("adam", "sparse_categorical_crossentropy")
        model.fit(
            x,
            y,
            batch_size=4,
            epochs=1,
            callbacks=[
                keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: batches.append(b))
            ],
        )
        assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
    assert model.jit_compile is True and model.steps_per_execution == 4
    assert model.layers[1].compute_dtype == "bfloat16" and model.layers[1].kernel.dtype == "float32"
    # 16 steps run 4 at a time: callbacks see 4 batch ends, the effect of steps_per_execution.
    assert len(batches) == 4
    assert keras.mixed_precision.global_policy().name == "float32"
    plain = _model()
    plain.compile("adam", "sparse_categorical_crossentropy")
    assert plain.steps_per_execution == 1 and plain.layers[1].compute_dtype == "float32"


@pytest.mark.slow
@pytest.mark.parametrize("keras_mode", ["keras3", "tf_keras"])
def test_datasets_reaching_fit_are_prefetched_to_the_device_with_the_same_batches(
    caplog, keras_mode
):
    """On CPU the target device is forced to /device:CPU:0 (a GPU run gets /device:GPU:0): the
    module still transforms the dataset (`take`) before fit, and SGD from the same weights ends in
    the same weights only
    if fit saw the same batches in the same order, in training and in validation."""
    import importlib

    import tensorflow as tf

    k = importlib.import_module("keras" if keras_mode == "keras3" else "tf_keras")
    x, y = _data()

    def train(device):
        k.utils.set_random_seed(0)
        data = tf.data.Dataset.from_tensor_slices((x, y)).batch(8).repeat()
        with fit_hooks.recording_fit(keras_mode, prefetch_device=device) as record:
            model = k.Sequential(
                [k.Input((3,)), k.layers.Dense(4), k.layers.Dense(2, activation="softmax")]
            )
            model.compile("sgd", "sparse_categorical_crossentropy")
            model.fit(
                data.take(12),
                epochs=2,
                steps_per_epoch=5,
                validation_data=data.take(3),
                validation_steps=3,
            )
        return [w.numpy() for w in model.weights], record.histories

    with caplog.at_level(logging.INFO, logger="generic_trainer.progress"):
        plain_weights, plain_history = train(None)
        assert "prefetch to device" not in caplog.text
        weights, history = train("/device:CPU:0")
    assert "prefetch to device: model.fit's batches are copied to /device:CPU:0" in caplog.text
    assert history == plain_history and len(history[0]["val_loss"]) == 2
    for got, want in zip(weights, plain_weights, strict=True):
        np.testing.assert_array_equal(got, want)
    # A dataset the module prefetched to a device itself is left as it is; class_weight leaves fit's
    # data alone.
    prefetch = fit_hooks.DevicePrefetch("/device:CPU:0")
    data = tf.data.Dataset.range(4).batch(2)
    on_device = data.apply(tf.data.experimental.prefetch_to_device("/device:CPU:0"))
    assert prefetch.apply((on_device,), {})[0][0] is on_device
    assert prefetch.apply((data,), {})[0][0] is not data
    assert prefetch.apply((data,), {"class_weight": {0: 1.0}})[0][0] is data


def test_module_choices_win_over_runtime_defaults():
    speed = fit_hooks.SpeedOptions(jit_compile=True, steps_per_execution=8)
    with fit_hooks.recording_fit(speed=speed):
        model = _model()
        model.compile("adam", "mse", jit_compile=False, steps_per_execution=2)
    assert model.jit_compile is False and model.steps_per_execution == 2


def _event_contents(log_dir) -> dict[str, set[str]]:
    """{run (subdirectory): tags of its summaries, plus 'graph_def' when a graph was written (Keras
    3.15
    writes none: its train function has no `function_spec`)}."""
    import tensorflow as tf

    runs: dict[str, set[str]] = {}
    for path in sorted(log_dir.rglob("events.out.tfevents.*")):
        tags = runs.setdefault(str(path.parent.relative_to(log_dir)), set())
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            if event.HasField("graph_def"):
                tags.add("graph_def")
            tags.update(value.tag for value in event.summary.value)
    return runs


def _fit_with_tensorboard(log_dir, update_freq="epoch"):
    """Fit with a TFX-style TensorBoard callback; returns (tf.summary.scalar calls during fit, the
    callback, whether Keras saw its batch hooks as the defaults at train begin)."""
    import keras
    import tensorflow as tf
    from keras.src.utils import is_default

    x, y = _data()
    board = keras.callbacks.TensorBoard(log_dir=str(log_dir), update_freq=update_freq)
    seen = {"default": None}

    class Probe(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            seen["default"] = all(
                is_default(getattr(board, name))
                for name in (
                    "on_train_batch_begin",
                    "on_train_batch_end",
                    "on_test_batch_begin",
                    "on_test_batch_end",
                )
            )

    model = _model()
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    calls = []

    # tf.summary, counting scalar calls (the callback's lazily set summary module)
    class CountingSummary:
        def __getattr__(self, name):
            return getattr(tf.summary, name)

        def scalar(self, name, *args, **kwargs):
            calls.append(name)
            return tf.summary.scalar(name, *args, **kwargs)

    board._summary_module = CountingSummary()
    model.fit(
        x, y, batch_size=8, epochs=2, validation_data=(x, y), callbacks=[board, Probe()], verbose=0
    )
    return calls, board, seen["default"]


@pytest.mark.slow
def test_epoch_tensorboard_costs_nothing_per_step_and_writes_the_same_event_files(tmp_path):
    from keras.src.utils import is_default

    calls, board, default = _fit_with_tensorboard(tmp_path / "plain")
    # Plain Keras: 16 steps x 2 metrics of batch_* scalar calls (no-ops without a default writer).
    assert default is False and sum(name.startswith("batch_") for name in calls) == 32
    with fit_hooks.recording_fit():
        calls, board, default = _fit_with_tensorboard(tmp_path / "hooked")
    assert default is True and not [name for name in calls if name.startswith("batch_")]
    assert not is_default(board.on_train_batch_end) and "on_train_batch_end" not in vars(
        board
    )  # restored

    plain, hooked = _event_contents(tmp_path / "plain"), _event_contents(tmp_path / "hooked")
    assert set(plain) == {"train", "validation"}
    assert {"keras", "epoch_loss", "epoch_accuracy"} <= plain[
        "train"
    ]  # model summary, epoch scalars
    assert "evaluation_loss_vs_iterations" in plain["validation"]
    assert hooked == plain


@pytest.mark.slow
def test_batch_tensorboard_is_left_alone(tmp_path):
    with fit_hooks.recording_fit():
        calls, board, default = _fit_with_tensorboard(tmp_path, update_freq=2)
    assert default is False and "batch_loss" in calls
    assert "batch_loss" in _event_contents(tmp_path)["train"]
