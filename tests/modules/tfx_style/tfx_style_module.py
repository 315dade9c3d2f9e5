"""A TFX Trainer module as TFX's penguin tutorial writes one, with no edits for generic-trainer.

`from tfx import v1 as tfx`, a sibling imported by name, `absl.logging` and Python logging,
its own `tf.distribute.MirroredStrategy()` with the model built in its scope, a per-epoch
TensorBoard callback, and Keras 2 saving:
`model.save(fn_args.serving_model_dir, save_format='tf', signatures={...})`.

custom_config (test knobs): `strategy` (mirrored | multi_worker | one_device:<device> | get_strategy
| tpu | parameter_server | none), `save` (model_save | save_model | saved_model | model_save_plain),
`epochs` (2).
"""

import logging as py_logging

import tensorflow as tf
import tfx_style_base as base
from absl import logging
from tensorflow import keras
from tfx import v1 as tfx

log = py_logging.getLogger(__name__)


def _strategy(kind: str):
    if kind == "mirrored":
        return tf.distribute.MirroredStrategy()
    if kind == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if kind.startswith("one_device:"):
        return tf.distribute.OneDeviceStrategy(kind.split(":", 1)[1])
    if kind == "get_strategy":
        return tf.distribute.get_strategy()
    if kind == "tpu":
        return tf.distribute.TPUStrategy()
    if kind == "parameter_server":
        return tf.distribute.experimental.ParameterServerStrategy(None)
    return None


def _make_keras_model() -> tf.keras.Model:
    inputs = [keras.layers.Input(shape=(1,), name=f) for f in base.FEATURE_KEYS]
    d = keras.layers.concatenate(inputs)
    d = keras.layers.BatchNormalization(momentum=0.5)(d)
    for _ in range(2):
        d = keras.layers.Dense(8, activation="relu")(d)
    outputs = keras.layers.Dense(3)(d)
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy()],
    )
    model.summary(print_fn=logging.info)
    return model


def run_fn(fn_args: tfx.components.FnArgs):
    config = fn_args.custom_config or {}
    schema = base.load_schema(fn_args.schema_path)
    train_dataset = base.input_fn(
        fn_args.train_files, fn_args.data_accessor, schema, base.TRAIN_BATCH_SIZE
    )
    eval_dataset = base.input_fn(
        fn_args.eval_files, fn_args.data_accessor, schema, base.EVAL_BATCH_SIZE
    )
    logging.info("tfx-style module: absl says training for %s steps", fn_args.train_steps)
    log.info("tfx-style module: python logging says hello")

    strategy = _strategy(config.get("strategy", "mirrored"))
    if strategy is None:
        model = _make_keras_model()
    else:
        logging.info(
            "tfx-style module: strategy %s with %d replicas",
            type(strategy).__name__,
            strategy.num_replicas_in_sync,
        )
        with strategy.scope():
            model = _make_keras_model()

    tensorboard_callback = tf.keras.callbacks.TensorBoard(
        log_dir=fn_args.model_run_dir, update_freq="epoch"
    )
    epochs = int(config.get("epochs", 2))
    model.fit(
        train_dataset,
        epochs=epochs,
        steps_per_epoch=fn_args.train_steps // epochs,
        validation_data=eval_dataset,
        validation_steps=fn_args.eval_steps,
        callbacks=[tensorboard_callback],
        verbose=0,
    )

    signatures = {"serving_default": base.serve_examples_fn(model, schema)}
    save = config.get("save", "model_save")
    if save == "model_save":
        model.save(fn_args.serving_model_dir, save_format="tf", signatures=signatures)
    elif save == "save_model":
        tf.keras.models.save_model(
            model, fn_args.serving_model_dir, save_format="tf", signatures=signatures
        )
    elif save == "saved_model":
        tf.saved_model.save(model, fn_args.serving_model_dir, signatures=signatures)
    elif save == "model_save_plain":
        model.save(fn_args.serving_model_dir)
