"""TFX's own module files, from the tfx==1.21.0 wheel, run unedited through the verbs, wired as TFX
wires them.

The wheel is downloaded once (`pip download --no-deps`, never installed; cached in pytest's cache
dir, shared by the xdist workers) and unpacked; the module files run from where they lie in it,
byte for byte, with default flags: their `tfx.*` imports of their own helper files
(`from tfx.examples.mnist import mnist_utils_native_keras_base`, the templates' `features` and
`constants`) load those files, and `tensorflow_transform` gives them Keras 2 as TFX does.
Nothing of TFX is copied into this repository.

Every `run_fn`, `tuner_fn` and `preprocessing_fn` module of the wheel that needs only TensorFlow,
TFT and keras-tuner runs: penguin keras (transform, tune, train, evaluate), the penguin and taxi
templates, taxi native Keras, imdb and mnist (import-examples, transform, train), and the
components' testdata trainer and tuner modules on the examples, schema and transform graph
shipped beside them. Data is the wheel's own (penguin ExampleGen output, the Chicago taxi and
IMDB samples, cut to a few hundred rows) or, for mnist, generated for its schema as TFRecords.
Trainer gets TFX's wiring: Transform's transformed examples, the raw schema and the transform
graph. Each served model is fed raw serialized examples through its `serving_default`.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import run_cli, shared_across_workers

TFX_VERSION = "1.21.0"
pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def _download_wheel(out: Path) -> None:
    wheels = out / "wheel"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            f"tfx=={TFX_VERSION}",
            "-d",
            str(wheels),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, (
        f"pip could not download tfx=={TFX_VERSION} (PyPI needed):\n{proc.stderr[-3000:]}"
    )
    [wheel] = wheels.glob("tfx-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(
            out / "unpacking", [n for n in archive.namelist() if n.startswith("tfx/")]
        )
    (out / "unpacking").rename(out / "root")


@pytest.fixture(scope="session")
def tfx_root(request, tmp_path_factory) -> Path:
    """The unpacked tfx wheel (its `tfx/` folder inside), downloaded once and kept in pytest's cache
    dir."""
    try:
        cache = Path(request.config.cache.mkdir(f"tfx-{TFX_VERSION}-wheel"))
    except AttributeError:  # -p no:cacheprovider
        cache = tmp_path_factory.getbasetemp().parent / f"tfx-{TFX_VERSION}-wheel"
        cache.mkdir(exist_ok=True)
    with open(cache / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one xdist worker downloads, the others wait
        # `root` appears whole (renamed from `unpacking`); the wheel has no tfx/__init__.py (that
        # file is ml-pipelines-sdk's), so a check for it downloaded the wheel again every session.
        if not (cache / "root" / "tfx" / "proto").is_dir():
            for stale in ("wheel", "unpacking", "root"):
                shutil.rmtree(cache / stale, ignore_errors=True)
            _download_wheel(cache)
    return cache / "root"


def _gt(*args) -> subprocess.CompletedProcess:
    proc = run_cli([str(a) for a in args], timeout=600)
    assert proc.returncode == 0, f"{args[0]} exited {proc.returncode}:\n{proc.stderr[-6000:]}"
    return proc


def _transform(out: Path, examples: Path, schema: Path, module: Path) -> tuple[Path, Path]:
    """TFX's Transform: (transform graph, transformed examples)."""
    _gt(
        "transform",
        "--examples",
        examples,
        "--schema",
        schema,
        "--module-file",
        module,
        "--transform-graph",
        out / "graph",
        "--transformed-examples",
        out / "transformed",
    )
    return out / "graph", out / "transformed"


def _train(
    out: Path, module: Path, examples: Path, schema: Path, graph: Path | None, *extra
) -> Path:
    """TFX's Trainer wired as TFX wires it; returns the serving model dir."""
    args = [
        "train",
        "--module-file",
        module,
        "--examples",
        examples,
        "--schema",
        schema,
        "--model-dir",
        out / "model",
        "--train-steps",
        "3",
        "--eval-steps",
        "2",
        *extra,
    ]
    _gt(*args, *(["--transform-graph", graph] if graph else []))
    serving = out / "model" / "Format-Serving"
    assert (serving / "saved_model.pb").is_file()
    return serving


def _serve(serving: Path, raw_examples: Path, split: str = "eval", count: int = 4):
    """Feed `count` raw serialized examples of `split` to the model's serving_default; returns its
    outputs."""
    import numpy as np
    import tensorflow as tf

    files = sorted(str(p) for p in (raw_examples / f"Split-{split}").iterdir())
    records = list(
        tf.data.TFRecordDataset(files, compression_type="GZIP").take(count).as_numpy_iterator()
    )
    signature = tf.saved_model.load(str(serving)).signatures["serving_default"]
    [name] = signature.structured_input_signature[1]
    outputs = {k: v.numpy() for k, v in signature(**{name: tf.constant(records)}).items()}
    for key, value in outputs.items():
        assert value.shape[0] == count and np.isfinite(value).all(), (key, value)
    return outputs


def _import_csv(out: Path, csv: Path) -> tuple[Path, Path]:
    """TFX's CsvExampleGen + SchemaGen: (examples, schema)."""
    _gt(
        "import-examples",
        "--input",
        csv,
        "--output",
        out / "examples",
        "--schema-output",
        out / "schema",
    )
    return out / "examples", out / "schema" / "schema.pbtxt"


def _head(source: Path, target: Path, lines: int) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(source, encoding="utf-8") as f:
        target.write_text("".join(itertools.islice(f, lines)), encoding="utf-8")
    return target


# --------------------------------------------------------------------------------------------
# Shared data: TFX's penguin ExampleGen output, a cut of TFX's Chicago taxi sample
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def penguin(tfx_root) -> tuple[Path, Path]:
    """The penguin examples (ExampleGen's layout) and schema shipped in the wheel's components
    testdata."""
    return _penguin_data(tfx_root)


def _penguin_data(tfx_root: Path) -> tuple[Path, Path]:
    testdata = tfx_root / "tfx" / "components" / "testdata" / "penguin"
    return testdata / "data", testdata / "schema" / "schema.pbtxt"


@pytest.fixture(scope="session")
def taxi(tfx_root, tmp_path_factory) -> tuple[Path, Path]:
    """240 rows of the wheel's Chicago taxi CSV, through import-examples (ExampleGen +
    SchemaGen); made once per run."""
    csv = tfx_root / "tfx" / "examples" / "chicago_taxi_pipeline" / "data" / "simple" / "data.csv"

    def make(out: Path) -> None:
        _import_csv(out, _head(csv, out / "csv" / "data.csv", 241))

    out = shared_across_workers(tmp_path_factory, "tfx_taxi_examples", make)
    return out / "examples", out / "schema" / "schema.pbtxt"


@pytest.fixture(scope="session")
def penguin_keras(tfx_root, tmp_path_factory) -> Path:
    """penguin_utils_keras.py through transform and train, wired as TFX wires them, once per run:
    a dir with `graph`, `transformed` and `model` (read only)."""
    examples, schema = _penguin_data(tfx_root)
    module = tfx_root / "tfx" / "examples" / "penguin" / "penguin_utils_keras.py"

    def make(out: Path) -> None:
        graph, transformed = _transform(out, examples, schema, module)
        _train(out, module, transformed, schema, graph)

    return shared_across_workers(tmp_path_factory, "tfx_penguin_keras", make)


@pytest.fixture(scope="session")
def taxi_native_keras(tfx_root, taxi, tmp_path_factory) -> Path:
    """taxi_utils_native_keras.py through transform and train, wired as TFX wires them, once per
    run: a dir with `graph`, `transformed` and `model` (read only)."""
    examples, schema = taxi
    module = tfx_root / "tfx" / "examples" / "chicago_taxi_pipeline" / "taxi_utils_native_keras.py"

    def make(out: Path) -> None:
        graph, transformed = _transform(out, examples, schema, module)
        _train(out, module, transformed, schema, graph)

    return shared_across_workers(tmp_path_factory, "tfx_taxi_native_keras", make)


# --------------------------------------------------------------------------------------------
# The modules
# --------------------------------------------------------------------------------------------


def test_penguin_keras_module_transforms_tunes_trains_and_is_evaluated(
    tfx_root, penguin, penguin_keras, tmp_path
):
    """tfx/examples/penguin/penguin_utils_keras.py (imports penguin_utils_base by its tfx path);
    its transform outputs are the shared fixture's."""
    examples, schema = penguin
    module = tfx_root / "tfx" / "examples" / "penguin" / "penguin_utils_keras.py"
    graph, transformed = penguin_keras / "graph", penguin_keras / "transformed"
    _gt(
        "tune",
        "--module-file",
        module,
        "--examples",
        transformed,
        "--schema",
        schema,
        "--transform-graph",
        graph,
        "--train-steps",
        "3",
        "--eval-steps",
        "2",
        "--max-trials",
        "1",
        "--best-hyperparameters-dir",
        tmp_path / "best",
    )
    [best] = (tmp_path / "best").iterdir()
    serving = _train(tmp_path, module, transformed, schema, graph, "--hyperparameters", best)
    outputs = _serve(serving, examples)
    assert {v.shape[1] for v in outputs.values()} == {3}  # three species
    _gt(
        "evaluate",
        "--model",
        tmp_path / "model",
        "--examples",
        examples,
        "--schema",
        schema,
        "--eval-config",
        json.dumps({"label_key": "species"}),
        "--blessing-dir",
        tmp_path / "blessing",
        "--metrics-file",
        tmp_path / "metrics.json",
    )
    assert [p.name for p in (tmp_path / "blessing").iterdir()] in (["BLESSED"], ["NOT_BLESSED"])
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert "accuracy" in json.dumps(metrics)


def test_penguin_keras_module_trained_under_keras3_is_bulk_inferred_through_its_tft_layer(
    tfx_root, penguin, penguin_keras, tmp_path
):
    """penguin_utils_keras.py under Keras 3 (--keras keras3) saves with tf.saved_model.save, its
    TFT layer tracked as `model.tft_layer`: Keras 3 saves its variables so that a TF1 session load
    (tfx_bsl's, TFX's BulkInferrer's) leaves the ones the signature reads unset ("Could not find
    variable dense_2/kernel"). bulk-infer sets them and answers what tf.saved_model.load does."""
    import numpy as np
    import tensorflow as tf
    from generic_trainer.records.example_files import read_records
    from tensorflow_serving.apis import prediction_log_pb2

    examples, schema = penguin
    module = tfx_root / "tfx" / "examples" / "penguin" / "penguin_utils_keras.py"
    graph, transformed = penguin_keras / "graph", penguin_keras / "transformed"
    serving = _train(tmp_path, module, transformed, schema, graph, "--keras", "keras3")
    result = tmp_path / "result"
    proc = _gt(
        "bulk-infer",
        "--model",
        tmp_path / "model",
        "--examples",
        examples,
        "--inference-result",
        result,
    )
    assert "restore left" in proc.stderr, "the Keras 3 SavedModel no longer needs the repair"
    [logs_file] = result.iterdir()
    logs = [prediction_log_pb2.PredictionLog.FromString(r) for r in read_records(str(logs_file))]
    records = [log.predict_log.request.inputs["examples"].string_val[0] for log in logs]
    assert len(set(records)) == len(logs) > 50
    got = np.concatenate(
        [tf.make_ndarray(log.predict_log.response.outputs["outputs"]) for log in logs]
    )
    signature = tf.saved_model.load(str(serving)).signatures["serving_default"]
    served = signature(examples=tf.constant(records))["outputs"].numpy()
    assert got.shape == served.shape == (len(logs), 3)
    np.testing.assert_allclose(got, served, rtol=1e-5, atol=1e-6)


def test_penguin_template_preprocessing_and_model_train_a_model_that_serves(
    tfx_root, penguin, tmp_path
):
    """tfx/experimental/templates/penguin/models: preprocessing.py and model.py import `features`
    and
    `constants` by their tfx paths."""
    examples, schema = penguin
    models = tfx_root / "tfx" / "experimental" / "templates" / "penguin" / "models"
    graph, transformed = _transform(tmp_path, examples, schema, models / "preprocessing.py")
    _serve(_train(tmp_path, models / "model.py", transformed, schema, graph), examples)


def test_components_testdata_tuner_module_tunes_penguin(tfx_root, penguin, tmp_path):
    """tfx/components/testdata/module_file/tuner_module.py, wired as TFX's Tuner test: raw examples
    + schema."""
    examples, schema = penguin
    module = tfx_root / "tfx" / "components" / "testdata" / "module_file" / "tuner_module.py"
    _gt(
        "tune",
        "--module-file",
        module,
        "--examples",
        examples,
        "--schema",
        schema,
        "--train-steps",
        "3",
        "--eval-steps",
        "2",
        "--max-trials",
        "1",
        "--best-hyperparameters-dir",
        tmp_path / "best",
    )
    [best] = (tmp_path / "best").iterdir()
    assert "learning_rate" in best.read_text()


def test_components_testdata_trainer_module_on_the_shipped_transform_outputs(tfx_root, tmp_path):
    """tfx/components/testdata/module_file/trainer_module.py on the taxi Transform outputs shipped
    beside it."""
    testdata = tfx_root / "tfx" / "components" / "testdata"
    serving = _train(
        tmp_path,
        testdata / "module_file" / "trainer_module.py",
        testdata / "transform" / "transformed_examples",
        testdata / "schema_gen" / "schema.pbtxt",
        testdata / "transform" / "transform_graph",
    )
    _serve(serving, testdata / "csv_example_gen")


def test_taxi_native_keras_module_trains_a_model_that_serves_the_examples(taxi, taxi_native_keras):
    """tfx/examples/chicago_taxi_pipeline/taxi_utils_native_keras.py (transformed and trained by
    the shared fixture, which test_evaluate_tfma evaluates)."""
    examples, _ = taxi
    _serve(taxi_native_keras / "model" / "Format-Serving", examples)


def test_taxi_template_preprocessing_and_keras_model(tfx_root, taxi, tmp_path):
    """tfx/experimental/templates/taxi/models: preprocessing.py, and keras_model/model.py, which
    imports
    `tfx.experimental.templates.taxi.models.features` (a folder above it) and
    `...keras_model.constants`."""
    examples, schema = taxi
    models = tfx_root / "tfx" / "experimental" / "templates" / "taxi" / "models"
    graph, transformed = _transform(tmp_path, examples, schema, models / "preprocessing.py")
    _serve(
        _train(tmp_path, models / "keras_model" / "model.py", transformed, schema, graph), examples
    )


def test_imdb_native_keras_module_transforms_and_trains_a_model_that_serves(tfx_root, tmp_path):
    """tfx/examples/imdb/imdb_utils_native_keras.py on the wheel's IMDB sample (100 reviews)."""
    csv = shutil.copy(
        tfx_root / "tfx" / "examples" / "imdb" / "data" / "imdb_small_with_labels.txt",
        tmp_path / "imdb.csv",
    )
    examples, schema = _import_csv(tmp_path, Path(csv))
    module = tfx_root / "tfx" / "examples" / "imdb" / "imdb_utils_native_keras.py"
    graph, transformed = _transform(tmp_path, examples, schema, module)
    _serve(_train(tmp_path, module, transformed, schema, graph), examples)


def test_mnist_native_keras_module_trains_from_tfrecords_a_model_that_serves(tfx_root, tmp_path):
    """tfx/examples/mnist/mnist_utils_native_keras.py (imports mnist_utils_native_keras_base by its
    tfx path),
    from TFRecords of tf.Example as TFX's ImportExampleGen reads them, image_floats inferred as
    shape [784]."""
    import numpy as np
    from datagen import write_split

    rng = np.random.default_rng(0)
    rows = [
        {"image_floats": [float(v) for v in rng.integers(0, 256, 784)], "image_class": [i % 10]}
        for i in range(60)
    ]
    write_split(str(tmp_path / "raw"), "all", rows)
    _gt(
        "import-examples",
        "--format",
        "tfrecord",
        "--input",
        tmp_path / "raw" / "Split-all" / "*",
        "--output",
        tmp_path / "examples",
        "--schema-output",
        tmp_path / "schema",
    )
    schema = tmp_path / "schema" / "schema.pbtxt"
    assert "size: 784" in schema.read_text()
    module = tfx_root / "tfx" / "examples" / "mnist" / "mnist_utils_native_keras.py"
    graph, transformed = _transform(tmp_path, tmp_path / "examples", schema, module)
    outputs = _serve(_train(tmp_path, module, transformed, schema, graph), tmp_path / "examples")
    assert {v.shape[1] for v in outputs.values()} == {10}
