"""bulk-infer (TFX's BulkInferrer on Beam's RunInference), on real models, real Beam and real files:
the session's trained penguin model on the bundled examples through the CLI and KFP's executor input
(every PredictionLog checked against the SavedModel called directly), TFX's spec JSON, a
classifier's classes and scores under TFX's OutputExampleSpec, a NOT_BLESSED model inferring
nothing (exit 0), and bad input (exit 2, nothing written) before and inside the pipeline.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest
from conftest import PENGUIN, run_cli
from generic_trainer import cli
from generic_trainer.beam.infer_specs import (
    Columns,
    ModelSpec,
    parse_model_spec,
    parse_output_example_spec,
)
from generic_trainer.errors import UserInputError
from generic_trainer.intake.infer_request import build_bulk_infer_request
from generic_trainer.records.example_files import read_records

EXAMPLES = PENGUIN / "data"


def _records(examples: Path, split: str) -> list[bytes]:
    return [
        r for f in sorted((examples / f"Split-{split}").iterdir()) for r in read_records(str(f))
    ]


def _logs(result_dir: Path) -> list:
    from tensorflow_serving.apis import prediction_log_pb2

    files = sorted(result_dir.iterdir())
    assert [f.name for f in files] == ["prediction_logs-00000-of-00001.gz"]  # TFX's name
    return [prediction_log_pb2.PredictionLog.FromString(r) for r in read_records(str(files[0]))]


def _examples(examples_dir: Path, split: str) -> list:
    from tensorflow.core.example import example_pb2

    files = sorted((examples_dir / f"Split-{split}").iterdir())
    assert [f.name for f in files] == ["examples-00000-of-00001.gz"]
    return [example_pb2.Example.FromString(r) for r in read_records(str(files[0]))]


def _blessing(path: Path, marker: str, text: str = "") -> Path:
    path.mkdir(parents=True)
    (path / marker).write_text(text)
    return path


def _artifact(name: str, title: str, uri: Path) -> dict:
    return {"artifacts": [{"name": name, "type": {"schemaTitle": title}, "uri": str(uri)}]}


def _executor_input(model: Path, out: Path, blessing: Path | None, **parameters) -> str:
    inputs = {
        "model": _artifact("m", "system.Model", model),
        "examples": _artifact("e", "system.Dataset", EXAMPLES),
    }
    if blessing:
        inputs["model_blessing"] = _artifact("b", "system.Artifact", blessing)
    return json.dumps(
        {
            "inputs": {"parameterValues": parameters, "artifacts": inputs},
            "outputs": {
                "artifacts": {
                    "inference_result": _artifact("r", "system.Artifact", out / "result"),
                    "output_examples": _artifact("x", "system.Dataset", out / "examples"),
                },
                "outputFile": str(out / "executor_output.json"),
            },
        }
    )


def _written(out: Path) -> dict:
    body = json.loads((out / "executor_output.json").read_text())["artifacts"]
    return {name: a["artifacts"][0]["metadata"] for name, a in body.items()}


def _served(model: Path, records: list[bytes]):
    """What the SavedModel's serving_default answers for `records`, called directly."""
    import tensorflow as tf

    fn = tf.saved_model.load(str(model / "Format-Serving")).signatures["serving_default"]
    return fn(examples=tf.constant(records))["outputs"].numpy()


# ---------------------------------------------------------------------------------------------
# End to end on the session's trained model
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_every_split_is_inferred_and_the_predictions_join_the_examples(
    trained_penguin_model, tmp_path, capsys
):
    """The CLI (in this process) with no splits and no spec: every split, one PredictionLog per
    example (TFX's InferenceResult), and the examples with the signature's output added under its
    own key."""
    import numpy as np
    import tensorflow as tf

    result, written = tmp_path / "result", tmp_path / "examples"
    argv = ["bulk-infer", "--model", trained_penguin_model, "--examples", EXAMPLES]
    code = cli.main(
        [*map(str, argv), "--inference-result", str(result), "--output-examples", str(written)]
    )
    out, err = capsys.readouterr()
    assert code == 0, err[-3000:]
    assert "no --model-blessing given: the model is used" in err
    records = {s: _records(EXAMPLES, s) for s in ("eval", "train")}
    summary = json.loads(out[out.index("{") :])
    assert summary["num_examples"] == {s: len(r) for s, r in records.items()}
    logs = _logs(result)
    inputs = [log.predict_log.request.inputs["examples"].string_val[0] for log in logs]
    assert Counter(inputs) == Counter(records["eval"] + records["train"])
    got = {
        i: tf.make_ndarray(log.predict_log.response.outputs["outputs"])
        for i, log in zip(inputs, logs, strict=True)
    }
    assert all(v.shape == (1, 3) for v in got.values())
    served = _served(trained_penguin_model, records["eval"])
    np.testing.assert_allclose(np.stack([got[r][0] for r in records["eval"]]), served, rtol=1e-5)
    for split, originals in records.items():
        examples = _examples(written, split)
        assert len(examples) == len(originals)
        for example in examples:
            added = list(example.features.feature.pop("outputs").float_list.value)
            original = example.SerializeToString(deterministic=True)
            matches = [r for r in originals if _same(r, original)]
            assert matches, "an output example is not one of the split's examples"
            np.testing.assert_allclose(added, got[matches[0]][0], rtol=1e-6)
    assert sorted(os.listdir(tmp_path)) == ["examples", "result"]  # no staging left


def _same(record: bytes, serialized: bytes) -> bool:
    from tensorflow.core.example import example_pb2

    return (
        example_pb2.Example.FromString(record).SerializeToString(deterministic=True) == serialized
    )


@pytest.mark.slow
def test_executor_input_form_infers_the_chosen_splits_and_writes_tfx_metadata(
    trained_penguin_model, tmp_path
):
    """KFP's form: data_splits (TFX's data_spec), a BLESSED model, TFX's ModelSpec and
    OutputExampleSpec as proto JSON (camelCase) naming the added feature; the metadata as TFX's."""
    blessed = _blessing(tmp_path / "blessing", "BLESSED")
    spec = {
        "outputColumnsSpec": [
            {
                "predictOutput": {
                    "outputColumns": [{"outputKey": "outputs", "outputColumn": "probs"}]
                }
            }
        ]
    }
    out = tmp_path / "kfp"
    executor_input = _executor_input(
        trained_penguin_model,
        out,
        blessed,
        data_splits=["eval"],
        model_spec=json.dumps({"modelSignatureName": ["serving_default"], "tag": ["serve"]}),
        output_example_spec=json.dumps(spec),
    )
    proc = run_cli(["bulk-infer", "--executor-input", executor_input])
    assert proc.returncode == 0, proc.stderr[-3000:]
    count = len(_records(EXAMPLES, "eval"))
    metadata = _written(out)
    assert metadata["inference_result"] == {
        "inferred": 1,
        "split_names": ["eval"],
        "num_examples": {"eval": count},
        "signatures": ["serving_default"],
    }
    assert metadata["output_examples"] == {
        "split_names": ["eval"],
        "num_examples": {"eval": count},
        "num_examples_eval": count,
    }
    logs = _logs(out / "result")
    inputs = [log.predict_log.request.inputs["examples"].string_val[0] for log in logs]
    assert Counter(inputs) == Counter(_records(EXAMPLES, "eval"))
    assert sorted(os.listdir(out / "examples")) == ["Split-eval"]
    for example in _examples(out / "examples", "eval"):
        features = example.features.feature
        assert "outputs" not in features
        assert pytest.approx(sum(features["probs"].float_list.value), abs=1e-4) == 1.0


# ---------------------------------------------------------------------------------------------
# Blessings: NOT_BLESSED infers nothing (exit 0); a dir without a verdict is exit 2
# ---------------------------------------------------------------------------------------------


def _fake_model(root: Path) -> Path:
    """A model dir whose SavedModel is never loaded (the blessing stops the run first)."""
    (root / "Format-Serving").mkdir(parents=True)
    (root / "Format-Serving" / "saved_model.pb").write_bytes(b"never read")
    return root


def test_not_blessed_infers_nothing_exit_0_with_the_reason(tmp_path):
    no = _blessing(tmp_path / "blessing", "NOT_BLESSED", "accuracy 0.41 < 0.9\n")
    out = tmp_path / "kfp"
    proc = run_cli(
        ["bulk-infer", "--executor-input", _executor_input(_fake_model(tmp_path / "m"), out, no)]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    reason = f"the evaluator did not bless the model ({no}: NOT_BLESSED: accuracy 0.41 < 0.9)"
    assert json.loads(proc.stdout[proc.stdout.index("{") :]) == {"inferred": 0, "reasons": [reason]}
    assert _written(out)["inference_result"] == {"inferred": 0, "reasons": reason}
    assert os.listdir(out / "result") == [] and os.listdir(out / "examples") == []
    assert "nothing inferred" in proc.stderr

    empty = tmp_path / "empty_blessing"
    empty.mkdir()
    proc = run_cli(
        ["bulk-infer", "--model", tmp_path / "m", "--examples", EXAMPLES]
        + ["--model-blessing", empty, "--inference-result", tmp_path / "r2"]
    )
    assert proc.returncode == 2 and "--model-blessing" in proc.stderr, proc.stderr[-2000:]
    assert "holds neither BLESSED nor NOT_BLESSED" in proc.stderr
    assert not (tmp_path / "r2").exists()


# ---------------------------------------------------------------------------------------------
# The request: bad input before TensorFlow loads
# ---------------------------------------------------------------------------------------------


def _values(tmp_path: Path, **changes) -> dict:
    model = tmp_path / "model"
    if not model.exists():
        _fake_model(model)
    values = {
        "model": str(model),
        "examples": str(EXAMPLES),
        "inference_result": str(tmp_path / "r"),
    }
    values.update(changes)
    return {k: v for k, v in values.items() if v is not None}


@pytest.mark.parametrize(
    "changes, flag, words",
    [
        ({"data_splits": "eval,test"}, "--data-splits", "has no split 'test'"),
        ({"data_splits": "../x"}, "--data-splits", "is not allowed"),
        ({"model": "MODEL_WITHOUT_SAVED_MODEL"}, "--model", "holds no SavedModel"),
        ({"model": "/no/such/model"}, "--model", "does not exist"),
        ({"examples": "/no/such/examples"}, "--examples", "does not exist"),
        ({"examples": str(PENGUIN)}, "--examples", "holds no Split-<name>/"),
        ({"model_blessing": "/no/such/blessing"}, "--model-blessing", "does not exist"),
        ({"model_blessing": str(PENGUIN / "module.py")}, "--model-blessing", "not a directory"),
        ({"inference_result": None}, "--inference-result", "required"),
        ({"inference_result": str(EXAMPLES)}, "--inference-result", "not empty"),
        ({"output_examples": "SAME"}, "--output-examples", "must differ"),
        ({"model_spec": "{bad"}, "--model-spec", "not valid JSON"),
        ({"model_spec": '{"signature": "x"}'}, "--model-spec", "unknown field(s) signature"),
        ({"output_example_spec": '{"output_columns_spec": []}'}, "--output-example-spec", "list"),
    ],
)
def test_bad_input_is_named_before_anything_loads(tmp_path, changes, flag, words):
    if changes.get("model") == "MODEL_WITHOUT_SAVED_MODEL":
        (tmp_path / "empty_model").mkdir()
        changes["model"] = str(tmp_path / "empty_model")
    if changes.get("output_examples") == "SAME":
        changes["output_examples"] = str(tmp_path / "r")
    with pytest.raises(UserInputError) as e:
        build_bulk_infer_request(_values(tmp_path, **changes))
    assert e.value.input_name == flag and words in str(e.value), str(e.value)


def test_a_remote_runner_gets_gs_uris_the_model_inside_format_serving(tmp_path):
    """With Dataflow the gs:// inputs and outputs go to Beam as URIs (checked through the mount)."""
    root = tmp_path / "gcs"
    shutil.copytree(EXAMPLES, root / "b" / "examples")
    _fake_model(root / "b" / "model")
    request = build_bulk_infer_request(
        {
            "model": "gs://b/model",
            "examples": "gs://b/examples",
            "inference_result": "gs://b/run/result",
            "output_examples": "gs://b/run/examples",
            "gcs_root": str(root),
            "beam_pipeline_args": ["--runner=DataflowRunner --project=p --region=r"],
        }
    )
    assert request.model_uri == "gs://b/model/Format-Serving"
    assert request.model == str(root / "b" / "model" / "Format-Serving")
    assert request.examples_uri == "gs://b/examples" and not request.local_runner
    assert (request.inference_result, request.output_examples) == (
        "gs://b/run/result",
        "gs://b/run/examples",
    )
    assert request.data_splits == ("eval", "train")


def test_tfx_model_and_output_example_specs_parse_in_camel_or_snake_case():
    assert parse_model_spec('{"modelSignatureName": ["a", "b"], "tag": ["serve", "gpu"]}') == (
        ModelSpec(("a", "b"), ("serve", "gpu"))
    )
    assert parse_model_spec("") == ModelSpec()
    spec = parse_output_example_spec(
        {
            "output_columns_spec": [
                {
                    "signature_name": "a",
                    "classify_output": {"label_column": "l", "score_column": "s"},
                },
                {"signatureName": "b", "regressOutput": {"valueColumn": "v"}},
            ]
        }
    )
    assert spec == (
        Columns("classify", "a", label_column="l", score_column="s"),
        Columns("regress", "b", value_column="v"),
    )
    for bad, words in [
        ('{"output_columns_spec": [{"classify_output": {}, "regress_output": {}}]}', "exactly one"),
        (
            json.dumps(
                {
                    "output_columns_spec": [
                        {"predict_output": {"output_columns": [{"output_key": "k"}]}}
                    ]
                }
            ),
            "output_column",
        ),
        (
            json.dumps({"output_columns_spec": [{"regress_output": {"value_column": "x"}}] * 2}),
            "repeats",
        ),
    ]:
        with pytest.raises(UserInputError, match=words):
            parse_output_example_spec(bad)


# ---------------------------------------------------------------------------------------------
# The model's signatures: TFX's classify and multi-head outputs, bad models and bad examples
# ---------------------------------------------------------------------------------------------


def _heavy_or_light(path: Path) -> Path:
    """A TF1 SavedModel (as Estimators export) with TF Serving's classify and regress signatures:
    classes [light, heavy] scored by body_mass_g > 4000, and the mass in kilograms."""
    import tensorflow as tf

    v1 = tf.compat.v1
    with tf.Graph().as_default() as graph, v1.Session(graph=graph) as session:
        serialized = v1.placeholder(tf.string, [None], name="examples")
        spec = {"body_mass_g": tf.io.FixedLenFeature([1], tf.float32)}
        mass = tf.io.parse_example(serialized, spec)["body_mass_g"]
        heavy = tf.cast(mass > 4000.0, tf.float32)
        classes = tf.tile(tf.constant([["light", "heavy"]]), [tf.shape(serialized)[0], 1])
        signatures = {
            "classify": v1.saved_model.classification_signature_def(
                serialized, classes, tf.concat([1 - heavy, heavy], axis=1)
            ),
            "regress": v1.saved_model.regression_signature_def(serialized, mass / 1000.0),
        }
        builder = v1.saved_model.Builder(str(path))
        builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map=signatures)
        builder.save()
    return path


def _bulk_infer(capsys, model: Path, out: Path, *extra) -> tuple[int, str]:
    argv = ["bulk-infer", "--model", str(model), "--examples", str(EXAMPLES)]
    argv += ["--data-splits", "eval", "--output-examples", str(out), *map(str, extra)]
    code = cli.main(argv)
    return code, capsys.readouterr().err


def _mass(example) -> float:
    return example.features.feature["body_mass_g"].float_list.value[0]


@pytest.mark.slow
def test_classify_and_multi_head_signatures_as_tfx_names_them(tmp_path, capsys):
    """A classify signature under TFX's OutputExampleSpec (label_column, score_column), then a
    multi-head run (classify + regress) with the default names, through TFX's MultiInferenceLog."""
    model = _heavy_or_light(tmp_path / "model")
    spec = {
        "output_columns_spec": [{"classify_output": {"label_column": "size", "score_column": "p"}}]
    }
    code, err = _bulk_infer(
        capsys,
        model,
        tmp_path / "one",
        "--model-spec",
        '{"model_signature_name": ["classify"]}',
        "--output-example-spec",
        json.dumps(spec),
    )
    assert code == 0, err[-3000:]
    examples = _examples(tmp_path / "one", "eval")
    assert len(examples) == len(_records(EXAMPLES, "eval"))
    for example in examples:
        features = example.features.feature
        assert list(features["size"].bytes_list.value) == [b"light", b"heavy"]
        heavy = float(_mass(example) > 4000)
        assert list(features["p"].float_list.value) == [1 - heavy, heavy]
    code, err = _bulk_infer(
        capsys,
        model,
        tmp_path / "two",
        "--model-spec",
        '{"model_signature_name": ["classify", "regress"]}',
    )
    assert code == 0, err[-3000:]
    for example in _examples(tmp_path / "two", "eval"):
        features = example.features.feature
        assert list(features["classify_classes"].bytes_list.value) == [b"light", b"heavy"]
        assert features["regress_outputs"].float_list.value[0] == pytest.approx(
            _mass(example) / 1000
        )


@pytest.mark.slow
def test_models_and_examples_that_do_not_fit_are_exit_2_and_write_nothing(tmp_path, capsys):
    import tiny_models

    classifier = _heavy_or_light(tmp_path / "classifier")
    floats = Path(tiny_models.float_input(str(tmp_path / "floats")))
    needs_pred = Path(tiny_models.class_from_feature(str(tmp_path / "needs_pred")))
    cases = [
        (floats, [], "--model", "takes inputs ['x']; bulk inference feeds each example"),
        (classifier, [], "--model", "has no signature 'serving_default'; it has classify, regress"),
        (
            classifier,
            [
                "--model-spec",
                '{"model_signature_name": ["classify"]}',
                "--output-example-spec",
                '{"output_columns_spec": [{"regress_output": {"value_column": "v"}}]}',
            ],
            "--output-example-spec",
            "has kind classify, so its columns need a classify_output",
        ),
        (
            classifier,
            [
                "--model-spec",
                '{"model_signature_name": ["regress"]}',
                "--output-example-spec",
                '{"output_columns_spec": [{"regress_output": {"value_column": "species"}}]}',
            ],
            "--output-example-spec",
            "the examples already have a feature 'species'",
        ),
        (needs_pred, [], "--examples", "split 'eval': the model cannot take these examples"),
    ]
    for i, (model, extra, flag, words) in enumerate(cases):
        out = tmp_path / f"out{i}"
        code, err = _bulk_infer(
            capsys, model, out, "--inference-result", tmp_path / f"r{i}", *extra
        )
        assert code == 2 and f"{flag}: " in err and words in err, (i, err[-3000:])
        assert not out.exists() and not (tmp_path / f"r{i}").exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]  # no staging left
