"""Keras 2 saving under Keras 3 writes the `serving_default` tf_keras writes, field by field.

tf_keras (Keras 2, installed) is the oracle: tests/modules/keras2_saving/save_models.py builds
the same functional, Sequential and subclassed models with the same weights in two fresh
processes, one with TF_USE_LEGACY_KERAS=1 (tf_keras's `model.save(dir, save_format='tf')`) and
one with Keras 3 through the runtime's bridge (`model.save(dir, save_format='tf')`,
`tf.keras.models.save_model`, `model.save(dir)`); the signatures must have the same input keys,
dtypes and shapes and the same output keys, dtypes and shapes, and compute the same outputs
for the same inputs. The naming rules are also checked on their own, in this process.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import PENGUIN, REPO, cli_env, run_cli
from generic_trainer.fit import keras2_signature

SCRIPT = REPO / "tests" / "modules" / "keras2_saving" / "save_models.py"
MODELS = [
    "penguin_simple",
    "functional_dict",
    "functional_unnamed",
    "sequential_input_shape",
    "sequential_named_input",
    "sequential_built_by_call",
    "subclassed",
]
HOWS = ["model_save", "save_model", "plain_save"]


def test_keras2_input_and_output_names_follow_from_keras3_layer_names():
    assert keras2_signature.keras2_input_name("culmen_length_mm") == "culmen_length_mm"
    assert keras2_signature.keras2_input_name("input_layer") == "input_1"
    assert keras2_signature.keras2_input_name("input_layer_2") == "input_3"
    assert (
        keras2_signature.keras2_input_name("input_layer_2", sequential_first_layer="dense")
        == "dense_input"
    )
    assert keras2_signature.keras2_input_name("input_layers") == "input_layers"
    assert keras2_signature.pseudo_names(object(), "output_") == ["output_1"]
    assert keras2_signature.pseudo_names([1, 2], "output_") == ["output_1", "output_2"]
    assert keras2_signature.pseudo_names({"b": 1, "a": [1, 2]}, "output_") == ["a_1", "a_2", "b"]
    assert keras2_signature.pseudo_names((None, 3), "input_", shapes=True) == ["input_1"]
    assert keras2_signature.pseudo_names([(None, 3), (None, 2)], "input_", shapes=True) == [
        "input_1",
        "input_2",
    ]


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> tuple[Path, Path]:
    """(tf_keras's SavedModels, the bridge's SavedModels), saved in two fresh processes side by
    side."""
    root = tmp_path_factory.mktemp("keras2_saving")

    def save(legacy: bool) -> Path:
        out = root / ("tf_keras" if legacy else "keras3")
        env = cli_env({"TF_USE_LEGACY_KERAS": "1"} if legacy else {})
        if not legacy:
            env.pop("TF_USE_LEGACY_KERAS", None)
        proc = subprocess.run(
            [sys.executable, str(SCRIPT), str(out)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        return out

    with ThreadPoolExecutor(2) as pool:
        oracle, bridged = pool.map(save, [True, False])
    return oracle, bridged


def _fields(signature) -> tuple[dict, dict]:
    args, kwargs = signature.structured_input_signature
    assert args == (), "Keras 2's serving_default takes keyword arguments only"
    inputs = {k: (v.dtype.name, v.shape.as_list()) for k, v in kwargs.items()}
    outputs = {
        k: (v.dtype.name, v.shape.as_list()) for k, v in signature.structured_outputs.items()
    }
    return inputs, outputs


def _feed(inputs: dict) -> dict:
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(7)
    return {
        k: tf.constant(
            rng.integers(0, 5, [4, *shape[1:]])
            if dtype == "int64"
            else rng.normal(size=[4, *shape[1:]]),
            dtype=dtype,
        )
        for k, (dtype, shape) in inputs.items()
    }


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_keras2_saves_of_a_keras3_model_write_tf_keras_serving_default(saved, model):
    import numpy as np
    import tensorflow as tf

    oracle_dir, bridged_dir = saved
    oracle = tf.saved_model.load(str(oracle_dir / model / "model_save")).signatures[
        "serving_default"
    ]
    oracle_inputs, oracle_outputs = _fields(oracle)
    feed = _feed(oracle_inputs)
    expected = {k: v.numpy() for k, v in oracle(**feed).items()}
    for how in HOWS:
        loaded = tf.saved_model.load(str(bridged_dir / model / how))
        assert set(loaded.signatures) == {"serving_default"}, how
        signature = loaded.signatures["serving_default"]
        assert _fields(signature) == (oracle_inputs, oracle_outputs), how
        served = signature(**feed)
        for key, value in expected.items():
            np.testing.assert_allclose(
                served[key].numpy(), value, rtol=1e-5, atol=1e-6, err_msg=f"{how} {key}"
            )


@pytest.mark.slow
def test_a_penguin_simple_style_module_saved_under_keras3_is_fed_by_feature_name_and_evaluated(
    tmp_path,
):
    """The tutorial's `model.save(dir, save_format='tf')` under Keras 3: serving_default takes the
    features by
    name, as under Keras 2, so a TF Serving client written for it (and evaluate) can feed it."""
    import tensorflow as tf

    module = REPO / "tests" / "modules" / "keras2_saving" / "penguin_simple_style.py"
    train = run_cli(
        [
            "train",
            "--keras",
            "keras3",
            "--examples",
            PENGUIN / "data",
            "--schema",
            PENGUIN / "schema.pbtxt",
            "--module-file",
            module,
            "--model-dir",
            tmp_path / "model",
            "--train-steps",
            "20",
            "--eval-steps",
            "2",
        ]
    )
    assert train.returncode == 0, train.stderr[-4000:]
    assert (
        "serving_default as Keras 2 wrote it: inputs bill_length_mm, bill_depth_mm" in train.stderr
    )
    signature = tf.saved_model.load(str(tmp_path / "model" / "Format-Serving")).signatures[
        "serving_default"
    ]
    assert sorted(signature.structured_input_signature[1]) == sorted(
        ["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]
    )
    assert list(signature.structured_outputs) == ["dense_1"]
    evaluate = run_cli(
        [
            "evaluate",
            "--model",
            tmp_path / "model",
            "--examples",
            PENGUIN / "data",
            "--schema",
            PENGUIN / "schema.pbtxt",
            "--eval-config",
            '{"label_key": "species"}',
            "--blessing-dir",
            tmp_path / "blessing",
            "--metrics-file",
            tmp_path / "metrics.json",
        ]
    )
    assert evaluate.returncode == 0, evaluate.stderr[-4000:]
    assert '"example_count"' in (tmp_path / "metrics.json").read_text()
