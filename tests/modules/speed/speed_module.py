"""A module for the speed-flag tests: compiles its models as a user would, and records what Keras
did.

It writes `<model_run_dir>/speed.json`: the first model's jit_compile, steps_per_execution, compute
and variable dtypes, optimizer class and the number of batch-end callbacks fit made
(steps_per_execution N means one per N batches); and the same for a second model whose compile sets
those arguments itself.
"""

import json
import os

import keras
import tensorflow as tf
from generic_trainer import tfx
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx_bsl.public import tfxio

FEATURES = ["left", "right"]
LABEL = "cls"


def _model(**compile_args):
    inputs = {name: keras.Input(shape=(1,), name=name) for name in FEATURES}
    x = keras.layers.Dense(8, activation="relu", name="hidden")(
        keras.layers.Concatenate()(list(inputs.values()))
    )
    model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax", name="out")(x))
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", **compile_args)
    return model


def _fit(model, dataset, steps):
    batch_ends = []
    model.fit(
        dataset,
        epochs=1,
        steps_per_epoch=steps,
        callbacks=[
            keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: batch_ends.append(b))
        ],
    )
    hidden = model.get_layer("hidden")
    sample = next(iter(dataset))[0]
    return {
        "jit_compile": model.jit_compile,
        "steps_per_execution": model.steps_per_execution,
        "compute_dtype": hidden.compute_dtype,
        "variable_dtype": hidden.kernel.dtype,
        "output_dtype": str(model(sample).dtype.name),
        "optimizer": type(model.optimizer).__name__,
        "batch_ends": len(batch_ends),
    }


def run_fn(fn_args: tfx.components.FnArgs):
    schema = tfx.utils.parse_pbtxt_file(fn_args.schema_path, schema_pb2.Schema())
    options = tfxio.TensorFlowDatasetOptions(batch_size=8, label_key=LABEL)
    dataset = fn_args.data_accessor.tf_dataset_factory(fn_args.train_files, options, schema)
    dataset = dataset.map(lambda f, y: ({k: f[k] for k in FEATURES}, y))
    steps = fn_args.train_steps
    record = {"policy": keras.mixed_precision.global_policy().name}
    model = _model()
    record["flags"] = _fit(model, dataset, steps)
    record["explicit"] = _fit(_model(jit_compile=False, steps_per_execution=1), dataset, steps)
    spec = {k: tf.io.FixedLenFeature([1], tf.float32) for k in FEATURES}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(examples):
        return {"probabilities": tf.cast(model(tf.io.parse_example(examples, spec)), tf.float32)}

    module = tf.Module()
    module.model = model
    tf.saved_model.save(module, fn_args.serving_model_dir, signatures={"serving_default": serve})
    with open(os.path.join(fn_args.model_run_dir, "speed.json"), "w") as f:
        json.dump(record, f)
