"""fn_args.backup_and_restore in one process, with Keras 3 and with tf_keras models.

Every step sees the same batch, so a run stopped and resumed mid-epoch must end with exactly the
weights of a run never stopped: that holds only if weights, optimizer slots and the step count
were all restored and the finished steps were not trained again.
"""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest
from generic_trainer.errors import EXIT_PREEMPTED, Preempted, UserCodeError
from generic_trainer.fit import checkpointing
from generic_trainer.fit.preemption import Watcher

pytestmark = pytest.mark.slow  # every test here trains (or starts the CLI) in TensorFlow

EPOCHS, STEPS = 3, 5


@pytest.fixture(params=["keras3", "tf_keras"])
def K(request):
    if request.param == "tf_keras":
        import tf_keras

        return tf_keras
    import keras

    return keras


def _data():
    import tensorflow as tf

    rng = np.random.RandomState(0)
    x = rng.rand(32, 4).astype("float32")
    y = (x[:, 0] + x[:, 1] > 1).astype("int64")
    return tf.data.Dataset.from_tensors((x, y)).repeat()  # the same batch every step


def _model(K, units: int = 8):
    K.utils.set_random_seed(1)
    model = K.Sequential(
        [
            K.Input((4,)),
            K.layers.Dense(units, activation="relu"),
            K.layers.BatchNormalization(),
            K.layers.Dense(2, activation="softmax"),
        ]
    )
    model.compile(
        optimizer=K.optimizers.Adam(0.05),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    return model


def _stop_after(K, watcher: Watcher, steps: int):
    """A callback that plays SIGTERM arriving during step `steps` (counted over the whole run)."""

    class Stop(K.callbacks.Callback):
        seen = 0

        def on_train_batch_begin(self, batch, logs=None):
            Stop.seen += 1
            if Stop.seen == steps:
                watcher.requested = True

    return Stop()


def _weights(model) -> list:
    return [np.asarray(w.numpy()) for w in model.weights]


def _steps(model) -> int:
    return int(np.asarray(model.optimizer.iterations.numpy()))


def test_stopped_mid_epoch_and_resumed_equals_a_run_never_stopped(K, tmp_path):
    reference = _model(K)
    reference.fit(_data(), epochs=EPOCHS, steps_per_epoch=STEPS, verbose=0)

    watcher = Watcher()
    first = _model(K)
    backup = checkpointing.BackupAndRestore(str(tmp_path), watcher=watcher)
    with pytest.raises(Preempted, match=f"saved global step 7 to {tmp_path}/backup") as raised:
        first.fit(
            _data(),
            epochs=EPOCHS,
            steps_per_epoch=STEPS,
            callbacks=[_stop_after(K, watcher, 7), backup],
            verbose=0,
        )
    assert raised.value.exit_code == EXIT_PREEMPTED == 143
    state = checkpointing.read_state(str(tmp_path))
    assert (state["global_step"], state["epoch"], state["step_in_epoch"]) == (7, 1, 2)
    assert sorted(os.listdir(tmp_path / "backup")) == [
        "ckpt-5.data-00000-of-00001",
        "ckpt-5.index",
        "ckpt-7.data-00000-of-00001",
        "ckpt-7.index",
        "state.json",
    ]

    resumed = _model(K)
    again = checkpointing.BackupAndRestore(str(tmp_path), watcher=Watcher())
    history = resumed.fit(
        _data(), epochs=EPOCHS, steps_per_epoch=STEPS, callbacks=[again], verbose=0
    )
    assert (again.resumed_from, again.steps_this_run, again.global_step) == (7, 8, 15)
    assert len(history.history["loss"]) == 2  # epochs 2 and 3
    assert _steps(resumed) == _steps(reference) == 15
    for got, want in zip(_weights(resumed), _weights(reference), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert checkpointing.read_state(str(tmp_path))["global_step"] == 15

    checkpointing.clear(str(tmp_path))
    assert checkpointing.read_state(str(tmp_path)) is None and os.listdir(tmp_path) == []


def test_a_second_fit_resumes_after_the_first_is_skipped(K, tmp_path):
    """Two-phase training (fit, then fit again): a restart skips the finished fit and resumes the
    second."""
    watcher = Watcher()
    model = _model(K)
    backup = checkpointing.BackupAndRestore(str(tmp_path), watcher=watcher)
    model.fit(_data(), epochs=2, steps_per_epoch=STEPS, callbacks=[backup], verbose=0)
    with pytest.raises(Preempted):
        model.fit(
            _data(),
            epochs=2,
            steps_per_epoch=STEPS,
            callbacks=[_stop_after(K, watcher, 3), backup],
            verbose=0,
        )
    assert checkpointing.read_state(str(tmp_path))["fit_index"] == 1

    model = _model(K)
    backup = checkpointing.BackupAndRestore(str(tmp_path), watcher=Watcher())
    first = model.fit(_data(), epochs=2, steps_per_epoch=STEPS, callbacks=[backup], verbose=0)
    assert backup.steps_this_run == 0 and first.history.get("loss", []) == []
    model.fit(_data(), epochs=2, steps_per_epoch=STEPS, callbacks=[backup], verbose=0)
    assert backup.resumed_from == 13 and backup.steps_this_run == 7 and _steps(model) == 20


def test_a_real_sigterm_during_fit_saves_and_outside_fit_raises_at_once(tmp_path):
    import keras

    original = signal.getsignal(signal.SIGTERM)
    watcher = Watcher()
    watcher.install(where=f"the backup in {tmp_path}")
    try:

        class Terminate(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                if batch == 3:
                    os.kill(os.getpid(), signal.SIGTERM)

        model = _model(keras)
        backup = checkpointing.BackupAndRestore(str(tmp_path), watcher=watcher)
        with pytest.raises(
            Preempted, match="SIGTERM received; saved global step 4 .*resumes from the backup in"
        ):
            model.fit(
                _data(),
                epochs=EPOCHS,
                steps_per_epoch=STEPS,
                callbacks=[Terminate(), backup],
                verbose=0,
            )
        assert checkpointing.read_state(str(tmp_path))["global_step"] == 4

        fresh = Watcher()
        fresh.install()
        with pytest.raises(Preempted, match="SIGTERM received outside training steps"):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(100):  # the handler runs at the next bytecode boundary
                pass
        fresh.uninstall()
    finally:
        watcher.uninstall()
    assert signal.getsignal(signal.SIGTERM) == original


def test_a_backup_of_other_settings_or_another_model_is_not_resumed(tmp_path, caplog):
    """Same settings resume; other train steps (or another model) start afresh, logged, the old
    backup kept aside."""
    import logging

    import keras

    settings = checkpointing.run_settings(3000, {"units": 8, "api_token": "s3cret"}, None)
    watcher = Watcher()
    model = _model(keras)
    with pytest.raises(Preempted):
        model.fit(
            _data(),
            epochs=1,
            steps_per_epoch=STEPS,
            verbose=0,
            callbacks=[
                _stop_after(keras, watcher, 3),
                checkpointing.BackupAndRestore(str(tmp_path), watcher=watcher, settings=settings),
            ],
        )
    saved = checkpointing.read_state(str(tmp_path))
    assert saved["global_step"] == 3 and saved["settings"] == settings

    def fit(model, settings, epochs=1):
        backup = checkpointing.BackupAndRestore(str(tmp_path), watcher=Watcher(), settings=settings)
        model.fit(_data(), epochs=epochs, steps_per_epoch=STEPS, verbose=0, callbacks=[backup])
        return backup

    caplog.set_level(logging.INFO, "generic_trainer.fit.checkpointing")
    other_steps = dict(settings, train_steps=20)
    fresh = fit(_model(keras), other_steps)
    assert fresh.resumed_from is None and _steps(fresh.model) == STEPS  # not 3 + 2
    assert (
        "was made by a run with other settings (train_steps 3000 -> 20): training starts afresh"
        in caplog.text
    )
    assert "s3cret" not in caplog.text
    superseded = json.loads((tmp_path / "backup.superseded" / checkpointing.STATE_FILE).read_text())
    assert superseded["global_step"] == 3
    assert checkpointing.read_state(str(tmp_path))["settings"]["train_steps"] == 20

    # The same settings resume; another model (other variable shapes) starts afresh.
    with pytest.raises(Preempted):
        w = Watcher()
        _model(keras).fit(
            _data(),
            epochs=2,
            steps_per_epoch=STEPS,
            verbose=0,
            callbacks=[
                _stop_after(keras, w, 2),
                checkpointing.BackupAndRestore(str(tmp_path), watcher=w, settings=other_steps),
            ],
        )
    resumed = fit(_model(keras), other_steps, epochs=2)
    assert resumed.resumed_from == 2 and _steps(resumed.model) == 2 * STEPS
    checkpointing.clear(str(tmp_path))  # what the runtime does once the outputs are published
    caplog.clear()
    with pytest.raises(Preempted):
        w = Watcher()
        _model(keras).fit(
            _data(),
            epochs=2,
            steps_per_epoch=STEPS,
            verbose=0,
            callbacks=[
                _stop_after(keras, w, 2),
                checkpointing.BackupAndRestore(str(tmp_path), watcher=w, settings=other_steps),
            ],
        )
    another = fit(_model(keras, units=16), other_steps, epochs=2)
    assert another.resumed_from is None and "(variables changed)" in caplog.text


def test_an_unbuilt_model_is_refused(tmp_path):
    import keras

    class Subclassed(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(2)

        def call(self, x):
            return self.dense(x)

    unbuilt = Subclassed()
    unbuilt.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    with pytest.raises(UserCodeError, match="needs a built model before fit"):
        unbuilt.fit(
            _data(),
            epochs=1,
            steps_per_epoch=STEPS,
            verbose=0,
            callbacks=[checkpointing.BackupAndRestore(str(tmp_path / "other"), watcher=Watcher())],
        )


def test_a_killed_run_is_not_resumed_by_a_run_with_other_train_steps(tmp_path):
    """SIGKILL a 4000-step CLI run after a few backups, then run --train-steps 20: it starts afresh
    (logged) and trains 20 steps, not on from the killed run's step."""
    import subprocess
    import sys
    import time

    from conftest import PENGUIN, cli_env, run_cli

    checkpoints = tmp_path / "ckpt"

    def args(steps: int) -> list[str]:
        return [
            "train",
            "--examples",
            str(PENGUIN / "data"),
            "--schema",
            str(PENGUIN / "schema.pbtxt"),
            "--module-file",
            str(PENGUIN / "module.py"),
            "--model-dir",
            str(tmp_path / "model"),
            "--checkpoint-dir",
            str(checkpoints),
            "--train-steps",
            str(steps),
            "--eval-steps",
            "2",
            "--custom-config",
            json.dumps({"epochs": 200}),
        ]  # 20 steps per epoch: a backup each epoch

    first = subprocess.Popen(
        [sys.executable, "-m", "generic_trainer", *args(4000)],
        env=cli_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 600
        while (checkpointing.read_state(str(checkpoints)) or {}).get("global_step", 0) < 40:
            assert first.poll() is None, (
                f"the first run ended (rc {first.returncode}) before its backups"
            )
            assert time.monotonic() < deadline, "no backup at step 40 within 600 s"
            time.sleep(0.2)
    finally:
        first.kill()
        first.wait(timeout=60)
    killed_at = checkpointing.read_state(str(checkpoints))["global_step"]
    assert killed_at >= 40

    second = run_cli(args(20), timeout=600)
    assert second.returncode == 0, second.stderr[-4000:]
    assert (
        "was made by a run with other settings (train_steps 4000 -> 20): training starts afresh"
        in second.stderr
    )
    assert "backup: fit done at global step 20 (20 steps in this run)" in second.stderr, (
        second.stderr[-3000:]
    )
    assert "resuming from" not in second.stderr
    assert (tmp_path / "model" / "Format-Serving" / "saved_model.pb").is_file()
    assert not (checkpoints / "backup").exists()  # published: removed
    superseded = json.loads(
        (checkpoints / "backup.superseded" / checkpointing.STATE_FILE).read_text()
    )
    assert superseded["global_step"] >= killed_at


# --- damaged and edited backups: never blamed on user code, never a half-trained model published as
# done ----


@pytest.fixture(scope="module")
def stopped_backup(tmp_path_factory):
    """A Keras 3 run stopped by SIGTERM during step 7: ckpt-5 (epoch end) and ckpt-7 in its backup
    (made once)."""
    import keras

    directory = tmp_path_factory.mktemp("stopped")
    watcher = Watcher()
    with pytest.raises(Preempted):
        _model(keras).fit(
            _data(),
            epochs=EPOCHS,
            steps_per_epoch=STEPS,
            verbose=0,
            callbacks=[
                _stop_after(keras, watcher, 7),
                checkpointing.BackupAndRestore(str(directory), watcher=watcher),
            ],
        )
    return directory


@pytest.fixture(scope="module")
def reference_weights() -> list:
    import keras

    reference = _model(keras)
    reference.fit(_data(), epochs=EPOCHS, steps_per_epoch=STEPS, verbose=0)
    return _weights(reference)


def _copy(stopped_backup, tmp_path):
    import shutil

    shutil.copytree(stopped_backup / "backup", tmp_path / "backup")
    return tmp_path / "backup"


def _resume(tmp_path, caplog):
    import logging

    import keras

    caplog.set_level(logging.INFO, "generic_trainer.fit.checkpointing")
    model = _model(keras)
    backup = checkpointing.BackupAndRestore(str(tmp_path), watcher=Watcher())
    model.fit(_data(), epochs=EPOCHS, steps_per_epoch=STEPS, callbacks=[backup], verbose=0)
    return backup, model


def _same(model, reference_weights) -> None:
    for got, want in zip(_weights(model), reference_weights, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "damage", ["truncate-data", "truncate-index", "garble-data", "delete-data"]
)
def test_a_damaged_newest_checkpoint_resumes_from_the_older_one_with_a_warning(
    stopped_backup, reference_weights, tmp_path, caplog, damage
):
    backup = _copy(stopped_backup, tmp_path)
    state = checkpointing.read_state(str(tmp_path))
    assert state["prefix"] == "ckpt-7" and [p["prefix"] for p in state["previous"]] == ["ckpt-5"]
    data, index = backup / "ckpt-7.data-00000-of-00001", backup / "ckpt-7.index"
    if damage == "truncate-data":
        data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    elif damage == "truncate-index":
        index.write_bytes(index.read_bytes()[:20])
    elif damage == "garble-data":
        data.write_bytes(b"\0" * data.stat().st_size)
    else:
        data.unlink()
    resumed, model = _resume(tmp_path, caplog)
    assert (resumed.resumed_from, resumed.steps_this_run, resumed.global_step) == (5, 10, 15)
    assert f"checkpoint {backup}/ckpt-7 cannot be resumed" in caplog.text
    assert f"resuming from the older checkpoint {backup}/ckpt-5" in caplog.text
    _same(model, reference_weights)


@pytest.mark.parametrize(
    "content",
    [
        b'{"prefix": "ckpt-7", "global_st',
        b"",
        b"[7]",
        b"\xff\xfe{}",
        b'{"a": ' * 3000 + b"1" + b"}" * 3000,
    ],
)
def test_a_damaged_state_json_starts_afresh_saying_why(
    stopped_backup, reference_weights, tmp_path, caplog, content
):
    state_file = _copy(stopped_backup, tmp_path) / checkpointing.STATE_FILE
    state_file.write_bytes(content)
    resumed, model = _resume(tmp_path, caplog)
    assert resumed.resumed_from is None and resumed.steps_this_run == EPOCHS * STEPS == _steps(
        model
    )
    assert f"cannot be resumed: state.json is damaged or was edited ({state_file}" in caplog.text
    assert "training starts afresh; the old backup is kept in" in caplog.text
    assert (tmp_path / "backup.superseded" / "ckpt-7.index").exists()  # nothing deleted
    _same(model, reference_weights)


@pytest.mark.parametrize(
    "edit, why",
    [
        ({"global_step": -5}, "global_step is -5, expected a whole number >= 0"),
        (
            {"prefix": "../../elsewhere/ckpt-7"},
            "prefix is '../../elsewhere/ckpt-7', expected ckpt-7",
        ),
        ({"prefix": "/tmp/ckpt-7"}, "prefix is '/tmp/ckpt-7', expected ckpt-7"),
        ({"epoch": -1}, "epoch is -1"),
        ({"step_in_epoch": "2"}, "step_in_epoch is '2'"),
        ({"global_step": True}, "global_step is True"),
        ({"global_step": 1e30}, "global_step is 1e+30"),
        ({"global_step": 9, "prefix": "ckpt-9"}, "its checkpoint"),
        ({"epoch": 99}, "past the fit's 3 epochs"),
        ({"epoch": 3, "step_in_epoch": 2}, "past the fit's 3 epochs"),
        ({"step_in_epoch": 999}, "past the fit's 5 steps per epoch"),
        (
            {"global_step": 5, "prefix": "ckpt-5", "previous": []},
            "it holds global step 7, not the 5 of state.json",
        ),
        (
            {"fit_index": 4},
            "says fit #1 finished, but its checkpoint is at global step 7, before that fit's end "
            "(15)",
        ),
    ],
)
def test_an_edited_state_json_never_resumes_into_a_half_trained_model(
    stopped_backup, reference_weights, tmp_path, caplog, edit, why
):
    """An edited state.json (a negative step, a path out of the backup, a position past the fit)
    never resumes into '0 steps in this run': the run starts afresh, or from the older checkpoint
    when its state is sound, saying which file and why; either way it trains every step and ends
    with the weights of a run never stopped."""
    backup = _copy(stopped_backup, tmp_path)
    state = json.loads((backup / checkpointing.STATE_FILE).read_text())
    if edit.get("prefix") == "ckpt-5":  # ckpt-7's files under ckpt-5's name
        for suffix in (".index", ".data-00000-of-00001"):
            (backup / f"ckpt-7{suffix}").replace(backup / f"ckpt-5{suffix}")
    state.update(edit)
    (backup / checkpointing.STATE_FILE).write_text(json.dumps(state))
    resumed, model = _resume(tmp_path, caplog)
    assert why in caplog.text and "(0 steps in this run" not in caplog.text
    assert resumed.resumed_from in (None, 5) and resumed.global_step == EPOCHS * STEPS == _steps(
        model
    )
    if resumed.resumed_from is None:
        assert "training starts afresh; the old backup is kept in" in caplog.text
    _same(
        model, reference_weights
    )  # a failed read is undone: the fresh run starts from the module's weights


def test_a_resumed_fit_that_raises_leaves_the_model_unpatched(stopped_backup, tmp_path):
    """Resumed at step 7 (epoch 1, step 2), the fit raises while the skipped steps are patched
    in: the runtime's fit wrapper undoes the resume point and the skipped steps all the same."""
    import keras
    from generic_trainer.fit import fit_hooks

    class Fails(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            raise RuntimeError("the module's callback failed")

    _copy(stopped_backup, tmp_path)
    model = _model(keras)
    before = vars(model).get("_initial_epoch")
    backup = checkpointing.BackupAndRestore(str(tmp_path), watcher=Watcher())
    with fit_hooks.recording_fit(), pytest.raises(RuntimeError, match="callback failed"):
        model.fit(_data(), epochs=EPOCHS, steps_per_epoch=STEPS, callbacks=[backup, Fails()])
    assert backup.resumed_from == 7
    assert vars(model).get("_initial_epoch") == before  # no resume point left for the next fit
    assert model.train_function.__name__ != "_skipped_step"  # Keras' own, computing again
