"""`--keras auto` (the default): the tf.keras TFX would give a module, read from its source before
TensorFlow loads.

Under TFX, importing tensorflow_transform sets TF_USE_LEGACY_KERAS=1 when it is unset, so a module
that imports tfx, tensorflow_transform or tfx_bsl (or imports a file of its own that does) gets
tf_keras; any other Keras 3.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import PENGUIN, REPO, cli_env, run_cli
from generic_trainer.errors import UserInputError
from generic_trainer.fit import keras_auto
from generic_trainer.intake.fit_request import build_train_request, build_tune_request

IDIOM = REPO / "tests" / "modules" / "keras_idiom"


def _write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return folder / next(iter(files))


@pytest.mark.parametrize(
    "source, package, line",
    [
        ("import tensorflow_transform as tft\n", "tensorflow_transform", 1),
        ("import os\nfrom tfx import v1 as tfx\n", "tfx", 2),
        ("import os\n\ndef run_fn(fn_args):\n    from tfx_bsl.public import tfxio\n", "tfx_bsl", 4),
        ("from tfx.examples.mnist import mnist_utils_native_keras_base as base\n", "tfx", 1),
    ],
)
def test_a_module_that_imports_tfx_gets_tf_keras_with_the_reason(tmp_path, source, package, line):
    module = _write(tmp_path, {"module.py": source})
    keras, why = keras_auto.choose(str(module))
    assert keras == "tf_keras"
    assert why.startswith(
        f"module.py imports {package} (line {line}): TFX gives such modules Keras 2 (tf_keras)"
    )
    assert "--keras keras3" in why


def test_a_file_of_its_own_the_module_imports_counts_too(tmp_path):
    module = _write(
        tmp_path,
        {
            "module.py": "import keras\nimport helpers\n",
            # read as the module's folder: a relative import
            "helpers.py": "from .models import model\n",
            "models/__init__.py": "",
            "models/model.py": "import os\nimport tensorflow_transform as tft\n",
        },
    )
    keras, why = keras_auto.choose(str(module))
    assert keras == "tf_keras"
    assert why.startswith(
        "module.py imports helpers.py, which imports model.py, which imports tensorflow_transform "
        "(line 2)"
    )


def test_a_module_without_tfx_imports_gets_keras_3(tmp_path):
    module = _write(
        tmp_path,
        {
            "module.py": "import keras\nimport tensorflow as tf\nfrom generic_trainer import "
            "tfx\nimport base\n",
            # cycles end; a tfx-like name is not tfx
            "base.py": "import module\nfrom tfx_helpers_of_mine import x\n",
            "broken.py": "def (:\n",
        },
    )
    keras, why = keras_auto.choose(str(module))
    assert keras == "keras3" and "neither module.py nor a file of its own" in why
    assert keras_auto.choose(str(_write(tmp_path, {"m2.py": "import broken\n"}))) == (
        "keras3",
        keras_auto.choose(str(tmp_path / "m2.py"))[1],
    )  # a file that does not parse is left to the loader


def test_a_module_not_readable_yet_gets_keras_3_saying_how_to_ask_for_tf_keras(tmp_path):
    keras, why = keras_auto.choose("gs://bucket/module.py", gcs_root=str(tmp_path))
    assert (
        keras == "keras3"
        and "cannot be read before it is fetched" in why
        and "--keras tf_keras" in why
    )
    _write(
        tmp_path / "bucket", {"module.py": "import tfx_bsl\n"}
    )  # mounted (gcsfuse): read where it is
    assert keras_auto.choose("gs://bucket/module.py", gcs_root=str(tmp_path))[0] == "tf_keras"


def _values(tmp_path: Path, module: Path, **more) -> dict:
    return {
        "examples": str(PENGUIN / "data"),
        "module_file": str(module),
        "model_dir": str(tmp_path / "model"),
        **more,
    }


def test_the_request_resolves_auto_and_an_explicit_choice_wins(tmp_path):
    tfx_module = IDIOM / "tfx_module.py"
    auto = build_train_request(_values(tmp_path, tfx_module), environ={})
    assert auto.keras == "tf_keras" and auto.keras_reason.startswith(
        "--keras auto: tfx_module.py imports tfx_bsl (line 4)"
    )
    plain = build_train_request(_values(tmp_path, IDIOM / "plain_module.py"), environ={})
    assert plain.keras == "keras3" and plain.keras_reason.startswith(
        "--keras auto: neither plain_module.py"
    )
    explicit = build_train_request(_values(tmp_path, tfx_module, keras="keras3"), environ={})
    assert (explicit.keras, explicit.keras_reason) == ("keras3", "--keras keras3")
    assert (
        build_train_request(_values(tmp_path, tfx_module, keras="auto"), environ={}).keras
        == "tf_keras"
    )
    task = build_train_request({"task": "t.py:T", "model_dir": str(tmp_path / "m")}, environ={})
    assert (task.keras, task.keras_reason) == ("keras3", "--keras auto: the Task API runs Keras 3")
    with pytest.raises(UserInputError, match="expected one of auto, keras3, tf_keras"):
        build_train_request(_values(tmp_path, tfx_module, keras="keras2"), environ={})


def test_tune_takes_auto_as_keras_3(tmp_path):
    """keras-tuner searches Keras 3 models: auto (unset or given) is Keras 3, tf_keras is
    refused."""
    values = {
        **_values(tmp_path, IDIOM / "tfx_module.py"),
        "best_hyperparameters_dir": str(tmp_path / "best"),
    }
    build_tune_request(values, environ={})
    build_tune_request({**values, "keras": "auto"}, environ={})
    with pytest.raises(UserInputError, match="keras-tuner searches Keras 3 models only"):
        build_tune_request({**values, "keras": "tf_keras"}, environ={})


def test_deciding_loads_no_tensorflow():
    code = (
        "import sys; from generic_trainer.fit import keras_auto; "
        f"print(keras_auto.choose({str(IDIOM / 'tfx_module.py')!r})[0], 'tensorflow' in "
        "sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=cli_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.stdout.split() == ["tf_keras", "False"], proc.stderr[-2000:]


def _train(tmp_path: Path, module: str, *flags: str) -> subprocess.CompletedProcess:
    return run_cli(
        [
            "train",
            "--examples",
            PENGUIN / "data",
            "--schema",
            PENGUIN / "schema.pbtxt",
            "--module-file",
            IDIOM / module,
            "--model-dir",
            tmp_path / "model",
            "--train-steps",
            "3",
            "--eval-steps",
            "1",
            *flags,
        ],
        timeout=600,
    )


@pytest.mark.slow
def test_a_keras_2_idiom_trains_as_tfx_gives_it_and_keras_3_names_the_flag(tmp_path):
    """tf.cast on symbolic inputs: the module importing tfx_bsl gets tf_keras by default and trains;
    the same code
    without TFX imports gets Keras 3, which refuses it: exit 3 naming --keras tf_keras."""
    proc = _train(tmp_path / "tfx", "tfx_module.py")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "IDIOM_MODULE trained with tf_keras" in proc.stdout
    assert (
        "tf.keras is Keras 2 (tf_keras): --keras auto: tfx_module.py imports tfx_bsl (line 4)"
        in proc.stderr
    )
    assert (tmp_path / "tfx" / "model" / "Format-Serving" / "saved_model.pb").is_file()

    proc = _train(tmp_path / "plain", "plain_module.py")
    assert proc.returncode == 3, proc.stderr[-4000:]
    assert "tf.keras is Keras 3: --keras auto: neither plain_module.py" in proc.stderr
    assert "run_fn raised ValueError" in proc.stderr  # Keras 3 refuses tf.cast on its inputs
    assert "run with --keras tf_keras" in proc.stderr
    assert not (tmp_path / "plain" / "model" / "Format-Serving").exists()
