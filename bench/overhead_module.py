"""(b) of bench/overhead.py: the module `generic-trainer train` runs, equivalent to
overhead_plain.py.

Same model, data and fit call as the plain script. custom_config:
  input:      "tf_data" (default): the same hand-written tf.data pipeline as the plain script, so
  the
              difference measured is the runtime's alone; "accessor": fn_args.data_accessor
              .tf_dataset_factory with tfx_bsl's TensorFlowDatasetOptions (what a TFX module
              writes), shuffle buffer and batch the same; "accessor_gt": the same with
              generic_trainer.data.DatasetOptions (same fields), so tfx_bsl is never imported.
  batch_size: default 128.  epochs: default 1.  units: width of the hidden layers, default 32.
  tensorboard: true adds the callback TFX modules add, `TensorBoard(log_dir=fn_args.model_run_dir,
              update_freq="epoch")` (bench/tfx_module.py --mode tensorboard).
--train-steps N stops each epoch after N batches, as the plain script's --train-steps.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import overhead_model  # noqa: E402


def _accessor_dataset(fn_args, patterns, batch_size, shuffle, tfx_bsl_options=True):
    from generic_trainer import tfx
    from tensorflow_metadata.proto.v0 import schema_pb2

    if tfx_bsl_options:
        from tfx_bsl.public.tfxio import TensorFlowDatasetOptions as Options
    else:
        from generic_trainer.data import DatasetOptions as Options
    schema = tfx.utils.parse_pbtxt_file(fn_args.schema_path, schema_pb2.Schema())
    options = Options(
        batch_size=batch_size,
        label_key=overhead_model.LABEL,
        num_epochs=1,
        shuffle=shuffle,
        shuffle_buffer_size=overhead_model.SHUFFLE_BUFFER,
    )
    return fn_args.data_accessor.tf_dataset_factory(patterns, options, schema)


def run_fn(fn_args) -> None:
    config = fn_args.custom_config or {}
    batch_size = int(config.get("batch_size", 128))
    if config.get("input", "tf_data") in ("accessor", "accessor_gt"):
        tfx_bsl_options = config["input"] == "accessor"
        train = _accessor_dataset(fn_args, fn_args.train_files, batch_size, True, tfx_bsl_options)
        evaluation = _accessor_dataset(
            fn_args, fn_args.eval_files, batch_size, False, tfx_bsl_options
        )
    else:
        train = overhead_model.dataset(fn_args.train_files, batch_size)
        evaluation = overhead_model.dataset(fn_args.eval_files, batch_size, shuffle=False)
    if fn_args.train_steps:
        train = train.take(fn_args.train_steps)
    model = overhead_model.build_model(int(config.get("units", 32)))
    callbacks = []
    if config.get("tensorboard"):
        import keras

        callbacks.append(
            keras.callbacks.TensorBoard(log_dir=fn_args.model_run_dir, update_freq="epoch")
        )
    model.fit(
        train, epochs=int(config.get("epochs", 1)), validation_data=evaluation, callbacks=callbacks
    )
    overhead_model.export_serving(model, fn_args.serving_model_dir)
