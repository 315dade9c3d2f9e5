"""A TFX-style module for tests/test_process_exit.py: what the process's fast end must not lose.

Trains with the per-epoch TensorBoard callback TFX modules add, writes a scalar through a tf.summary
writer it never closes (under `<model_run_dir>/own`, huge flush interval and queue: only a flush at
the end writes it), and registers an atexit handler writing custom_config's `atexit_file`.
"""

import atexit

import tensorflow as tf
import tfx_style_base as base
from tensorflow import keras


def run_fn(fn_args):
    config = fn_args.custom_config or {}
    path = config["atexit_file"]

    def write_marker():
        with open(path, "w") as f:
            f.write("ran")

    atexit.register(write_marker)
    writer = tf.summary.create_file_writer(
        fn_args.model_run_dir + "/own", flush_millis=10**9, max_queue=10**6
    )
    with writer.as_default():
        tf.summary.scalar("module_never_closed", 1.0, step=0)
    run_fn.writer = writer  # kept alive, never closed

    schema = base.load_schema(fn_args.schema_path)
    train = base.input_fn(fn_args.train_files, fn_args.data_accessor, schema, base.TRAIN_BATCH_SIZE)
    evaluation = base.input_fn(
        fn_args.eval_files, fn_args.data_accessor, schema, base.EVAL_BATCH_SIZE
    )
    inputs = [keras.layers.Input(shape=(1,), name=f) for f in base.FEATURE_KEYS]
    outputs = keras.layers.Dense(3)(
        keras.layers.Dense(8, activation="relu")(keras.layers.concatenate(inputs))
    )
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )
    model.fit(
        train,
        epochs=1,
        steps_per_epoch=fn_args.train_steps,
        validation_data=evaluation,
        validation_steps=2,
        callbacks=[
            tf.keras.callbacks.TensorBoard(log_dir=fn_args.model_run_dir, update_freq="epoch")
        ],
    )
    model.save(
        fn_args.serving_model_dir,
        save_format="tf",
        signatures={"serving_default": base.serve_examples_fn(model, schema)},
    )
