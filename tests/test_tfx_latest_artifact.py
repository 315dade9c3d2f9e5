"""TFX's LatestArtifactStrategy on any KFP (generic_trainer.tfx_kfp): the records transform and push
leave under the pipeline root (model_records.py), the resolve step that reads them
(`--strategy latest_artifact`), how a plan's resolver compiles (its artifact type, the records
dir every recording step is given, the resolver's one output feeding Transform's analyzer_cache),
and what is refused by name (SpanRangeStrategy, a type no step records, a producer filter,
several channels). The penguin local file runs twice with it in test_tfx_pipeline_files.py."""

import json
import os
from pathlib import Path

import pytest
import yaml
from conftest import run_cli
from generic_trainer.tfx_dsl.steps import OutputRef, Plan, Step


def _fake_model(path: Path) -> Path:
    (path / "Format-Serving" / "variables").mkdir(parents=True)
    (path / "Format-Serving" / "saved_model.pb").write_bytes(b"\x08\x01")
    return path


def _dir(path: Path, name: str = "entry") -> Path:
    path.mkdir(parents=True)
    (path / name).write_text(str(path))
    return path


def test_latest_artifact_is_the_newest_record_still_there(tmp_path):
    from generic_trainer.tfx_kfp import model_records

    records = str(tmp_path / "records")
    assert model_records.latest_artifact(records, "TransformCache") is None  # a first run
    old = _dir(tmp_path / "run1" / "cache")
    model_records.record_artifact(records, "TransformCache", str(old))
    new = tmp_path / "run2" / "cache"
    model_records.record_artifact(records, "TransformCache", str(new), {"k": 1})
    assert model_records.latest_artifact(records, "TransformCache")["uri"] == str(old)
    _dir(new)
    latest = model_records.latest_artifact(records, "TransformCache")
    assert (latest["uri"], latest["properties"]) == (str(new), {"k": 1})
    assert model_records.latest_artifact(records, "PushedModel") is None  # per type


def _resolve(tmp_path: Path, out: Path, *args: str):
    return run_cli(
        ["resolve", "--records-dir", str(tmp_path / "records"), "--model-dir", str(out), *args]
    )


@pytest.mark.slow
def test_push_records_each_pushed_model_and_resolve_hands_on_the_latest(tmp_path):
    """Push (only when it pushes) leaves a PushedModel record; `resolve --strategy
    latest_artifact` copies the latest one, NOTHING_RESOLVED before; a type no step records is
    refused naming --artifact-type."""
    from generic_trainer.tfx_kfp import model_records

    records = tmp_path / "records"
    nothing = _resolve(
        tmp_path, tmp_path / "r0", "--strategy", "latest_artifact", "--artifact-type", "PushedModel"
    )
    assert nothing.returncode == 0, nothing.stderr[-2000:]
    assert os.listdir(tmp_path / "r0") == [model_records.NOTHING_RESOLVED]
    assert json.loads(nothing.stdout)["found"] is False

    model = _fake_model(tmp_path / "model")
    not_blessed = tmp_path / "blessing"
    not_blessed.mkdir()
    (not_blessed / "NOT_BLESSED").write_text("")
    push = ["push", "--model", str(model), "--push-destination", str(tmp_path / "serving")]
    push += ["--records-dir", str(records)]
    refused = run_cli([*push, "--model-blessing", str(not_blessed)])
    assert refused.returncode == 0, refused.stderr[-2000:]
    assert not (records / "artifacts" / "PushedModel").exists()  # not pushed: no record

    pushed = run_cli([*push, "--pushed-model-dir", str(tmp_path / "pushed")])
    assert pushed.returncode == 0, pushed.stderr[-2000:]
    version = json.loads(pushed.stdout)["pushed_version"]
    record = model_records.latest_artifact(str(records), "PushedModel")
    assert record["uri"] == str(tmp_path / "pushed")
    assert record["properties"] == {
        "pushed": 1,
        "pushed_destination": f"{tmp_path / 'serving'}/{version}",
        "pushed_version": version,
        "model": str(model),
    }
    found = _resolve(
        tmp_path, tmp_path / "r1", "--strategy", "latest_artifact", "--artifact-type", "PushedModel"
    )
    assert found.returncode == 0, found.stderr[-2000:]
    assert (tmp_path / "r1" / "saved_model.pb").read_bytes() == b"\x08\x01"
    assert "resolved the latest PushedModel artifact" in found.stderr

    bad = _resolve(
        tmp_path, tmp_path / "r2", "--strategy", "latest_artifact", "--artifact-type", "Model"
    )
    assert bad.returncode == 2 and "--artifact-type" in bad.stderr, bad.stderr[-2000:]
    assert "TransformCache" in bad.stderr and not (tmp_path / "r2").exists()


def _cache_plan(root: str, **resolver: object) -> Plan:
    """penguin local's wiring: a LatestArtifactStrategy resolver of TransformCache feeds
    Transform's analyzer_cache; the pusher records what it pushes."""
    parameters = {
        "strategy": "LatestArtifactStrategy",
        "artifact_types": {"cache": "TransformCache"},
        "pipeline_name": "penguin",
        "pipeline_root": root,
        **resolver,
    }
    return Plan(
        name="penguin",
        root=root,
        enable_cache=True,
        steps=(
            Step("CsvExampleGen", "import_examples", parameters={"input_pattern": "/d/*"}),
            Step("transform_cache_resolver", "resolver", parameters=parameters),
            Step(
                "Transform",
                "transform",
                inputs={
                    "examples": OutputRef("CsvExampleGen", "examples"),
                    "schema": OutputRef("CsvExampleGen", "output_schema"),
                    "analyzer_cache": OutputRef("transform_cache_resolver", "cache"),
                },
                parameters={"module_file": "/m.py"},
            ),
            Step(
                "Trainer",
                "trainer",
                inputs={
                    "examples": OutputRef("Transform", "transformed_examples"),
                    "transform_graph": OutputRef("Transform", "transform_graph"),
                },
                parameters={"module_file": "/m.py"},
            ),
            Step(
                "Pusher",
                "pusher",
                inputs={"model": OutputRef("Trainer", "model")},
                parameters={"push_destination": "/serving"},
            ),
        ),
    )


def _compile(tmp_path: Path, plan: Plan) -> dict:
    from generic_trainer.intake import kfp_component
    from generic_trainer.tfx_kfp import kfp_pipeline

    components = kfp_component.components_by_name("example.com/gt:1")
    out = kfp_pipeline.compile_plan(plan, components, str(tmp_path / "p.yaml"))
    return yaml.safe_load(Path(out).read_text())


def test_latest_artifact_resolver_compiles_into_transforms_analyzer_cache(tmp_path):
    spec = _compile(tmp_path, _cache_plan("/pipelines/penguin"))
    tasks = {t["taskInfo"]["name"]: t for t in spec["root"]["dag"]["tasks"].values()}
    keys = {t["taskInfo"]["name"]: k for k, t in spec["root"]["dag"]["tasks"].items()}

    def constant(task: str, name: str) -> object:
        return tasks[task]["inputs"]["parameters"][name]["runtimeValue"]["constant"]

    records = "/pipelines/penguin/generic-trainer-records/penguin"
    assert constant("transform_cache_resolver", "strategy") == "latest_artifact"
    assert constant("transform_cache_resolver", "artifact_type") == "TransformCache"
    for task in ("transform_cache_resolver", "Transform", "Pusher"):
        assert constant(task, "records_dir") == records, task
    cache = tasks["Transform"]["inputs"]["artifacts"]["analyzer_cache"]["taskOutputArtifact"]
    assert cache == {"producerTask": keys["transform_cache_resolver"], "outputArtifactKey": "model"}
    assert not tasks["transform_cache_resolver"]["cachingOptions"].get("enableCache")
    assert tasks["Transform"]["cachingOptions"]["enableCache"] is True


@pytest.mark.parametrize(
    ("change", "where", "words"),
    [
        ({"strategy": "SpanRangeStrategy"}, "strategy_class", "not recorded by span"),
        ({"artifact_types": {"model": "Model"}}, ".model", "no step records Model"),
        ({"producers": {"cache": "Transform"}}, ".cache", "producer_component_id='Transform'"),
        (
            {"artifact_types": {"cache": "TransformCache", "pushed": "PushedModel"}},
            "transform_cache_resolver",
            "over 2 channels",
        ),
    ],
)
def test_what_the_records_cannot_honour_is_refused_by_name(tmp_path, change, where, words):
    from generic_trainer.errors import UserInputError

    with pytest.raises(UserInputError, match=words) as raised:
        _compile(tmp_path, _cache_plan("/r", **change))
    assert raised.value.input_name.startswith("transform_cache_resolver")
    assert where in raised.value.input_name
    assert not (tmp_path / "p.yaml").exists()


def test_local_steps_get_the_users_keras_choice_not_the_clis(tmp_path, monkeypatch):
    """`tfx-pipeline run` hands its steps TF_USE_LEGACY_KERAS as the user set it (empty: unset,
    so train's --keras auto gives a TFX module tf_keras, as TFX and the step's own container do),
    not the Keras 3 the CLI chose for its own process."""
    from generic_trainer import tfx_pipeline
    from generic_trainer.intake.tfx_pipeline_options import build_tfx_pipeline_request

    file = tmp_path / "p.py"
    file.write_text("import os\nprint('KERAS=' + repr(os.environ['TF_USE_LEGACY_KERAS']))\n")
    values = {"action": "run", "pipeline_file": str(file)}
    for user, steps in ((None, ""), ("1", "1")):
        environ = {} if user is None else {"TF_USE_LEGACY_KERAS": user}
        request = build_tfx_pipeline_request(values, environ)
        assert request.legacy_keras == steps
        monkeypatch.setenv("TF_USE_LEGACY_KERAS", "0")  # what the CLI sets for itself
        tfx_pipeline.run(request)
        assert os.environ["TF_USE_LEGACY_KERAS"] == steps
