"""compat: each patch of library internals relies on internals that are still there, and is undone.

Each library patch has a test of the internals it assumes (names, signatures, and the behaviour the
runtime builds on): a Keras, TensorFlow or keras-tuner upgrade that changes them fails here.
"""

from __future__ import annotations

import inspect
import logging

import numpy as np
import pytest
from generic_trainer import compat
from generic_trainer.compat import (
    keras2_saving,
    keras_multiworker,
    keras_resume,
    keras_tuner,
    model_methods,
    strategy_classes,
    tensorboard_hooks,
    tf_coordination,
)

ALL_PATCHES = (
    model_methods.ModelMethods,
    tensorboard_hooks.IdleBatchHooks,
    keras_multiworker.MultiWorkerFit,
    keras_resume.ResumeAt,
    keras_resume.SkipSteps,
    strategy_classes.StrategyStandIns,
    keras2_saving.SaveModel,
    keras_tuner.TunerHooks,
    keras_tuner.OracleMethods,
    keras_tuner.ClientWait,
    keras_tuner.RetryQueue,
    tf_coordination.CoordinationDeadline,
)


# --- the context manager -----------------------------------------------------------------------


class _Target:
    inherited = "class value"


class _Set(compat.Patch):
    def __init__(self, owner, **values):
        super().__init__()
        self.owner, self.values = owner, values

    def replacements(self):
        return [(self.owner, name, value) for name, value in self.values.items()]


class _Broken(_Set):
    required = True
    lost = "nothing, it is a test"

    def missing(self):
        return ["Thing.gone"]


def test_patched_undoes_every_patch_in_reverse_also_when_the_block_raises():
    target = _Target()
    target.own = "instance value"
    first, second = (
        _Set(target, own="first", inherited="first", new="first"),
        _Set(target, own="second"),
    )
    with pytest.raises(RuntimeError, match="user code"):
        with compat.patched(first, None, second) as applied:
            assert applied == [first, second]
            assert (target.own, target.inherited, target.new) == ("second", "first", "first")
            raise RuntimeError("user code")
    assert (
        target.own == "instance value"
        and target.inherited == "class value"
        and not hasattr(target, "new")
    )
    assert vars(target) == {
        "own": "instance value"
    }  # nothing left behind, not even a copy of the class value
    with compat.patched(first):  # applicable again after the undo
        assert target.new == "first"
    assert not hasattr(target, "new")


def test_a_required_patch_that_cannot_be_applied_undoes_those_before_it():
    target = _Target()
    with pytest.raises(compat.Unsupported, match=r"lacks Thing.gone; nothing, it is a test"):
        with compat.patched(_Set(target, new="x"), _Broken(target, other="y")):
            pytest.fail("the block must not run")
    assert not hasattr(target, "new") and not hasattr(target, "other")


def test_a_patch_whose_later_attribute_cannot_be_set_undoes_its_earlier_ones():
    class ReadOnly:
        @property
        def other(self):  # no setter: setting it fails
            return "read only"

    class Partial(_Set):
        def replacements(self):
            return [(self.owner, "new", "x"), (ReadOnly(), "other", "y")]

    target = _Target()
    patch = Partial(target)
    with pytest.raises(AttributeError):
        with compat.patched(patch):
            pytest.fail("the block must not run")
    assert vars(target) == {}
    with compat.patched(_Set(target, new="again")):  # nothing recorded as applied
        assert target.new == "again"


def test_an_optional_patch_that_cannot_be_applied_is_left_out_with_what_is_lost(caplog):
    class Optional(_Broken):
        required = False
        lost = "the log lines of optional things"

    target = _Target()
    with caplog.at_level(logging.WARNING, logger="generic_trainer.compat"):
        with compat.patched(Optional(target, new="x")) as applied:
            assert applied == [] and not hasattr(target, "new")
    assert "lacks Thing.gone; the log lines of optional things (left out)" in caplog.text


def test_outside_the_versions_it_was_written_for_a_patch_warns_and_still_applies(caplog):
    class Old(_Set):
        versions = (compat.Versions("keras", "2.0", "2.1"),)
        lost = "what old patches do"

    target = _Target()
    with caplog.at_level(logging.WARNING, logger="generic_trainer.compat"):
        with compat.patched(Old(target, new="x")):
            assert target.new == "x"
    installed = compat.Versions("keras", "0", "1").installed()
    assert (
        f"Old patches library internals and was not tested with keras {installed} (written for "
        "keras>=2.0,<2.1); if it misbehaves: what old patches do" in caplog.text
    )
    assert compat.Versions("keras", "3.15", "3.16").contains("3.15.1")
    assert not compat.Versions("keras", "3.15", "3.16").contains("3.16.0rc1")


@pytest.mark.parametrize("patch", ALL_PATCHES, ids=lambda p: p.__name__)
def test_every_patch_was_written_for_the_installed_libraries(patch):
    assert patch.lost and patch.versions
    assert (
        patch.__new__(patch).untested() == []
    )  # an upgrade: read the internals again, then widen the range


# --- each library patch: the internals it relies on
# ------------------------------------------------


def _keras_model():
    import keras

    inputs = keras.Input(shape=(3,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    model.compile(optimizer="sgd", loss="mse")
    return model


def _xy(n=8):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, 3)).astype("float32"), rng.normal(size=(n, 1)).astype("float32")


def test_model_methods_wraps_fit_and_compile_of_keras_and_tf_keras_and_undoes_it():
    import keras
    import tf_keras

    before = {
        (cls, name): (getattr(cls, name), name in vars(cls))
        for cls in (keras.Model, tf_keras.Model)
        for name in ("fit", "compile")
    }
    calls = []

    def make(original, cls):
        def method(self, *args, **kwargs):
            calls.append(cls)
            return original(self, *args, **kwargs)

        method.__wrapped__ = original
        return method

    patch = model_methods.ModelMethods("tf_keras", {"fit": make, "compile": make})
    assert (
        patch.missing() == []
    )  # fit(x, callbacks, verbose, shuffle), compile(jit_compile, steps_per_execution)
    with compat.patched(patch):
        assert patch.missing() == []  # a wrapped method still shows the library's signature
        model = _keras_model()
        model.fit(*_xy(), epochs=1, verbose=0)
    assert calls == [keras.Model, keras.Model]
    assert {(cls, name): (getattr(cls, name), name in vars(cls)) for cls, name in before} == before


def test_idle_tensorboard_hooks_rely_on_keras_3_tensorboard_internals(tmp_path):
    import keras
    from keras.src.utils import is_default

    board = keras.callbacks.TensorBoard(log_dir=str(tmp_path), update_freq="epoch")
    board.set_model(_keras_model())
    board.on_train_begin()  # sets _should_write_train_graph
    for name in tensorboard_hooks.GRAPH_ATTRIBUTES:
        assert hasattr(board, name), f"keras.callbacks.TensorBoard.{name} is gone"
    assert board._should_trace is False and board.write_steps_per_second is False
    assert tensorboard_hooks.hooks_idle(board)
    assert not any(
        is_default(getattr(board, name)) for name in ("on_train_batch_end", "on_train_batch_begin")
    )
    patch = tensorboard_hooks.IdleBatchHooks(
        [board, keras.callbacks.TensorBoard(log_dir=str(tmp_path), update_freq=1)]
    )
    assert patch.changed == [board]
    with compat.patched(patch):
        assert all(is_default(getattr(board, name)) for name in tensorboard_hooks.BATCH_HOOKS)
    assert (
        vars(board)
        .keys()
        .isdisjoint({*tensorboard_hooks.BATCH_HOOKS, "on_epoch_end", "on_train_end"})
    )


def test_multi_worker_fit_relies_on_keras_3_tensorflow_trainer_internals():
    from keras.src.backend.tensorflow import trainer

    patch = keras_multiworker.MultiWorkerFit()
    assert patch.missing() == []
    assert list(inspect.signature(trainer.TensorFlowTrainer._maybe_symbolic_build).parameters) == [
        "self",
        "iterator",
        "data_batch",
    ]
    assert list(inspect.signature(trainer.reduce_per_replica).parameters) == [
        "values",
        "strategy",
        "reduction",
    ]
    assert "data_batch" in inspect.signature(trainer.TensorFlowTrainer._symbolic_build).parameters
    import tensorflow as tf

    assert trainer._collective_all_reduce_multi_worker(tf.distribute.get_strategy()) is False
    originals = trainer.reduce_per_replica, trainer.TensorFlowTrainer._maybe_symbolic_build
    with pytest.raises(KeyboardInterrupt):
        with compat.patched(patch):
            assert trainer.reduce_per_replica is not originals[0]
            assert "_maybe_symbolic_build" in vars(trainer.TensorFlowTrainer)
            raise KeyboardInterrupt
    assert (
        trainer.reduce_per_replica,
        trainer.TensorFlowTrainer._maybe_symbolic_build,
    ) == originals


@pytest.mark.slow
def test_keras_3_fit_starts_at_the_resume_epoch_and_skipped_steps_compute_nothing():
    model = _keras_model()
    x, y = _xy()
    model.fit(x, y, epochs=1, batch_size=4, verbose=0)  # makes the train function
    resume = keras_resume.ResumeAt(model, epoch=1, step=0, tf_keras=False)
    assert resume.missing() == [] and model._initial_epoch is None
    weights = [w.copy() for w in model.get_weights()]

    class Skip(__import__("keras").callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if not skip._saved:
                skip.apply()

    skip = keras_resume.SkipSteps(model)
    assert skip.missing() == []
    with compat.patched(resume):
        history = model.fit(x, y, epochs=2, batch_size=4, verbose=0, callbacks=[Skip()])
    skip.undo()
    assert history.epoch == [1]  # epoch 0 was done before the restart
    assert all(
        np.array_equal(a, b) for a, b in zip(weights, model.get_weights(), strict=True)
    )  # nothing trained
    assert (
        model._initial_epoch is None
        and "train_function" in vars(model)
        and model.train_function is not None
    )
    assert model.train_function is not keras_resume._skipped_step


@pytest.mark.slow
def test_tf_keras_fit_asks_the_training_state_where_to_start():
    import tf_keras

    model = tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(3,))])
    model.compile(optimizer="sgd", loss="mse")
    resume = keras_resume.ResumeAt(model, epoch=1, step=1, tf_keras=True)
    assert resume.missing() == [] and model._training_state is None
    steps = []

    class Steps(tf_keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            steps.append(batch)

    with compat.patched(resume):
        history = model.fit(*_xy(), epochs=2, batch_size=4, verbose=0, callbacks=[Steps()])
    assert history.epoch == [1] and steps == [1]  # epoch 1 from its step 1
    assert model._training_state is None


def test_tf_keras_callback_list_asks_what_the_mixin_declares_and_optimizers_build_early():
    import inspect as inspect_module

    import tf_keras
    from tf_keras.src.callbacks import CallbackList

    declared = [
        name
        for name in vars(keras_resume.TfKerasCallback)
        if name.startswith("_") and not name.startswith("__")
    ]
    assert sorted(declared) == [
        "_chief_worker_only",
        "_implements_predict_batch_hooks",
        "_implements_test_batch_hooks",
        "_implements_train_batch_hooks",
        "_supports_tf_logs",
    ]
    source = inspect_module.getsource(CallbackList) + inspect_module.getsource(
        tf_keras.callbacks.Callback
    )
    assert all(name in source and hasattr(tf_keras.callbacks.Callback(), name) for name in declared)

    model = tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(3,))])
    model.compile(optimizer="adam", loss="mse")
    assert (
        len(model.optimizer.variables()) <= 1
    )  # created on the first step, too late to restore into
    keras_resume.build_optimizer(model)
    assert len(model.optimizer.variables()) == 1 + 2 * len(
        model.trainable_variables
    )  # iterations, m and v


def test_strategy_stand_ins_replace_the_classes_user_code_reaches_through_tf_distribute():
    import tensorflow as tf

    def classes():
        return {
            (space.__name__, name): getattr(space, name)
            for space in strategy_classes.namespaces()
            for name in strategy_classes.STRATEGY_NAMES
            if hasattr(space, name)
        }

    originals = classes()
    assert all(isinstance(cls, type) for cls in originals.values())
    assert isinstance(tf.distribute.MirroredStrategy, type) and isinstance(
        tf.distribute.TPUStrategy, type
    )
    assert isinstance(tf.distribute.experimental.ParameterServerStrategy, type)
    made = {}

    def stand_in(name, original):
        made[name] = type(name, (), {"original": original})
        return made[name]

    patch = strategy_classes.StrategyStandIns(stand_in)
    assert patch.missing() == []
    with pytest.raises(ValueError):
        with compat.patched(patch):
            assert tf.distribute.MirroredStrategy is made["MirroredStrategy"]
            assert (
                made["MirroredStrategy"].original
                is originals[(tf.distribute.__name__, "MirroredStrategy")]
            )
            raise ValueError
    assert classes() == originals


def test_save_model_is_what_model_save_calls_and_every_keras_reference_is_restored(tmp_path):
    import keras
    import tensorflow as tf

    patch = keras2_saving.SaveModel(
        lambda original: lambda model, filepath, **kwargs: saved.append(filepath)
    )
    saved = []
    assert patch.missing() == []
    original = keras2_saving.saving_api().save_model
    _ = tf.keras.models.save_model
    with compat.patched(patch):
        assert keras.saving.save_model is not original and keras.models.save_model is not original
        _keras_model().save(str(tmp_path / "m.keras"))
    assert saved == [str(tmp_path / "m.keras")] and not (tmp_path / "m.keras").exists()
    assert keras.saving.save_model is original and keras.models.save_model is original
    assert (
        keras2_saving.saving_api().save_model is original and tf.keras.models.save_model is original
    )


def _tuner(tmp_path, trials=2):
    import keras_tuner as kt

    class Scored(kt.Tuner):
        def run_trial(self, trial, *args, **kwargs):
            return float(trial.hyperparameters.Int("units", 1, 8))

    oracle = kt.oracles.RandomSearchOracle(
        objective=kt.Objective("score", "max"), max_trials=trials, seed=1
    )
    return Scored(oracle=oracle, directory=str(tmp_path), project_name="p", overwrite=True)


def test_tuner_hooks_and_oracle_methods_see_every_trial_and_are_removed(tmp_path):
    tuner = _tuner(tmp_path)
    events = []

    def hook(name):
        def call(original, *args, **kwargs):
            events.append((name, *[getattr(a, "trial_id", a) for a in args]))
            return original(*args, **kwargs)

        return call

    tuner_hooks = ("pre_create_trial", "on_trial_begin", "on_trial_end")
    hooks = keras_tuner.TunerHooks(tuner, **{n: hook(n) for n in tuner_hooks})
    methods = keras_tuner.OracleMethods(
        tuner.oracle, **{n: hook(n) for n in ("create_trial", "end_trial", "save")}
    )
    assert hooks.missing() == [] and methods.missing() == []
    with compat.patched(hooks, methods):
        tuner.search()
    names = [e[0] for e in events if e[0] != "save"]
    trial = ["pre_create_trial", "create_trial", "on_trial_begin", "on_trial_end", "end_trial"]
    assert names == trial + trial + [
        "pre_create_trial",
        "create_trial",
    ]  # the third: STOPPED, max_trials reached
    assert (
        ("create_trial", tuner.tuner_id) in events
        and ("on_trial_end", "0") in events
        and ("save",) in events
    )
    assert {t.status for t in tuner.oracle.trials.values()} == {"COMPLETED"}  # the originals ran
    assert not {"pre_create_trial", "on_trial_begin", "on_trial_end"} & set(vars(tuner))
    assert not {"create_trial", "end_trial", "save"} & set(vars(tuner.oracle))


def test_the_oracle_runs_a_queued_trial_again_before_new_ones(tmp_path):
    tuner = _tuner(tmp_path, trials=3)
    oracle = tuner.oracle
    first = oracle.create_trial("tuner0")
    oracle.ongoing_trials.pop("tuner0")  # as a killed attempt leaves it: RUNNING, held by nobody
    before = oracle._retry_queue
    with compat.patched(keras_tuner.RetryQueue(oracle, [first.trial_id])):
        assert oracle._retry_queue == [first.trial_id]
        again = oracle.create_trial("tuner1")
        assert again.trial_id == first.trial_id and again.status == "RUNNING"
        assert oracle._retry_queue == []
    assert oracle._retry_queue is before


def test_client_wait_sets_the_oracle_clients_call_timeout():
    from keras_tuner.src.distribute import oracle_client

    before = oracle_client.TIMEOUT
    assert "timeout=TIMEOUT" in inspect.getsource(oracle_client.OracleClient)  # read at each call
    patch = keras_tuner.ClientWait(12.5)
    assert patch.missing() == []
    with compat.patched(patch):
        assert oracle_client.TIMEOUT == 12
    assert oracle_client.TIMEOUT == before


def test_the_oracle_servicer_the_chief_subclasses_has_what_the_subclass_overrides():
    """Not a patch (tuning/oracle_server.py subclasses it), but keras-tuner internals all the
    same."""
    from keras_tuner.src.distribute.oracle_chief import OracleServicer

    assert list(inspect.signature(OracleServicer.__init__).parameters) == ["self", "oracle"]
    for name in ("CreateTrial", "UpdateTrial", "EndTrial", "GetTrial"):
        assert list(inspect.signature(getattr(OracleServicer, name)).parameters) == [
            "self",
            "request",
            "context",
        ]
    source = inspect.getsource(OracleServicer)
    assert "self.oracle = oracle" in source and "self.stop_triggered" in source


def test_the_coordination_deadline_is_the_config_the_strategy_reads_and_is_undone():
    from tensorflow.python.eager import context

    assert context.context().coordination_service is None
    patch = tf_coordination.CoordinationDeadline(
        "/job:chief/replica:0/task:0", [("chief", 1), ("worker", 2)], 5000
    )
    with compat.patched(patch) as applied:
        assert applied == [patch]
        config = context.context().coordination_service  # what MultiWorkerMirroredStrategy reads
        assert (config.service_leader, config.cluster_register_timeout_in_ms) == (
            "/job:chief/replica:0/task:0",
            5000,
        )
        assert config.cluster_register_with_barrier and config.enable_health_check
        assert [(j.name, j.num_tasks) for j in config.coordinated_job_list] == [
            ("chief", 1),
            ("worker", 2),
        ]
    assert context.context().coordination_service is None
