"""generic_trainer.data against the real tfx_bsl reader, on small generated TFX Examples
artifacts."""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from generic_trainer import data
from generic_trainer.errors import UserInputError
from generic_trainer.records import example_files, schemas
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx_bsl.public import tfxio

WIDE = 40  # extra dense float features w00.. of the main data set
ROWS = {"train": 203, "eval": 57}

MAIN_SCHEMA = """
feature { name: "f_dense" type: FLOAT presence { min_fraction: 1 } shape { dim { size: 1 } } }
feature { name: "f_scalar" type: FLOAT presence { min_fraction: 1 } shape { } }
feature { name: "label" type: INT presence { min_fraction: 1 } shape { dim { size: 1 } } }
feature { name: "s_dense" type: BYTES presence { min_fraction: 1 } shape { dim { size: 1 } } }
feature { name: "m_multi" type: FLOAT presence { min_fraction: 1 } \
shape { dim { size: 2 } dim { size: 3 } } }
feature { name: "v_float" type: FLOAT presence { min_fraction: 0.5 } }
feature { name: "v_str" type: BYTES value_count { min: 0 max: 3 } }
feature { name: "v_int" type: INT }
feature { name: "gone" type: INT deprecated: true }
""" + "".join(
    f'feature {{ name: "w{i:02d}" type: FLOAT presence {{ min_fraction: 1 }} shape {{ dim {{ size: '
    "1 } } }\n"
    for i in range(WIDE)
)


def main_row(i: int) -> dict:
    """Row i of the main data set: {feature: list of values}; some var-len features absent."""
    row = {
        "f_dense": [i * 0.5],
        "f_scalar": [-float(i)],
        "label": [i % 3],
        "s_dense": [f"näme-{i % 7}".encode()],
        "m_multi": [float(i + k) for k in range(6)],
        "v_str": [f"t{k}".encode() for k in range(i % 4)],
        "v_int": [i] * (i % 3),
        "gone": [1],
    }
    if i % 2:
        row["v_float"] = [1.0 / (i + 1)] * (1 + i % 5)
    row.update({f"w{k:02d}": [float(i * k)] for k in range(WIDE)})
    return row


def example(row: dict) -> bytes:
    ex = tf.train.Example()
    for name, values in row.items():
        if not values:
            continue
        feature = ex.features.feature[name]
        if isinstance(values[0], bytes):
            feature.bytes_list.value.extend(values)
        elif isinstance(values[0], float):
            feature.float_list.value.extend(values)
        else:
            feature.int64_list.value.extend(values)
    return ex.SerializeToString()


def write_records(path: str, rows: list[dict], gzipped: bool) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path, "GZIP" if gzipped else "") as writer:
        for row in rows:
            writer.write(example(row))


def write_schema(path: str, text: str) -> schema_pb2.Schema:
    schema = text_format.Parse(text, schema_pb2.Schema())
    with open(path, "w") as f:
        f.write(text)
    return schema


@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> str:
    """Examples dir: Split-train = 3 gzipped shards, Split-eval = 1 uncompressed file;
    schema.pbtxt."""
    root = str(tmp_path_factory.mktemp("examples"))
    train = [main_row(i) for i in range(ROWS["train"])]
    for shard in range(3):
        write_records(
            f"{root}/Split-train/data_tfrecord-{shard:05d}-of-00003.gz", train[shard::3], True
        )
    write_records(
        f"{root}/Split-eval/data_tfrecord-00000-of-00001",
        [main_row(i) for i in range(ROWS["eval"])],
        False,
    )
    write_schema(f"{root}/schema.pbtxt", MAIN_SCHEMA)
    return root


def tfx_bsl_dataset(pattern, options, schema):
    return tfxio.TFExampleRecord(
        file_pattern=pattern, telemetry_descriptors=[], schema=schema
    ).TensorFlowDataset(options)


def assert_same_datasets(ours, theirs, max_batches: int | None = None) -> int:
    """Same element spec, same elements in the same order; returns the number of examples."""
    assert ours.element_spec == theirs.element_spec
    if max_batches is not None:
        ours, theirs = ours.take(max_batches), theirs.take(max_batches)
    examples = 0
    batches = list(zip(ours, theirs, strict=True))
    for a, b in batches:
        tf.nest.assert_same_structure(a, b, expand_composites=True)
        flat_a, flat_b = (
            tf.nest.flatten(a, expand_composites=True),
            tf.nest.flatten(b, expand_composites=True),
        )
        for x, y in zip(flat_a, flat_b, strict=True):
            np.testing.assert_array_equal(x.numpy(), y.numpy())
        features = a[0] if isinstance(a, tuple) else a
        examples += int(features["f_dense"].shape[0])
    return examples


# ---- the dataset factory against tfx_bsl ---------------------------------------------------------


@pytest.mark.parametrize("split", ["train", "eval"])  # 3 gzipped shards / one uncompressed file
@pytest.mark.parametrize("batch_size", [16, 1000])
def test_same_batches_as_tfx_bsl_without_shuffle(artifact, split, batch_size):
    schema = schemas.load_schema(artifact)
    pattern = example_files.split_file_patterns(artifact, [split])[0]
    options = tfxio.TensorFlowDatasetOptions(batch_size=batch_size, shuffle=False, num_epochs=1)
    ours = data.DataAccessor().tf_dataset_factory([pattern], options, schema)
    assert assert_same_datasets(ours, tfx_bsl_dataset(pattern, options, schema)) == ROWS[split]

    features = ours.element_spec
    assert features["f_dense"] == tf.TensorSpec([None, 1], tf.float32)
    assert features["f_scalar"] == tf.TensorSpec([None], tf.float32)
    assert features["label"] == tf.TensorSpec([None, 1], tf.int64)
    assert features["s_dense"] == tf.TensorSpec([None, 1], tf.string)
    assert features["m_multi"] == tf.TensorSpec([None, 2, 3], tf.float32)
    assert features["v_float"] == tf.SparseTensorSpec([None, None], tf.float32)
    assert features["v_str"] == tf.SparseTensorSpec([None, None], tf.string)
    assert features["v_int"] == tf.SparseTensorSpec([None, None], tf.int64)
    assert "gone" not in features and len(features) == 8 + WIDE


def test_same_order_as_tfx_bsl_with_seeded_shuffle_and_two_epochs(artifact):
    schema = schemas.load_schema(artifact)
    pattern = f"{artifact}/Split-train/*"
    options = tfxio.TensorFlowDatasetOptions(
        batch_size=32, num_epochs=2, shuffle_seed=7, shuffle_buffer_size=50
    )
    ours = data.DataAccessor().tf_dataset_factory(pattern, options, schema)
    assert (
        assert_same_datasets(ours, tfx_bsl_dataset(pattern, options, schema)) == 2 * ROWS["train"]
    )
    first = next(iter(ours))["f_dense"][:, 0].numpy()
    assert not np.array_equal(first, np.sort(first))  # shuffled indeed


@pytest.mark.parametrize("threads", [1, 2])  # tfx_bsl fails with more threads than CPUs
def test_same_order_as_tfx_bsl_with_explicit_reader_threads(artifact, threads):
    schema = schemas.load_schema(artifact)
    pattern = f"{artifact}/Split-train/*"
    options = tfxio.TensorFlowDatasetOptions(
        batch_size=50, shuffle=False, num_epochs=1, reader_num_threads=threads
    )
    ours = data.DataAccessor().tf_dataset_factory(pattern, options, schema)
    assert assert_same_datasets(ours, tfx_bsl_dataset(pattern, options, schema)) == ROWS["train"]


def test_label_key_gives_features_and_label(artifact):
    schema = schemas.load_schema(artifact)
    pattern = f"{artifact}/Split-eval/*"
    options = tfxio.TensorFlowDatasetOptions(
        batch_size=10, shuffle=False, num_epochs=1, label_key="label"
    )
    ours = data.DataAccessor().tf_dataset_factory(pattern, options, schema)
    features, label = ours.element_spec
    assert "label" not in features and label == tf.TensorSpec([None, 1], tf.int64)
    assert_same_datasets(ours, tfx_bsl_dataset(pattern, options, schema))
    labels = np.concatenate([label.numpy()[:, 0] for _, label in ours])
    np.testing.assert_array_equal(labels, [i % 3 for i in range(ROWS["eval"])])


def test_num_epochs_none_repeats_forever_with_full_batches(artifact):
    options = data.DatasetOptions(batch_size=25, shuffle=False)
    ours = data.DataAccessor().tf_dataset_factory(
        f"{artifact}/Split-eval/*", options, f"{artifact}/schema.pbtxt"
    )
    assert ours.element_spec["f_dense"].shape == [
        25,
        1,
    ]  # drop_remainder, as tfx_bsl: a static batch size
    batches = list(ours.take(3 * ROWS["eval"] // 25 + 1))  # more than 3 epochs' worth
    values = np.concatenate([b["f_scalar"].numpy() for b in batches])
    expected = np.tile(-np.arange(ROWS["eval"], dtype=np.float32), 4)[: len(values)]
    np.testing.assert_array_equal(values, expected)


@pytest.mark.parametrize("drop", [False, True])
def test_drop_final_batch_drops_only_the_short_last_batch(artifact, drop):
    options = data.DatasetOptions(batch_size=20, shuffle=False, num_epochs=1, drop_final_batch=drop)
    ours = data.DataAccessor().tf_dataset_factory(
        f"{artifact}/Split-eval/*", options, schemas.load_schema(artifact)
    )
    sizes = [int(b["f_dense"].shape[0]) for b in ours]
    assert sizes == ([20, 20] if drop else [20, 20, ROWS["eval"] - 40])


def test_both_options_classes_and_a_schema_path_give_the_same_data(artifact):
    pattern = f"{artifact}/Split-train/*"
    fields = dict(batch_size=64, shuffle=True, shuffle_seed=3, num_epochs=1, label_key="label")
    ours = data.DataAccessor().tf_dataset_factory(pattern, data.DatasetOptions(**fields), artifact)
    theirs = data.DataAccessor().tf_dataset_factory(
        pattern, tfxio.TensorFlowDatasetOptions(**fields), schemas.load_schema(artifact)
    )
    assert assert_same_datasets(ours, theirs) == ROWS["train"]


def test_dataset_options_defaults_are_tfx_bsls():
    theirs = tfxio.TensorFlowDatasetOptions(batch_size=8)
    ours = data.DatasetOptions(batch_size=8)
    assert {f: getattr(theirs, f) for f in theirs._fields} == {
        f: getattr(ours, f) for f in theirs._fields
    }


def test_gzip_without_gz_and_mixed_compression_in_a_split_read_every_record(tmp_path):
    rows = [main_row(i) for i in range(30)]
    split = tmp_path / "Split-train"
    write_records(str(split / "a.gz"), rows[:10], gzipped=True)
    write_records(str(split / "b"), rows[10:20], gzipped=False)
    write_records(str(tmp_path / "other" / "c"), rows[20:], gzipped=True)  # gzip without .gz
    schema = write_schema(str(tmp_path / "schema.pbtxt"), MAIN_SCHEMA)
    options = data.DatasetOptions(batch_size=7, shuffle=False, num_epochs=1)
    assert example_files.check_readable([str(split / "*"), str(tmp_path / "other" / "*")]) == 3
    ours = data.DataAccessor().tf_dataset_factory(
        [str(split / "*"), str(tmp_path / "other" / "*")], options, schema
    )
    read = sorted(float(v) for b in ours for v in b["f_dense"].numpy()[:, 0])
    assert read == sorted(r["f_dense"][0] for r in rows)


def test_schema_with_sparse_feature_ragged_and_renamed_tensor_matches_tfx_bsl(tmp_path):
    schema_text = """
feature { name: "idx" type: INT int_domain { min: 0 max: 9 } }
feature { name: "val" type: FLOAT }
feature { name: "b" type: INT presence { min_fraction: 1 } shape { } }
feature { name: "r" type: INT }
feature { name: "rl" type: INT }
feature { name: "f_dense" type: FLOAT presence { min_fraction: 1 } shape { dim { size: 1 } } }
sparse_feature { name: "sp" index_feature { name: "idx" } value_feature { name: "val" } }
tensor_representation_group { key: "" value {
  tensor_representation { key: "rag" value {
    ragged_tensor { feature_path { step: "r" } partition { row_length: "rl" } } } }
  tensor_representation { key: "bb" value { dense_tensor { column_name: "b" shape { } } } } } }
"""
    schema = write_schema(str(tmp_path / "schema.pbtxt"), schema_text)
    rows = [
        {
            "idx": [i % 10, 9],
            "val": [1.0, 2.0],
            "b": [i],
            "r": [1, 2, 3],
            "rl": [1, 2],
            "f_dense": [float(i)],
        }
        for i in range(9)
    ]
    write_records(str(tmp_path / "Split-x" / "d.gz"), rows, gzipped=True)
    pattern = str(tmp_path / "Split-x" / "*")
    spec = schemas.feature_spec_from_schema(schema)
    assert isinstance(spec["sp"], tf.io.SparseFeature) and isinstance(
        spec["rag"], tf.io.RaggedFeature
    )
    assert isinstance(spec["b"], tf.io.FixedLenFeature)
    for options in (
        tfxio.TensorFlowDatasetOptions(batch_size=4, shuffle=False, num_epochs=1, label_key="bb"),
        tfxio.TensorFlowDatasetOptions(batch_size=4, shuffle_seed=1),
    ):
        ours = data.DataAccessor().tf_dataset_factory(pattern, options, schema)
        assert_same_datasets(ours, tfx_bsl_dataset(pattern, options, schema), max_batches=5)


def test_feature_spec_from_schema_is_dense_varlen_or_ragged_as_tfx_bsl(artifact):
    schema = text_format.Parse(MAIN_SCHEMA, schema_pb2.Schema())
    spec = schemas.feature_spec_from_schema(schema)
    assert spec["f_dense"] == tf.io.FixedLenFeature([1], tf.float32)
    assert spec["m_multi"] == tf.io.FixedLenFeature([2, 3], tf.float32)
    assert spec["v_str"] == tf.io.VarLenFeature(tf.string)
    assert spec["v_int"] == tf.io.VarLenFeature(tf.int64)
    assert "gone" not in spec

    schema.represent_variable_length_as_ragged = True
    ragged = schemas.feature_spec_from_schema(schema)["v_float"]
    assert ragged == tf.io.RaggedFeature(tf.float32, value_key="v_float", row_splits_dtype=tf.int64)
    pattern = f"{artifact}/Split-eval/*"
    options = tfxio.TensorFlowDatasetOptions(batch_size=20, shuffle=False, num_epochs=1)
    ours = data.DataAccessor().tf_dataset_factory(pattern, options, schema)
    assert assert_same_datasets(ours, tfx_bsl_dataset(pattern, options, schema)) == ROWS["eval"]


def test_importing_data_does_not_import_tensorflow():
    code = (
        "import sys, generic_trainer.data; assert 'tensorflow' not in sys.modules, 'tensorflow "
        "imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- errors a user can fix -------------------------------------------------------------------


@contextlib.contextmanager
def raises_user_error(input_name: str, *fragments: str):
    """Expects a UserInputError for `input_name` whose message holds every fragment."""
    with pytest.raises(UserInputError) as info:
        yield
    assert info.value.input_name == input_name
    for fragment in fragments:
        assert fragment in str(info.value)


def test_split_file_patterns_of_the_split_dir_and_the_plain_dir_layouts(tmp_path, artifact):
    assert example_files.split_file_patterns(artifact, ["train", "eval"]) == [
        os.path.join(artifact, "Split-train", "*"),
        os.path.join(artifact, "Split-eval", "*"),
    ]
    old = tmp_path / "old"
    shutil.copytree(os.path.join(artifact, "Split-eval"), old / "eval")
    assert example_files.split_file_patterns(str(old), ["eval"]) == [str(old / "eval" / "*")]


def test_a_missing_dir_split_or_empty_split_is_named_with_its_input(tmp_path, artifact):
    with raises_user_error("--examples", str(tmp_path / "nope"), "does not exist"):
        example_files.split_file_patterns(str(tmp_path / "nope"), ["train"])
    with raises_user_error("--eval-examples", "'test'", "splits present: eval, train"):
        example_files.split_file_patterns(artifact, ["train", "test"], input_name="--eval-examples")
    (tmp_path / "empty" / "Split-train").mkdir(parents=True)
    with raises_user_error("--examples", "'train'", "holds no files"):
        example_files.split_file_patterns(str(tmp_path / "empty"), ["train"])


def test_check_readable_counts_files_and_names_a_bad_one(tmp_path, artifact):
    assert (
        example_files.check_readable(example_files.split_file_patterns(artifact, ["train", "eval"]))
        == 4
    )

    bad = tmp_path / "Split-train"
    bad.mkdir()
    shutil.copy(os.path.join(artifact, "Split-eval", "data_tfrecord-00000-of-00001"), bad / "good")
    (bad / "zz.gz").write_bytes(b"\x1f\x8b" + os.urandom(200))  # gzip magic, then garbage
    with raises_user_error("--examples", str(bad / "zz.gz")):
        example_files.check_readable([str(bad / "*")])
    (bad / "zz.gz").unlink()
    (bad / "zz.csv").write_text("a,b,c\n1,2,3\n" * 10)
    with raises_user_error("--examples", str(bad / "zz.csv"), "checksum"):
        example_files.check_readable([str(bad / "*")])
    (bad / "zz.csv").unlink()
    record = (bad / "good").read_bytes()
    with gzip.open(bad / "truncated.gz", "wb") as f:
        f.write(record[:20])  # a 12-byte header, then only part of the first record
    with raises_user_error("--examples", str(bad / "truncated.gz"), "ends inside"):
        example_files.check_readable([str(bad / "*")])
    with raises_user_error("--examples", "no files match"):
        example_files.check_readable([str(tmp_path / "none" / "*")])


def test_a_schema_dir_without_pbtxt_a_bad_or_missing_schema_is_named(tmp_path, artifact):
    assert len(schemas.load_schema(os.path.join(artifact, "schema.pbtxt")).feature) == 9 + WIDE
    with raises_user_error("--schema", "no *.pbtxt file"):
        schemas.load_schema(str(tmp_path))
    (tmp_path / "schema.pbtxt").write_text("feature { name: 'x' type: WHAT }")
    with raises_user_error("--schema", str(tmp_path / "schema.pbtxt"), "not a text-format"):
        schemas.load_schema(str(tmp_path))
    with raises_user_error("--schema", "is missing (nothing there)"):
        schemas.load_schema(str(tmp_path / "missing.pbtxt"))


def test_dataset_factory_names_a_bad_label_pattern_schema_or_batch_size(tmp_path, artifact):
    schema = schemas.load_schema(artifact)
    accessor = data.DataAccessor()
    pattern = f"{artifact}/Split-eval/*"
    with raises_user_error("label_key", "'nope'", "f_dense"):
        accessor.tf_dataset_factory(
            pattern, data.DatasetOptions(batch_size=4, label_key="nope"), schema
        )
    with raises_user_error("file_patterns", "no files match"):
        accessor.tf_dataset_factory(
            str(tmp_path / "*.gz"), data.DatasetOptions(batch_size=4), schema
        )
    with raises_user_error("schema", "needs a schema"):
        accessor.tf_dataset_factory(pattern, data.DatasetOptions(batch_size=4), None)
    with raises_user_error("options", "batch_size"):
        accessor.tf_dataset_factory(pattern, data.DatasetOptions(batch_size=0), schema)
    shaped_but_optional = (
        'feature { name: "x" type: FLOAT presence { min_fraction: 0.5 } shape { dim { size: 1 } } }'
    )
    with raises_user_error("--schema", "'x'", "min_fraction"):
        schemas.feature_spec_from_schema(
            text_format.Parse(shaped_but_optional, schema_pb2.Schema())
        )


# ---- record_batch_factory (TFX's sklearn-style modules) ------------------------------------------


@pytest.mark.parametrize("with_schema", [True, False])
def test_record_batches_are_tfx_bsls(artifact, with_schema):
    schema = schemas.load_schema(f"{artifact}/schema.pbtxt") if with_schema else None
    pattern = [f"{artifact}/Split-train/*"]
    for options in (
        tfxio.RecordBatchesOptions(batch_size=50, num_epochs=1, shuffle=False),
        tfxio.RecordBatchesOptions(
            batch_size=64, num_epochs=2, shuffle=True, shuffle_seed=7, drop_final_batch=True
        ),
    ):
        ours = list(data.DataAccessor().record_batch_factory(pattern, options, schema))
        theirs = list(
            tfxio.TFExampleRecord(
                file_pattern=pattern, telemetry_descriptors=[], schema=schema
            ).RecordBatches(options)
        )
        assert len(ours) == len(theirs) > 2
        for a, b in zip(ours, theirs, strict=True):
            assert a.equals(b)
    assert sum(b.num_rows for b in ours) == (2 * ROWS["train"]) // 64 * 64
    if (
        with_schema
    ):  # one list column per schema feature (as tfx_bsl: deprecated ones too); null where absent
        assert set(ours[0].schema.names) == {f.name for f in schema.feature}
        assert ours[0].column("v_float").null_count > 0


def test_sklearn_style_module_reads_record_batches_and_fits_with_numpy(artifact, tmp_path):
    """A run_fn in the idiom of TFX's sklearn penguin module: numpy arrays from record batches, a
    model
    fitted without TensorFlow, pickled into serving_model_dir."""
    import pickle

    from generic_trainer.fit.fn_args import FnArgs

    def run_fn(fn_args):
        schema = schemas.load_schema(fn_args.schema_file)

        def input_fn(patterns):
            features, labels = [], []
            for batch in fn_args.data_accessor.record_batch_factory(
                patterns, tfxio.RecordBatchesOptions(batch_size=20, num_epochs=1), schema
            ):
                columns = {
                    field.name: column.flatten()
                    for column, field in zip(batch, batch.schema, strict=True)
                }
                features.append(np.stack([columns["f_dense"], np.ones(batch.num_rows)], axis=-1))
                labels.append(np.asarray(columns["f_scalar"]))
            return np.concatenate(features), np.concatenate(labels)

        x, y = input_fn(fn_args.train_files)
        coef, *_ = np.linalg.lstsq(x, y, rcond=None)
        x_eval, y_eval = input_fn(fn_args.eval_files)
        os.makedirs(fn_args.serving_model_dir)
        with open(os.path.join(fn_args.serving_model_dir, "model.pkl"), "wb") as f:
            pickle.dump(
                {
                    "coef": coef,
                    "rows": len(y),
                    "eval_error": float(np.abs(x_eval @ coef - y_eval).max()),
                },
                f,
            )

    accessor = data.DataAccessor()
    assert accessor.data_view_decode_fn is None  # TFX's value without a Data View
    run_fn(
        FnArgs(
            working_dir=str(tmp_path),
            train_files=[f"{artifact}/Split-train/*"],
            eval_files=[f"{artifact}/Split-eval/*"],
            schema_path=f"{artifact}/schema.pbtxt",
            data_accessor=accessor,
            serving_model_dir=str(tmp_path / "serving"),
        )
    )
    with open(tmp_path / "serving" / "model.pkl", "rb") as f:
        model = pickle.load(f)
    assert model["rows"] == ROWS["train"]  # every example once, in shuffled batches
    np.testing.assert_allclose(model["coef"], [-2.0, 0.0], atol=1e-4)  # f_scalar = -2 * f_dense
    assert model["eval_error"] < 1e-3


def test_record_batch_factory_names_unmatched_files_and_a_bad_batch_size(tmp_path):
    accessor = data.DataAccessor()
    with raises_user_error("file_patterns", "no files match", str(tmp_path)):
        accessor.record_batch_factory(
            [f"{tmp_path}/none/*"], tfxio.RecordBatchesOptions(batch_size=4), None
        )
    with raises_user_error("options", "batch_size must be a positive integer"):
        accessor.record_batch_factory(
            [f"{tmp_path}/*"], tfxio.RecordBatchesOptions(batch_size=0), None
        )
