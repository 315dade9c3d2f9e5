"""TFX ExampleGen's and SchemaGen's contracts in import-examples, and tf.SequenceExample end to end.

- Spans and versions: `{SPAN}`, `{SPAN:W}`, `{VERSION}` and `{YYYY}{MM}{DD}` select the latest span
  and its latest version (TFX's example_gen/utils.py rules, errors included), `--range-config`'s
  static range another span; span, version and TFX's input fingerprint land in the KFP executor
  output and in `<examples>/examples_properties.json`. `--input DIR` is TFX's input_base.
- `--partition-feature`: each record's split is SHA-256 of the feature's deterministic
  `tf.train.Feature` bytes (computed here with TensorFlow's own protos, the oracle) mod the buckets.
- SchemaGen: the wheel's Chicago taxi CSV gets exactly TFX's two string domains (company,
  payment_type) with TFDV's rule; `--infer-feature-shape false` gives no shapes (read sparse).
- tf.SequenceExample: TFX's own testdata/tfrecord_sequence (its first records) through
  import-examples and then transform with TFX's transform_sequence_module.py and TFX's
  schema_gen_sequence schema, both from the tfx wheel; the trainer's record check and data accessor
  read the imported examples per the schema.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import os
import struct
from pathlib import Path

import pytest
from conftest import run_cli
from generic_trainer import cli
from generic_trainer.beam import spans
from generic_trainer.errors import UserInputError
from test_tfx_real_modules import tfx_root  # noqa: F401  (the tfx wheel fixture)

SEQUENCE = "FORMAT_TF_SEQUENCE_EXAMPLE"


def _records(split_dir: Path) -> list[bytes]:
    out = []
    for path in sorted(split_dir.glob("*.gz")):
        data = gzip.decompress(path.read_bytes())
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            out.append(data[offset + 12 : offset + 12 + length])
            offset += 12 + length + 4
    return out


def _write_tfrecords(path: Path, records: list[bytes]) -> None:
    from generic_trainer.beam.tfrecords import masked_crc32c

    with gzip.open(path, "wb") as f:
        for r in records:
            head = struct.pack("<Q", len(r))
            f.write(head + struct.pack("<I", masked_crc32c(head)) + r)
            f.write(struct.pack("<I", masked_crc32c(r)))


def _files(root: Path, names: list[str]) -> None:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x")


def _glob(pattern: str) -> list[str]:
    import glob

    return sorted(glob.glob(pattern))


def _stat(path: str) -> tuple[int, int]:
    return os.path.getsize(path), int(os.stat(path).st_mtime)


# --------------------------------------------------------------------------------------------------
# spans.py: TFX's rules
# --------------------------------------------------------------------------------------------------


def test_latest_span_and_version_as_tfx_selects_them(tmp_path):
    _files(tmp_path, ["s-01/v1/a", "s-02/v3/a", "s-02/v10/a", "s-02/v9/a"])
    got = spans.resolve([("train", f"{tmp_path}/s-{{SPAN:2}}/v{{VERSION}}/*")], None, _glob, _stat)
    assert (got.span, got.version, got.patterns) == (2, 10, (("train", f"{tmp_path}/s-02/v10/*"),))
    static = {"static_range": {"start_span_number": 1, "end_span_number": 1}}
    got = spans.resolve(
        [("train", f"{tmp_path}/s-{{SPAN:2}}/v{{VERSION}}/*")], static, _glob, _stat
    )
    assert (got.span, got.version) == (1, 1)
    # Without a width the span is greedy: s-1 and s-01 are both span 1, s-02 is the latest; with
    # width 2, s-1 matches the glob but not the regex: an error, as in TFX.
    _files(tmp_path, ["s-1/v7/a"])
    with pytest.raises(ValueError, match="s-1/v7/a does not match"):
        spans.resolve([("t", f"{tmp_path}/s-{{SPAN:2}}/v{{VERSION}}/*")], None, _glob, _stat)
    got = spans.resolve([("train", f"{tmp_path}/s-{{SPAN}}/v{{VERSION}}/*")], None, _glob, _stat)
    assert (got.span, got.version) == (2, 10)
    # TFX's fingerprint: per split over the files' sizes and whole-second mtimes.
    mtime = int(os.stat(tmp_path / "s-02/v10/a").st_mtime)
    assert got.fingerprint == (
        f"split:train,num_files:1,total_bytes:1,xor_checksum:{mtime},sum_checksum:{mtime}"
    )


def test_date_specs_are_days_since_the_epoch(tmp_path):
    _files(tmp_path, ["2024-01-31/a", "2024-02-01/a", "2023-12-31/a"])
    got = spans.resolve([("t", f"{tmp_path}/{{YYYY}}-{{MM}}-{{DD}}/*")], None, _glob, _stat)
    assert got.span == 19754 and got.patterns[0][1].endswith("/2024-02-01/*")  # 2024-02-01
    static = {"static_range": {"start_span_number": 19753, "end_span_number": 19753}}
    got = spans.resolve([("t", f"{tmp_path}/{{YYYY}}-{{MM}}-{{DD}}/*")], static, _glob, _stat)
    assert got.patterns[0][1].endswith("/2024-01-31/*")


@pytest.mark.parametrize(
    ("patterns", "config", "words"),
    [
        (["a/{SPAN}/{SPAN}/*"], None, "only one {SPAN}"),
        (["a/{VERSION}/*"], None, "{VERSION} needs a {SPAN}"),
        (["a/{SPAN}/{YYYY}{MM}{DD}"], None, "not both"),
        (["a/{YYYY}{MM}/*"], None, "exactly one each"),
        (["a/{SPAN:0}/*"], None, "not a positive integer"),
        (["a/{SPAN}/*", "b/*"], None, "same specs"),
        (["a/*"], {"static_range": {"start_span_number": 1, "end_span_number": 1}}, "needs a"),
        (["a/{SPAN}"], {"static_range": {"start_span_number": 1, "end_span_number": 2}}, "equal"),
        (["a/{SPAN}"], {"rolling_range": {"num_spans": 2}}, "num_spans 1"),
    ],
)
def test_bad_specs_and_range_configs_are_refused_as_tfx_refuses_them(patterns, config, words):
    splits = [(f"s{i}", p) for i, p in enumerate(patterns)]
    with pytest.raises(ValueError, match=None) as raised:
        spans.resolve(splits, config, lambda p: [], _stat)
    assert words in str(raised.value)


def test_splits_must_find_the_same_span_and_a_width_must_hold_the_span(tmp_path):
    _files(tmp_path, ["train/s3/a", "eval/s2/a", "w/s123/a"])
    splits = [("train", f"{tmp_path}/train/s{{SPAN}}/*"), ("eval", f"{tmp_path}/eval/s{{SPAN}}/*")]
    with pytest.raises(ValueError, match="must be the same for each split"):
        spans.resolve(splits, None, _glob, _stat)
    static = {"static_range": {"start_span_number": 123, "end_span_number": 123}}
    with pytest.raises(ValueError, match="width 2 is less than the digits of 123"):
        spans.resolve([("t", f"{tmp_path}/w/s{{SPAN:2}}/*")], static, _glob, _stat)
    with pytest.raises(ValueError, match="no files match split 't'"):
        spans.resolve([("t", f"{tmp_path}/none/{{SPAN}}/*")], None, _glob, _stat)


# --------------------------------------------------------------------------------------------------
# import-examples: spans, input_base, partition feature, properties
# --------------------------------------------------------------------------------------------------


def _csv(path: Path, rows: list[tuple]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([("user", "x"), *rows])


def _executor_input(tmp_path: Path, params: dict) -> str:
    return json.dumps(
        {
            "inputs": {"parameterValues": params},
            "outputs": {
                "artifacts": {
                    "examples": {"artifacts": [{"name": "e", "uri": str(tmp_path / "out")}]}
                },
                "outputFile": str(tmp_path / "executor_output.json"),
            },
        }
    )


def test_input_base_with_span_patterns_takes_the_latest_span_and_records_it(tmp_path):
    """TFX's input_base + input_config: span-{SPAN}/v{VERSION} patterns, KFP parameters."""
    base = tmp_path / "data"
    for span, version, n in ((1, 1, 3), (2, 1, 4), (2, 2, 5)):
        for split in ("train", "eval"):
            rows = [(f"u{span}{version}{i}", i) for i in range(n)]
            _csv(base / f"span-{span}" / f"v{version}" / split / "part.csv", rows)
    splits = {"train": "span-{SPAN}/v{VERSION}/train/*", "eval": "span-{SPAN}/v{VERSION}/eval/*"}
    params = {"input_pattern": str(base), "input_splits": splits}
    assert cli.main(["import-examples", "--executor-input", _executor_input(tmp_path, params)]) == 0
    out = tmp_path / "out"
    assert {s: len(_records(out / f"Split-{s}")) for s in ("train", "eval")} == {
        "train": 5,
        "eval": 5,
    }
    meta = json.loads((tmp_path / "executor_output.json").read_text())
    examples = meta["artifacts"]["examples"]["artifacts"][0]["metadata"]
    props = json.loads((out / "examples_properties.json").read_text())
    assert {k: examples[k] for k in props} == props
    assert (props["span"], props["version"], props["payload_format"]) == (2, 2, "FORMAT_TF_EXAMPLE")
    assert props["input_fingerprint"].splitlines()[1].startswith("split:eval,num_files:1,")
    # A static range reads span 1 (its latest version), into a new output.
    args = ["--input", str(base), "--input-splits", ",".join(f"{k}={v}" for k, v in splits.items())]
    static = '{"static_range": {"start_span_number": 1, "end_span_number": 1}}'
    assert (
        cli.main(["import-examples", *args, "--range-config", static, "--output", str(out) + "1"])
        == 0
    )
    props = json.loads((Path(str(out) + "1") / "examples_properties.json").read_text())
    assert (props["span"], props["version"]) == (1, 1)


@pytest.mark.slow
def test_partition_feature_splits_by_the_feature_hash_as_tfx(tmp_path):
    import bisect

    from tensorflow.core.example import example_pb2

    rows = [(f"user{i % 7}", i + 0.5) for i in range(60)]
    _csv(tmp_path / "in" / "a.csv", rows[:30])
    _csv(tmp_path / "in" / "b.csv", rows[30:])
    out = tmp_path / "out"
    args = ["--input", str(tmp_path / "in"), "--splits", "train:3,eval:2", "--output", str(out)]
    assert cli.main(["import-examples", *args, "--partition-feature", "user"]) == 0
    seen: dict[str, str] = {}
    for split in ("train", "eval"):
        for record in _records(out / f"Split-{split}"):
            feature = example_pb2.Example.FromString(record).features.feature["user"]
            key = feature.SerializeToString(deterministic=True)  # TFX's _GeneratePartitionKey
            bucket = int(hashlib.sha256(key).hexdigest(), 16) % 5
            assert ("train", "eval")[bisect.bisect([3, 5], bucket)] == split
            assert seen.setdefault(feature.bytes_list.value[0].decode(), split) == split
    assert len(seen) == 7 and sum(len(_records(out / f"Split-{s}")) for s in seen.values()) >= 60
    # A float feature cannot partition (TFX's rule): exit 2 naming the input, nothing written.
    code = cli.main(["import-examples", *args[:-1], str(out) + "2", "--partition-feature", "x"])
    assert code == 2 and not Path(str(out) + "2").exists()


@pytest.mark.slow
def test_infer_feature_shape_false_gives_no_shapes_and_sparse_reading(tmp_path):
    from generic_trainer.beam import inference
    from generic_trainer.intake.data_request import build_import_examples_request
    from generic_trainer.records.schemas import feature_spec_from_schema

    facts = {"rows": 2, "columns": {"a": [0, 2, 1, 1], "b": [1, 2, 3, 3]}, "values": {}}
    shaped = inference.schema_from_inference(facts, ["a", "b"])
    flat = inference.schema_from_inference(facts, ["a", "b"], infer_shape=False)
    assert [list(f.shape.dim) != [] for f in shaped.feature] == [True, True]
    assert not any(f.HasField("shape") for f in flat.feature)
    spec = feature_spec_from_schema(flat)
    assert {k: type(v).__name__ for k, v in spec.items()} == {
        "a": "VarLenFeature",
        "b": "VarLenFeature",
    }
    values = {"input": "a.csv", "output": str(tmp_path / "o"), "infer_feature_shape": "false"}
    assert build_import_examples_request(values, environ={}).infer_feature_shape is False
    with pytest.raises(UserInputError, match="true or false"):
        build_import_examples_request({**values, "infer_feature_shape": "maybe"}, environ={})


# --------------------------------------------------------------------------------------------------
# SchemaGen: TFDV's string domains on TFX's taxi data
# --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_taxi_csv_gets_tfx_string_domains(tfx_root, tmp_path):  # noqa: F811
    """The wheel's Chicago taxi CSV: string domains for company and payment_type only, holding the
    values of TFX's own SchemaGen output for it (components/testdata/schema_gen)."""
    from generic_trainer.records.schemas import load_schema

    taxi = tfx_root / "tfx/examples/chicago_taxi_pipeline/data/simple"
    out = tmp_path / "examples"
    assert cli.main(["import-examples", "--input", str(taxi), "--output", str(out)]) == 0
    schema = load_schema(str(out / "schema.pbtxt"))
    tfx = load_schema(str(tfx_root / "tfx/components/testdata/schema_gen/schema.pbtxt"))
    domains = {d.name: sorted(d.value) for d in schema.string_domain}
    assert domains == {d.name: sorted(d.value) for d in tfx.string_domain}
    assert {f.name: f.domain for f in schema.feature if f.domain} == {
        "company": "company",
        "payment_type": "payment_type",
    }
    # TFDV's order: the values sorted (its rank histogram's labels in a std::map).
    assert list(schema.string_domain[0].value) == sorted(schema.string_domain[0].value)
    assert not any(f.HasField("bool_domain") for f in schema.feature)


def test_string_domain_limits_follow_tfdv():
    """At most 100 distinct UTF-8 values make a domain; 101, or bytes that are not UTF-8, none;
    one or two true/false words a bool_domain."""
    from generic_trainer.beam import inference, tfrecords

    facts = {"rows": 0, "columns": {}, "seen": {}}
    for i in range(101):
        values = {
            "hundred": [f"v{i % 100}".encode()],
            "many": [f"w{i}".encode()],
            "flag": [b"true" if i % 2 else b"false"],
            "raw": [b"\xff\xfe" if i == 3 else b"a"],
        }
        tfrecords.add_facts(facts, {k: (2, 1) for k in values}, f"r{i}")
        tfrecords.add_values(facts, values)
    merged = inference.merge_inference([facts])
    schema = inference.schema_from_inference(merged, sorted(values))
    assert [d.name for d in schema.string_domain] == ["hundred"]
    assert len(schema.string_domain[0].value) == 100
    flag = next(f for f in schema.feature if f.name == "flag")
    assert (flag.bool_domain.true_value, flag.bool_domain.false_value) == ("true", "false")


# --------------------------------------------------------------------------------------------------
# tf.SequenceExample end to end on TFX's own testdata and module
# --------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.e2e
def test_tfx_sequence_examples_import_transform_and_read(tfx_root, tmp_path):  # noqa: F811
    from generic_trainer.records.example_files import read_records

    testdata = tfx_root / "tfx/components/testdata"
    inputs = {}
    for split in ("train", "eval"):
        [source] = (testdata / "tfrecord_sequence" / f"Split-{split}").iterdir()
        inputs[split] = tmp_path / "in" / f"{split}.gz"
        inputs[split].parent.mkdir(exist_ok=True)
        _write_tfrecords(inputs[split], list(read_records(str(source), 150)))
    schema = testdata / "schema_gen_sequence"
    examples = tmp_path / "examples"
    split_arg = ",".join(f"{k}={v}" for k, v in inputs.items())
    imported = cli.main(
        ["import-examples", "--format", "tfrecord", "--payload-format", SEQUENCE,
         "--input-splits", split_arg, "--schema", str(schema), "--output", str(examples)]
    )  # fmt: skip
    assert imported == 0
    props = json.loads((examples / "examples_properties.json").read_text())
    assert props["payload_format"] == SEQUENCE
    assert _canonical(_records(examples / "Split-train")) == _canonical(
        read_records(str(inputs["train"]))
    )
    transformed = run_cli(
        ["transform", "--examples", str(examples), "--schema", str(schema), "--module-file",
         str(testdata / "module_file/transform_sequence_module.py"), "--transform-graph",
         str(tmp_path / "graph"), "--transformed-examples", str(tmp_path / "transformed")],
        timeout=600,
    )  # fmt: skip
    assert transformed.returncode == 0, transformed.stderr[-3000:]
    summary = json.loads(transformed.stdout)
    assert summary["num_examples"] == {"train": 150, "eval": 150}
    graph_schema = (tmp_path / "graph/transformed_metadata/schema.pbtxt").read_text()
    assert "seq_s_transformed" in graph_schema and "ragged_tensor" in graph_schema
    _read_as_the_trainer_does(examples, schema / "schema.pbtxt", tmp_path)


def _canonical(records) -> list[bytes]:
    """SequenceExamples as TensorFlow's own proto serializes them deterministically, sorted."""
    from tensorflow.core.example import example_pb2

    parse = example_pb2.SequenceExample.FromString
    return sorted(parse(r).SerializeToString(deterministic=True) for r in records)


def _read_as_the_trainer_does(examples: Path, schema: Path, tmp_path: Path) -> None:
    """The trainer's first-record check and data accessor on SequenceExamples, per the schema."""
    from generic_trainer.data import DataAccessor, DatasetOptions
    from generic_trainer.records.record_checks import check_first_records

    patterns = [str(examples / "Split-train" / "*")]
    assert check_first_records(patterns, str(schema)) == []
    options = DatasetOptions(batch_size=4, num_epochs=1, shuffle=False)
    batch = next(iter(DataAccessor().tf_dataset_factory(patterns, options, str(schema))))
    assert {k: type(v).__name__ for k, v in batch.items()} == {
        "f": "SparseTensor",
        "i": "SparseTensor",
        "seq_s": "RaggedTensor",
    }
    assert batch["seq_s"].shape[0] == 4
    # A schema whose sequence feature has another type: bad data, named by split and record.
    wrong = tmp_path / "wrong.pbtxt"
    wrong.write_text(schema.read_text().replace("type: BYTES", "type: INT"))
    with pytest.raises(UserInputError, match="split 'train'"):
        check_first_records(patterns, str(wrong))


def test_bad_span_inputs_are_exit_2_naming_the_input(tmp_path, capsys):
    out = str(tmp_path / "out")
    _files(tmp_path, ["d/s1/a.csv"])
    cases = [
        (["--input", f"{tmp_path}/d/s{{SPAN}}/{{SPAN}}"], "--input: only one {SPAN}"),
        (["--input", f"{tmp_path}/d/s{{SPAN}}/*.csv", "--range-config", '{"static_range": 1}'],
         "--range-config: "),
        (["--input", f"{tmp_path}/d/s{{SPAN}}/*.csv", "--range-config", "{"], "--range-config: "),
        (["--input", f"{tmp_path}/d", "--input-splits", "a=s{SPAN}/*", "--partition-feature",
          "x"], "--partition-feature: is for --input with hash --splits"),
        (["--input", "x.csv", "--payload-format", SEQUENCE], "--payload-format: "),
    ]  # fmt: skip
    for args, message in cases:
        assert cli.main(["import-examples", *args, "--output", out]) == 2
        assert message in capsys.readouterr().err
    assert not Path(out).exists()
