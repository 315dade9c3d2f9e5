"""Transformed features from raw examples: the data accessor applies `--transform-graph` in the
input pipeline when a module asks for features only the transform produces (TFX modules ask for the
transformed schema and a `*_xf` label, because TFX feeds them Transform's materialised examples)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PENGUIN, REPO, cli_env, free_port, run_cli, shared_across_workers
from generic_trainer.data import transform_plan
from generic_trainer.errors import UserInputError
from tensorflow_metadata.proto.v0 import schema_pb2

XF_MODULE = REPO / "tests" / "modules" / "tfx_transform" / "penguin_xf_module.py"
RAW_SCHEMA_MODULE = REPO / "tests" / "modules" / "tfx_transform" / "raw_schema_module.py"
RAW = ["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]


# --------------------------------------------------------------------------------------------
# The decision, on schema protos and a first record's feature kinds (no TensorFlow)
# --------------------------------------------------------------------------------------------


def _schema(**features: int) -> schema_pb2.Schema:
    schema = schema_pb2.Schema()
    for name, kind in features.items():
        feature = schema.feature.add(name=name, type=kind)
        feature.shape.dim.add(size=1)
        feature.presence.min_fraction = 1
    return schema


F, INT, B = schema_pb2.FLOAT, schema_pb2.INT, schema_pb2.BYTES
RAW_SCHEMA = _schema(body_mass_g=F, island=B, species=INT)
XF_SCHEMA = _schema(body_mass_g_xf=F, island_xf=INT, species_xf=INT)
RAW_RECORD = {"body_mass_g": "float_list", "island": "bytes_list", "species": "int64_list"}
XF_RECORD = {"body_mass_g_xf": "float_list", "island_xf": "int64_list", "species_xf": "int64_list"}


def test_transformed_schema_of_raw_examples_is_transformed_on_the_fly():
    plan = transform_plan(
        XF_SCHEMA, "species_xf", RAW_SCHEMA, XF_SCHEMA, RAW_RECORD, ["data_tfrecord-0.gz"]
    )
    assert plan.apply and "examples are raw" in plan.reason and "species_xf" in plan.reason
    assert plan.from_transform == ("body_mass_g_xf", "island_xf", "species_xf")


def test_transformed_examples_are_parsed_as_they_are():
    apply, why, _ = transform_plan(
        XF_SCHEMA, "species_xf", RAW_SCHEMA, XF_SCHEMA, XF_RECORD, ["data_tfrecord-0.gz"]
    )
    assert not apply and "hold the transformed features" in why


def test_raw_schema_or_raw_features_only_are_parsed_as_they_are():
    assert transform_plan(RAW_SCHEMA, "species", RAW_SCHEMA, XF_SCHEMA, RAW_RECORD, ["f"]) == (
        False,
        "the module asks for the raw schema",
        (),
    )
    apply, why, _ = transform_plan(
        _schema(body_mass_g=F), "species", RAW_SCHEMA, XF_SCHEMA, RAW_RECORD, ["f"]
    )
    assert not apply and "every feature" in why


def test_a_transformed_label_alone_is_enough_to_transform():
    plan = transform_plan(
        _schema(body_mass_g_xf=F), "species_xf", RAW_SCHEMA, XF_SCHEMA, RAW_RECORD, ["f"]
    )
    assert plan.apply and plan.from_transform == ("body_mass_g_xf", "species_xf")


def test_features_in_the_files_are_read_from_them_and_only_the_missing_ones_transformed():
    """TFX's data accessor reads the schema it is given from the files: a feature the transform
    graph does not know
    ('tags') is read as it is; only the transformed label the files lack comes from the transform
    graph."""
    asked = _schema(body_mass_g=F, island=B, species=INT, tags=B)
    record = {**RAW_RECORD, "tags": "bytes_list"}
    assert transform_plan(asked, "species", RAW_SCHEMA, XF_SCHEMA, record, ["f"]) == (
        False,
        "the examples hold every feature the module asks for",
        (),
    )
    plan = transform_plan(asked, "species_xf", RAW_SCHEMA, XF_SCHEMA, record, ["f"])
    assert plan.apply and plan.from_transform == ("species_xf",)
    # A var-len feature the first record lacks is not refused: tfx_bsl parses it as a SparseTensor.
    optional = schema_pb2.Schema()
    optional.CopyFrom(asked)
    optional.feature.add(name="note", type=B)
    assert transform_plan(optional, "species", RAW_SCHEMA, XF_SCHEMA, record, ["f"]).apply is False


def test_same_names_and_other_types_as_the_bundled_graph():
    raw = _schema(island=B, year=INT, species=INT)
    transformed = _schema(island=INT, year=F, species=INT)
    raw_record = {"island": "bytes_list", "year": "int64_list", "species": "int64_list"}
    assert transform_plan(transformed, "species", raw, transformed, raw_record, ["f"])[0] is True
    xf_record = {"island": "int64_list", "year": "float_list", "species": "int64_list"}
    assert transform_plan(transformed, "species", raw, transformed, xf_record, ["f"])[0] is False
    # Not the whole transformed schema: only the feature whose transformed type the files lack.
    plan = transform_plan(
        _schema(island=INT, species=INT), "species", raw, transformed, raw_record, ["f"]
    )
    assert plan.apply and plan.from_transform == ("island",)


def test_same_names_and_types_use_extra_raw_features_then_transforms_file_names():
    raw = _schema(body_mass_g=F, note=B, species=INT)
    transformed = _schema(
        body_mass_g=F, species=INT
    )  # z-scores: names and types kept; `note` dropped
    with_note = {"body_mass_g": "float_list", "note": "bytes_list", "species": "int64_list"}
    assert transform_plan(transformed, "species", raw, transformed, with_note, ["a.gz"])[0] is True
    same = {"body_mass_g": "float_list", "species": "int64_list"}
    materialised = ["d/transformed_examples-0-of-1.gz"]
    assert transform_plan(transformed, "species", raw, transformed, same, materialised)[0] is False
    apply, why, _ = transform_plan(
        transformed, "species", raw, transformed, same, ["d/data_tfrecord-0-of-1.gz"]
    )
    assert apply and "taken as raw" in why


def test_a_feature_in_neither_the_files_nor_the_graph_names_it_and_the_input():
    with pytest.raises(UserInputError) as e:
        transform_plan(
            XF_SCHEMA,
            "species_xff",
            RAW_SCHEMA,
            XF_SCHEMA,
            RAW_RECORD,
            ["f"],
            where=(
                "/data/Split-train/* (--examples)",
                "raw schema /g/metadata/schema.pbtxt",
                "/g/transformed_metadata",
            ),
        )
    message = str(e.value)
    assert e.value.input_name == "/data/Split-train/* (--examples)"
    assert "label_key 'species_xff'" in message and "/g/transformed_metadata" in message
    assert "species_xf" in message and "island" in message
    with pytest.raises(UserInputError, match="feature\\(s\\) 'colour_xf'"):
        transform_plan(_schema(colour_xf=F), None, RAW_SCHEMA, XF_SCHEMA, RAW_RECORD, ["f"])


# --------------------------------------------------------------------------------------------
# A real transform graph with *_xf outputs, made by the module's own preprocessing_fn
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def xf_graph(tmp_path_factory) -> Path:
    """Made once per run (shared by the xdist workers); the tests only read it."""

    def transform(root: Path) -> None:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "generic_trainer",
                "transform",
                "--examples",
                str(PENGUIN / "data"),
                "--schema",
                str(PENGUIN / "schema.pbtxt"),
                "--module-file",
                str(XF_MODULE),
                "--transform-graph",
                str(root / "transform_graph"),
                "--transformed-examples",
                str(root / "transformed_examples"),
            ],
            env=cli_env(),
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]

    return shared_across_workers(tmp_path_factory, "xf_graph", transform) / "transform_graph"


EQUIVALENCE = r"""
import os, sys, json
os.environ["TF_USE_LEGACY_KERAS"] = "0"
import logging
logging.basicConfig(level=logging.INFO, stream=sys.stdout)
import numpy as np
import tensorflow as tf
from generic_trainer import data
GRAPH, RAW, OUT = sys.argv[1:4]
accessor = data.DataAccessor(transform_graph=GRAPH)
schema = data.load_schema(os.path.join(GRAPH, "transformed_metadata", "schema.pbtxt"))
options = data.DatasetOptions(batch_size=1000, shuffle=False, num_epochs=1, label_key="species_xf")
features, label = next(iter(accessor.tf_dataset_factory([RAW], options, schema)))
# Materialise the transformed examples, named as TFX's Transform names them.
os.makedirs(os.path.join(OUT, "Split-train"))
with tf.io.TFRecordWriter(
        os.path.join(OUT, "Split-train", "transformed_examples-00000-of-00001.gz"), "GZIP") as w:
    for i in range(int(label.shape[0])):
        feature = {k: tf.train.Feature(float_list=tf.train.FloatList(value=v[i].numpy().ravel()))
                   for k, v in features.items()}
        feature["species_xf"] = tf.train.Feature(
            int64_list=tf.train.Int64List(value=label[i].numpy().ravel()))
        w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
again, label2 = next(iter(
    accessor.tf_dataset_factory([os.path.join(OUT, "Split-train", "*")], options, schema)))
print("RESULT " + json.dumps({
    "keys": sorted(features), "n": int(label.shape[0]),
    "same": bool(all(np.allclose(features[k].numpy(), again[k].numpy()) for k in features)
                 and (label.numpy() == label2.numpy()).all()),
    "mass_mean": float(np.mean(features["body_mass_g_xf"].numpy())),
    "shapes": sorted({str(v.shape) for v in features.values()}),
}))
"""


@pytest.mark.slow
def test_on_the_fly_equals_materialised_transformed_examples(xf_graph, tmp_path):
    raw = str(PENGUIN / "data" / "Split-train" / "*")
    proc = subprocess.run(
        [sys.executable, "-c", EQUIVALENCE, str(xf_graph), raw, str(tmp_path / "xf")],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert result["keys"] == sorted(f"{k}_xf" for k in RAW)
    assert result["same"] and result["n"] > 100 and result["shapes"] == [f"({result['n']}, 1)"]
    assert abs(result["mass_mean"]) < 0.2  # z-scores of the train split the graph was analysed on
    assert (
        "applying the transform graph" in proc.stdout
        and "parsing the examples as they are" in proc.stdout
    )


def _serving_accuracy(model_dir: Path) -> float:
    import tensorflow as tf

    files = sorted(str(p) for p in (PENGUIN / "data" / "Split-eval").glob("*"))
    records = list(tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator())
    labels = [
        tf.train.Example.FromString(r).features.feature["species"].int64_list.value[0]
        for r in records
    ]
    serve = tf.saved_model.load(str(model_dir / "Format-Serving")).signatures["serving_default"]
    logits = serve(examples=tf.constant(records))["outputs"].numpy()
    return float((logits.argmax(axis=1) == labels).mean())


def _train_args(tmp_path: Path, graph: Path, *extra: str) -> list[str]:
    return [
        "train",
        "--examples",
        str(PENGUIN / "data"),
        "--schema",
        str(PENGUIN / "schema.pbtxt"),
        "--transform-graph",
        str(graph),
        "--module-file",
        str(XF_MODULE),
        "--model-dir",
        str(tmp_path / "model"),
        "--train-steps",
        "150",
        "--eval-steps",
        "5",
        *extra,
    ]


@pytest.mark.slow
def test_train_applies_the_transform_graph_to_raw_examples_and_serves_accurately(
    xf_graph, tmp_path
):
    proc = run_cli(_train_args(tmp_path, xf_graph), timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "applying the transform graph" in proc.stderr and "species_xf" in proc.stderr
    assert _serving_accuracy(tmp_path / "model") > 0.8


@pytest.mark.slow
@pytest.mark.parametrize(
    "wiring", ["raw examples", "TFX's: transformed examples and the raw schema"]
)
def test_tune_with_the_transform_graph_reads_raw_or_transformed_examples(
    xf_graph, tmp_path, wiring
):
    if wiring == "raw examples":
        examples, more, expected = PENGUIN / "data", [], "applying the transform graph"
    else:
        examples, more = (
            xf_graph.parent / "transformed_examples",
            ["--schema", str(PENGUIN / "schema.pbtxt")],
        )
        expected = "parsing the examples as they are"
    proc = run_cli(
        [
            "tune",
            "--examples",
            str(examples),
            "--transform-graph",
            str(xf_graph),
            *more,
            "--module-file",
            str(XF_MODULE),
            "--best-hyperparameters-dir",
            str(tmp_path / "best"),
            "--tuner-results-file",
            str(tmp_path / "results.json"),
            "--train-steps",
            "10",
            "--eval-steps",
            "3",
            "--max-trials",
            "2",
        ],
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert expected in proc.stderr
    assert len(json.loads((tmp_path / "results.json").read_text())) == 2
    assert os.listdir(tmp_path / "best") == ["best_hyperparameters.txt"]


@pytest.mark.slow
def test_a_label_in_neither_schema_is_a_user_input_error_and_leaves_no_model(xf_graph, tmp_path):
    proc = run_cli(
        _train_args(tmp_path, xf_graph, "--custom-config", '{"label_key": "species_xff"}'),
        timeout=600,
    )
    assert proc.returncode == 2, proc.stderr[-4000:]
    assert "label_key 'species_xff'" in proc.stderr and "(--examples)" in proc.stderr
    assert "transformed_metadata" in proc.stderr
    assert not (tmp_path / "model" / "Format-Serving").exists()


@pytest.mark.slow
def test_two_workers_both_transform_on_the_fly(xf_graph, tmp_path):
    cluster = {"worker": [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]}
    args = [
        sys.executable,
        "-m",
        "generic_trainer",
        *_train_args(tmp_path, xf_graph, "--cluster-timeout", "300"),
    ]
    args[args.index("150")] = "40"
    procs, logs = [], []
    for i in range(2):
        logs.append(tmp_path / f"worker{i}.log")
        env = cli_env(
            {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})}
        )
        with open(logs[-1], "w") as log:
            procs.append(subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT))
    try:
        for proc in procs:
            proc.wait(timeout=900)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    outputs = [path.read_text() for path in logs]
    for proc, output in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, output[-4000:]
        assert "applying the transform graph" in output
    assert "replicas_in_sync=2" in outputs[0]
    assert _serving_accuracy(tmp_path / "model") > 0.5


# --------------------------------------------------------------------------------------------
# TFX's wiring: Transform's transformed examples, the raw schema and the transform graph
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_tfx_wiring_transformed_examples_with_the_raw_schema_train(xf_graph, tmp_path):
    """`train --examples <transformed_examples> --schema <raw schema> --transform-graph G`, as TFX
    wires its Trainer:
    the record check finds the splits follow the graph's transformed_metadata, the module reads
    them as they are."""
    args = _train_args(tmp_path, xf_graph)
    args[args.index("--examples") + 1] = str(xf_graph.parent / "transformed_examples")
    proc = run_cli(args, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "follows the schema" in proc.stderr and "transformed_metadata" in proc.stderr
    assert (
        "parsing the examples as they are" in proc.stderr
        and "applying the transform graph" not in proc.stderr
    )
    assert _serving_accuracy(tmp_path / "model") > 0.8


def _write_split(split: Path, examples: list[dict[str, list]]) -> None:
    import tensorflow as tf

    split.mkdir(parents=True)
    kinds = {bytes: "bytes_list", int: "int64_list", float: "float_list"}
    with tf.io.TFRecordWriter(str(split / "data_tfrecord-00000-of-00001.gz"), "GZIP") as writer:
        for example in examples:
            feature = {}
            for key, values in example.items():
                kind = kinds[type(values[0])]
                lists = {
                    "bytes_list": tf.train.BytesList,
                    "int64_list": tf.train.Int64List,
                    "float_list": tf.train.FloatList,
                }
                feature[key] = tf.train.Feature(**{kind: lists[kind](value=values)})
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
            )


@pytest.mark.slow
def test_records_fitting_neither_schema_name_both_and_exit_2(xf_graph, tmp_path):
    _write_split(tmp_path / "bad" / "Split-train", [{"colour": [b"red"]}] * 4)
    _write_split(tmp_path / "bad" / "Split-eval", [{"colour": [b"blue"]}] * 4)
    args = _train_args(tmp_path, xf_graph)
    args[args.index("--examples") + 1] = str(tmp_path / "bad")
    proc = run_cli(args, timeout=600)
    assert proc.returncode == 2, proc.stderr[-4000:]
    message = proc.stderr
    assert "bad data in split 'train'" in message and str(PENGUIN / "schema.pbtxt") in message
    assert (
        str(xf_graph / "transformed_metadata" / "schema.pbtxt") in message
        and "fit neither" in message
    )
    assert (
        "RAW_SCHEMA_MODULE" not in proc.stdout
        and not (tmp_path / "model" / "Format-Serving").exists()
    )


@pytest.mark.slow
def test_a_module_passing_its_raw_schema_reads_a_feature_the_graph_does_not_know(
    xf_graph, tmp_path
):
    """The regression of issue 23: the raw schema holds 'tags' (unknown to the transform graph);
    TFX's accessor reads
    it from the files. The label the module asks for, species_xf, is not in the files: the graph
    gives it."""
    import tensorflow as tf
    from google.protobuf import text_format

    for split in ("train", "eval"):
        files = sorted(str(p) for p in (PENGUIN / "data" / f"Split-{split}").glob("*"))
        rows = []
        for i, record in enumerate(
            tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator()
        ):
            feature = tf.train.Example.FromString(record).features.feature
            row = {k: list(getattr(v, v.WhichOneof("kind")).value) for k, v in feature.items()}
            rows.append(
                {**row, **({"tags": [f"tag-{i % 3}".encode()]} if i % 4 else {})}
            )  # some examples lack tags
        _write_split(tmp_path / "tagged" / f"Split-{split}", rows)
    schema = text_format.Parse((PENGUIN / "schema.pbtxt").read_text(), schema_pb2.Schema())
    schema.feature.add(name="tags", type=schema_pb2.BYTES)  # var-len: absent from some examples
    (tmp_path / "schema.pbtxt").write_text(text_format.MessageToString(schema))
    proc = run_cli(
        [
            "train",
            "--examples",
            str(tmp_path / "tagged"),
            "--schema",
            str(tmp_path / "schema.pbtxt"),
            "--transform-graph",
            str(xf_graph),
            "--module-file",
            str(RAW_SCHEMA_MODULE),
            "--model-dir",
            str(tmp_path / "model"),
            "--train-steps",
            "5",
            "--eval-steps",
            "1",
        ],
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (
        "RAW_SCHEMA_MODULE features=['bill_depth_mm', 'bill_length_mm', 'body_mass_g', "
        "'flipper_length_mm', "
        "'island', 'sex', 'species', 'tags', 'year'] label=species_xf" in proc.stdout
    )
    assert "applying the transform graph" in proc.stderr and "lack (species_xf)" in proc.stderr
    assert (tmp_path / "model" / "Format-Serving" / "saved_model.pb").exists()


@pytest.mark.slow
def test_record_checks_tell_which_splits_follow_the_transformed_schema(xf_graph, tmp_path):
    import tensorflow as tf
    from generic_trainer.records import record_checks

    raw_schema = str(PENGUIN / "schema.pbtxt")
    xf_schema = str(xf_graph / "transformed_metadata" / "schema.pbtxt")
    raw = [str(PENGUIN / "data" / f"Split-{s}" / "*") for s in ("train", "eval")]
    transformed = [
        str(xf_graph.parent / "transformed_examples" / f"Split-{s}" / "*")
        for s in ("train", "eval")
    ]
    assert record_checks.check_first_records(
        raw + transformed, raw_schema, transformed_schema_path=xf_schema
    ) == (transformed)
    assert (
        record_checks.check_first_records(raw, raw_schema, transformed_schema_path=xf_schema) == []
    )
    with pytest.raises(
        UserInputError
    ) as e:  # without the transform graph, only the raw schema counts
        record_checks.check_first_records(transformed, raw_schema)
    assert "is required by the schema but missing" in str(e.value) and xf_schema not in str(e.value)
    # An error the input pipeline raised: the records fit the transformed schema, so the module's
    # parsing is at fault.
    error = tf.errors.InvalidArgumentError(
        None, None, "Feature: species (data type: int64) is required but could not be found."
    )
    assert (
        record_checks.decode_error(
            error, transformed, raw_schema, transformed_schema_path=xf_schema
        )
        is None
    )
    assert record_checks.decode_error(error, transformed, raw_schema) is not None
