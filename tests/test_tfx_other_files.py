"""TFX pipeline files beyond the seven issue 34 names, as a TFX user keeps them: they plan and run,
or are refused clearly (what, why, what to do instead).

Two kinds of files: the rest of the tfx wheel's example pipelines, used in place (the Airflow
workshop's taxi DAG, taxi_pipeline_simple on Airflow, bigquery_ml, the custom component examples,
ranking, penguin sklearn on GCP), and files written here in the style of TFX's tutorials
(tensorflow.org/tfx: penguin_simple, penguin_tfdv, penguin_tft, penguin_tfma, the Vertex
pipelines ones), never copied from them. penguin_simple runs end to end with `tfx-pipeline run`.
Also: an import the hook does not serve fails with a short message; a file that calls
`absl.app.run(main)` with flags runs twice in one process and leaves logging as it was.
"""

from __future__ import annotations

import csv
import glob
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import PENGUIN, cli_env, run_cli
from generic_trainer import tfx_hook
from generic_trainer.errors import UserInputError
from generic_trainer.tfx_dsl import capture, planning
from test_tfx_real_modules import tfx_root  # noqa: F401 (the tfx wheel fixture)


@pytest.fixture(autouse=True)
def _no_hook_left():
    """The `tfx` hook is taken away after each test (capture installs it, as the CLI does)."""
    yield
    tfx_hook.uninstall()


def _write(folder: Path, body: str, name: str = "pipeline.py") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(body))
    return path


def _steps(plan) -> list[tuple[str, str]]:
    return [(s.id, s.component) for s in plan.steps]


def _wiring(plan) -> dict[str, dict[str, str]]:
    return {s.id: {k: f"{r.step}.{r.output}" for k, r in s.inputs.items()} for s in plan.steps}


def _plan_file(path: Path, args=(), home: Path | None = None):
    (run,) = capture.run_pipeline_file(str(path), list(args), home=str(home) if home else None)
    return planning.plan(run.pipeline), run


# ------------------------------------------------------------------------------------------------
# imports the hook does not serve: short, named, why and what to do


@pytest.mark.parametrize(
    "statement,name,why",
    [
        (
            "from tfx.components.experimental.data_view import binder_component",
            "tfx.components.experimental.data_view",
            "DataView",
        ),
        (
            "from tfx.dsl.components.base import base_component",
            "tfx.dsl.components.base.base_component",
            "custom components",
        ),
        (
            "from tfx.dsl.component.experimental import container_component",
            "tfx.dsl.component.experimental.container_component",
            "custom components",
        ),
        ("from tfx.components import ModelValidator", "tfx.components.ModelValidator", "Evaluator"),
        (
            "from tfx.extensions.google_cloud_big_query.example_gen import component",
            "tfx.extensions.google_cloud_big_query",
            "CsvExampleGen",
        ),
        (
            "from tfx.orchestration.experimental.interactive import interactive_context",
            "tfx.orchestration.experimental.interactive",
            "LocalDagRunner",
        ),
        ("from tfx.components.trainer.executor import Executor", "executor.Executor", "run_fn"),
        (  # the Vertex BigQuery tutorial's spelling
            "from tfx import v1 as tfx\ntfx.extensions.google_cloud_big_query.BigQueryExampleGen",
            "tfx.v1.extensions.google_cloud_big_query",
            "BigQuery",
        ),
        (  # the recommenders tutorial's TFDS ExampleGen
            "from tfx.components.example_gen.component import FileBasedExampleGen",
            "tfx.components.example_gen",
            "ExampleGen executors",
        ),
        (  # the python function component tutorial's artifact types
            "from tfx.types.experimental.simple_artifacts import Dataset",
            "tfx.types.experimental.simple_artifacts",
            "custom components",
        ),
        ("from tfx.v1.components import NoSuchComponent", "NoSuchComponent", "none of TFX"),
    ],
)
def test_an_import_not_served_fails_short_naming_it_why_and_where_the_list_is(statement, name, why):
    tfx_hook.install()
    with pytest.raises(ImportError) as raised:
        exec(statement, {})
    message = str(raised.value)
    assert name in message and why in message
    assert 'docs/guides/tfx.md ("Supported tfx imports")' in message
    assert len(message) < 700  # not the wall of every supported name
    assert "tfx.utils.io_utils" not in message


def test_the_docs_list_every_supported_import():
    """docs/guides/tfx.md's list (where the error points) is the hook's own."""
    text = (Path(__file__).parent.parent / "docs" / "guides" / "tfx.md").read_text()
    section = text.split("## Supported tfx imports", 1)[1].split("\n## ", 1)[0]
    flat = " ".join(section.split())
    entries = [e.split(" (", 1) for e in tfx_hook.supported().split("; ") if " (" in e]
    assert len(entries) > 40
    for module, names in entries:  # `tfx.x.y (A, B)` is listed as "- `tfx.x.y`: A, B"
        assert f"- `{module}`: {names[:-1]}" in flat, module


def test_the_verb_reports_an_import_not_served_in_one_short_line(tmp_path):
    path = _write(tmp_path, "from tfx.components import CsvExampleGen, ModelValidator\n")
    proc = run_cli(["tfx-pipeline", "plan", str(path)], cwd=str(tmp_path))
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = [x for x in proc.stderr.splitlines() if "ModelValidator" in x]
    assert (
        "the pipeline file's import failed: the module imports tfx.components.ModelValidator"
        in (line)
    )
    assert "Evaluator" in line and "docs/guides/tfx.md" in line and len(line) < 800
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------------------------------------
# absl.app.run(main) with flags: in-process twice; logging left as it was

ABSL_FILE = """
    from absl import app, flags, logging
    from tfx import v1 as tfx

    flags.DEFINE_string("data", "/nowhere", "the data folder")
    flags.DEFINE_integer("steps", 1, "train steps")
    FLAGS = flags.FLAGS


    def main(argv):
        logging.set_verbosity(logging.ERROR)
        example_gen = tfx.components.CsvExampleGen(input_base=FLAGS.data)
        trainer = tfx.components.Trainer(
            module_file="/m/trainer.py",
            examples=example_gen.outputs["examples"],
            train_args=tfx.proto.TrainArgs(num_steps=FLAGS.steps),
        )
        tfx.orchestration.LocalDagRunner().run(
            tfx.dsl.Pipeline(
                pipeline_name="absl", pipeline_root="/root", components=[example_gen, trainer]
            )
        )


    if __name__ == "__main__":
        app.run(main)
"""


def test_a_file_calling_absl_app_run_with_flags_runs_twice_and_leaves_logging_as_it_was(
    tmp_path,
):
    path = _write(tmp_path, ABSL_FILE)
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    root.setLevel(logging.INFO)
    try:
        for data, steps in (("/first", 5), ("/second", 7)):
            plan, _ = _plan_file(path, [f"--data={data}", f"--steps={steps}"])
            assert plan.steps[0].parameters["input_pattern"] == data
            assert plan.steps[1].parameters["train_args"] == {"num_steps": steps}
            # app.run added absl's handler and set the level from --verbosity; both undone
            assert root.level == logging.INFO and root.handlers == handlers
        from absl import flags

        assert "data" not in flags.FLAGS and not flags.FLAGS.is_parsed()
        assert "verbosity" in flags.FLAGS  # absl's own flags stay
    finally:
        root.setLevel(level)


# ------------------------------------------------------------------------------------------------
# runners that cannot run here; TFX's old executor spelling (no TensorFlow: legacy imports only)

AIRFLOW_FILE = """
    import datetime, os
    from tfx.components import CsvExampleGen, Pusher, Trainer
    from tfx.components.trainer.executor import GenericExecutor
    from tfx.dsl.components.base import executor_spec
    from tfx.orchestration import metadata, pipeline
    from tfx.orchestration.airflow.airflow_dag_runner import (
        AirflowDagRunner,
        AirflowPipelineConfig,
    )
    from tfx.proto import pusher_pb2, trainer_pb2

    _airflow_config = {"schedule_interval": None, "start_date": datetime.datetime(2019, 1, 1)}
    home = os.environ["HOME"]
    example_gen = CsvExampleGen(input_base=os.path.join(home, "data"))
    trainer = Trainer(
        module_file=os.path.join(home, "trainer.py"),
        custom_executor_spec=executor_spec.ExecutorClassSpec(GenericExecutor),
        examples=example_gen.outputs["examples"],
        train_args=trainer_pb2.TrainArgs(num_steps=100),
    )
    pusher = Pusher(
        model=trainer.outputs["model"],
        push_destination=pusher_pb2.PushDestination(
            filesystem=pusher_pb2.PushDestination.Filesystem(
                base_directory=os.path.join(home, "serving")
            )
        ),
    )
    DAG = AirflowDagRunner(AirflowPipelineConfig(_airflow_config)).run(
        pipeline.Pipeline(
            pipeline_name="airflow_dag",
            pipeline_root=os.path.join(home, "root"),
            components=[example_gen, trainer, pusher],
            metadata_connection_config=metadata.sqlite_metadata_connection_config(
                os.path.join(home, "metadata.db")
            ),
        )
    )
"""


def test_an_airflow_dag_plans_and_run_refuses_naming_the_runners_that_work(tmp_path):
    """`plan` shows the pipeline (the GenericExecutor spec is the train step) with the refusal;
    `run` exits 2 naming LocalDagRunner and KubeflowV2DagRunner, writing nothing."""
    path = _write(tmp_path, AIRFLOW_FILE, "taxi_dag.py")
    env = {"HOME": str(tmp_path)}
    planned = run_cli(["tfx-pipeline", "plan", str(path)], cwd=str(tmp_path), env=env)
    assert planned.returncode == 0, planned.stderr[-3000:]
    assert "AirflowDagRunner:\n(`tfx-pipeline run` refuses this runner: Airflow" in planned.stdout
    assert "Trainer: runs as trainer" in planned.stdout
    assert "custom_executor_spec" not in planned.stdout
    ran = run_cli(["tfx-pipeline", "run", str(path)], cwd=str(tmp_path), env=env)
    assert ran.returncode == 2, ran.stderr[-3000:]
    assert "AirflowDagRunner: Airflow cannot run here" in ran.stderr
    assert "LocalDagRunner" in ran.stderr and "KubeflowV2DagRunner" in ran.stderr
    assert "Traceback" not in ran.stderr
    assert sorted(os.listdir(tmp_path)) == ["taxi_dag.py"]


KUBEFLOW_V1_FILE = """
    from tfx import v1 as tfx

    example_gen = tfx.components.CsvExampleGen(input_base="gs://bucket/data")
    metadata_config = tfx.orchestration.experimental.get_default_kubeflow_metadata_config()
    runner_config = tfx.orchestration.experimental.KubeflowDagRunnerConfig(
        kubeflow_metadata_config=metadata_config, tfx_image="gcr.io/my/tfx:1.21.0"
    )
    tfx.orchestration.experimental.KubeflowDagRunner(config=runner_config).run(
        tfx.dsl.Pipeline(
            pipeline_name="v1", pipeline_root="gs://bucket/root", components=[example_gen]
        )
    )
"""


def test_a_kubeflow_v1_runner_plans_and_refuses_to_run(tmp_path):
    path = _write(tmp_path, KUBEFLOW_V1_FILE)
    plan, run = _plan_file(path)
    assert type(run.runner).__name__ == "KubeflowDagRunner"
    assert _steps(plan) == [("CsvExampleGen", "import_examples")]
    with pytest.raises(UserInputError) as refused:
        capture.run_pipeline_file(str(path), capture=False)
    assert refused.value.input_name == "KubeflowDagRunner"
    assert "KFP v1" in str(refused.value) and "KubeflowV2DagRunner" in str(refused.value)


# ------------------------------------------------------------------------------------------------
# tutorial-style files (tensorflow.org/tfx's penguin tutorials and the Vertex ones)

TUTORIAL_HEAD = """
    import os
    from tfx import v1 as tfx

    PIPELINE_NAME = "{name}"
    PIPELINE_ROOT = os.path.join("pipelines", PIPELINE_NAME)
    METADATA_PATH = os.path.join("metadata", PIPELINE_NAME, "metadata.db")
    SERVING_MODEL_DIR = os.path.join("serving_model", PIPELINE_NAME)
    DATA_ROOT = "data"
    SCHEMA_PATH = "schema"
    _trainer_module_file = "penguin_trainer.py"
    _transform_module_file = "penguin_transform.py"


    def _pusher(trainer, **kwargs):
        return tfx.components.Pusher(
            model=trainer.outputs["model"],
            push_destination=tfx.proto.PushDestination(
                filesystem=tfx.proto.PushDestination.Filesystem(base_directory=SERVING_MODEL_DIR)
            ),
            **kwargs,
        )
"""
TUTORIAL_RUN = """

    tfx.orchestration.LocalDagRunner().run(
        tfx.dsl.Pipeline(
            pipeline_name=PIPELINE_NAME,
            pipeline_root=PIPELINE_ROOT,
            metadata_connection_config=tfx.orchestration.metadata
            .sqlite_metadata_connection_config(METADATA_PATH),
            components=_components(),
            beam_pipeline_args=["--direct_num_workers=1"],
        )
    )
"""
SIMPLE = """

    def _components():
        example_gen = tfx.components.CsvExampleGen(input_base=DATA_ROOT)
        trainer = tfx.components.Trainer(
            module_file=_trainer_module_file,
            examples=example_gen.outputs["examples"],
            train_args=tfx.proto.TrainArgs(num_steps=100),
            eval_args=tfx.proto.EvalArgs(num_steps=5),
        )
        return [example_gen, trainer, _pusher(trainer)]
"""
TFDV_SCHEMA = """

    def _components():
        example_gen = tfx.components.CsvExampleGen(input_base=DATA_ROOT)
        statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
        schema_gen = tfx.components.SchemaGen(
            statistics=statistics_gen.outputs["statistics"], infer_feature_shape=True
        )
        return [example_gen, statistics_gen, schema_gen]
"""
TFDV = """

    def _components():
        example_gen = tfx.components.CsvExampleGen(input_base=DATA_ROOT)
        statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
        schema_importer = tfx.dsl.Importer(
            source_uri=SCHEMA_PATH, artifact_type=tfx.types.standard_artifacts.Schema
        ).with_id("schema_importer")
        example_validator = tfx.components.ExampleValidator(
            statistics=statistics_gen.outputs["statistics"],
            schema=schema_importer.outputs["result"],
        )
        trainer = tfx.components.Trainer(
            module_file=_trainer_module_file,
            examples=example_gen.outputs["examples"],
            schema=schema_importer.outputs["result"],
            train_args=tfx.proto.TrainArgs(num_steps=100),
            eval_args=tfx.proto.EvalArgs(num_steps=5),
        )
        return [
            example_gen, statistics_gen, schema_importer, example_validator, trainer,
            _pusher(trainer),
        ]
"""
TFT = """

    def _components():
        example_gen = tfx.components.CsvExampleGen(input_base=DATA_ROOT)
        schema_gen = tfx.components.ImportSchemaGen(schema_file=SCHEMA_PATH + "/schema.pbtxt")
        transform = tfx.components.Transform(
            examples=example_gen.outputs["examples"],
            schema=schema_gen.outputs["schema"],
            materialize=True,
            module_file=_transform_module_file,
        )
        trainer = tfx.components.Trainer(
            module_file=_trainer_module_file,
            examples=transform.outputs["transformed_examples"],
            transform_graph=transform.outputs["transform_graph"],
            schema=schema_gen.outputs["schema"],
            train_args=tfx.proto.TrainArgs(num_steps=100),
            eval_args=tfx.proto.EvalArgs(num_steps=5),
        )
        return [example_gen, schema_gen, transform, trainer, _pusher(trainer)]
"""
VERTEX_TRAINING = """

    def _components():
        example_gen = tfx.components.CsvExampleGen(input_base=DATA_ROOT)
        vertex_job_spec = {
            "project": "my-project",
            "worker_pool_specs": [{
                "machine_spec": {"machine_type": "n1-standard-4"},
                "replica_count": 1,
                "container_spec": {"image_uri": "gcr.io/tfx-oss-public/tfx:1.21.0"},
            }],
        }
        trainer = tfx.extensions.google_cloud_ai_platform.Trainer(
            module_file=_trainer_module_file,
            examples=example_gen.outputs["examples"],
            train_args=tfx.proto.TrainArgs(num_steps=100),
            eval_args=tfx.proto.EvalArgs(num_steps=5),
            custom_config={
                tfx.extensions.google_cloud_ai_platform.ENABLE_VERTEX_KEY: True,
                tfx.extensions.google_cloud_ai_platform.VERTEX_REGION_KEY: "us-central1",
                tfx.extensions.google_cloud_ai_platform.TRAINING_ARGS_KEY: vertex_job_spec,
                "use_gpu": False,
            },
        )
        pusher = tfx.extensions.google_cloud_ai_platform.Pusher(
            model=trainer.outputs["model"],
            custom_config={
                tfx.extensions.google_cloud_ai_platform.ENABLE_VERTEX_KEY: True,
                tfx.extensions.google_cloud_ai_platform.VERTEX_REGION_KEY: "us-central1",
                tfx.extensions.google_cloud_ai_platform.VERTEX_CONTAINER_IMAGE_URI_KEY: "img",
                tfx.extensions.google_cloud_ai_platform.SERVING_ARGS_KEY: {"project_id": "p"},
            },
        )
        return [example_gen, trainer, pusher]
"""
VERTEX_SIMPLE_RUN = """

    runner = tfx.orchestration.experimental.KubeflowV2DagRunner(
        config=tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(),
        output_filename=PIPELINE_NAME + "_pipeline.json",
    )
    _ = runner.run(
        tfx.dsl.Pipeline(
            pipeline_name=PIPELINE_NAME,
            pipeline_root="gs://my-bucket/pipeline_root/" + PIPELINE_NAME,
            components=_components(),
        )
    )
"""


def _tutorial(tmp_path: Path, name: str, body: str, run: str = TUTORIAL_RUN) -> Path:
    text = textwrap.dedent(TUTORIAL_HEAD).replace("{name}", name)
    return _write(tmp_path, text + textwrap.dedent(body) + textwrap.dedent(run), f"{name}.py")


@pytest.fixture()
def in_tmp(tmp_path):
    """The test runs in tmp_path (the tutorials' paths are relative, as in their notebooks)."""
    cwd = os.getcwd()
    os.chdir(tmp_path)
    yield tmp_path
    os.chdir(cwd)


def test_tutorial_penguin_simple_and_tfdv_plans(in_tmp):
    simple, run = _plan_file(_tutorial(in_tmp, "penguin-simple", SIMPLE))
    assert type(run.runner).__name__ == "LocalDagRunner"  # tfx.v1.orchestration's spelling
    assert _steps(simple) == [
        ("CsvExampleGen", "import_examples"),
        ("Trainer", "trainer"),
        ("Pusher", "pusher"),
    ]
    trainer = simple.steps[1].parameters
    assert trainer["module_file"] == f"{in_tmp}/penguin_trainer.py"
    assert (trainer["train_args"], trainer["eval_args"]) == ({"num_steps": 100}, {"num_steps": 5})
    assert simple.beam_pipeline_args == ("--direct_num_workers=1",)
    assert simple.notices == (planning.METADATA_NOTICE,)

    schema, _ = _plan_file(_tutorial(in_tmp, "penguin-schema", TFDV_SCHEMA))
    assert _steps(schema) == [("CsvExampleGen", "import_examples")]
    assert schema.steps[0].folds == ("SchemaGen",)
    assert schema.steps[0].parameters["infer_feature_shape"] is True
    assert [n.id for n in schema.not_run] == ["StatisticsGen"]

    tfdv, _ = _plan_file(_tutorial(in_tmp, "penguin-tfdv", TFDV))
    assert [c for _, c in _steps(tfdv)] == ["import_examples", "importer", "trainer", "pusher"]
    assert _wiring(tfdv)["Trainer"] == {
        "examples": "CsvExampleGen.examples",
        "schema": "schema_importer.result",
    }
    assert [n.id for n in tfdv.not_run] == ["StatisticsGen", "ExampleValidator"]


def test_tutorial_penguin_tft_plan(in_tmp):
    plan, _ = _plan_file(_tutorial(in_tmp, "penguin-tft", TFT))
    assert [c for _, c in _steps(plan)] == [
        "import_examples",
        "importer",
        "transform",
        "trainer",
        "pusher",
    ]
    steps = {s.id: s for s in plan.steps}
    assert steps["ImportSchemaGen"].parameters == {
        "artifact_uri": f"{in_tmp}/schema/schema.pbtxt",
        "artifact_type": "Schema",
    }
    assert _wiring(plan)["Trainer"] == {
        "examples": "Transform.transformed_examples",
        "transform_graph": "Transform.transform_graph",
        "schema": "ImportSchemaGen.schema",
    }
    assert steps["Transform"].parameters["module_file"] == f"{in_tmp}/penguin_transform.py"


def test_tutorial_vertex_pipelines(in_tmp):
    """vertex_pipelines_simple: KubeflowV2DagRunner writes the pipeline file (here a plan);
    vertex_pipelines_vertex_training: the cloud Trainer and Pusher are refused, saying what to
    use."""
    plan, run = _plan_file(_tutorial(in_tmp, "penguin-vertex", SIMPLE, VERTEX_SIMPLE_RUN))
    assert type(run.runner).__name__ == "KubeflowV2DagRunner"
    assert plan.root == "gs://my-bucket/pipeline_root/penguin-vertex"
    assert [c for _, c in _steps(plan)] == ["import_examples", "trainer", "pusher"]
    path = _tutorial(in_tmp, "penguin-vertex-training", VERTEX_TRAINING, VERTEX_SIMPLE_RUN)
    with pytest.raises(UserInputError) as refused:
        _plan_file(path)
    assert refused.value.input_name == "Trainer"
    assert "Vertex AI custom job" in str(refused.value)
    assert "use tfx.components.Trainer" in str(refused.value)


TFMA = """
    import tensorflow_model_analysis as tfma


    def _components():
        example_gen = tfx.components.CsvExampleGen(input_base=DATA_ROOT)
        trainer = tfx.components.Trainer(
            module_file=_trainer_module_file,
            examples=example_gen.outputs["examples"],
            train_args=tfx.proto.TrainArgs(num_steps=100),
            eval_args=tfx.proto.EvalArgs(num_steps=5),
        )
        model_resolver = tfx.dsl.Resolver(
            strategy_class=tfx.dsl.experimental.LatestBlessedModelStrategy,
            model=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
            model_blessing=tfx.dsl.Channel(type=tfx.types.standard_artifacts.ModelBlessing),
        ).with_id("latest_blessed_model_resolver")
        eval_config = tfma.EvalConfig(
            model_specs=[tfma.ModelSpec(label_key="species")],
            slicing_specs=[tfma.SlicingSpec(), tfma.SlicingSpec(feature_keys=["species"])],
            metrics_specs=[
                tfma.MetricsSpec(per_slice_thresholds={
                    "sparse_categorical_accuracy": tfma.PerSliceMetricThresholds(thresholds=[
                        tfma.PerSliceMetricThreshold(
                            slicing_specs=[tfma.SlicingSpec()],
                            threshold=tfma.MetricThreshold(
                                value_threshold=tfma.GenericValueThreshold(
                                    lower_bound={"value": 0.6}
                                ),
                                change_threshold=tfma.GenericChangeThreshold(
                                    direction=tfma.MetricDirection.HIGHER_IS_BETTER,
                                    absolute={"value": -1e-10},
                                ),
                            ),
                        )
                    ])
                })
            ],
        )
        evaluator = tfx.components.Evaluator(
            examples=example_gen.outputs["examples"],
            model=trainer.outputs["model"],
            baseline_model=model_resolver.outputs["model"],
            eval_config=eval_config,
        )
        pusher = _pusher(trainer, model_blessing=evaluator.outputs["blessing"])
        return [example_gen, trainer, model_resolver, evaluator, pusher]
"""


@pytest.mark.slow  # TFMA imports TensorFlow
def test_tutorial_penguin_tfma_plan(in_tmp):
    plan, _ = _plan_file(_tutorial(in_tmp, "penguin-tfma", TFMA))
    assert [c for _, c in _steps(plan)] == [
        "import_examples",
        "resolver",
        "trainer",
        "evaluator",
        "pusher",
    ]
    assert _wiring(plan)["Evaluator"] == {
        "examples": "CsvExampleGen.examples",
        "model": "Trainer.model",
        "baseline_model": "latest_blessed_model_resolver.model",
    }
    evaluator = next(s for s in plan.steps if s.id == "Evaluator").parameters
    config = evaluator["eval_config"]
    assert config["model_specs"] == [{"label_key": "species"}]
    threshold = config["metrics_specs"][0]["per_slice_thresholds"]["sparse_categorical_accuracy"]
    assert threshold["thresholds"][0]["threshold"]["value_threshold"] == {"lower_bound": 0.6}
    assert _wiring(plan)["Pusher"]["model_blessing"] == "Evaluator.blessing"


# ------------------------------------------------------------------------------------------------
# the rest of the tfx wheel's example pipelines, in place (they import TFMA: TensorFlow)


@pytest.fixture(scope="module")
def wheel_files(tfx_root, tmp_path_factory):  # noqa: F811
    """Each wheel file's plan (or the UserInputError that refused it), by name."""
    examples = tfx_root / "tfx" / "examples"
    home = tmp_path_factory.mktemp("home")
    files = {
        "airflow_workshop": examples / "airflow_workshop/taxi/setup/dags/taxi_pipeline.py",
        "taxi_simple": examples / "chicago_taxi_pipeline/taxi_pipeline_simple.py",
        "bigquery_ml": examples / "bigquery_ml/taxi_pipeline_kubeflow_gcp_bqml.py",
        "container": examples
        / "custom_components/container_components/download_grep_print_pipeline.py",
        "hello": examples / "custom_components/hello_world/example/taxi_pipeline_hello.py",
        "presto": examples / "custom_components/presto_example_gen/example/taxi_pipeline_presto.py",
        "slack": examples / "custom_components/slack/example/taxi_pipeline_slack.py",
        "slack_kubeflow": examples
        / "custom_components/slack/example/taxi_pipeline_slack_kubeflow.py",
        "sklearn_gcp": examples / "penguin/experimental/penguin_pipeline_sklearn_gcp.py",
        "ranking": examples / "ranking/ranking_pipeline.py",
    }
    results = {}
    try:
        for name, path in files.items():
            try:
                results[name] = _plan_file(path, home=home)
            except UserInputError as error:
                results[name] = (error, None)
            tfx_hook.uninstall()
    finally:
        tfx_hook.uninstall()
    return results, home


TAXI_STEPS = [
    ("CsvExampleGen", "import_examples"),
    ("latest_blessed_model_resolver", "resolver"),
    ("Transform", "transform"),
    ("Trainer", "trainer"),
    ("Evaluator", "evaluator"),
    ("Pusher", "pusher"),
]


@pytest.mark.slow
def test_wheel_airflow_files_plan_with_the_runner_refused_at_run(wheel_files):
    """The Airflow workshop's DAG (its old-style GenericExecutor spec is the train step) and
    taxi_pipeline_simple plan as TFX wires them; their runner is Airflow's."""
    results, home = wheel_files
    for name, root in (("airflow_workshop", "airflow/tfx"), ("taxi_simple", "tfx")):
        plan, run = results[name]
        assert not isinstance(plan, Exception), f"{name}: {plan}"
        assert type(run.runner).__name__ == "AirflowDagRunner"
        assert "LocalDagRunner" in run.runner.REFUSAL
        assert _steps(plan) == TAXI_STEPS, name
        assert plan.root.startswith(f"{home}/{root}/pipelines/")
        assert plan.steps[0].folds == ("SchemaGen",)
        assert [n.id for n in plan.not_run] == ["StatisticsGen", "ExampleValidator"]
        assert _wiring(plan)["Trainer"] == {
            "examples": "Transform.transformed_examples",
            "transform_graph": "Transform.transform_graph",
            "schema": "CsvExampleGen.output_schema",
        }
    workshop = {s.id: s for s in results["airflow_workshop"][0].steps}
    assert workshop["Trainer"].parameters["train_args"] == {"num_steps": 10000}
    assert "custom_executor_spec" not in workshop["Trainer"].parameters


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,import_name,why",
    [
        ("bigquery_ml", "tfx.components.ModelValidator", "deprecated in TFX"),
        ("presto", "tfx.components.ModelValidator", "deprecated in TFX"),
        ("slack", "tfx.components.ModelValidator", "deprecated in TFX"),
        ("slack_kubeflow", "tfx.components.ModelValidator", "deprecated in TFX"),
        ("container", "tfx.dsl.component.experimental.container_component", "custom"),
        ("hello", "tfx.dsl.components.base.base_component", "custom components"),
        ("ranking", "tfx.components.experimental.data_view", "DataView"),
    ],
)
def test_wheel_files_importing_what_is_not_run_here_are_refused_by_name(
    wheel_files, name, import_name, why
):
    error, _ = wheel_files[0][name]
    assert isinstance(error, UserInputError), error
    message = str(error)
    assert f"the module imports {import_name}" in message and why in message
    assert "docs/guides/tfx.md" in message and len(message) < 1000


@pytest.mark.slow
def test_wheel_sklearn_gcp_pipeline_refuses_its_cloud_trainer(wheel_files):
    error, _ = wheel_files[0]["sklearn_gcp"]
    assert isinstance(error, UserInputError) and error.input_name == "Trainer"
    assert "Vertex AI custom job" in str(error)


# ------------------------------------------------------------------------------------------------
# penguin_simple, the first tutorial, end to end: CsvExampleGen -> Trainer -> Pusher


def _tutorial_csv(path: Path) -> None:
    """The tutorial's penguins_processed.csv shape (species, then four scaled measurements),
    made from the repository's penguins."""
    columns = ("bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g")
    scale = (60.0, 22.0, 230.0, 6300.0)
    with open(PENGUIN / "penguins.csv") as f, open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(
            ["species", "culmen_length_mm", "culmen_depth_mm", "flipper_length_mm", "body_mass_g"]
        )
        for row in csv.DictReader(f):
            values = [row[c] for c in columns]
            if "NA" not in values:
                scaled = [f"{float(v) / s:.4f}" for v, s in zip(values, scale, strict=True)]
                writer.writerow([row["species"], *scaled])


# The tutorial's module file, written the way it writes it (tfx.v1 names, tfxio, schema_utils).
PENGUIN_TRAINER = """
    from typing import List
    from absl import logging
    import tensorflow as tf
    from tensorflow import keras
    from tensorflow_transform.tf_metadata import schema_utils

    from tfx import v1 as tfx
    from tfx_bsl.public import tfxio
    from tensorflow_metadata.proto.v0 import schema_pb2

    _FEATURE_KEYS = ["culmen_length_mm", "culmen_depth_mm", "flipper_length_mm", "body_mass_g"]
    _LABEL_KEY = "species"
    _FEATURE_SPEC = {
        **{f: tf.io.FixedLenFeature(shape=[1], dtype=tf.float32) for f in _FEATURE_KEYS},
        _LABEL_KEY: tf.io.FixedLenFeature(shape=[1], dtype=tf.int64),
    }


    def _input_fn(file_pattern: List[str], data_accessor: tfx.components.DataAccessor,
                  schema: schema_pb2.Schema, batch_size: int = 200) -> tf.data.Dataset:
        return data_accessor.tf_dataset_factory(
            file_pattern,
            tfxio.TensorFlowDatasetOptions(batch_size=batch_size, label_key=_LABEL_KEY),
            schema=schema).repeat()


    def _build_keras_model() -> tf.keras.Model:
        inputs = [keras.layers.Input(shape=(1,), name=f) for f in _FEATURE_KEYS]
        d = keras.layers.concatenate(inputs)
        for _ in range(2):
            d = keras.layers.Dense(8, activation="relu")(d)
        outputs = keras.layers.Dense(3)(d)
        model = keras.Model(inputs=inputs, outputs=outputs)
        model.compile(
            optimizer=keras.optimizers.Adam(1e-2),
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=[keras.metrics.SparseCategoricalAccuracy()])
        model.summary(print_fn=logging.info)
        return model


    def run_fn(fn_args: tfx.components.FnArgs):
        schema = schema_utils.schema_from_feature_spec(_FEATURE_SPEC)
        train_dataset = _input_fn(fn_args.train_files, fn_args.data_accessor, schema, 20)
        eval_dataset = _input_fn(fn_args.eval_files, fn_args.data_accessor, schema, 10)
        model = _build_keras_model()
        model.fit(train_dataset, steps_per_epoch=fn_args.train_steps,
                  validation_data=eval_dataset, validation_steps=fn_args.eval_steps)
        model.save(fn_args.serving_model_dir, save_format="tf")
"""


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.timeout(1200)
def test_tutorial_penguin_simple_runs_end_to_end(tmp_path):
    """The tutorial's pipeline, its module file and its data's shape: `tfx-pipeline run` trains
    and pushes a SavedModel to SERVING_MODEL_DIR, as the tutorial's last cell lists."""
    (tmp_path / "data").mkdir()
    _tutorial_csv(tmp_path / "data" / "data.csv")
    _write(tmp_path, PENGUIN_TRAINER, "penguin_trainer.py")
    path = _tutorial(tmp_path, "penguin-simple", SIMPLE)
    env = cli_env({"HOME": str(tmp_path), "TF_CPP_MIN_LOG_LEVEL": "2"})
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    proc = subprocess.run(
        [sys.executable, "-m", "generic_trainer", "tfx-pipeline", "run", str(path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-8000:]
    serving = tmp_path / "serving_model" / "penguin-simple"
    (version,) = glob.glob(f"{serving}/*")
    import tensorflow as tf  # loaded as TF Serving loads it (the test process has TF already)

    signature = tf.saved_model.load(version).signatures["serving_default"]
    assert sorted(signature.structured_input_signature[1]) == [
        "body_mass_g",
        "culmen_depth_mm",
        "culmen_length_mm",
        "flipper_length_mm",
    ]
    (logits,) = signature(
        **{
            k: tf.constant([[0.7]])
            for k in ("body_mass_g", "culmen_depth_mm", "culmen_length_mm", "flipper_length_mm")
        }
    ).values()
    assert logits.shape == (1, 3)
