"""TFX's pipeline DSL on this image: pipeline files run with the `tfx` hook, their Pipeline is
captured from the runner's `.run()`, and `plan` says what each node becomes.

TFX 1.21's own pipeline files (from the tfx wheel, unedited: mnist, Chicago taxi and imdb native
Keras, penguin local and kubeflow, and the taxi and penguin templates after the copy `tfx template
copy` makes) are planned and each plan is pinned: step ids, components, wiring, key parameters, the
nodes that do not run and why. Those import TFMA (and so TensorFlow): marked slow, one import for
all of them. The rest builds pipelines without TensorFlow: what a node becomes, and refusals that
name the node and argument (a pipeline file that raises, one that never calls a runner, an
argument this image cannot honour, a consumer of a node that does not run).
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from generic_trainer import tfx_hook
from generic_trainer.errors import UserCodeError, UserInputError
from generic_trainer.tfx_dsl import capture, planning, render
from generic_trainer.tfx_dsl.steps import (
    OutputRef,
    ParameterRef,
    PipelineParameter,
    RunWhen,
)
from test_tfx_real_modules import tfx_root  # noqa: F401 (the tfx wheel fixture)
from tfx_templates import copy_template


@pytest.fixture(autouse=True)
def _no_hook_left():
    """The `tfx` hook is taken away after each test (capture installs it, as the CLI does)."""
    yield
    tfx_hook.uninstall()


@pytest.fixture()
def tfx():
    """`from tfx import v1 as tfx` through the hook."""
    tfx_hook.install()
    import tfx.v1 as v1

    yield v1
    tfx_hook.uninstall()


def _write(tmp_path: Path, body: str, name: str = "pipeline.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def _wiring(plan) -> dict[str, dict[str, str]]:
    return {s.id: {k: f"{r.step}.{r.output}" for k, r in s.inputs.items()} for s in plan.steps}


def _basic(tfx, **trainer_args):
    """CsvExampleGen -> StatisticsGen -> SchemaGen -> Transform -> Trainer."""
    eg = tfx.components.CsvExampleGen(input_base="/data")
    st = tfx.components.StatisticsGen(examples=eg.outputs["examples"])
    sg = tfx.components.SchemaGen(statistics=st.outputs["statistics"], infer_feature_shape=False)
    tr = tfx.components.Transform(
        examples=eg.outputs["examples"], schema=sg.outputs["schema"], module_file="/m.py"
    )
    args = {
        "module_file": "/m.py",
        "examples": tr.outputs["transformed_examples"],
        "transform_graph": tr.outputs["transform_graph"],
        "schema": sg.outputs["schema"],
        **trainer_args,
    }
    trainer = tfx.components.Trainer(**args)
    return [eg, st, sg, tr, trainer]


def _pipeline(tfx, components, **kwargs):
    return tfx.dsl.Pipeline(
        pipeline_name="p", pipeline_root="/root", components=components, **kwargs
    )


# ------------------------------------------------------------------------------------------------
# what each node becomes (no TensorFlow)


def test_schema_gen_folds_into_import_examples_and_statistics_do_not_run(tfx):
    plan = planning.plan(_pipeline(tfx, _basic(tfx, train_args=tfx.proto.TrainArgs(num_steps=7))))
    assert [(s.id, s.component) for s in plan.steps] == [
        ("CsvExampleGen", "import_examples"),
        ("Transform", "transform"),
        ("Trainer", "trainer"),
    ]
    example_gen = plan.steps[0]
    assert example_gen.folds == ("SchemaGen",)
    assert example_gen.parameters == {
        "input_pattern": "/data",
        "format": "csv",
        "infer_feature_shape": False,
    }
    assert _wiring(plan)["Trainer"] == {
        "examples": "Transform.transformed_examples",
        "transform_graph": "Transform.transform_graph",
        "schema": "CsvExampleGen.output_schema",
    }
    assert plan.steps[2].parameters["train_args"] == {"num_steps": 7}
    assert [(n.id, n.tfx_component) for n in plan.not_run] == [("StatisticsGen", "StatisticsGen")]
    assert "TFDV" in plan.not_run[0].reason and "none are faked" in plan.not_run[0].reason


def test_a_step_consuming_statistics_is_refused_naming_it(tfx):
    nodes = _basic(tfx)
    nodes[-1] = tfx.components.Trainer(
        module_file="/m.py",
        examples=nodes[0].outputs["examples"],
        statistics=nodes[1].outputs["statistics"],
    )
    with pytest.raises(UserInputError) as raised:
        planning.plan(_pipeline(tfx, nodes))
    assert raised.value.input_name == "Trainer.statistics"
    assert "StatisticsGen" in str(raised.value) and "does not run here" in str(raised.value)
    assert raised.value.exit_code == 2


def test_resolver_cond_runtime_parameter_importer_and_protos(tfx):
    eg, st, sg, tr, trainer = _basic(
        tfx,
        train_args=tfx.dsl.experimental.RuntimeParameter(
            name="train-args", default='{"num_steps": 3}', ptype=str
        ),
    )
    resolver = tfx.dsl.Resolver(
        strategy_class=tfx.dsl.experimental.LatestBlessedModelStrategy,
        model=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
        model_blessing=tfx.dsl.Channel(type=tfx.types.standard_artifacts.ModelBlessing),
    ).with_id("latest")
    evaluator = tfx.components.Evaluator(
        examples=eg.outputs["examples"],
        model=trainer.outputs["model"],
        baseline_model=resolver.outputs["model"],
        eval_config={"model_specs": [{"label_key": "y"}]},
    )
    base = tfx.dsl.Importer(
        source_uri="gs://b/base", artifact_type=tfx.types.standard_artifacts.Model
    ).with_id("base")
    with tfx.dsl.Cond(evaluator.outputs["blessing"].future()[0].custom_property("blessed") == 1):
        pusher = tfx.components.Pusher(
            model=trainer.outputs["model"],
            push_destination=tfx.proto.PushDestination(
                filesystem=tfx.proto.PushDestination.Filesystem(base_directory="gs://b/serving")
            ),
        )
    bulk = tfx.components.BulkInferrer(
        examples=eg.outputs["examples"],
        model=base.outputs["result"],
        data_spec=tfx.proto.DataSpec(example_splits=["eval"]),
    )
    nodes = [pusher, bulk, evaluator, resolver, base, trainer, tr, sg, st, eg]
    plan = planning.plan(_pipeline(tfx, nodes, enable_cache=True))
    ids = [s.id for s in plan.steps]
    assert ids.index("Trainer") < ids.index("Evaluator") < ids.index("Pusher")
    steps = {s.id: s for s in plan.steps}
    assert steps["latest"].component == "resolver"
    assert steps["latest"].parameters == {
        "strategy": "LatestBlessedModelStrategy",
        "artifact_types": {"model": "Model", "model_blessing": "ModelBlessing"},
        "pipeline_name": "p",
        "pipeline_root": "/root",
    }
    assert steps["Evaluator"].inputs["baseline_model"] == OutputRef("latest", "model")
    assert steps["Evaluator"].parameters == {"eval_config": {"model_specs": [{"label_key": "y"}]}}
    assert steps["Pusher"].run_when == (RunWhen("Evaluator", "blessed", 1),)
    assert json.loads(steps["Pusher"].parameters["push_destination"]) == {
        "filesystem": {"base_directory": "gs://b/serving"}
    }
    assert steps["Trainer"].parameters["train_args"] == ParameterRef("train-args")
    assert plan.parameters == (PipelineParameter("train-args", "str", '{"num_steps": 3}'),)
    assert steps["base"].component == "importer"
    assert steps["base"].parameters["artifact_uri"] == "gs://b/base"
    assert steps["base"].parameters["artifact_type"] == "Model"
    assert steps["BulkInferrer"].inputs["model"] == OutputRef("base", "result")
    assert steps["BulkInferrer"].parameters == {"data_splits": ["eval"]}
    assert plan.enable_cache is True
    text = render.render_plan(plan)
    assert "Pusher: runs as pusher" in text and "runs only when Evaluator.blessed == 1" in text
    assert "StatisticsGen: NOT RUN (StatisticsGen): TFDV" in text
    assert "pipeline parameter train-args (str" in text


@pytest.mark.parametrize(
    "change,where,needle",
    [
        ("tuner", "Tuner.tune_args", "TuneArgs"),
        ("materialize", "Transform.materialize", "materialize=False"),
        ("custom", "RangeGen", "custom @component"),
        ("cloud", "Trainer", "google_cloud_ai_platform.Trainer runs the training as an AI"),
        ("cloud_pusher", "Pusher", "google_cloud_ai_platform.Pusher deploys the model to an AI"),
        ("executor", "Trainer.custom_executor_spec", "my_executors.MyExecutor is not run here"),
        ("cond", "Pusher.Cond", "a Cond here tests"),
        ("missing", "Transform.schema", "not in the Pipeline's components"),
        ("pusher", "Pusher.push_destination", "needed"),
        ("bad_value", "Trainer.custom_config.f", "cannot be passed"),
    ],
)
def test_arguments_and_nodes_the_image_cannot_honour_are_refused_by_name(
    tfx, change, where, needle
):
    nodes = _basic(tfx)
    eg, st, sg, tr, trainer = nodes
    if change == "tuner":
        nodes.append(
            tfx.components.Tuner(
                examples=eg.outputs["examples"],
                module_file="/m.py",
                tune_args=tfx.proto.TuneArgs(num_parallel_trials=3),
            )
        )
    elif change == "materialize":
        nodes[3] = tfx.components.Transform(
            examples=eg.outputs["examples"],
            schema=sg.outputs["schema"],
            module_file="/m.py",
            materialize=False,
        )
        nodes.pop()
    elif change == "custom":

        @tfx.dsl.components.component
        def RangeGen(  # noqa: N802 - TFX's style
            day: tfx.dsl.components.Parameter[str],
            out: tfx.dsl.components.OutputArtifact[tfx.types.standard_artifacts.String],
        ):
            """A custom component."""

        nodes.append(RangeGen(day="20240101"))
    elif change == "cloud":
        nodes[-1] = tfx.extensions.google_cloud_ai_platform.Trainer(
            module_file="/m.py", examples=tr.outputs["transformed_examples"]
        )
    elif change == "cloud_pusher":
        nodes.append(
            tfx.extensions.google_cloud_ai_platform.Pusher(
                model=trainer.outputs["model"],
                custom_config={tfx.extensions.google_cloud_ai_platform.ENABLE_VERTEX_KEY: True},
            )
        )
    elif change == "executor":
        from tfx.dsl.components.base import executor_spec

        my_executor = type("MyExecutor", (), {"__module__": "my_executors"})
        nodes[-1] = tfx.components.Trainer(
            module_file="/m.py",
            examples=eg.outputs["examples"],
            custom_executor_spec=executor_spec.ExecutorClassSpec(my_executor),
        )
    elif change in ("cond", "pusher"):
        with tfx.dsl.Cond(trainer.outputs["model"].future()[0].custom_property("x") == 1):
            cond_pusher = tfx.components.Pusher(
                model=trainer.outputs["model"],
                push_destination={"filesystem": {"base_directory": "/serving"}},
            )
        plain_pusher = tfx.components.Pusher(model=trainer.outputs["model"])
        nodes.append(cond_pusher if change == "cond" else plain_pusher)
    elif change == "missing":
        nodes.remove(sg)
    elif change == "bad_value":
        nodes[-1] = tfx.components.Trainer(
            module_file="/m.py", examples=eg.outputs["examples"], custom_config={"f": object()}
        )
    with pytest.raises(UserInputError) as raised:
        planning.plan(_pipeline(tfx, nodes))
    assert raised.value.input_name == where
    assert needle in str(raised.value)


def test_infra_validator_specs_map_to_its_parameters(tfx):
    eg, st, sg, tr, trainer = nodes = _basic(tfx)
    infra = tfx.components.InfraValidator(
        model=trainer.outputs["model"],
        examples=eg.outputs["examples"],
        serving_spec=tfx.proto.ServingSpec(
            tensorflow_serving=tfx.proto.TensorFlowServing(tags=["latest"]),
            local_docker=tfx.proto.LocalDockerConfig(),
        ),
        request_spec=tfx.proto.RequestSpec(
            tensorflow_serving=tfx.proto.TensorFlowServingRequestSpec(),
            split_name="test",
            num_examples=5,
            make_warmup=True,
        ),
        validation_spec=tfx.proto.ValidationSpec(max_loading_time_seconds=60),
    )
    pusher = tfx.components.Pusher(
        model=trainer.outputs["model"],
        infra_blessing=infra.outputs["blessing"],
        push_destination={"filesystem": {"base_directory": "/serving"}},
    )
    plan = planning.plan(_pipeline(tfx, [*nodes, infra, pusher]))
    steps = {s.id: s for s in plan.steps}
    assert steps["InfraValidator"].parameters == {
        "eval_splits": ["test"],
        "num_requests": 5,
        "batch_size": 1,
        "write_warmup": 5,
        "timeout": 60.0,
    }
    assert _wiring(plan)["InfraValidator"] == {
        "model": "Trainer.model",
        "examples": "CsvExampleGen.examples",
    }
    assert _wiring(plan)["Pusher"]["infra_blessing"] == "InfraValidator.blessing"
    assert plan.notices == (f"InfraValidator: {planning.SERVING_NOTICE}",)


def test_span_resolver_waits_for_its_example_gen_and_feeds_transform(tfx):
    eg, st, sg, tr, trainer = _basic(tfx)
    spans = tfx.dsl.Resolver(
        strategy_class=tfx.dsl.experimental.SpanRangeStrategy,
        config={
            "range_config": tfx.proto.RangeConfig(rolling_range=tfx.proto.RollingRange(num_spans=2))
        },
        examples=tfx.dsl.Channel(
            type=tfx.types.standard_artifacts.Examples, producer_component_id=eg.id
        ),
    ).with_id("span_resolver")
    spans.add_upstream_node(eg)
    transform = tfx.components.Transform(
        examples=spans.outputs["examples"], schema=sg.outputs["schema"], module_file="/m.py"
    )
    plan = planning.plan(_pipeline(tfx, [spans, transform, sg, st, eg]))
    steps = {s.id: s for s in plan.steps}
    assert [s.id for s in plan.steps] == ["CsvExampleGen", "span_resolver", "Transform"]
    assert steps["span_resolver"].after == ("CsvExampleGen",)
    assert steps["span_resolver"].parameters["producers"] == {"examples": "CsvExampleGen"}
    assert steps["span_resolver"].parameters["config"] == {
        "range_config": {"rolling_range": {"num_spans": 2}}
    }
    assert steps["Transform"].inputs["examples"] == OutputRef("span_resolver", "examples")
    value = eg.outputs["examples"].future()[0].value
    bad = tfx.components.CsvExampleGen(input_base=value).with_id("Bad")
    with pytest.raises(UserInputError, match="placeholder") as raised:
        planning.plan(_pipeline(tfx, [eg, bad]))
    assert raised.value.input_name == "Bad"


def test_unknown_tfx_arguments_fail_as_with_tfx(tfx):
    with pytest.raises(TypeError, match="num_stepz"):
        tfx.components.Trainer(module_file="/m.py", num_stepz=3)
    with pytest.raises(TypeError, match="schema"):
        tfx.components.Transform(examples=None)


def test_example_gen_configs_become_import_examples_parameters(tfx, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    eg = tfx.components.CsvExampleGen(
        input_base="data",
        input_config=tfx.proto.Input(
            splits=[
                tfx.proto.Input.Split(name="train", pattern="train/*"),
                tfx.proto.Input.Split(name="eval", pattern="eval/*"),
            ]
        ),
        range_config=tfx.proto.RangeConfig(
            static_range=tfx.proto.StaticRange(start_span_number=2, end_span_number=2)
        ),
    )
    imported = tfx.components.ImportExampleGen(
        input_base="/records",
        output_config=tfx.proto.Output(
            split_config=tfx.proto.SplitConfig(
                splits=[
                    tfx.proto.SplitConfig.Split(name="train", hash_buckets=9),
                    tfx.proto.SplitConfig.Split(name="eval", hash_buckets=1),
                ],
                partition_feature_name="user",
            )
        ),
        payload_format=tfx.proto.PayloadFormat.FORMAT_TF_SEQUENCE_EXAMPLE,
    )
    plan = planning.plan(
        _pipeline(
            tfx,
            [eg, imported],
            metadata_connection_config=(
                tfx.orchestration.metadata.sqlite_metadata_connection_config("m.db")
            ),
        )
    )
    csv, records = plan.steps
    assert csv.parameters == {
        "input_pattern": str(tmp_path / "data"),  # relative to where the file ran, as TFX
        "format": "csv",
        "input_splits": {"train": "train/*", "eval": "eval/*"},
        "range_config": {"static_range": {"start_span_number": 2, "end_span_number": 2}},
    }
    assert records.parameters == {
        "input_pattern": "/records",
        "format": "tfrecord",
        "payload_format": "FORMAT_TF_SEQUENCE_EXAMPLE",
        "splits": "train:9,eval:1",
        "partition_feature": "user",
    }
    assert plan.notices == (planning.METADATA_NOTICE,)


# ------------------------------------------------------------------------------------------------
# running a pipeline file


def test_a_pipeline_file_that_raises_is_a_user_code_error_naming_it(tmp_path):
    path = _write(tmp_path, "from tfx import v1 as tfx\nraise RuntimeError('broken file')\n")
    with pytest.raises(UserCodeError) as raised:
        capture.run_pipeline_file(str(path))
    assert str(path) in str(raised.value) and "broken file" in str(raised.value)
    assert raised.value.exit_code == 3


def test_a_pipeline_file_that_never_calls_a_runner_is_refused(tmp_path):
    path = _write(
        tmp_path,
        """
        from tfx import v1 as tfx
        pipeline = tfx.dsl.Pipeline(pipeline_name="p", pipeline_root="/r", components=[])
        """,
    )
    with pytest.raises(UserInputError, match="without handing a Pipeline to a runner"):
        capture.run_pipeline_file(str(path))
    with pytest.raises(UserInputError, match="no such pipeline file"):
        capture.run_pipeline_file(str(tmp_path / "nothing.py"))


FLAGGED = """
    import os, sys
    import wave  # a library module the file imports first: it stays imported
    from absl import flags
    from tfx import v1 as tfx
    flags.DEFINE_string("name", "default", "the pipeline name")
    if __name__ == "__main__":
        flags.FLAGS(sys.argv)
        from helper import ROOT
        example_gen = tfx.components.CsvExampleGen(input_base=os.environ["HOME"] + "/data")
        tfx.orchestration.LocalDagRunner().run(tfx.dsl.Pipeline(
            pipeline_name=flags.FLAGS.name, pipeline_root=ROOT, components=[example_gen]))
    """


def test_a_file_runs_as_main_with_its_args_home_and_folder_and_leaves_nothing_behind(tmp_path):
    path = _write(tmp_path, FLAGGED)
    (tmp_path / "helper.py").write_text("ROOT = 'gs://bucket/root'\n")
    argv, home = list(sys.argv), os.environ.get("HOME")
    for name in ("first", "second"):  # twice: the flag is defined again, the helper reloaded
        (runs,) = capture.run_pipeline_file(str(path), [f"--name={name}"], home=str(tmp_path))
        plan = planning.plan(runs.pipeline)
        assert (plan.name, plan.root) == (name, "gs://bucket/root")
        assert plan.steps[0].parameters["input_pattern"] == f"{tmp_path}/data"
        assert type(runs.runner).__name__ == "LocalDagRunner"
    assert sys.argv == argv and os.environ.get("HOME") == home
    assert "helper" not in sys.modules and str(tmp_path) not in sys.path
    assert "wave" in sys.modules
    assert not capture.capturing()


# ------------------------------------------------------------------------------------------------
# TFX 1.21's own pipeline files, unedited (they import TFMA, so TensorFlow)


@pytest.fixture(scope="module")
def tfx_plans(tfx_root, tmp_path_factory):  # noqa: F811
    """Each TFX file's plan (or the error planning it raised), by name."""
    examples = tfx_root / "tfx" / "examples"
    home = tmp_path_factory.mktemp("home")
    files = {
        "mnist": (examples / "mnist" / "mnist_pipeline_native_keras.py", []),
        "taxi": (examples / "chicago_taxi_pipeline" / "taxi_pipeline_native_keras.py", []),
        "imdb": (examples / "imdb" / "imdb_pipeline_native_keras.py", []),
        "penguin_local": (examples / "penguin" / "penguin_pipeline_local.py", []),
        "penguin_kubeflow": (examples / "penguin" / "penguin_pipeline_kubeflow.py", []),
        "penguin_kubeflow_vertex": (
            examples / "penguin" / "penguin_pipeline_kubeflow.py",
            ["--use_cloud_component", "--use_vertex"],
        ),
    }
    plans = {}
    cwd = os.getcwd()
    for name, tutorial in (("taxi", False), ("penguin", False), ("taxi", True)):
        out = tmp_path_factory.mktemp(f"template_{name}")
        files[f"template_{name}" + ("_tutorial" if tutorial else "")] = (
            copy_template(tfx_root, name, out, tutorial=tutorial),
            [],
        )
    try:
        for name, (path, args) in files.items():
            os.chdir(path.parent)  # TFX's templates write under `.`
            try:
                (run,) = capture.run_pipeline_file(str(path), args, home=str(home))
                plans[name] = (planning.plan(run.pipeline), run)
            except UserInputError as error:
                plans[name] = (error, None)
    finally:
        os.chdir(cwd)
        tfx_hook.uninstall()
    return plans, home


def _plan(tfx_plans, name):
    plans, home = tfx_plans
    plan, run = plans[name]
    assert not isinstance(plan, Exception), f"{name}: {plan}"
    return plan, run, home


def _steps(plan) -> list[tuple[str, str]]:
    return [(s.id, s.component) for s in plan.steps]


TFDV_NOT_RUN = ["StatisticsGen", "ExampleValidator"]
BLESSED_MODEL_RESOLVER = {
    "strategy": "LatestBlessedModelStrategy",
    "artifact_types": {"model": "Model", "model_blessing": "ModelBlessing"},
}


def _native_keras_wiring(example_gen: str, suffix: str = "", resolver: bool = True) -> dict:
    trainer, evaluator = f"Trainer{suffix}", f"Evaluator{suffix}"
    return {
        example_gen: {},
        **({"latest_blessed_model_resolver": {}} if resolver else {}),
        "Transform": {
            "examples": f"{example_gen}.examples",
            "schema": f"{example_gen}.output_schema",
        },
        trainer: {
            "examples": "Transform.transformed_examples",
            "transform_graph": "Transform.transform_graph",
            "schema": f"{example_gen}.output_schema",
        },
        evaluator: {
            "examples": f"{example_gen}.examples",
            "model": f"{trainer}.model",
            **({"baseline_model": "latest_blessed_model_resolver.model"} if resolver else {}),
        },
        f"Pusher{suffix}": {"model": f"{trainer}.model", "model_blessing": f"{evaluator}.blessing"},
    }


def _threshold(plan, step: str) -> dict:
    config = next(s for s in plan.steps if s.id == step).parameters["eval_config"]
    return config["metrics_specs"][0]["metrics"][0]


@pytest.mark.slow
def test_tfx_mnist_native_keras_plan(tfx_plans):
    plan, run, home = _plan(tfx_plans, "mnist")
    assert type(run.runner).__name__ == "BeamDagRunner"
    assert (plan.name, plan.root, plan.enable_cache) == (
        "mnist_native_keras",
        f"{home}/tfx/pipelines/mnist_native_keras",
        True,
    )
    assert _steps(plan) == [
        ("ImportExampleGen", "import_examples"),
        ("Transform", "transform"),
        ("Trainer.mnist", "trainer"),
        ("Evaluator.mnist", "evaluator"),
        ("Pusher.mnist", "pusher"),
    ]
    assert _wiring(plan) == _native_keras_wiring("ImportExampleGen", ".mnist", resolver=False)
    steps = {s.id: s for s in plan.steps}
    assert steps["ImportExampleGen"].folds == ("SchemaGen",)
    assert steps["ImportExampleGen"].parameters == {
        "input_pattern": f"{home}/mnist/data",
        "format": "tfrecord",
        "payload_format": "FORMAT_TF_EXAMPLE",
        "infer_feature_shape": True,
    }
    module = f"{home}/mnist/mnist_utils_native_keras.py"
    assert steps["Transform"].parameters == {"module_file": module}
    assert steps["Trainer.mnist"].parameters == {
        "module_file": module,
        "train_args": {"num_steps": 5000},
        "eval_args": {"num_steps": 100},
    }
    config = steps["Evaluator.mnist"].parameters["eval_config"]
    assert config["model_specs"] == [{"label_key": "image_class"}]
    assert _threshold(plan, "Evaluator.mnist") == {
        "class_name": "SparseCategoricalAccuracy",
        "threshold": {"value_threshold": {"lower_bound": 0.8}},
    }
    assert json.loads(steps["Pusher.mnist"].parameters["push_destination"]) == {
        "filesystem": {"base_directory": f"{home}/mnist/serving_model/mnist_native_keras"}
    }
    assert [n.id for n in plan.not_run] == TFDV_NOT_RUN
    assert all("TFDV" in n.reason for n in plan.not_run)
    assert plan.notices == (planning.METADATA_NOTICE,)
    assert plan.beam_pipeline_args == (
        "--direct_running_mode=multi_processing",
        "--direct_num_workers=0",
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", ["taxi", "imdb"])
def test_tfx_taxi_and_imdb_native_keras_plans(tfx_plans, name):
    plan, run, home = _plan(tfx_plans, name)
    folder = {"taxi": "taxi", "imdb": "imdb"}[name]
    pipeline = {"taxi": "chicago_taxi_native_keras", "imdb": "imdb_native_keras"}[name]
    assert (plan.name, plan.enable_cache) == (pipeline, True)
    assert [c for _, c in _steps(plan)] == [
        "import_examples",
        "resolver",
        "transform",
        "trainer",
        "evaluator",
        "pusher",
    ]
    assert _wiring(plan) == _native_keras_wiring("CsvExampleGen")
    steps = {s.id: s for s in plan.steps}
    assert steps["latest_blessed_model_resolver"].parameters == {
        **BLESSED_MODEL_RESOLVER,
        "pipeline_name": pipeline,
        "pipeline_root": f"{home}/tfx/pipelines/{pipeline}",
    }
    data = {"taxi": f"{home}/taxi/data/simple", "imdb": f"{home}/imdb/data"}[name]
    example_gen = {"input_pattern": data, "format": "csv", "infer_feature_shape": True}
    if name == "imdb":
        example_gen["splits"] = "train:9,eval:1"
    assert steps["CsvExampleGen"].parameters == example_gen
    steps_args = {"taxi": (1000, 150), "imdb": (500, 200)}[name]
    assert steps["Trainer"].parameters == {
        "module_file": f"{home}/{folder}/{folder}_utils_native_keras.py",
        "train_args": {"num_steps": steps_args[0]},
        "eval_args": {"num_steps": steps_args[1]},
    }
    change = _threshold(plan, "Evaluator")["threshold"]["change_threshold"]
    assert change["direction"] == "HIGHER_IS_BETTER"
    if name == "taxi":
        assert steps["Evaluator"].parameters["eval_config"]["model_specs"] == [
            {
                "signature_name": "serving_default",
                "label_key": "tips_xf",
                "preprocessing_function_names": ["transform_features"],
            }
        ]
    assert [n.id for n in plan.not_run] == TFDV_NOT_RUN


@pytest.mark.slow
def test_tfx_penguin_local_plan(tfx_plans):
    plan, run, home = _plan(tfx_plans, "penguin_local")
    assert type(run.runner).__name__ == "LocalDagRunner"
    assert plan.name == "penguin_local_keras"
    assert _steps(plan) == [
        ("CsvExampleGen", "import_examples"),
        ("latest_blessed_model_resolver", "resolver"),
        ("transform_cache_resolver", "resolver"),
        ("CsvExampleGen_Unlabelled", "import_examples"),
        ("Transform", "transform"),
        ("Tuner", "tuner"),
        ("Trainer", "trainer"),
        ("Evaluator", "evaluator"),
        ("BulkInferrer", "bulk_inferrer"),
        ("Pusher", "pusher"),
    ]
    wiring = _wiring(plan)
    assert wiring["Transform"] == {
        "examples": "CsvExampleGen.examples",
        "schema": "CsvExampleGen.output_schema",
        "analyzer_cache": "transform_cache_resolver.cache",
    }
    assert wiring["Trainer"]["hyperparameters"] == "Tuner.best_hyperparameters"
    assert wiring["Tuner"] == {
        "examples": "Transform.transformed_examples",
        "transform_graph": "Transform.transform_graph",
    }
    assert wiring["BulkInferrer"] == {
        "examples": "CsvExampleGen_Unlabelled.examples",
        "model": "Trainer.model",
    }
    assert wiring["Pusher"] == {"model": "Trainer.model"}
    steps = {s.id: s for s in plan.steps}
    assert steps["Pusher"].run_when == (RunWhen("Evaluator", "blessed", 1),)
    assert steps["transform_cache_resolver"].parameters["strategy"] == "LatestArtifactStrategy"
    assert steps["transform_cache_resolver"].parameters["artifact_types"] == {
        "cache": "TransformCache"
    }
    assert steps["CsvExampleGen"].parameters["input_pattern"] == f"{home}/penguin/data/labelled"
    assert steps["Trainer"].parameters["module_file"] == f"{home}/penguin/penguin_utils_keras.py"
    assert steps["BulkInferrer"].parameters == {}  # DataSpec() and ModelSpec(): the defaults
    assert [n.id for n in plan.not_run] == ["StatisticsGen"]


@pytest.mark.slow
def test_tfx_penguin_kubeflow_plan_and_its_cloud_components_refused(tfx_plans):
    plan, run, home = _plan(tfx_plans, "penguin_kubeflow")
    assert type(run.runner).__name__ == "KubeflowV2DagRunner"
    assert (plan.name, plan.root) == (
        "penguin-kubeflow",
        "gs://<your-project-bucket>/penguin-kubeflow",
    )
    assert [c for _, c in _steps(plan)] == [
        "import_examples",
        "importer",
        "resolver",
        "transform",
        "trainer",
        "evaluator",
        "pusher",
    ]
    steps = {s.id: s for s in plan.steps}
    assert steps["ImportSchemaGen"].parameters == {
        "artifact_uri": "gs://<your-project-bucket>/penguin/schema/user_provided/schema.pbtxt",
        "artifact_type": "Schema",
    }
    assert _wiring(plan)["Transform"] == {
        "examples": "CsvExampleGen.examples",
        "schema": "ImportSchemaGen.schema",
    }
    assert steps["Trainer"].parameters["train_args"] == ParameterRef("train-args")
    assert plan.parameters == (
        PipelineParameter("train-args", "str", '{"num_steps" : 100}'),
        PipelineParameter("eval-args", "str", '{"num_steps": 50}'),
    )
    assert [n.id for n in plan.not_run] == TFDV_NOT_RUN
    assert plan.notices == ()  # no metadata_connection_config in this file
    refused, _ = tfx_plans[0]["penguin_kubeflow_vertex"]
    assert isinstance(refused, UserInputError) and refused.input_name == "Trainer"
    assert "google_cloud_ai_platform.Trainer runs the training as an AI Platform" in str(refused)


@pytest.mark.slow
def test_tfx_templates_as_copied_plan_what_their_pipeline_holds(tfx_plans):
    taxi, _, _ = _plan(tfx_plans, "template_taxi")
    penguin, _, _ = _plan(tfx_plans, "template_penguin")
    assert _steps(taxi) == [("CsvExampleGen", "import_examples")]
    assert taxi.name == "my_taxi" and taxi.root.endswith("/tfx_pipeline_output/my_taxi")
    assert taxi.steps[0].parameters["input_pattern"].endswith("/data")
    assert _steps(penguin) == [("CsvExampleGen", "import_examples")]
    assert penguin.steps[0].folds == ("SchemaGen",)
    assert [n.id for n in penguin.not_run] == ["StatisticsGen"]


@pytest.mark.slow
def test_tfx_taxi_template_with_the_tutorials_steps(tfx_plans):
    plan, run, _ = _plan(tfx_plans, "template_taxi_tutorial")
    folder = run.pipeline.source_dir  # the copied template, where local_runner.py lies
    assert [c for _, c in _steps(plan)] == [
        "import_examples",
        "resolver",
        "transform",
        "trainer",
        "evaluator",
        "pusher",
    ]
    steps = {s.id: s for s in plan.steps}
    assert steps["Transform"].parameters == {
        "module_file": "models.preprocessing",
        "preprocessing_fn": "preprocessing_fn",
    }
    assert steps["Trainer"].parameters == {
        "module_file": "models.keras_model.model",
        "run_fn": "run_fn",
        "train_args": {"num_steps": 1000},
        "eval_args": {"num_steps": 150},
    }
    assert plan.python_path == (folder,)
    assert (
        json.loads(steps["Pusher"].parameters["push_destination"])["filesystem"]["base_directory"]
        == f"{folder}/tfx_pipeline_output/my_taxi/serving_model"
    )
