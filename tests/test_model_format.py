"""train --model-format other: a model of another framework is published as run_fn wrote it.

The real case is TFX's penguin scikit-learn module from the tfx 1.21 wheel, run unedited: it reads
the wheel's penguin examples through the data accessor, fits, and pickles its model to
`serving_model_dir/model.pkl` (after `os.makedirs(serving_model_dir)`, so the dir must not exist
yet). scikit-learn is not in the image, so a stand-in package (tests/modules/sklearn_stub) gives the
module the three classes it uses; everything else (the module's reading, fileio, io_utils, the
publishing) is the runtime's own. The default, savedmodel, still refuses what is no SavedModel.
"""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

import pytest
from conftest import cli_env, run_cli
from generic_trainer.errors import OutputError
from generic_trainer.trained import model_artifact
from test_tfx_real_modules import tfx_root  # noqa: F401 - the wheel fixture

STUB = Path(__file__).parent / "modules" / "sklearn_stub"


@pytest.mark.slow
def test_penguin_sklearn_module_publishes_its_pickle(tfx_root, tmp_path):  # noqa: F811
    testdata = tfx_root / "tfx" / "components" / "testdata" / "penguin"
    module = tfx_root / "tfx" / "examples" / "penguin" / "experimental" / "penguin_utils_sklearn.py"
    model_dir = tmp_path / "model"
    args = [
        "train", "--module-file", module, "--examples", testdata / "data",
        "--schema", testdata / "schema" / "schema.pbtxt", "--model-dir", model_dir,
        "--train-steps", "23", "--model-format", "other",
    ]  # fmt: skip
    env = cli_env({"PYTHONPATH": os.pathsep.join([str(STUB), os.environ.get("PYTHONPATH", "")])})
    proc = run_cli(args, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert "--model-format other: publishing what run_fn wrote (model.pkl) as it is" in proc.stderr
    serving = model_dir / "Format-Serving"
    assert sorted(p.name for p in serving.iterdir()) == ["model.pkl"]
    assert not (model_dir / "schemata").exists()  # no SavedModel, no predictSchemata
    assert not [p for p in tmp_path.iterdir() if "staging" in p.name]
    sys.path.insert(0, str(STUB))
    try:
        with open(serving / "model.pkl", "rb") as f:
            model = pickle.load(f)
    finally:
        sys.path.remove(str(STUB))
        for name in [n for n in sys.modules if n == "sklearn" or n.startswith("sklearn.")]:
            del sys.modules[name]
    assert model.feature_keys[0] == "culmen_length_mm" and model.label_key == "species"
    assert list(model.steps[-1][1].classes_) == [0, 1, 2]  # fitted on the wheel's examples


def test_savedmodel_check_stays_the_default_and_other_needs_a_model(tmp_path):
    from generic_trainer.artifacts import outputs

    (tmp_path / "serving").mkdir()
    (tmp_path / "serving" / "model.pkl").write_bytes(pickle.dumps({"w": [1.0]}))
    with pytest.raises(OutputError, match=r"wrote \['model.pkl'\] .* but no SavedModel"):
        outputs.validate_serving_model(str(tmp_path / "serving"))
    info = model_artifact.check_other_model(str(tmp_path / "serving"))
    assert info == {"format": "other", "files": ["model.pkl"], "signatures": []}
    (tmp_path / "empty").mkdir()
    with pytest.raises(OutputError, match="run_fn wrote no model"):
        model_artifact.check_other_model(str(tmp_path / "empty"))


def test_model_format_other_refuses_a_tflite_export(tmp_path, monkeypatch, capsys):
    from generic_trainer import cli

    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "0")
    module = tmp_path / "m.py"
    module.write_text("def run_fn(fn_args):\n    pass\n")
    code = cli.main(
        ["train", "--module-file", str(module), "--examples", str(tmp_path),
         "--model-dir", str(tmp_path / "model"), "--model-format", "other", "--export-tflite"]
    )  # fmt: skip
    assert code == 2
    assert "--model-format: --export-tflite converts a SavedModel" in capsys.readouterr().err
    assert not (tmp_path / "model").exists()
