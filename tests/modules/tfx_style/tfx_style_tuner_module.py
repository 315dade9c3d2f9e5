"""A TFX Tuner module in the style of TFX's testdata `tuner_module.py`, with no edits for
generic-trainer.

Imports `TunerFnResult` from `tfx.components.tuner.component`, `DataAccessor` / `FnArgs` from
`tfx.components.trainer.fn_args_utils`, `io_utils` from `tfx.utils`; reads the schema with
`io_utils.parse_pbtxt_file`, builds a keras-tuner RandomSearch whose trials run in a
`tf.distribute.MirroredStrategy()` the module creates itself, and logs with absl.
"""

import absl
import keras_tuner
import tensorflow as tf
from tensorflow import keras
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.components.trainer.fn_args_utils import DataAccessor, FnArgs
from tfx.components.tuner.component import TunerFnResult
from tfx.utils import io_utils
from tfx_bsl.tfxio import dataset_options

_FEATURE_KEYS = ["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]
_LABEL_KEY = "species"


def _input_fn(
    file_pattern: list[str],
    data_accessor: DataAccessor,
    schema: schema_pb2.Schema,
    batch_size: int = 20,
) -> tf.data.Dataset:
    dataset = data_accessor.tf_dataset_factory(
        file_pattern,
        dataset_options.TensorFlowDatasetOptions(batch_size=batch_size, label_key=_LABEL_KEY),
        schema,
    )
    return dataset.map(lambda f, y: ({k: f[k] for k in _FEATURE_KEYS}, y)).repeat()


def _build_keras_model(hparams: keras_tuner.HyperParameters) -> tf.keras.Model:
    inputs = [keras.layers.Input(shape=(1,), name=f) for f in _FEATURE_KEYS]
    d = keras.layers.BatchNormalization(momentum=0.5)(keras.layers.concatenate(inputs))
    for _ in range(int(hparams.get("num_layers"))):
        d = keras.layers.Dense(8, activation="relu")(d)
    model = keras.Model(inputs=inputs, outputs=keras.layers.Dense(3)(d))
    model.compile(
        optimizer=keras.optimizers.Adam(hparams.get("learning_rate")),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy()],
    )
    model.summary(print_fn=absl.logging.info)
    return model


def tuner_fn(fn_args: FnArgs) -> TunerFnResult:
    hp = keras_tuner.HyperParameters()
    hp.Choice("learning_rate", [1e-2, 1e-3], default=1e-2)
    hp.Int("num_layers", 1, 2, default=2)
    strategy = tf.distribute.MirroredStrategy()
    absl.logging.info("tfx-style tuner module: trials run in %s", type(strategy).__name__)
    tuner = keras_tuner.RandomSearch(
        _build_keras_model,
        max_trials=2,
        hyperparameters=hp,
        allow_new_entries=False,
        objective=keras_tuner.Objective("val_sparse_categorical_accuracy", "max"),
        directory=fn_args.working_dir,
        project_name="tfx_style_tuning",
        distribution_strategy=strategy,
    )
    schema = schema_pb2.Schema()
    io_utils.parse_pbtxt_file(fn_args.schema_path, schema)
    return TunerFnResult(
        tuner=tuner,
        fit_kwargs={
            "x": _input_fn(fn_args.train_files, fn_args.data_accessor, schema),
            "validation_data": _input_fn(fn_args.eval_files, fn_args.data_accessor, schema),
            "steps_per_epoch": fn_args.train_steps,
            "validation_steps": fn_args.eval_steps,
        },
    )
