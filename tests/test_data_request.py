"""The data verbs' requests: one Beam preamble (beam_inputs) decides where their paths point, for
both verbs."""

from __future__ import annotations

import os

import pytest
from conftest import PENGUIN
from generic_trainer.artifacts.kfp_io import KfpOutputs
from generic_trainer.errors import UserInputError
from generic_trainer.intake.data_request import beam_inputs, build_import_examples_request
from generic_trainer.intake.transform_request import build_transform_request

DATAFLOW = ["--runner=DataflowRunner", "--project=p", "--region=europe-west4"]


def _kfp(tmp_path, *names: str) -> KfpOutputs:
    """KFP output artifacts as kfp_io gives them: a gs:// URI and its local path under the mount."""
    return KfpOutputs(
        output_file=str(tmp_path / "executor_output.json"),
        artifacts={
            name: {
                "name": name,
                "uri": f"gs://bkt/run/{name}",
                "path": str(tmp_path / "gcs" / "bkt" / "run" / name),
                "schema_title": "system.Artifact",
            }
            for name in names
        },
    )


def test_beam_inputs_map_gcs_paths_only_for_a_local_runner(tmp_path):
    values = {"gcs_root": str(tmp_path / "gcs"), "out": "gs://bkt/o"}
    local = beam_inputs({**values, "beam_pipeline_args": ""}, environ={})
    remote = beam_inputs({**values, "beam_pipeline_args": DATAFLOW}, environ={})
    assert local.local and not remote.local and remote.beam_args == tuple(DATAFLOW)
    assert local.path("gs://bkt/x/*.csv") == str(tmp_path / "gcs" / "bkt" / "x" / "*.csv")
    assert remote.path("gs://bkt/x/*.csv") == "gs://bkt/x/*.csv"
    assert remote.path(str(tmp_path / "a.csv")) == str(tmp_path / "a.csv")
    # An output: the flag's value, else the KFP artifact's local path; None when neither is there.
    assert local.output("out", "examples") == "gs://bkt/o"
    assert local.output("missing", "examples") is None
    kfp = beam_inputs(
        {"gcs_root": str(tmp_path / "gcs")}, environ={}, kfp=_kfp(tmp_path, "examples")
    )
    assert kfp.output("output", "examples") == str(tmp_path / "gcs" / "bkt" / "run" / "examples")
    assert kfp.raw.gcs_root == str(tmp_path / "gcs")


def test_both_data_verbs_take_their_outputs_from_kfp_artifacts(tmp_path):
    kfp = _kfp(tmp_path, "examples", "output_schema", "transform_graph", "transformed_examples")
    values = {"gcs_root": str(tmp_path / "gcs"), "beam_pipeline_args": ""}
    imported = build_import_examples_request(
        {**values, "input": str(PENGUIN / "penguins.csv")}, environ={}, kfp=kfp
    )
    assert imported.output == str(tmp_path / "gcs" / "bkt" / "run" / "examples")
    assert imported.schema_output == str(tmp_path / "gcs" / "bkt" / "run" / "output_schema")
    assert imported.kfp is kfp and imported.beam_args == ()
    transform = build_transform_request(
        {
            **values,
            "examples": str(PENGUIN / "data"),
            "schema": str(PENGUIN),
            "module_file": str(PENGUIN / "module_transform.py"),
        },
        environ={},
        kfp=kfp,
    )
    assert transform.transform_graph == str(tmp_path / "gcs" / "bkt" / "run" / "transform_graph")
    assert transform.transformed_examples == str(
        tmp_path / "gcs" / "bkt" / "run" / "transformed_examples"
    )
    assert transform.examples_uri == str(PENGUIN / "data")


def test_data_verbs_refuse_what_they_refused_before(tmp_path):
    values = {
        "gcs_root": str(tmp_path / "gcs"),
        "examples": str(PENGUIN / "data"),
        "schema": str(PENGUIN),
        "module_file": "m.py",
        "transform_graph": str(tmp_path / "g"),
    }
    with pytest.raises(UserInputError, match="^--transformed-examples: must differ"):
        build_transform_request({**values, "transformed_examples": str(tmp_path / "g")}, environ={})
    with pytest.raises(UserInputError, match="^--transform-graph: required"):
        build_transform_request({**values, "transform_graph": ""}, environ={})
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    with pytest.raises(UserInputError, match="^--output: .* already exists and is not empty"):
        build_import_examples_request(
            {"input": "a.csv", "output": str(tmp_path / "full")}, environ={}
        )
    with pytest.raises(UserInputError, match="^--output: required"):
        build_import_examples_request({"input": "a.csv"}, environ={})


@pytest.mark.parametrize(
    "field, value, want",
    [
        ("splits", "train:3, eval:1", (("train", 3), ("eval", 1))),
        (
            "splits",
            {"eval": 1, "train": "2"},
            (("eval", 1), ("train", 2)),
        ),  # a dict keeps its order
        (
            "input_splits",
            "train=a/*.csv,eval=b/x=1.csv",
            (("train", "a/*.csv"), ("eval", "b/x=1.csv")),
        ),
        ("input_splits", {"train": " a/*.csv "}, (("train", "a/*.csv"),)),
    ],
)
def test_split_pairs_from_a_string_or_a_kfp_dict(tmp_path, field, value, want):
    source = {"input": "data/*.csv"} if field == "splits" else {}
    request = build_import_examples_request(
        {**source, field: value, "output": str(tmp_path / "out")}, environ={}
    )
    if (
        field == "input_splits"
    ):  # every path absolute at the edge (a run_fn's os.chdir cannot move them)
        want = tuple((name, os.path.abspath(pattern)) for name, pattern in want)
    assert (request.splits if field == "splits" else request.input_splits) == want


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("splits", "train:2,eval", "--splits: expected name:buckets pairs with whole buckets >= 1"),
        ("splits", "train:1.5", "--splits: expected name:buckets pairs with whole buckets >= 1"),
        ("splits", "train:1,train:2", "--splits: a split name appears twice"),
        ("input_splits", "train=a.csv,eval", "--input-splits: expected name=PATTERN pairs"),
        ("input_splits", "train=a.csv,train=b.csv", "--input-splits: a split name appears twice"),
    ],
)
def test_bad_split_pairs_name_the_flag(tmp_path, field, value, message):
    source = {"input": "data/*.csv"} if field == "splits" else {}
    with pytest.raises(UserInputError, match=message):
        build_import_examples_request(
            {**source, field: value, "output": str(tmp_path / "out")}, environ={}
        )


def test_import_format_tfrecord_is_accepted_and_an_unknown_one_named(tmp_path):
    values = {"input": "data/*", "output": str(tmp_path / "out")}
    assert (
        build_import_examples_request({**values, "format": "TFRecord"}, environ={}).format
        == "tfrecord"
    )
    with pytest.raises(
        UserInputError, match="^--format: expected csv, parquet or tfrecord, got 'avro'"
    ):
        build_import_examples_request({**values, "format": "avro"}, environ={})
