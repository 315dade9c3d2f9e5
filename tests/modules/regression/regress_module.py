"""A TFX-style module unlike the penguin one: regression, another schema, a custom run_fn name.

It records what it received in `<model_run_dir>/fn_args.json` so tests can check the contract.
"""

import json
import os

import tensorflow as tf
from generic_trainer import tfx
from regress_helpers import FEATURES, LABEL, build_model
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx_bsl.public import tfxio


def train_regressor(fn_args: tfx.components.FnArgs):
    schema = tfx.utils.parse_pbtxt_file(fn_args.schema_file, schema_pb2.Schema())
    options = tfxio.TensorFlowDatasetOptions(batch_size=16, label_key=LABEL)
    train = fn_args.data_accessor.tf_dataset_factory(fn_args.train_files, options, schema)
    evaluation = fn_args.data_accessor.tf_dataset_factory(fn_args.eval_files, options, schema)
    hp = (fn_args.hyperparameters or {}).get("values", {})
    epochs = fn_args.custom_config.get("epochs", 1)
    model = build_model(hp.get("units", 8), hp.get("learning_rate", 0.05))
    model.fit(
        train.map(lambda f, y: ({k: f[k] for k in FEATURES}, y)),
        epochs=epochs,
        steps_per_epoch=fn_args.train_steps,
        validation_data=evaluation.map(lambda f, y: ({k: f[k] for k in FEATURES}, y)),
        validation_steps=fn_args.eval_steps,
    )
    spec = {k: tf.io.FixedLenFeature([1], tf.float32) for k in FEATURES}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(examples):
        return {"prediction": model(tf.io.parse_example(examples, spec))}

    module = tf.Module()
    module.model = model
    tf.saved_model.save(module, fn_args.serving_model_dir, signatures={"serving_default": serve})
    record = {
        "train_files": fn_args.train_files,
        "eval_files": fn_args.eval_files,
        "train_steps": fn_args.train_steps,
        "eval_steps": fn_args.eval_steps,
        "schema_path": fn_args.schema_path,
        "schema_file": fn_args.schema_file,
        "transform_output": fn_args.transform_output,
        "hyperparameters": fn_args.hyperparameters,
        "custom_config": fn_args.custom_config,
        "epochs_type": type(epochs).__name__,
        "working_dir": fn_args.working_dir,
        "checkpoint_dir": fn_args.checkpoint_dir,
        "is_chief": fn_args.is_chief,
        "num_gpus": fn_args.num_gpus,
        "strategy": type(fn_args.strategy).__name__,
        "in_scope": tf.distribute.has_strategy(),
        "serving_model_dir": fn_args.serving_model_dir,
        "model_run_dir": fn_args.model_run_dir,
        "base_model": fn_args.base_model,
    }
    with open(os.path.join(fn_args.model_run_dir, "fn_args.json"), "w") as f:
        json.dump(record, f)
    return {"custom_metric": 42.5}
