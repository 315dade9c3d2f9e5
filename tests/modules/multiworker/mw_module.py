"""A TFX-style module for the multi-worker and preemption tests: any schema's FLOAT features -> a
class.

Written against `tf.keras`, as TFX-era modules are: Keras 3 by default, tf_keras under `--keras
tf_keras`. It uses `fn_args.backup_and_restore` and exports with `fn_args.export_dir("serving")`.

custom_config: `label` (default "label"), `epochs` (4), `batch_size` (16), `steps_per_execution`
(1), `step_sleep` (seconds slept after each training step, so a test can stop the run halfway),
`result_dir` (each replica writes `<task_type>-<task_index>.json` there: Keras flavour, optimizer
steps, weights digest, and what the backup callback did).
"""

import hashlib
import json
import os
import time

import numpy as np
import tensorflow as tf
from generic_trainer import tfx
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx_bsl.public import tfxio


def _dataset(fn_args, files, schema, label, features, batch_size):
    options = tfxio.TensorFlowDatasetOptions(batch_size=batch_size, label_key=label, shuffle_seed=1)
    dataset = fn_args.data_accessor.tf_dataset_factory(files, options, schema)
    return dataset.map(lambda f, y: (tf.concat([f[k] for k in features], axis=-1), y))


def run_fn(fn_args: tfx.components.FnArgs):
    keras = tf.keras
    config = fn_args.custom_config
    label = config.get("label", "label")
    batch_size = int(config.get("batch_size", 16))
    epochs = int(config.get("epochs", 4))
    schema = tfx.utils.parse_pbtxt_file(fn_args.schema_path, schema_pb2.Schema())
    features = sorted(
        f.name for f in schema.feature if f.name != label and f.type == schema_pb2.FLOAT
    )
    train = _dataset(fn_args, fn_args.train_files, schema, label, features, batch_size)
    evaluation = _dataset(fn_args, fn_args.eval_files, schema, label, features, batch_size)

    keras.utils.set_random_seed(7)
    model = keras.Sequential(
        [
            keras.Input(shape=(len(features),)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(2, activation="softmax"),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(0.02),
        loss="sparse_categorical_crossentropy",
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        steps_per_execution=int(config.get("steps_per_execution", 1)),
    )

    sleep = float(config.get("step_sleep", 0))
    callbacks = [fn_args.backup_and_restore]
    if sleep:
        callbacks.append(
            keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: time.sleep(sleep))
        )
    train_steps = fn_args.train_steps or 40
    model.fit(
        train,
        epochs=epochs,
        steps_per_epoch=train_steps // epochs,
        validation_data=evaluation,
        validation_steps=fn_args.eval_steps or 8,
        callbacks=callbacks,
        verbose=0,
    )

    model.export(fn_args.export_dir("serving"))
    if config.get("result_dir"):
        digest = hashlib.sha256()
        for weight in model.weights:
            digest.update(np.asarray(weight.numpy()).tobytes())
        backup = fn_args.backup_and_restore
        result = {
            "keras": type(model).__module__.split(".")[0],
            "iterations": int(np.asarray(model.optimizer.iterations.numpy())),
            "weights_sha256": digest.hexdigest(),
            "steps_this_run": backup.steps_this_run,
            "resumed_from": backup.resumed_from,
            "is_chief": fn_args.is_chief,
        }
        os.makedirs(config["result_dir"], exist_ok=True)
        path = os.path.join(config["result_dir"], f"{fn_args.task_type}-{fn_args.task_index}.json")
        with open(path, "w") as f:
            json.dump(result, f)
