"""import-examples: CSV and Parquet to TFX Examples on Beam's DirectRunner (run in this process
through the CLI).

Checks the layout, the split rule (TFX ExampleGen's: SHA-256 of the serialized record modulo the
buckets), that records equal TensorFlow's deterministic serialization, empty cells left out, types
from the schema or inferred, the Beam arguments reaching the pipeline options, and bad input (exit
2, one-line cause, nothing written).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import struct
from pathlib import Path

import pytest
from conftest import PENGUIN
from generic_trainer import cli
from generic_trainer.beam import beam_run
from generic_trainer.intake.data_request import build_import_examples_request


def _records(split_dir: Path) -> list[bytes]:
    """Records of the gzipped TFRecord files in a dir, read from the framing."""
    out = []
    for path in sorted(split_dir.glob("*.gz")):
        data = gzip.decompress(path.read_bytes())
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            out.append(data[offset + 12 : offset + 12 + length])
            offset += 12 + length + 4
    return out


def _example(record: bytes) -> dict:
    from tensorflow.core.example import example_pb2

    example = example_pb2.Example.FromString(record)
    assert (
        example.SerializeToString(deterministic=True) == record
    )  # canonical bytes, as TFX hashes them
    out = {}
    for key, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        out[key] = list(getattr(feature, kind).value)
    return out


def _run(args: list[str]) -> int:
    return cli.main(["import-examples", *args])


def test_penguin_csv_with_schema_is_split_like_example_gen(tmp_path, capsys):
    out = tmp_path / "examples"
    assert (
        _run(
            [
                "--input",
                str(PENGUIN / "penguins.csv"),
                "--schema",
                str(PENGUIN / "schema.pbtxt"),
                "--output",
                str(out),
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert sorted(p.name for p in out.iterdir()) == [
        "Split-eval",
        "Split-train",
        "examples_properties.json",
        "schema.pbtxt",
    ]
    assert [p.name for p in (out / "Split-train").iterdir()] == ["data_tfrecord-00000-of-00001.gz"]
    assert (out / "schema.pbtxt").read_text() != "" and "bill_length_mm" in (
        out / "schema.pbtxt"
    ).read_text()
    train, evals = _records(out / "Split-train"), _records(out / "Split-eval")
    assert (
        summary["num_examples"] == {"train": len(train), "eval": len(evals)}
        and len(train) + len(evals) == 333
    )
    assert summary["feature_count"] == 8 and summary["schema"] == "given"
    for records, expected in (
        (train, 0),
        (evals, 1),
    ):  # buckets train:2, eval:1 -> cumulative [2, 3]
        for record in records:
            bucket = int(hashlib.sha256(record).hexdigest(), 16) % 3
            assert (0 if bucket < 2 else 1) == expected
    rows = list(csv.DictReader((PENGUIN / "penguins.csv").open()))
    examples = [_example(r) for r in train + evals]
    first = next(
        e
        for e in examples
        if e["body_mass_g"] == [float(rows[0]["body_mass_g"])]
        and e["bill_length_mm"][0] == pytest.approx(float(rows[0]["bill_length_mm"]))
    )
    assert first["species"] == [int(rows[0]["species"])] and first["island"] == [
        rows[0]["island"].encode()
    ]
    assert first["year"] == [int(rows[0]["year"])]  # INT from the schema
    assert isinstance(first["flipper_length_mm"][0], float)  # "181" is a FLOAT: the schema says so

    again = tmp_path / "again"  # stable: the same input gives the same files
    assert (
        _run(
            [
                "--input",
                str(PENGUIN / "penguins.csv"),
                "--schema",
                str(PENGUIN / "schema.pbtxt"),
                "--output",
                str(again),
            ]
        )
        == 0
    )
    assert _records(again / "Split-eval") == evals


def test_types_inferred_and_empty_cells_left_out(tmp_path, capsys):
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.csv").write_text("id,score,name,note\n1,0.5,ann,x\n2,,bob,\n3,7,,NA\n")
    (src / "b.csv").write_text(
        'name,id,score,note\n"c, d",-4,1e3,\n'
    )  # other column order, quoted comma
    out = tmp_path / "out"
    assert _run(["--input", str(src / "*.csv"), "--splits", "only:1", "--output", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["num_examples"] == {"only": 4} and summary["schema"] == "inferred"
    from generic_trainer.records.schemas import load_schema

    schema = {f.name: f for f in load_schema(str(out / "schema.pbtxt")).feature}
    from tensorflow_metadata.proto.v0 import schema_pb2

    assert {n: schema_pb2.FeatureType.Name(f.type) for n, f in schema.items()} == {
        "id": "INT",
        "score": "FLOAT",
        "name": "BYTES",
        "note": "BYTES",
    }
    assert schema["id"].presence.min_fraction == 1.0 and [
        d.size for d in schema["id"].shape.dim
    ] == [1]
    assert schema["score"].presence.min_fraction == 0.75 and not schema["score"].shape.dim
    examples = {e["id"][0]: e for e in map(_example, _records(out / "Split-only"))}
    assert examples[2] == {"id": [2], "name": [b"bob"]}  # empty score and note: no feature at all
    assert examples[3] == {
        "id": [3],
        "score": [7.0],
        "note": [b"NA"],
    }  # NA is a value, not a missing cell
    assert examples[-4] == {"id": [-4], "score": [1000.0], "name": [b"c, d"]}


def test_parquet_files_import_into_the_given_input_splits(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table({"x": [1, 2, 3], "y": ["a", None, "c"], "z": [0.5, 1.5, None]}),
        tmp_path / "t.parquet",
    )
    pq.write_table(pa.table({"x": [9], "y": ["e"], "z": [2.5]}), tmp_path / "e.parquet")
    out = tmp_path / "out"
    assert (
        _run(
            [
                "--format",
                "parquet",
                "--input-splits",
                f"train={tmp_path}/t.parquet,eval={tmp_path}/e.parquet",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["num_examples"] == {"train": 3, "eval": 1}
    train = sorted((_example(r) for r in _records(out / "Split-train")), key=lambda e: e["x"])
    assert train == [
        {"x": [1], "y": [b"a"], "z": [0.5]},
        {"x": [2], "z": [1.5]},
        {"x": [3], "y": [b"c"]},
    ]
    assert [_example(r) for r in _records(out / "Split-eval")] == [
        {"x": [9], "y": [b"e"], "z": [2.5]}
    ]
    from generic_trainer.records.schemas import load_schema

    schema = {
        f.name: f for f in load_schema(str(out / "schema.pbtxt")).feature
    }  # one value per cell: shape [1]
    assert [d.size for d in schema["x"].shape.dim] == [1] and not schema["y"].HasField("shape")
    assert (
        schema["y"].value_count.min,
        schema["y"].value_count.max,
        schema["y"].presence.min_fraction,
    ) == (1, 1, 0.75)


def test_beam_args_reach_the_pipeline_options(tmp_path, capsys):
    from apache_beam.options.pipeline_options import (
        DirectOptions,
        GoogleCloudOptions,
        StandardOptions,
    )

    values = {
        "input": str(PENGUIN / "penguins.csv"),
        "output": str(tmp_path / "o"),
        "beam_pipeline_args": [
            "--runner=DataflowRunner --project=my-proj",
            "--region=europe-west4",
            "--temp_location=gs://bucket/tmp",
        ],
    }
    request = build_import_examples_request(values, environ={})
    options = beam_run.pipeline_options(request.beam_args)
    assert options.view_as(StandardOptions).runner == "DataflowRunner"
    gcp = options.view_as(GoogleCloudOptions)
    assert (gcp.project, gcp.region, gcp.temp_location) == (
        "my-proj",
        "europe-west4",
        "gs://bucket/tmp",
    )
    assert "direct_num_workers" not in " ".join(
        beam_run.pipeline_args(request.beam_args)
    )  # not for Dataflow
    # A gs:// input stays a URI for a remote runner (its workers read it), and is the /gcs path
    # locally.
    remote = build_import_examples_request({**values, "input": "gs://b/data/*.csv"}, environ={})
    assert remote.input_pattern == "gs://b/data/*.csv"
    local = build_import_examples_request(
        {**values, "input": "gs://b/data/*.csv", "beam_pipeline_args": ""}, environ={}, kfp=None
    )
    assert local.input_pattern == "/gcs/b/data/*.csv"
    # DirectRunner defaults: in this process for small input, a worker per core for large; given
    # values win.
    small = beam_run.pipeline_options([], input_bytes=1000).view_as(DirectOptions)
    assert (small.direct_running_mode, small.direct_num_workers) == ("in_memory", 1)
    large = beam_run.pipeline_options([], input_bytes=1 << 30).view_as(DirectOptions)
    assert large.direct_num_workers == beam_run.cpu_count()
    given = beam_run.pipeline_options(
        ["--direct_running_mode=multi_threading", "--direct_num_workers=3"], input_bytes=1 << 30
    ).view_as(DirectOptions)
    assert (given.direct_running_mode, given.direct_num_workers) == ("multi_threading", 3)
    # Through the CLI, into the pipeline that runs.
    out = tmp_path / "run"
    assert (
        _run(
            [
                "--input",
                str(PENGUIN / "penguins.csv"),
                "--output",
                str(out),
                "--beam-pipeline-args=--direct_running_mode=multi_threading --direct_num_workers=2",
            ]
        )
        == 0
    )
    assert (
        "runner=DirectRunner direct_num_workers=2 direct_running_mode=multi_threading"
        in capsys.readouterr().err
    )
    assert len(_records(out / "Split-train")) + len(_records(out / "Split-eval")) == 333


def _error(capsys) -> str:
    """The one error line the CLI logged (`<verb> failed: <message>`)."""
    lines = [line for line in capsys.readouterr().err.splitlines() if " failed: " in line]
    assert len(lines) == 1, lines
    return lines[0].split(" failed: ", 1)[1]


def _no_leftovers(tmp_path: Path, name: str) -> None:
    assert not (tmp_path / name).exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(f".{name}.staging")]


def test_columns_not_matching_the_schema_are_refused_naming_the_file(tmp_path, capsys):
    (tmp_path / "p.csv").write_text("species,island,extra\n1,Dream,3\n")
    assert (
        _run(
            [
                "--input",
                str(tmp_path / "p.csv"),
                "--schema",
                str(PENGUIN / "schema.pbtxt"),
                "--output",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )
    message = _error(capsys)
    assert "p.csv: the columns do not match the schema" in message
    assert (
        "missing bill_depth_mm, bill_length_mm" in message and "not in the schema: extra" in message
    )
    _no_leftovers(tmp_path, "out")


def test_cell_not_of_its_type_names_file_line_and_column(tmp_path, capsys):
    lines = ["species,island,sex,bill_length_mm,bill_depth_mm,flipper_length_mm,body_mass_g,year"]
    lines += ["0,Dream,male,39.1,18.7,181,3750,2007"] * 5000 + [
        "0,Dream,male,39.1,18.7,181,heavy,2007"
    ]
    (tmp_path / "p.csv").write_text("\n".join(lines) + "\n")
    assert (
        _run(
            [
                "--input",
                str(tmp_path / "p.csv"),
                "--schema",
                str(PENGUIN / "schema.pbtxt"),
                "--output",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )
    message = _error(capsys)
    assert f"{tmp_path / 'p.csv'} line 5002 column 'body_mass_g': 'heavy' is not a FLOAT" in message
    assert "\n" not in message
    _no_leftovers(tmp_path, "out")
    # Inferred types cannot be broken, but a row with too few cells can.
    (tmp_path / "q.csv").write_text("a,b\n1,2\n3\n")
    assert _run(["--input", str(tmp_path / "q.csv"), "--output", str(tmp_path / "out")]) == 2
    assert "q.csv line 3: 1 cells, but the header has 2 columns" in _error(capsys)
    _no_leftovers(tmp_path, "out")


def test_a_used_output_or_a_missing_input_is_refused_and_the_output_kept(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("keep me")
    assert _run(["--input", str(PENGUIN / "penguins.csv"), "--output", str(out)]) == 2
    assert "already exists and is not empty" in _error(capsys)
    assert [p.name for p in out.iterdir()] == ["old.txt"]
    assert _run(["--input", str(tmp_path / "nothing*.csv"), "--output", str(tmp_path / "new")]) == 2
    assert "--input: no files match" in _error(capsys)
    assert (
        _run(["--input", "x.csv", "--input-splits", "a=y.csv", "--output", str(tmp_path / "new")])
        == 2
    )
    assert "x.csv is not a folder; with --input-splits" in _error(capsys)
    assert _run(["--input", "x.csv", "--splits", "train:0", "--output", str(tmp_path / "new")]) == 2
    assert "--splits: expected name:buckets" in _error(capsys)
    _no_leftovers(tmp_path, "new")


@pytest.mark.parametrize(
    "args, message",
    [
        (["import-examples", "--help"], None),
        (["transform", "--help"], None),
        (
            ["import-examples", "--input", "x.csv", "--splits", "train:x", "--output", "o"],
            "--splits: expected",
        ),
        (
            [
                "transform",
                "--examples",
                "missing",
                "--schema",
                "s",
                "--module-file",
                "m.py",
                "--transform-graph",
                "g",
            ],
            "--schema: s does not exist",
        ),
    ],
)
def test_help_and_argument_errors_load_no_heavy_library(tmp_path, args, message):
    import subprocess
    import sys

    code = (
        "import json, sys\nfrom generic_trainer.cli import main\ntry:\n    code = "
        "main(sys.argv[1:])\n"
        "except SystemExit as e:\n    code = e.code\nheavy = ('tensorflow', 'apache_beam', "
        "'pyarrow', "
        "'tensorflow_transform', 'kfp')\nprint(json.dumps([code, [m for m in heavy if m in "
        "sys.modules]]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    exit_code, heavy = json.loads(proc.stdout.strip().splitlines()[-1])
    assert heavy == []
    assert exit_code == (0 if message is None else 2)
    if message:
        assert message in proc.stderr


# --------------------------------------------------------------------------------------------------
# TFRecords of tf.Example (TFX's ImportExampleGen)
# --------------------------------------------------------------------------------------------------


def _mnist_like(index: int, tags: int | None = None):
    """A tf.Example as TFX's mnist pipeline reads: 784 image floats and a class; `tags` varies per
    example."""
    import tensorflow as tf

    feature = {
        "image_floats": tf.train.Feature(
            float_list=tf.train.FloatList(value=[(index * 7 + i) % 256 / 255.0 for i in range(784)])
        ),
        "image_class": tf.train.Feature(int64_list=tf.train.Int64List(value=[index % 10])),
    }
    if tags is not None:
        feature["tags"] = tf.train.Feature(
            bytes_list=tf.train.BytesList(value=[b"t%d" % i for i in range(tags)])
        )
    return tf.train.Example(features=tf.train.Features(feature=feature))


def _write_tfrecords(path: Path, payloads: list[bytes], gzipped: bool) -> None:
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path), options="GZIP" if gzipped else None) as writer:
        for payload in payloads:
            writer.write(payload)


def test_tfrecord_import_splits_like_import_example_gen_and_infers_shapes(tmp_path, capsys):
    import tensorflow as tf

    src = tmp_path / "in"
    src.mkdir()
    examples = [_mnist_like(i, tags=i % 3 + 1) for i in range(60)]
    # Compression found by content: the gzipped file has no .gz name, the plain one has.
    _write_tfrecords(
        src / "part-a.tfrecord", [e.SerializeToString() for e in examples[:40]], gzipped=True
    )
    _write_tfrecords(
        src / "part-b.gz", [e.SerializeToString() for e in examples[40:]], gzipped=False
    )
    out = tmp_path / "examples"
    assert _run(["--format", "tfrecord", "--input", str(src / "*"), "--output", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    train, evals = _records(out / "Split-train"), _records(out / "Split-eval")
    assert (
        summary["num_examples"] == {"train": len(train), "eval": len(evals)}
        and len(train) + len(evals) == 60
    )
    assert summary["feature_count"] == 3 and summary["schema"] == "inferred" and train and evals
    # ImportExampleGen: parse each record as a tf.Example, hash its deterministic serialization
    # (train:2, eval:1).
    canonical = {e.SerializeToString(deterministic=True) for e in examples}
    assert set(train) | set(evals) == canonical
    for records, expected in ((train, 0), (evals, 1)):
        assert all(
            (int(hashlib.sha256(r).hexdigest(), 16) % 3 >= 2) == bool(expected) for r in records
        )
    # SchemaGen(infer_feature_shape=True): the same number of values everywhere -> that shape;
    # varying -> none.
    from generic_trainer.records.schemas import feature_spec_from_schema, load_schema

    schema = {f.name: f for f in load_schema(str(out / "schema.pbtxt")).feature}
    assert [d.size for d in schema["image_floats"].shape.dim] == [784]
    assert [d.size for d in schema["image_class"].shape.dim] == [1]
    assert not schema["tags"].HasField("shape") and schema["tags"].value_count.min == 1
    assert (
        not schema["tags"].value_count.HasField("max")
        and schema["tags"].presence.min_fraction == 1.0
    )
    # TensorFlow reads the written split with the inferred schema's spec, image as a dense [784]
    # tensor.
    spec = feature_spec_from_schema(load_schema(str(out / "schema.pbtxt")))
    dataset = tf.data.TFRecordDataset(
        sorted(str(p) for p in (out / "Split-eval").glob("*.gz")), "GZIP"
    )
    batch = next(iter(dataset.batch(100).map(lambda x: tf.io.parse_example(x, spec))))
    assert batch["image_floats"].shape == (len(evals), 784) and isinstance(
        batch["tags"], tf.SparseTensor
    )

    split_out = tmp_path / "by-pattern"  # --input-splits: one pattern per split, no hashing
    assert (
        _run(
            [
                "--format",
                "tfrecord",
                "--input-splits",
                f"train={src}/part-a.tfrecord,eval={src}/part-b.gz",
                "--output",
                str(split_out),
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["num_examples"] == {"train": 40, "eval": 20}
    assert _records(split_out / "Split-eval") == [
        e.SerializeToString(deterministic=True) for e in examples[40:]
    ]


def test_tfrecord_records_that_are_not_tf_examples_name_file_and_record(tmp_path, capsys):
    import tensorflow as tf

    good = [_mnist_like(i).SerializeToString() for i in range(4)]
    sequence = tf.train.SequenceExample()
    sequence.context.feature["image_class"].int64_list.value.append(1)
    sequence.feature_lists.feature_list["frames"].feature.add().float_list.value.append(0.5)
    cases = {
        "sequence": (
            good[:2] + [sequence.SerializeToString()] + good[2:],
            "record 3: not a tf.Example",
        ),
        "random": ([good[0], bytes(range(256)) * 3], "record 2: not a tf.Example"),
    }
    for name, (payloads, expected) in cases.items():
        _write_tfrecords(tmp_path / f"{name}.tfrecord", payloads, gzipped=name == "random")
        assert (
            _run(
                [
                    "--format",
                    "tfrecord",
                    "--input",
                    str(tmp_path / f"{name}.tfrecord"),
                    "--output",
                    str(tmp_path / "out"),
                ]
            )
            == 2
        )
        assert f"{tmp_path / f'{name}.tfrecord'} {expected}" in _error(capsys)
        _no_leftovers(tmp_path, "out")
    # A gzip stream cut short, a CSV given as TFRecords, and a feature whose type differs between
    # files.
    _write_tfrecords(tmp_path / "whole.gz", good, gzipped=True)
    (tmp_path / "cut.gz").write_bytes((tmp_path / "whole.gz").read_bytes()[:-40])
    (tmp_path / "table.csv").write_text("a,b\n1,2\n")
    other = tf.train.Example()
    other.features.feature["image_class"].float_list.value.append(1.0)
    (tmp_path / "types").mkdir()
    _write_tfrecords(tmp_path / "types" / "a", good, gzipped=False)
    _write_tfrecords(tmp_path / "types" / "b", [other.SerializeToString()], gzipped=False)
    for pattern, expected in (
        (tmp_path / "cut.gz", f"{tmp_path / 'cut.gz'} record "),
        (tmp_path / "table.csv", f"{tmp_path / 'table.csv'} record 1: "),
        (tmp_path / "types" / "*", "feature 'image_class' holds int64_list (INT) in "),
    ):
        assert (
            _run(
                ["--format", "tfrecord", "--input", str(pattern), "--output", str(tmp_path / "out")]
            )
            == 2
        )
        message = _error(capsys)
        assert expected in message, message
        _no_leftovers(tmp_path, "out")
    assert f"float_list (FLOAT) in {tmp_path / 'types' / 'b'} record 1" in message
    # With a schema: a record's features must have its types and fixed shapes.
    (tmp_path / "schema.pbtxt").write_text(
        'feature { name: "image_class" type: INT presence { min_fraction: 1 } shape { dim { size: '
        "1 } } }\n"
        'feature { name: "image_floats" type: FLOAT presence { min_fraction: 1 } shape { dim { '
        "size: 784 } } }\n"
    )
    assert (
        _run(
            [
                "--format",
                "tfrecord",
                "--input",
                str(tmp_path / "types" / "b"),
                "--schema",
                str(tmp_path / "schema.pbtxt"),
                "--output",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )
    assert "b record 1: feature 'image_class' is float_list (FLOAT), the schema says INT" in _error(
        capsys
    )
    assert (
        _run(
            [
                "--format",
                "tfrecord",
                "--input",
                str(tmp_path / "types" / "a"),
                "--schema",
                str(tmp_path / "schema.pbtxt"),
                "--output",
                str(tmp_path / "out"),
                "--splits",
                "all:1",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["num_examples"] == {"all": 4}


def test_inferred_shapes_follow_value_counts_across_files():
    """SchemaGen's infer_feature_shape=True on merged facts: one count everywhere -> shape; else
    value_count only."""
    from generic_trainer.beam import inference, tfrecords

    files = []
    for counts in ({"img": 4, "label": 1, "tags": 2, "opt": 1}, {"img": 4, "label": 1, "tags": 3}):
        facts = {"rows": 0, "columns": {}, "seen": {}}
        for row in range(2):
            tfrecords.add_facts(
                facts, {name: (1, n) for name, n in counts.items()}, f"f record {row + 1}"
            )
        files.append(facts)
    merged = inference.merge_inference(files)
    schema = {
        f.name: f
        for f in inference.schema_from_inference(merged, inference.feature_names(merged)).feature
    }
    assert [d.size for d in schema["img"].shape.dim] == [4] and [
        d.size for d in schema["label"].shape.dim
    ] == [1]
    assert not schema["tags"].HasField("shape") and (
        schema["tags"].value_count.min,
        schema["tags"].value_count.max,
    ) == (1, 0)
    assert not schema["opt"].HasField("shape") and schema["opt"].presence.min_fraction == 0.5
    assert (schema["opt"].value_count.min, schema["opt"].value_count.max) == (1, 1)
    assert inference.kind_conflict(merged) is None
    tfrecords.add_facts(files[1], {"img": (0, 4)}, "g record 9")
    assert inference.kind_conflict(inference.merge_inference(files)) == (
        "feature 'img' holds int64_list (INT) in g record 9 but float_list (FLOAT) in f record 1; "
        "a feature has one "
        "type in every example"
    )


def test_csv_byte_order_mark_is_no_part_of_the_header(tmp_path, capsys):
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf" + (PENGUIN / "penguins.csv").read_bytes())
    assert (
        _run(
            [
                "--input",
                str(tmp_path / "bom.csv"),
                "--schema",
                str(PENGUIN / "schema.pbtxt"),
                "--output",
                str(tmp_path / "given"),
            ]
        )
        == 0
    )
    assert sum(json.loads(capsys.readouterr().out)["num_examples"].values()) == 333
    (tmp_path / "small.csv").write_bytes("\ufeffspecies,island\n1,Dream\n2,Biscoe\n".encode())
    assert (
        _run(
            [
                "--input",
                str(tmp_path / "small.csv"),
                "--splits",
                "all:1",
                "--output",
                str(tmp_path / "inferred"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    from generic_trainer.records.schemas import load_schema

    assert [f.name for f in load_schema(str(tmp_path / "inferred")).feature] == [
        "species",
        "island",
    ]
    assert sorted(
        _example(r)["species"] for r in _records(tmp_path / "inferred" / "Split-all")
    ) == [[1], [2]]


def test_csv_without_a_column_name_or_without_rows_is_refused(tmp_path, capsys):
    (tmp_path / "noname.csv").write_text("a,,c\n1,2,3\n")
    assert _run(["--input", str(tmp_path / "noname.csv"), "--output", str(tmp_path / "out")]) == 2
    assert _error(capsys) == (
        f"--input: {tmp_path / 'noname.csv'}: column 2 (counting from 1) has no name; every "
        "column needs one (it becomes the feature's name)"
    )
    _no_leftovers(tmp_path, "out")
    (tmp_path / "header.csv").write_text("species,island\n\n")
    assert _run(["--input", str(tmp_path / "header.csv"), "--output", str(tmp_path / "out")]) == 2
    assert _error(capsys) == (
        f"--input: {tmp_path / 'header.csv'} has a header line but no rows; expected at least "
        "one example"
    )
    _no_leftovers(tmp_path, "out")
    (tmp_path / "rows.csv").write_text("species,island\n1,Dream\n")
    assert (
        _run(
            [
                "--input-splits",
                f"train={tmp_path}/rows.csv,eval={tmp_path}/header.csv",
                "--output",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )
    assert f"--input-splits: {tmp_path / 'header.csv'} has a header line but no rows" in _error(
        capsys
    )
    _no_leftovers(tmp_path, "out")
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    assert (
        _run(
            [
                "--format",
                "tfrecord",
                "--input",
                str(tmp_path / "empty.tfrecord"),
                "--output",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )
    assert "empty.tfrecord holds no records (it is empty)" in _error(capsys)
    _no_leftovers(tmp_path, "out")


@pytest.mark.slow  # starts Beam worker processes (about 20 s of CPU)
def test_tfrecord_import_runs_in_worker_processes(tmp_path, capsys):
    """Large input runs on one worker process per core (forced here on small files): every record
    once, the
    schema facts merged across the workers."""
    src = tmp_path / "in"
    src.mkdir()
    examples = [_mnist_like(i, tags=1 if i % 5 else 2) for i in range(40)]
    for k in range(4):
        _write_tfrecords(
            src / f"part-{k}", [e.SerializeToString() for e in examples[k::4]], gzipped=k % 2 == 0
        )
    out = tmp_path / "out"
    assert (
        _run(
            [
                "--format",
                "tfrecord",
                "--input",
                str(src / "part-*"),
                "--output",
                str(out),
                "--splits",
                "all:1",
                "--beam-pipeline-args=--direct_running_mode=multi_processing "
                "--direct_num_workers=2",
            ]
        )
        == 0
    )
    assert "direct_num_workers=2 direct_running_mode=multi_processing" in capsys.readouterr().err
    assert sorted(_records(out / "Split-all")) == sorted(
        e.SerializeToString(deterministic=True) for e in examples
    )
    from generic_trainer.records.schemas import load_schema

    schema = {f.name: f for f in load_schema(str(out)).feature}
    assert [d.size for d in schema["image_floats"].shape.dim] == [784] and not schema[
        "tags"
    ].HasField("shape")


@pytest.mark.slow
def test_executor_output_is_written_before_the_examples_are_published(
    tmp_path, monkeypatch, capsys
):
    """The one publish order of every verb (intake/contract.py): the executor output first, the main
    output
    last; when writing the executor output fails, nothing is published (exit 4)."""
    from generic_trainer.artifacts import kfp_io
    from generic_trainer.errors import OutputError

    src = tmp_path / "in"
    src.mkdir()
    (src / "a.csv").write_text("id,score\n1,0.5\n2,1.5\n")
    real_write, seen = kfp_io.write_executor_output, []

    def executor_input(out: Path) -> str:
        return json.dumps(
            {
                "inputs": {
                    "parameterValues": {"input_pattern": str(src / "*.csv"), "splits": "only:1"}
                },
                "outputs": {
                    "artifacts": {"examples": {"artifacts": [{"name": "e", "uri": str(out)}]}},
                    "outputFile": str(tmp_path / "executor_output.json"),
                },
            }
        )

    def write(kfp, metadata, **kwargs):
        examples = dict(metadata["examples"])
        fingerprint = examples.pop("input_fingerprint")  # TFX's, over the files' sizes and mtimes
        assert fingerprint.startswith("split:single_split,num_files:1,total_bytes:21,")
        seen.append((Path(kfp.path("examples")).exists(), examples))
        real_write(kfp, metadata, **kwargs)

    monkeypatch.setattr(kfp_io, "write_executor_output", write)
    assert _run(["--executor-input", executor_input(tmp_path / "out")]) == 0
    assert seen == [
        (
            False,
            {
                "split_names": ["only"],
                "num_examples": {"only": 2},
                "feature_count": 2,
                "format": "csv",
                "num_examples_only": 2,
                "payload_format": "FORMAT_TF_EXAMPLE",
                "file_format": "tfrecords_gzip",
                "span": 0,
            },
        )
    ]
    assert (tmp_path / "out" / "Split-only").is_dir() and (
        tmp_path / "executor_output.json"
    ).is_file()

    def refuse(kfp, metadata, **kwargs):
        raise OutputError("could not write the executor output: disk full")

    monkeypatch.setattr(kfp_io, "write_executor_output", refuse)
    assert _run(["--executor-input", executor_input(tmp_path / "out2")]) == 4
    assert not (tmp_path / "out2").exists() and not [
        p for p in tmp_path.iterdir() if "staging" in p.name
    ]
