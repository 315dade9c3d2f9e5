"""TFX module files run unedited: their tfx imports, their own strategies, Keras 2 saving, their
logging.

The import stand-ins and the strategy and saving substitutions are checked in this process
against real TensorFlow and Keras 3; then modules written in TFX's idioms (tests/modules/tfx_style:
`from tfx import v1 as tfx`, a sibling imported by name, `tf.distribute.MirroredStrategy()`,
`model.save(dir, save_format='tf', signatures=...)`, absl logging) train and tune through the
real CLI with default flags, on one process and on two CLUSTER_SPEC workers on 127.0.0.1, and the
served model is judged by the evaluate verb.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import PENGUIN, REPO, free_port, run_cli
from generic_trainer import tfx_hook
from generic_trainer.errors import UserCodeError
from generic_trainer.fit import user_module

TFX_STYLE = REPO / "tests" / "modules" / "tfx_style"
MODULE = TFX_STYLE / "tfx_style_module.py"
TUNER_MODULE = TFX_STYLE / "tfx_style_tuner_module.py"


@pytest.fixture
def stand_ins():
    """The tfx finder installed for one test and removed after (with every stand-in module)."""
    assert tfx_hook.install(), (
        "the real tfx package is installed here; these tests assume it is not"
    )
    yield
    tfx_hook.uninstall()


# --------------------------------------------------------------------------------------------
# tfx imports
# --------------------------------------------------------------------------------------------


def test_tfx_import_paths_of_module_files_resolve_to_the_runtime(stand_ins, tmp_path):
    from generic_trainer import data
    from generic_trainer import tfx as runtime_tfx
    from generic_trainer.fit import fn_args
    from tfx import v1 as tfx
    from tfx.components.trainer.fn_args_utils import DataAccessor, FnArgs
    from tfx.components.tuner.component import TunerFnResult
    from tfx.dsl.io import fileio
    from tfx.utils import io_utils

    assert tfx.components.FnArgs is FnArgs is fn_args.FnArgs
    assert tfx.components.TunerFnResult is TunerFnResult is fn_args.TunerFnResult
    assert tfx.components.DataAccessor is DataAccessor is data.DataAccessor
    assert tfx.utils.parse_pbtxt_file is io_utils.parse_pbtxt_file is runtime_tfx.parse_pbtxt_file
    assert (
        importlib.import_module("tfx.v1.components").FnArgs is FnArgs
    )  # `import tfx.v1.components` works too

    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = schema_pb2.Schema(feature=[schema_pb2.Feature(name="x", type=schema_pb2.FLOAT)])
    path = str(tmp_path / "sub" / "schema.pbtxt")
    tfx.utils.write_pbtxt_file(path, schema)
    assert io_utils.parse_pbtxt_file(path, schema_pb2.Schema()) == schema
    assert io_utils.get_only_uri_in_dir(str(tmp_path / "sub")) == path
    with fileio.open(str(tmp_path / "a.txt"), "w") as f:
        f.write("hello")
    assert fileio.exists(str(tmp_path / "a.txt")) and tfx.dsl.io.fileio.isdir(str(tmp_path))
    assert sorted(fileio.listdir(str(tmp_path))) == ["a.txt", "sub"]
    io_utils.copy_dir(str(tmp_path / "sub"), str(tmp_path / "copy"))
    assert io_utils.read_string_file(str(tmp_path / "copy" / "schema.pbtxt")) == open(path).read()


@pytest.mark.parametrize(
    "statement,name",
    [
        (
            "import tfx.orchestration.airflow.airflow_component",
            "tfx.orchestration.airflow.airflow_component",
        ),
        ("from tfx.types import standard_component_specs", "tfx.types.standard_component_specs"),
        ("from tfx.v1.components import NoSuchComponent", "tfx.v1.components.NoSuchComponent"),
        ("from tfx.utils import doc_controls", "tfx.utils.doc_controls"),
        ("from tfx.examples.penguin import penguin_utils_base", "tfx.examples"),
    ],
)
def test_other_tfx_imports_fail_naming_the_import_and_what_is_supported(stand_ins, statement, name):
    """A short message: the import, why, what to do, where the supported imports are listed
    (not the list itself)."""
    with pytest.raises(ImportError) as raised:
        exec(statement, {})
    message = str(raised.value)
    assert f"the module imports {name}, which generic-trainer does not provide" in message
    assert 'listed in docs/guides/tfx.md ("Supported tfx imports")' in message
    assert "fn_args_utils (FnArgs" not in message and len(message) < 700


def test_a_module_and_its_sibling_load_with_their_tfx_imports(tmp_path):
    """load_user_module installs the finder, puts the module's folder on sys.path, names a bad
    import."""
    (tmp_path / "my_base.py").write_text(
        "from tfx.components.trainer.fn_args_utils import FnArgs\n"
    )
    (tmp_path / "my_module.py").write_text(
        textwrap.dedent("""
        from tfx import v1 as tfx
        import my_base
        def run_fn(fn_args: tfx.components.FnArgs):
            return my_base.FnArgs
    """)
    )
    (tmp_path / "bad_module.py").write_text("from tfx.orchestration import kubeflow_v1\n")
    try:
        module = user_module.load_user_module(str(tmp_path / "my_module.py"), str(tmp_path / "dl"))
        from generic_trainer.fit.fn_args import FnArgs

        assert module.run_fn(None) is FnArgs
        with pytest.raises(UserCodeError) as raised:
            user_module.load_user_module(str(tmp_path / "bad_module.py"), str(tmp_path / "dl"))
        assert "importing module" in str(raised.value).splitlines()[0]
        # with a module loaded, tfx.orchestration may be a package on the way to a file of its tree:
        # the file is named
        assert (
            "the module imports tfx.orchestration.kubeflow_v1, which generic-trainer does not "
            "provide" in str(raised.value)
        )
    finally:
        tfx_hook.uninstall()
        for name in ("my_base", "my_module", "bad_module"):
            sys.modules.pop(name, None)


def _tfx_tree(root: Path) -> Path:
    """Files laid out as TFX's taxi template and mnist example are (written here: no TFX file is
    copied)."""
    models = root / "taxi" / "models"
    (models / "keras_model").mkdir(parents=True)
    (models / "features.py").write_text("LABEL_KEY = 'tips'\n")
    (models / "keras_model" / "constants.py").write_text("HIDDEN_UNITS = [8, 4]\n")
    (models / "keras_model" / "model.py").write_text(
        textwrap.dedent("""
        from tfx.experimental.templates.taxi.models import features
        from tfx.experimental.templates.taxi.models.keras_model import constants
        import tfx.experimental.templates.taxi.models.keras_model.constants as same_constants

        def run_fn(fn_args):
            return features.LABEL_KEY, constants.HIDDEN_UNITS, same_constants is constants
    """)
    )
    flat = root / "flat"
    flat.mkdir()
    (flat / "helper_base.py").write_text(
        "from tfx.components.trainer.fn_args_utils import DataAccessor\nNAME = 'b'\n"
    )
    (flat / "helper.py").write_text(
        "from tfx.examples.mnist import helper_base as base\nrun_fn = lambda a: base\n"
    )
    (models / "keras_model" / "unknown.py").write_text(
        "from tfx.experimental.templates.taxi.models import nothing\n"
    )
    (models / "keras_model" / "elsewhere.py").write_text(
        "from tfx.experimental.other import features\n"
    )
    (models / "keras_model" / "bare.py").write_text(
        "import tfx.orchestration.airflow\ndef run_fn(fn_args):\n    return "
        "tfx.orchestration.airflow.AirflowDagRunner\n"
    )
    return root


def test_tfx_paths_to_files_beside_the_module_or_above_it_in_its_tree_load_those_files(tmp_path):
    """`from tfx.experimental.templates.taxi.models import features` loads
    .../taxi/models/features.py; an
    unknown tfx path is still an import error naming it (exit 3 in a run)."""
    root = _tfx_tree(tmp_path)
    keras_model = root / "taxi" / "models" / "keras_model"
    try:
        module = user_module.load_user_module(str(keras_model / "model.py"), str(tmp_path / "dl"))
        assert module.run_fn(None) == ("tips", [8, 4], True)
        assert sys.modules["tfx.experimental.templates.taxi.models.features"].__file__ == str(
            root / "taxi" / "models" / "features.py"
        )
        helper = user_module.load_user_module(
            str(root / "flat" / "helper.py"), str(tmp_path / "dl")
        )
        assert (
            helper.run_fn(None).NAME == "b"
            and helper.run_fn(None).__name__ == "tfx.examples.mnist.helper_base"
        )
        for name, missing in (
            ("unknown", "tfx.experimental.templates.taxi.models.nothing"),
            ("elsewhere", "tfx.experimental.other.features"),
        ):
            with pytest.raises(
                UserCodeError
            ) as raised:  # elsewhere: no folder above is named other
                user_module.load_user_module(str(keras_model / f"{name}.py"), str(tmp_path / "dl"))
            assert f"the module imports {missing}, which generic-trainer does not provide" in str(
                raised.value
            )
        bare = user_module.load_user_module(
            str(keras_model / "bare.py"), str(tmp_path / "dl")
        )  # `import a.b.c` alone: at use
        with pytest.raises(
            ImportError,
            match="the module imports tfx.orchestration.airflow.AirflowDagRunner, which",
        ):
            bare.run_fn(None)
    finally:
        tfx_hook.uninstall()
        for name in ("model", "helper", "unknown", "elsewhere", "bare"):
            sys.modules.pop(name, None)
    assert not [n for n in sys.modules if n.startswith("tfx.")], (
        "uninstall removes the tree's modules too"
    )


def test_an_installed_tfx_is_left_alone(tmp_path, monkeypatch):
    """Where a real `tfx` package is importable, the finder is not installed and that package is
    used."""
    package = tmp_path / "site" / "tfx"
    (package / "components" / "trainer").mkdir(parents=True)
    (package / "__init__.py").write_text("REAL = True\n")
    (package / "v1.py").write_text("components = 'the real one'\n")
    (package / "components" / "__init__.py").write_text("")
    (package / "components" / "trainer" / "__init__.py").write_text("")
    (package / "components" / "trainer" / "fn_args_utils.py").write_text("FnArgs = 'real FnArgs'\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    was_installed = any(
        isinstance(f, tfx_hook.TfxFinder) for f in sys.meta_path
    )  # by an earlier module load
    tfx_hook.uninstall()
    try:
        assert tfx_hook.install() is False
        assert not any(isinstance(f, tfx_hook.TfxFinder) for f in sys.meta_path)
        from tfx import v1
        from tfx.components.trainer.fn_args_utils import FnArgs

        assert v1.components == "the real one" and FnArgs == "real FnArgs"
        with pytest.raises(ModuleNotFoundError) as raised:
            importlib.import_module("tfx.orchestration")
        assert "generic-trainer" not in str(
            raised.value
        )  # Python's own error: the real package answers
    finally:
        for name in [n for n in sys.modules if n == "tfx" or n.startswith("tfx.")]:
            del sys.modules[name]
        if was_installed:
            sys.meta_path.append(tfx_hook.TfxFinder())


def test_generic_trainer_tfx_exposes_fn_args_data_accessor_pbtxt_and_fileio():
    from generic_trainer import data, tfx
    from generic_trainer.fit import fn_args

    assert (
        tfx.components.FnArgs is fn_args.FnArgs and tfx.components.DataAccessor is data.DataAccessor
    )
    assert tfx.components.TunerFnResult is fn_args.TunerFnResult
    assert callable(tfx.utils.parse_pbtxt_file) and callable(tfx.utils.write_pbtxt_file)
    assert "exists" in dir(tfx.dsl.io.fileio)


# --------------------------------------------------------------------------------------------
# The module's own strategy (in this process: real strategies, no training)
# --------------------------------------------------------------------------------------------


def test_module_strategies_are_answered_with_the_runtimes_and_restored(caplog):
    import tensorflow as tf
    from generic_trainer.fit import module_strategy

    runtime = tf.distribute.MirroredStrategy(["/cpu:0"])
    originals = (
        tf.distribute.MirroredStrategy,
        tf.distribute.experimental.MultiWorkerMirroredStrategy,
    )
    with caplog.at_level(logging.INFO, logger="generic_trainer.fit.module_strategy"):
        with runtime.scope(), module_strategy.substitute(runtime):
            assert tf.distribute.MirroredStrategy() is runtime
            assert tf.distribute.MirroredStrategy() is runtime
            assert tf.distribute.MultiWorkerMirroredStrategy() is runtime
            assert tf.distribute.experimental.MultiWorkerMirroredStrategy() is runtime
            assert tf.distribute.OneDeviceStrategy("/cpu:0") is runtime
            assert tf.distribute.MirroredStrategy(devices=["/cpu:0"]) is runtime
            assert tf.distribute.get_strategy() is runtime
            assert isinstance(runtime, tf.distribute.MirroredStrategy)
            assert not isinstance(runtime, tf.distribute.OneDeviceStrategy)
            with (
                tf.distribute.MirroredStrategy().scope()
            ):  # what TFX modules do: build the model in its scope
                variable = tf.Variable(1.0)
            assert isinstance(variable, tf.distribute.DistributedValues)
    asked = [
        r.getMessage() for r in caplog.records if r.getMessage().startswith("module asked for")
    ]
    assert asked == [
        "module asked for MirroredStrategy; using MirroredStrategy over 1 device "
        "(/job:localhost/replica:0/task:0/device:CPU:0)",
        "module asked for MultiWorkerMirroredStrategy; using MirroredStrategy over 1 device "
        "(/job:localhost/replica:0/task:0/device:CPU:0)",
        "module asked for OneDeviceStrategy on /cpu:0; using MirroredStrategy over 1 device "
        "(/job:localhost/replica:0/task:0/device:CPU:0)",
    ]  # once per kind
    assert (
        tf.distribute.MirroredStrategy,
        tf.distribute.experimental.MultiWorkerMirroredStrategy,
    ) == originals


@pytest.mark.parametrize(
    "make,needle",
    [
        (
            lambda tf: tf.distribute.TPUStrategy(),
            "the module asked for TPUStrategy, which generic-trainer cannot honour",
        ),
        (
            lambda tf: tf.distribute.experimental.ParameterServerStrategy(None),
            "the module asked for ParameterServerStrategy, which generic-trainer cannot honour",
        ),
        (
            lambda tf: tf.distribute.MirroredStrategy(["/gpu:0", "/gpu:1"]),
            "the module asked for MirroredStrategy on /gpu:0, /gpu:1, which this replica does not "
            "have (it has "
            "/device:CPU:0)",
        ),
        (
            lambda tf: tf.distribute.OneDeviceStrategy("/cpu:3"),
            "OneDeviceStrategy on /cpu:3, which this replica",
        ),
    ],
)
def test_strategies_that_cannot_be_honoured_are_user_code_errors(make, needle):
    import tensorflow as tf
    from generic_trainer.fit import module_strategy

    runtime = tf.distribute.get_strategy()
    with module_strategy.substitute(runtime), pytest.raises(UserCodeError) as raised:
        make(tf)
    assert needle in str(raised.value) and raised.value.exit_code == 3
    assert type(runtime).__name__ in str(raised.value)  # the strategy the runtime uses


# --------------------------------------------------------------------------------------------
# Keras 2 saving under Keras 3 (in this process)
# --------------------------------------------------------------------------------------------


def _tiny_model():
    import keras
    import tensorflow as tf

    inputs = {k: keras.Input(shape=(1,), name=k) for k in ("a", "b")}
    model = keras.Model(
        inputs, keras.layers.Dense(2)(keras.layers.concatenate(list(inputs.values())))
    )
    spec = {k: tf.io.FixedLenFeature([1], tf.float32) for k in ("a", "b")}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(serialized):
        return {"outputs": model(tf.io.parse_example(serialized, spec))}

    return model, serve


def _example(a: float, b: float) -> bytes:
    import tensorflow as tf

    feature = {
        k: tf.train.Feature(float_list=tf.train.FloatList(value=[v]))
        for k, v in (("a", a), ("b", b))
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.mark.parametrize("how", ["model_save", "save_model", "keras_save_model", "saved_model"])
def test_keras2_saves_write_a_saved_model_with_their_signatures(tmp_path, how):
    import keras
    import numpy as np
    import tensorflow as tf
    from generic_trainer.fit import keras2_saving

    model, serve = _tiny_model()
    path = str(tmp_path / "serving")
    with keras2_saving.bridge("keras3"):
        if how == "model_save":
            model.save(
                path, save_format="tf", signatures={"serving_default": serve, "other": serve}
            )
        elif how == "save_model":
            tf.keras.models.save_model(
                model, path, save_format="tf", signatures={"serving_default": serve}
            )
        elif how == "keras_save_model":
            keras.saving.save_model(model, path, signatures=serve.get_concrete_function())
        else:
            tf.saved_model.save(model, path, signatures={"serving_default": serve})
    loaded = tf.saved_model.load(path)
    expected = {"serving_default", "other"} if how == "model_save" else {"serving_default"}
    assert set(loaded.signatures) == expected
    served = loaded.signatures["serving_default"](examples=tf.constant([_example(1.0, 2.0)]))[
        "outputs"
    ].numpy()
    direct = model({"a": np.array([[1.0]]), "b": np.array([[2.0]])}).numpy()
    np.testing.assert_allclose(served, direct, rtol=1e-5)


def test_keras2_plain_save_to_a_dir_and_keras3_saves_outside_the_bridge(tmp_path):
    import keras
    import tensorflow as tf
    from generic_trainer.fit import keras2_saving

    model, _ = _tiny_model()
    with keras2_saving.bridge("keras3"):
        model.save(str(tmp_path / "plain"))  # Keras 2: a path without extension is a SavedModel
        model.save(str(tmp_path / "model.keras"))  # Keras 3's own format is untouched
    assert "serving_default" in tf.saved_model.load(str(tmp_path / "plain")).signatures
    assert isinstance(keras.saving.load_model(str(tmp_path / "model.keras")), keras.Model)
    # restored once the user call is over: Keras 3 refuses save_format again and writes nothing
    with pytest.raises(ValueError):
        model.save(str(tmp_path / "after"), save_format="tf")
    with pytest.raises(ValueError):
        tf.keras.models.save_model(model, str(tmp_path / "after"), save_format="tf")
    assert not (tmp_path / "after").exists()


def test_keras2_apis_that_cannot_be_bridged_get_a_hint_naming_tf_keras(tmp_path):
    import keras
    from generic_trainer.fit import keras2_saving

    model, _ = _tiny_model()
    model.export(str(tmp_path / "sm"), verbose=False)
    with pytest.raises(ValueError) as raised:
        keras.models.load_model(str(tmp_path / "sm"))
    assert "run with --keras tf_keras" in keras2_saving.hint(raised.value)
    assert "keras-tuner needs Keras 3" in keras2_saving.hint(raised.value, tf_keras_possible=False)
    assert keras2_saving.hint(ValueError("shapes (3,) and (4,) are incompatible")) == ""


# --------------------------------------------------------------------------------------------
# Through the CLI: train, evaluate, tune, two workers
# --------------------------------------------------------------------------------------------


def _train_args(out: Path, **config) -> list:
    return [
        "train",
        "--examples",
        PENGUIN / "data",
        "--schema",
        PENGUIN / "schema.pbtxt",
        "--module-file",
        MODULE,
        "--model-dir",
        out / "model",
        "--train-steps",
        "60",
        "--eval-steps",
        "5",
        "--custom-config",
        json.dumps(config),
    ]


@pytest.mark.slow
def test_tfx_tutorial_style_module_trains_with_default_flags_and_is_judged_by_evaluate(tmp_path):
    proc = run_cli(_train_args(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    log = proc.stderr
    import tensorflow as tf
    from generic_trainer.fit import module_strategy

    default = module_strategy.describe(tf.distribute.get_strategy())
    assert default.endswith("(TensorFlow's default strategy, one device)")
    assert f"module asked for MirroredStrategy; using {default}" in log
    # --keras auto: the module imports tfx, so it gets the tf.keras TFX gives it, Keras 2, which
    # saves natively
    assert (
        "tf.keras is Keras 2 (tf_keras): --keras auto: tfx_style_module.py imports tfx (line 19)"
        in log
    )
    assert "Keras 2 save of a Keras 3 model" not in log
    # the module's absl lines (its sibling's too) and Python logging, with who wrote them
    assert "INFO tfx_style_base (absl): tfx-style base: schema with 8 features" in log
    assert "INFO tfx_style_module (absl): tfx-style module: absl says training for 60 steps" in log
    assert "INFO tfx_style_module: tfx-style module: python logging says hello" in log
    assert re.search(
        r"INFO absl: Model: .*Total params", log, re.S
    )  # model.summary(print_fn=logging.info)
    assert (
        "(absl): Epoch" not in log and "keras (absl)" not in log
    )  # libraries' absl chatter stays out

    config = {"label_key": "species", "thresholds": {"accuracy": {"lower_bound": 0.7}}}
    proc = run_cli(
        [
            "evaluate",
            "--model",
            tmp_path / "model",
            "--examples",
            PENGUIN / "data",
            "--eval-config",
            json.dumps(config),
            "--blessing-dir",
            tmp_path / "blessing",
            "--metrics-file",
            tmp_path / "evaluation.json",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "blessing" / "BLESSED").is_file(), proc.stderr[-3000:]
    overall = json.loads((tmp_path / "evaluation.json").read_text())["metrics"]
    assert overall["accuracy"] >= 0.7 and overall["example_count"] > 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "config,needle",
    [
        (
            {"strategy": "tpu"},
            "the module asked for TPUStrategy, which generic-trainer cannot honour",
        ),
        (
            {"strategy": "one_device:/gpu:5"},
            "the module asked for OneDeviceStrategy on /gpu:5, which this replica does not have",
        ),
    ],
)
def test_strategies_that_cannot_be_honoured_exit_3_and_leave_no_model(tmp_path, config, needle):
    proc = run_cli(_train_args(tmp_path, **config))
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert needle in proc.stderr
    assert not (tmp_path / "model" / "Format-Serving").exists()
    assert not (tmp_path / "model" / ".staging").exists()


@pytest.mark.slow
def test_unbridgeable_keras2_api_exits_3_naming_tf_keras_and_leaves_no_model(tmp_path):
    module = tmp_path / "loads_saved_model.py"
    module.write_text(
        textwrap.dedent("""
        import tensorflow as tf
        from tfx import v1 as tfx

        def run_fn(fn_args: tfx.components.FnArgs):
            # Keras 2: a SavedModel dir
            model = tf.keras.models.load_model(fn_args.custom_config["warm_start"])
            model.save(fn_args.serving_model_dir, save_format="tf")
    """)
    )
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "saved_model.pb").write_bytes(b"")
    args = [
        *_train_args(tmp_path, warm_start=str(saved)),
        "--keras",
        "keras3",
    ]  # Keras 3 asked for explicitly
    args[args.index(MODULE)] = module
    proc = run_cli(args)
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "run_fn raised ValueError" in proc.stderr and "run with --keras tf_keras" in proc.stderr
    assert not (tmp_path / "model" / "Format-Serving").exists()


@pytest.mark.slow
def test_tfx_style_tuner_module_tunes_with_its_own_strategy_and_imports(tmp_path):
    proc = run_cli(
        [
            "tune",
            "--examples",
            PENGUIN / "data",
            "--schema",
            PENGUIN / "schema.pbtxt",
            "--module-file",
            TUNER_MODULE,
            "--best-hyperparameters-dir",
            tmp_path / "best",
            "--train-steps",
            "10",
            "--eval-steps",
            "3",
            "--max-trials",
            "2",
        ]
    )
    import tensorflow as tf
    from generic_trainer.fit import module_strategy

    assert proc.returncode == 0, proc.stderr[-4000:]
    default = module_strategy.describe(tf.distribute.get_strategy())  # the runtime's, one replica
    assert f"module asked for MirroredStrategy; using {default}" in proc.stderr
    assert "tfx_style_tuner_module (absl): tfx-style tuner module: trials run in" in proc.stderr
    best = json.loads((tmp_path / "best" / "best_hyperparameters.txt").read_text())
    assert set(best["values"]) == {"learning_rate", "num_layers"}


@pytest.mark.slow
@pytest.mark.e2e
def test_module_mirrored_strategy_on_two_cluster_spec_workers(tmp_path):
    import subprocess

    from conftest import cli_env

    cluster = {
        "workerpool0": [f"127.0.0.1:{free_port()}"],
        "workerpool1": [f"127.0.0.1:{free_port()}"],
    }
    procs = []
    try:
        for pool, name in (("workerpool0", "chief"), ("workerpool1", "worker")):
            spec = {
                "cluster": cluster,
                "environment": "cloud",
                "task": {"type": pool, "index": 0, "trial": ""},
            }
            log_path = tmp_path / f"{name}.log"
            with open(log_path, "w") as log:
                procs.append(
                    (
                        subprocess.Popen(
                            [
                                sys.executable,
                                "-m",
                                "generic_trainer",
                                *map(str, _train_args(tmp_path / name)),
                                "--cluster-timeout",
                                "180",
                            ],
                            env=cli_env({"CLUSTER_SPEC": json.dumps(spec)}),
                            stdout=log,
                            stderr=subprocess.STDOUT,
                        ),
                        log_path,
                    )
                )
        for proc, _ in procs:
            proc.wait(timeout=400)
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    (chief, chief_log), (worker, worker_log) = procs
    chief_out, worker_out = chief_log.read_text(), worker_log.read_text()
    assert chief.returncode == 0, chief_out[-4000:]
    assert worker.returncode == 0, worker_out[-4000:]
    for out in (chief_out, worker_out):
        assert (
            "module asked for MirroredStrategy; using MultiWorkerMirroredStrategy over 2 workers"
            in out
        ), out[-3000:]
        assert re.search(r"tfx-style module: strategy \w+ with 2 replicas", out)
    assert (
        "serving model:" in chief_out
        and not (tmp_path / "worker" / "model" / "Format-Serving").exists()
    )

    import tensorflow as tf

    serve = tf.saved_model.load(str(tmp_path / "chief" / "model" / "Format-Serving")).signatures[
        "serving_default"
    ]
    files = sorted(str(p) for p in (PENGUIN / "data" / "Split-eval").glob("*.gz"))
    records = [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]
    labels = [
        tf.train.Example.FromString(r).features.feature["species"].int64_list.value[0]
        for r in records
    ]
    predicted = serve(examples=tf.constant(records))["outputs"].numpy().argmax(axis=1)
    accuracy = sum(int(p == y) for p, y in zip(predicted, labels, strict=True)) / len(labels)
    assert accuracy > 0.6, accuracy


@pytest.mark.slow
def test_transform_verb_loads_a_module_that_imports_a_sibling_and_tfx(tmp_path):
    module_dir = tmp_path / "module"
    module_dir.mkdir()
    (module_dir / "helpers.py").write_text("def scale(x):\n    return x * 2.0\n")
    (module_dir / "transform_module.py").write_text(
        textwrap.dedent("""
        import helpers
        from tfx import v1 as tfx  # resolved by the runtime: TFX is not installed

        def preprocessing_fn(inputs):
            assert tfx.components.FnArgs is not None
            return {"bill_length_xf": helpers.scale(inputs["bill_length_mm"])}
    """)
    )
    proc = run_cli(
        [
            "transform",
            "--examples",
            PENGUIN / "data",
            "--schema",
            PENGUIN / "schema.pbtxt",
            "--module-file",
            module_dir / "transform_module.py",
            "--transform-graph",
            tmp_path / "graph",
        ],
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    transformed = (tmp_path / "graph" / "transformed_metadata" / "schema.pbtxt").read_text()
    assert 'name: "bill_length_xf"' in transformed
