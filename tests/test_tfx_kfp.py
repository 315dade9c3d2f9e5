"""A TFX pipeline's Plan on KFP (generic_trainer.tfx_kfp), with plans written by hand here: the
pipeline kfp compiles (the wiring, TFX's Cond as dsl.If on the evaluator's `blessed`, pipeline
parameters, importer, caching, the image), KubeflowV2DagRunner's file loaded back by kfp, the
resolver's records (TFX's LatestBlessedModelStrategy), and a real kfp.local run of resolver steps
under a dsl.If, and of a failing step named by its TFX node id."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import run_cli
from generic_trainer.tfx_dsl.steps import (
    NotRun,
    OutputRef,
    ParameterRef,
    PipelineParameter,
    Plan,
    RunWhen,
    Step,
)


def _components(image):
    from generic_trainer.intake import kfp_component

    return kfp_component.components_by_name(image)


def _taxi_like(root: str, enable_cache: bool = True) -> Plan:
    """TFX's taxi native-Keras wiring: examples -> transform -> trainer; a resolver hands the
    evaluator its baseline; the pusher runs only when the evaluator blessed the model."""
    examples = OutputRef("CsvExampleGen", "examples")
    return Plan(
        name="taxi_like",
        root=root,
        enable_cache=enable_cache,
        steps=(
            Step(
                "CsvExampleGen",
                "import_examples",
                parameters={"input_pattern": "/data/taxi/*", "format": "csv"},
                folds=("SchemaGen",),
            ),
            Step(
                "Transform",
                "transform",
                inputs={
                    "examples": examples,
                    "schema": OutputRef("CsvExampleGen", "output_schema"),
                },
                parameters={"module_file": ParameterRef("module_file")},
            ),
            Step(
                "Trainer",
                "trainer",
                inputs={
                    "examples": OutputRef("Transform", "transformed_examples"),
                    "transform_graph": OutputRef("Transform", "transform_graph"),
                    "schema": OutputRef("CsvExampleGen", "output_schema"),
                },
                parameters={
                    "module_file": ParameterRef("module_file"),
                    "train_args": {"num_steps": 100},
                },
            ),
            Step(
                "latest_blessed_model_resolver",
                "resolver",
                parameters={"strategy": "LatestBlessedModelStrategy"},
            ),
            Step(
                "Evaluator",
                "evaluator",
                inputs={
                    "examples": examples,
                    "model": OutputRef("Trainer", "model"),
                    "baseline_model": OutputRef("latest_blessed_model_resolver", "model"),
                },
                parameters={"eval_config": {"model_specs": [{"label_key": "tips"}]}},
            ),
            Step(
                "Pusher",
                "pusher",
                inputs={"model": OutputRef("Trainer", "model")},
                parameters={"push_destination": "/serving/taxi"},
                run_when=(RunWhen("Evaluator", "blessed", 1),),
            ),
        ),
        not_run=(NotRun("StatisticsGen", "StatisticsGen", "TFDV cannot be installed"),),
        parameters=(
            PipelineParameter("module_file", "str", "/home/taxi_utils.py"),
            PipelineParameter("train_steps", "int", 100),
        ),
        beam_pipeline_args=("--direct_num_workers=1",),
    )


def _compiled(tmp_path: Path, plan: Plan, image: str = "example.com/gt:1") -> dict:
    from generic_trainer.tfx_kfp import kfp_pipeline

    out = kfp_pipeline.compile_plan(plan, _components(image), str(tmp_path / "p.yaml"))
    return yaml.safe_load(Path(out).read_text())


def _all_tasks(spec: dict) -> dict:
    """Display name -> task spec, also of the tasks inside dsl.If sub-DAGs."""
    tasks = dict(spec["root"]["dag"]["tasks"])
    for component in spec["components"].values():
        tasks.update(component.get("dag", {}).get("tasks", {}))
    return {t["taskInfo"]["name"]: t for t in tasks.values() if "triggerPolicy" not in t}


def _producer(task: dict, name: str) -> tuple[str, str]:
    art = task["inputs"]["artifacts"][name]
    if "taskOutputArtifact" in art:
        ref = art["taskOutputArtifact"]
        return ref["producerTask"], ref["outputArtifactKey"]
    return "parent", art["componentInputArtifact"]


def test_plan_compiles_into_the_wiring_tfx_gives_it(tmp_path):
    spec = _compiled(tmp_path, _taxi_like("/pipelines/taxi"))
    tasks = _all_tasks(spec)
    assert set(tasks) == {
        "CsvExampleGen",
        "Transform",
        "Trainer",
        "latest_blessed_model_resolver",
        "Evaluator",
        "Pusher",
    }
    keys = {
        name: key
        for key, t in {**spec["root"]["dag"]["tasks"]}.items()
        for name in [t["taskInfo"]["name"]]
    }
    trainer = tasks["Trainer"]
    assert _producer(trainer, "examples") == (keys["Transform"], "transformed_examples")
    assert _producer(trainer, "schema") == (keys["CsvExampleGen"], "output_schema")
    assert trainer["inputs"]["parameters"]["module_file"] == {
        "componentInputParameter": "module_file"
    }
    evaluator = tasks["Evaluator"]
    assert _producer(evaluator, "baseline_model") == (
        keys["latest_blessed_model_resolver"],
        "model",
    )
    records = evaluator["inputs"]["parameters"]["records_dir"]["runtimeValue"]["constant"]
    assert records == "/pipelines/taxi/generic-trainer-records/taxi_like"
    resolver = tasks["latest_blessed_model_resolver"]
    assert resolver["inputs"]["parameters"]["records_dir"]["runtimeValue"]["constant"] == records
    # caching as TFX's enable_cache, never for the resolver (it must see the latest records)
    assert trainer["cachingOptions"].get("enableCache") is True
    assert not resolver["cachingOptions"].get("enableCache")
    # Beam steps get the pipeline's beam_pipeline_args
    beam = tasks["Transform"]["inputs"]["parameters"]["beam_pipeline_args"]
    assert beam["runtimeValue"]["constant"] == ["--direct_num_workers=1"]
    # TFX's Cond(... custom_property('blessed') == 1): a dsl.If on the evaluator's output parameter
    pusher = tasks["Pusher"]
    condition_task = next(t for t in spec["root"]["dag"]["tasks"].values() if "triggerPolicy" in t)
    condition = condition_task["triggerPolicy"]["condition"]
    assert "blessed" in condition and "true" in condition, condition
    assert keys["Evaluator"] in json.dumps(condition_task["inputs"])
    assert pusher["inputs"]["parameters"]["push_destination"]["runtimeValue"]["constant"] == (
        "/serving/taxi"
    )
    # RuntimeParameters: pipeline parameters with their defaults
    params = spec["root"]["inputDefinitions"]["parameters"]
    assert params["module_file"]["defaultValue"] == "/home/taxi_utils.py"
    assert params["train_steps"] == {
        "defaultValue": 100.0,
        "isOptional": True,
        "parameterType": "NUMBER_INTEGER",
    }
    # every executor is this image's generic-trainer with its verb
    verbs = {e["container"]["args"][0] for e in spec["deploymentSpec"]["executors"].values()}
    images = {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()}
    assert verbs == {"import-examples", "transform", "train", "resolve", "evaluate", "push"}
    assert images == {"example.com/gt:1"}
    assert spec["defaultPipelineRoot"] == "/pipelines/taxi"


def test_importer_step_is_kfps_importer(tmp_path):
    plan = Plan(
        name="imported",
        root=str(tmp_path / "root"),
        steps=(
            Step(
                "import_schema",
                "importer",
                parameters={"artifact_uri": "gs://b/schema", "artifact_type": "Schema"},
            ),
            Step(
                "import_model",
                "importer",
                parameters={"artifact_uri": "gs://b/model", "artifact_type": "Model"},
            ),
            Step(
                "Pusher",
                "pusher",
                inputs={"model": OutputRef("import_model", "result")},
                parameters={"push_destination": "gs://b/serving"},
            ),
        ),
    )
    spec = _compiled(tmp_path, plan)
    importers = {
        e["importer"]["artifactUri"]["constant"]: e["importer"]["typeSchema"]["schemaTitle"]
        for e in spec["deploymentSpec"]["executors"].values()
        if "importer" in e
    }
    assert importers == {"gs://b/schema": "system.Artifact", "gs://b/model": "system.Model"}
    tasks = _all_tasks(spec)
    assert _producer(tasks["Pusher"], "model")[1] == "artifact"


def test_kubeflow_v2_runner_writes_a_pipeline_file_kfp_loads(tmp_path):
    from generic_trainer.tfx_kfp import component_source, runners
    from kfp import components

    plan = _taxi_like("gs://bucket/root", enable_cache=False)
    runner = runners.KubeflowV2DagRunner(
        config=runners.KubeflowV2DagRunnerConfig(default_image="example.com/taxi:2"),
        output_dir=str(tmp_path),
        output_filename="taxi_pipeline.json",
    )
    with component_source.using(_components):
        written = runner.run(plan)
    assert written == str(tmp_path / "taxi_pipeline.json")
    spec = json.loads(Path(written).read_text())  # kfp writes JSON for a .json name
    images = {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()}
    assert images == {"example.com/taxi:2"}
    assert all(
        not t.get("cachingOptions", {}).get("enableCache") for t in _all_tasks(spec).values()
    )
    loaded = components.load_component_from_file(written)  # kfp accepts it
    assert loaded.name == "taxi-like"
    assert set(loaded.component_spec.inputs) == {"module_file", "train_steps"}
    # without a default_image: this project's image
    default = runners.KubeflowV2DagRunner(output_dir=str(tmp_path))
    assert default.image() == os.environ.get(runners.IMAGE_ENV, runners.DEFAULT_IMAGE)


def test_default_image_is_the_components_image():
    from generic_trainer.tfx_kfp import runners

    from components import specs

    assert runners.DEFAULT_IMAGE == specs.DEFAULT_IMAGE


def test_runner_outside_the_verb_says_how_to_run_the_file(tmp_path):
    from generic_trainer.errors import UserInputError
    from generic_trainer.tfx_kfp import runners

    with pytest.raises(UserInputError, match="tfx-pipeline run FILE"):
        runners.KubeflowV2DagRunner(output_dir=str(tmp_path)).run(_taxi_like("/r"))
    assert not list(tmp_path.iterdir())


def _fake_model(path: Path) -> Path:
    (path / "Format-Serving" / "variables").mkdir(parents=True)
    (path / "Format-Serving" / "saved_model.pb").write_bytes(b"\x08\x01")
    return path


def _bless(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "BLESSED").write_text("")
    return path


def test_resolve_takes_the_latest_blessed_model_still_there(tmp_path):
    from generic_trainer.tfx_kfp import model_records

    records = tmp_path / "records"
    out = tmp_path / "resolved0"
    first = run_cli(["resolve", "--records-dir", str(records), "--model-dir", str(out)])
    assert first.returncode == 0, first.stderr[-2000:]
    assert os.listdir(out) == [model_records.NOTHING_RESOLVED]
    assert json.loads(first.stdout)["found"] is False

    old = _fake_model(tmp_path / "run1" / "model")
    model_records.record_blessed(str(records), str(old), str(_bless(tmp_path / "run1" / "b")))
    new = _fake_model(tmp_path / "run2" / "model")
    model_records.record_blessed(str(records), str(new), str(tmp_path / "run2" / "b"))
    # run2's blessing was never published (BLESSED missing): run1's model is the latest blessed
    out = tmp_path / "resolved1"
    executor_input = {
        "inputs": {"parameterValues": {"records_dir": str(records)}},
        "outputs": {
            "artifacts": {
                "model": {
                    "artifacts": [
                        {
                            "name": "m",
                            "type": {"schemaTitle": "system.Model"},
                            "uri": str(out),
                            "metadata": {},
                        }
                    ]
                }
            },
            "parameters": {"found": {"outputFile": str(tmp_path / "found")}},
            "outputFile": str(tmp_path / "executor_output.json"),
        },
    }
    second = run_cli(["resolve", "--executor-input", json.dumps(executor_input)])
    assert second.returncode == 0, second.stderr[-2000:]
    assert (out / "Format-Serving" / "saved_model.pb").read_bytes() == b"\x08\x01"
    written = json.loads((tmp_path / "executor_output.json").read_text())
    assert written["parameterValues"] == {"found": True}
    assert written["artifacts"]["model"]["artifacts"][0]["metadata"]["source"] == str(old)
    assert "run2" in second.stderr and "skipped" in second.stderr


def test_evaluate_reads_nothing_resolved_as_no_baseline(tmp_path):
    from generic_trainer.intake.judge_request import build_evaluate_request
    from generic_trainer.tfx_kfp import model_records

    model = _fake_model(tmp_path / "model")
    nothing = tmp_path / "resolved"
    nothing.mkdir()
    (nothing / model_records.NOTHING_RESOLVED).write_text("")
    examples = tmp_path / "examples" / "Split-eval"
    examples.mkdir(parents=True)
    (examples / "data.gz").write_bytes(b"")
    values = {
        "model": str(model),
        "examples": str(tmp_path / "examples"),
        "blessing_dir": str(tmp_path / "blessing"),
        "eval_config": {"label_key": "y", "problem": "binary"},
        "records_dir": str(tmp_path / "records"),
    }
    request = build_evaluate_request({**values, "baseline_model": str(nothing)})
    assert request.baseline_model is None and request.records_dir == str(tmp_path / "records")
    with_baseline = build_evaluate_request({**values, "baseline_model": str(model)})
    assert with_baseline.baseline_model == str(model)


def _resolver_plan(root: Path) -> Plan:
    """resolver `first`; only when it found a model, resolver `second` (a TFX Cond)."""
    return Plan(
        name="resolvers",
        root=str(root),
        steps=(
            Step("first", "resolver", parameters={"strategy": "LatestBlessedModelStrategy"}),
            Step(
                "second",
                "resolver",
                parameters={"strategy": "LatestBlessedModelStrategy"},
                run_when=(RunWhen("first", "found", True),),
            ),
        ),
        not_run=(NotRun("StatisticsGen", "StatisticsGen", "TFDV cannot be installed"),),
        notices=("metadata_connection_config is not used: KFP keeps the metadata",),
    )


def _run_local(plan: Plan) -> subprocess.CompletedProcess:
    code = (
        "import pickle, sys, logging\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "from generic_trainer.intake import kfp_component\n"
        "from generic_trainer.tfx_kfp import component_source, local_run\n"
        "plan = pickle.loads(bytes.fromhex(sys.argv[1]))\n"
        "with component_source.using(kfp_component.components_by_name):\n"
        "    local_run.run_plan(plan)\n"
    )
    import pickle

    return subprocess.run(
        [sys.executable, "-c", code, pickle.dumps(plan).hex()],
        capture_output=True,
        text=True,
        timeout=600,
    )


def _outputs(root: Path, task: str) -> list[Path]:
    return [p for p in root.glob(f"resolvers-*/{task}/model") if "workspace-" not in str(p)]


@pytest.mark.slow
def test_local_run_follows_the_condition_and_resolves_fresh_each_run(tmp_path):
    from generic_trainer.tfx_kfp import kfp_pipeline, model_records

    root = tmp_path / "root"
    plan = _resolver_plan(root)
    records = Path(kfp_pipeline.records_dir(plan))
    assert records == root / "generic-trainer-records" / "resolvers"
    first = _run_local(plan)
    assert first.returncode == 0, first.stderr[-4000:]
    log = first.stdout + first.stderr
    assert "not run: StatisticsGen (StatisticsGen): TFDV cannot be installed" in log
    assert "notice: metadata_connection_config is not used" in log
    assert "step second (resolver) runs as kfp.local task generic-resolver-2" in log
    assert [os.listdir(p) for p in _outputs(root, "generic-resolver")] == [
        [model_records.NOTHING_RESOLVED]
    ]
    assert _outputs(root, "generic-resolver-2") == []  # the condition was false
    model = _fake_model(tmp_path / "blessed_model")
    model_records.record_blessed(str(records), str(model), str(_bless(tmp_path / "blessing")))
    second = _run_local(plan)
    assert second.returncode == 0, second.stderr[-4000:]
    found = sorted(_outputs(root, "generic-resolver-2"))
    assert len(found) == 1 and (found[0] / "Format-Serving" / "saved_model.pb").is_file()


@pytest.mark.slow
def test_local_run_of_a_latest_artifact_resolver_takes_the_newest_record(tmp_path):
    """TFX's LatestArtifactStrategy of TransformCache under kfp.local: nothing on a first run,
    then the newest analyzer cache a transform recorded."""
    from generic_trainer.tfx_kfp import kfp_pipeline, model_records

    root = tmp_path / "root"
    parameters = {
        "strategy": "LatestArtifactStrategy",
        "artifact_types": {"cache": "TransformCache"},
        "pipeline_name": "resolvers",
        "pipeline_root": str(root),
    }
    plan = Plan(
        name="resolvers", root=str(root), steps=(Step("cache", "resolver", {}, parameters),)
    )
    first = _run_local(plan)
    assert first.returncode == 0, first.stderr[-4000:]
    assert [os.listdir(p) for p in _outputs(root, "generic-resolver")] == [
        [model_records.NOTHING_RESOLVED]
    ]
    records = kfp_pipeline.records_dir(plan)
    for run in ("run1", "run2"):
        (tmp_path / run / "cache" / "key").mkdir(parents=True)
        model_records.record_artifact(records, "TransformCache", str(tmp_path / run / "cache"))
    second = _run_local(plan)
    assert second.returncode == 0, second.stderr[-4000:]
    log = second.stdout + second.stderr
    assert f"resolved the latest TransformCache artifact: {tmp_path / 'run2' / 'cache'}" in log
    resolved = sorted(_outputs(root, "generic-resolver"))
    assert len(resolved) == 2 and os.listdir(resolved[-1]) == ["key"]


@pytest.mark.slow
def test_a_failing_step_ends_the_run_naming_its_tfx_node(tmp_path):
    plan = Plan(
        name="failing",
        root=str(tmp_path / "root"),
        steps=(
            Step(
                "import_model",
                "importer",
                parameters={"artifact_uri": str(tmp_path / "no_model"), "artifact_type": "Model"},
            ),
            Step(
                "Pusher.fails",
                "pusher",
                inputs={"model": OutputRef("import_model", "artifact")},
                parameters={"push_destination": str(tmp_path / "serving")},
            ),
        ),
    )
    proc = _run_local(plan)
    assert proc.returncode != 0
    assert "step Pusher.fails failed" in proc.stderr, proc.stderr[-3000:]
    assert not (tmp_path / "serving").exists()


PIPELINE_FILE = """
import os
from absl import app, flags
from tfx import v1 as tfx

flags.DEFINE_string("image", None, "the image")
FLAGS = flags.FLAGS


def main(argv):
    example_gen = tfx.components.CsvExampleGen(input_base=os.path.join(os.environ["HOME"], "data"))
    trainer = tfx.components.Trainer(
        module_file="/m/trainer.py",
        examples=example_gen.outputs["examples"],
        train_args=tfx.proto.TrainArgs(num_steps=10),
    )
    pusher = tfx.components.Pusher(
        model=trainer.outputs["model"],
        push_destination=tfx.proto.PushDestination(
            filesystem=tfx.proto.PushDestination.Filesystem(base_directory="/serving")
        ),
    )
    pipeline = tfx.dsl.Pipeline(
        pipeline_name="small",
        pipeline_root="gs://bucket/root",
        components=[example_gen, trainer, pusher],
        enable_cache=True,
    )
    config = tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(default_image=FLAGS.image)
    tfx.orchestration.experimental.KubeflowV2DagRunner(
        config=config, output_filename="small.yaml"
    ).run(pipeline)


if __name__ == "__main__":
    app.run(main)
"""


def test_tfx_pipeline_verb_plans_and_compiles_a_pipeline_file(tmp_path):
    """`tfx-pipeline plan` prints tfx_dsl's plan and writes nothing; `run` with its absl flags
    compiles it (the file's own KubeflowV2DagRunner) for the image the flag names."""
    file = tmp_path / "small_pipeline.py"
    file.write_text(PIPELINE_FILE)
    planned = run_cli(
        ["tfx-pipeline", "plan", str(file), "--image=example.com/small:3"],
        cwd=str(tmp_path),
        env={"HOME": str(tmp_path)},
    )
    assert planned.returncode == 0, planned.stderr[-3000:]
    assert "pipeline small (root gs://bucket/root" in planned.stdout
    assert "Pusher: runs as pusher" in planned.stdout
    assert not (tmp_path / "small.yaml").exists()
    ran = run_cli(
        ["tfx-pipeline", "run", str(file), "--image=example.com/small:3"],
        cwd=str(tmp_path),
        env={"HOME": str(tmp_path)},
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    spec = yaml.safe_load((tmp_path / "small.yaml").read_text())
    images = {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()}
    assert images == {"example.com/small:3"}
    tasks = {t["taskInfo"]["name"]: t for t in spec["root"]["dag"]["tasks"].values()}
    assert set(tasks) == {"CsvExampleGen", "Trainer", "Pusher"}
    assert all(t["cachingOptions"]["enableCache"] for t in tasks.values())
    model = tasks["Pusher"]["inputs"]["artifacts"]["model"]["taskOutputArtifact"]
    assert model["outputArtifactKey"] == "model"


def test_tfx_pipeline_verb_refuses_a_missing_file(tmp_path):
    proc = run_cli(["tfx-pipeline", "run", str(tmp_path / "none.py")])
    assert proc.returncode == 2 and "FILE" in proc.stderr and "none.py" in proc.stderr
