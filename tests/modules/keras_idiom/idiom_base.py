"""A run_fn in a Keras 2 idiom common in TFX modules: TensorFlow ops (`tf.cast`) on symbolic Keras
inputs.

Keras 2 (tf_keras) wraps such ops in layers; Keras 3 refuses them ("A KerasTensor cannot be used as
input to a TensorFlow function"). Imports nothing of TFX: the modules beside it decide what `--keras
auto` gives.
"""

import tensorflow as tf
from generic_trainer.data import DatasetOptions

FEATURES = ["bill_length_mm", "body_mass_g"]


def run_fn(fn_args):
    keras = tf.keras
    inputs = {name: keras.layers.Input(shape=(1,), name=name) for name in FEATURES}
    x = keras.layers.concatenate([tf.cast(v, tf.float32) / 100.0 for v in inputs.values()])
    model = keras.Model(inputs, keras.layers.Dense(3)(x))
    model.compile(
        optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    dataset = fn_args.data_accessor.tf_dataset_factory(
        fn_args.train_files, DatasetOptions(batch_size=8, label_key="species"), fn_args.schema_path
    )
    dataset = dataset.map(lambda features, label: ({k: features[k] for k in FEATURES}, label))
    model.fit(dataset, steps_per_epoch=fn_args.train_steps, epochs=1)
    print(f"IDIOM_MODULE trained with {type(model).__module__.split('.')[0]}")
    model.save(fn_args.serving_model_dir, save_format="tf")
