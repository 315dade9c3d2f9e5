"""Experiment configs of the Task API: override order, unknown keys, coercion, registry,
params.yaml.

No TensorFlow here: config resolution happens before TensorFlow loads.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from generic_trainer.artifacts import kfp_io
from generic_trainer.errors import UserInputError
from generic_trainer.fit.requests import TaskProgram, TrainRequest
from generic_trainer.intake.fit_options import TRAIN
from generic_trainer.intake.fit_request import build_train_request
from generic_trainer.intake.options import artifact_maps
from generic_trainer.task import (
    DataConfig,
    ExperimentConfig,
    RunInputs,
    Task,
    TaskConfig,
    build_experiment,
    check_task_class,
    get_experiment,
    parse_params_override,
    register_experiment,
    validate,
    write_params_yaml,
)
from generic_trainer.task import config as config_lib
from generic_trainer.task import loading as runner

ARTIFACTS = artifact_maps(TRAIN)  # the train verb's own executor-input maps

TASKS = Path(__file__).parent / "task_modules"


@dataclasses.dataclass
class TinyModel:
    units: int = 8
    dropout: float = 0.0
    activation: str = "relu"
    layers: list[int] = dataclasses.field(default_factory=lambda: [4, 2])
    embed: int | None = None
    use_bias: bool = True


@dataclasses.dataclass
class TinyTaskConfig(TaskConfig):
    model: TinyModel = dataclasses.field(default_factory=TinyModel)


class TinyTask(Task):
    config_cls = TinyTaskConfig

    def build_model(self):
        pass

    def build_inputs(self, params, input_context=None):
        pass

    def build_losses(self, labels, model_outputs, aux_losses=None):
        pass


def defaults() -> ExperimentConfig:
    return TinyTask.default_experiment()


def write(path: Path, data) -> str:
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return str(path)


def test_override_order_defaults_files_config_then_params_override(tmp_path):
    first = write(
        tmp_path / "a.yaml",
        {
            "trainer": {"train_steps": 100, "steps_per_loop": 10},
            "task": {"model": {"units": 16, "activation": "tanh"}},
        },
    )
    second = write(
        tmp_path / "b.yaml", {"trainer": {"train_steps": 200}, "task": {"model": {"units": 32}}}
    )
    inline = "trainer: {train_steps: 300}\ntask: {model: {dropout: 0.5}}"
    cfg = build_experiment(
        defaults(),
        config_files=[first, second],
        config_text=inline,
        params_override="trainer.train_steps=400",
    )
    assert cfg.trainer.train_steps == 400  # params-override wins over everything
    assert cfg.task.model.units == 32  # the later file wins over the earlier
    assert cfg.task.model.activation == "tanh"  # set only in the first file: kept
    assert cfg.trainer.steps_per_loop == 10
    assert cfg.task.model.dropout == 0.5  # inline config (KFP `config`) applies after the files
    assert cfg.task.model.layers == [4, 2]  # untouched default
    # without the later layers, the earlier ones show through
    assert build_experiment(defaults(), config_files=[first]).trainer.train_steps == 100
    assert build_experiment(defaults()).trainer.train_steps == 0
    # the defaults object itself is never modified
    base = defaults()
    build_experiment(base, params_override="task.model.units=99")
    assert base.task.model.units == 8


def test_run_inputs_fill_only_unset_fields_and_steps_replace_defaults(tmp_path):
    base = defaults()
    base.task.validation_data.input_path = "/data/fixed-eval/*"
    base.trainer.train_steps = 50
    inputs = RunInputs(
        train_input_path="/ex/Split-train/*",
        eval_input_path="/ex/Split-eval/*",
        schema_path="/s/schema.pbtxt",
        hyperparameters={"values": {"units": 4}},
        custom_config={"k": 1},
        train_steps=70,
        eval_steps=3,
        strategy="mirrored",
    )
    cfg = build_experiment(base, inputs)
    assert cfg.task.train_data.input_path == "/ex/Split-train/*"
    assert cfg.task.validation_data.input_path == "/data/fixed-eval/*"  # set by the defaults: kept
    assert cfg.task.schema_path == "/s/schema.pbtxt"
    assert cfg.task.hyperparameters == {"values": {"units": 4}}
    assert cfg.task.custom_config == {"k": 1}
    assert cfg.trainer.train_steps == 70 and cfg.trainer.validation_steps == 3
    assert cfg.runtime.distribution_strategy == "mirrored"
    # config files and overrides still win over run inputs
    cfg = build_experiment(
        base, inputs, params_override="trainer.train_steps=9,task.train_data.input_path=/other/*"
    )
    assert cfg.trainer.train_steps == 9 and cfg.task.train_data.input_path == "/other/*"


@pytest.mark.parametrize(
    "source, expected",
    [
        ("file", "unknown key 'trainer.train_step' (did you mean 'trainer.train_steps'?)"),
        ("override", "unknown key 'task.model.unitz' (did you mean 'task.model.units'?)"),
        ("top", "unknown key 'trainers' (did you mean 'trainer'?)"),
    ],
)
def test_unknown_keys_are_rejected_naming_the_key_and_source(tmp_path, source, expected):
    path = write(tmp_path / "bad.yaml", {"trainer": {"train_step": 5}})
    with pytest.raises(UserInputError) as e:
        if source == "file":
            build_experiment(defaults(), config_files=[path])
        elif source == "override":
            build_experiment(defaults(), params_override="trainer.train_steps=5,task.model.unitz=3")
        else:
            build_experiment(defaults(), config_text="trainers: {train_steps: 5}")
    assert expected in str(e.value)
    assert (
        e.value.input_name
        == {"file": f"--config-file {path}", "override": "--params-override", "top": "config"}[
            source
        ]
    )


def test_override_and_config_values_are_coerced_to_each_fields_type():
    cfg = build_experiment(
        defaults(),
        params_override=(
            "trainer.train_steps=5.0,task.model.dropout=1,trainer.optimizer_config.learning_rate.constant.learning_rate=1e-3,"
            "task.model.use_bias=false,task.model.activation=123,task.model.embed=7,task.model.layers=[8,16,32],"
            "task.train_data.seed=null,trainer.optimizer_config.optimizer.sgd.momentum=0.9"
        ),
    )
    assert cfg.trainer.train_steps == 5 and isinstance(cfg.trainer.train_steps, int)
    assert cfg.task.model.dropout == 1.0 and isinstance(cfg.task.model.dropout, float)
    # YAML 1.1 reads "1e-3" as a string
    assert cfg.trainer.optimizer_config.learning_rate.constant.learning_rate == pytest.approx(1e-3)
    assert cfg.task.model.use_bias is False
    assert cfg.task.model.activation == "123"
    assert cfg.task.model.embed == 7
    assert cfg.task.model.layers == [8, 16, 32]
    assert cfg.task.train_data.seed is None
    assert cfg.trainer.optimizer_config.optimizer.sgd.momentum == 0.9
    # KFP hands ints back as floats; strings from YAML files coerce too
    cfg = build_experiment(
        defaults(),
        config_text=json.dumps(
            {
                "trainer": {"max_to_keep": 3.0, "validation_steps": "4"},
                "task": {"model": {"use_bias": "yes"}},
            }
        ),
    )
    assert (
        cfg.trainer.max_to_keep == 3
        and cfg.trainer.validation_steps == 4
        and cfg.task.model.use_bias is True
    )


@pytest.mark.parametrize(
    "override, message",
    [
        ("trainer.train_steps=5.5", "trainer.train_steps: expected an integer, got 5.5"),
        ("trainer.train_steps=lots", "trainer.train_steps: expected an integer, got 'lots'"),
        ("task.model.use_bias=maybe", "task.model.use_bias: expected true or false, got 'maybe'"),
        ("task.model.dropout=[1]", "task.model.dropout: expected a number"),
        ("task.model.layers=7", "task.model.layers: expected a list, got 7"),
        ("task.train_data=5", "expected a mapping of keys to values at task.train_data."),
        ("task.model.units", "expected key=value pairs"),
    ],
)
def test_bad_values_name_the_key(override, message):
    with pytest.raises(UserInputError) as e:
        build_experiment(defaults(), params_override=override)
    assert message in str(e.value)


def test_params_override_reads_dotted_keys_yaml_values_and_comma_continued_paths():
    assert parse_params_override("a.b=1,c=[1, 2],d={x: 1, y: 2},e='s,t'") == {
        "a": {"b": 1},
        "c": [1, 2],
        "d": {"x": 1, "y": 2},
        "e": "s,t",
    }
    # a piece without '=' continues the previous value: comma-separated file patterns
    assert parse_params_override("task.train_data.input_path=/a/*,/b/*,trainer.train_steps=3") == {
        "task": {"train_data": {"input_path": "/a/*,/b/*"}},
        "trainer": {"train_steps": 3},
    }
    assert parse_params_override("{trainer: {train_steps: 3}}") == {"trainer": {"train_steps": 3}}
    assert parse_params_override("") == {}
    with pytest.raises(UserInputError, match="bad key 'a..b'"):
        parse_params_override("a..b=1")


def test_free_form_dict_fields_merge_the_config_file_and_the_override():
    cfg = build_experiment(
        ExperimentConfig(),
        config_text="task: {custom_config: {a: 1, nested: {x: 1}}}",
        params_override="task.custom_config.nested.y=2,task.custom_config.b=text",
    )
    assert cfg.task.custom_config == {"a": 1, "nested": {"x": 1, "y": 2}, "b": "text"}


def test_a_registered_experiment_is_a_fresh_copy_and_an_unknown_name_lists_the_registered():
    @register_experiment("tiny_test_experiment")
    def tiny() -> ExperimentConfig:
        cfg = defaults()
        cfg.trainer.train_steps = 123
        cfg.task.model.units = 3
        return cfg

    assert get_experiment("tiny_test_experiment").trainer.train_steps == 123
    get_experiment("tiny_test_experiment").trainer.train_steps = 1  # a fresh copy each time
    assert get_experiment("tiny_test_experiment").trainer.train_steps == 123
    with pytest.raises(
        UserInputError, match="no experiment named 'nope'; registered: .*tiny_test_experiment"
    ):
        get_experiment("nope")


def test_an_experiment_configuring_another_task_config_class_is_refused(tmp_path):
    @register_experiment("plain_task_experiment")
    def plain() -> ExperimentConfig:
        return ExperimentConfig()

    request = TrainRequest(
        program=TaskProgram(task="t:TinyTask", experiment="plain_task_experiment", mode="train"),
        examples="",
        model_dir="m",
        model_run_dir="r",
        checkpoint_dir="c",
        gcs_root=str(tmp_path),
    )
    with pytest.raises(
        UserInputError, match="configures a TaskConfig, but TinyTask expects a TinyTaskConfig"
    ):
        runner.resolve_experiment(TinyTask, request)


def test_each_mode_requires_its_steps_and_inputs_and_known_runtime_values():
    cfg = build_experiment(
        defaults(),
        params_override="task.train_data.input_path=/x/*,task.validation_data.input_path=/y/*",
    )
    with pytest.raises(UserInputError, match="trainer.train_steps: required to train"):
        validate(cfg, "train")
    validate(cfg, "eval")  # evaluation needs no train_steps
    cfg.trainer.train_steps = 10
    cfg.runtime.distribution_strategy = "off"
    assert (
        validate(cfg, "train_and_eval").runtime.distribution_strategy == "default"
    )  # Model Garden's name
    for override, message in [
        (
            "runtime.distribution_strategy=tpu",
            "runtime.distribution_strategy: TPUs are not supported",
        ),
        (
            "runtime.distribution_strategy=parameter_server",
            "runtime.distribution_strategy: expected one of",
        ),
        ("runtime.distribution_strategy=ps", r"multi_worker_mirrored \(or off, none for default\)"),
        (
            "runtime.mixed_precision_dtype=half",
            "runtime.mixed_precision_dtype: expected one of float32, float16, bfloat16, "
            "mixed_float16, mixed_bfloat16 "
            "or empty",
        ),
        (
            "trainer.best_checkpoint_export_subdir=best",
            "trainer.best_checkpoint_eval_metric: required",
        ),
        ("trainer.best_checkpoint_metric_comp=bigger", "expected higher or lower"),
        ("trainer.steps_per_loop=0", "trainer.steps_per_loop: expected a positive integer"),
        ("trainer.validation_steps=0", "trainer.validation_steps: expected -1"),
        ("task.train_data.input_path=''", "task.train_data.input_path: not set"),
    ]:
        with pytest.raises(UserInputError, match=message):
            validate(build_experiment(cfg, params_override=override), "train_and_eval")


def test_params_yaml_round_trips_and_masks_secrets(tmp_path):
    cfg = build_experiment(
        defaults(),
        params_override="trainer.train_steps=42,task.model.layers=[3],"
        "task.custom_config={api_key: s3cret, rows: 5}",
    )
    path = write_params_yaml(cfg, str(tmp_path))
    assert path == str(tmp_path / "params.yaml")
    text = Path(path).read_text()
    assert "s3cret" not in text and "api_key: '***'" in text
    reloaded = build_experiment(defaults(), config_files=[path])
    assert reloaded.trainer.train_steps == 42 and reloaded.task.model.layers == [3]
    assert dataclasses.asdict(reloaded.trainer) == dataclasses.asdict(cfg.trainer)
    assert reloaded.task.custom_config == {"api_key": "***", "rows": 5}


def test_missing_unparsable_binary_or_list_config_files_are_user_errors(tmp_path):
    with pytest.raises(UserInputError, match="does not exist"):
        build_experiment(defaults(), config_files=[str(tmp_path / "missing.yaml")])
    bad = write(tmp_path / "bad.yaml", "trainer: [1, 2\n")
    with pytest.raises(
        UserInputError, match=r"--config-file .*bad.yaml: not valid YAML/JSON at line"
    ):
        build_experiment(defaults(), config_files=[bad])
    broken_json = write(tmp_path / "broken.json", '{"trainer": {"train_steps": 5}')
    with pytest.raises(
        UserInputError, match=r"--config-file .*broken.json: not valid YAML/JSON at line 1"
    ):
        build_experiment(defaults(), config_files=[broken_json])
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"trainer:\n  train_steps: \xff\xfe\n")
    with pytest.raises(
        UserInputError, match=r"--config-file .*binary.yaml: .*binary.yaml is not UTF-8 text"
    ):
        build_experiment(defaults(), config_files=[str(binary)])
    listy = write(tmp_path / "list.yaml", "- 1\n- 2\n")
    with pytest.raises(UserInputError, match="expected a mapping"):
        build_experiment(defaults(), config_files=[listy])
    empty = write(tmp_path / "empty.yaml", "")
    assert build_experiment(defaults(), config_files=[empty]).trainer.train_steps == 0


def test_a_task_class_missing_methods_or_a_malformed_task_spec_is_refused():
    class NoModel(Task):
        def build_inputs(self, params, input_context=None):
            pass

    with pytest.raises(UserInputError, match="NoModel does not define build_model, build_losses"):
        check_task_class(NoModel)

    class OwnSteps(Task):  # build_losses not needed when both steps are the task's own
        def build_model(self):
            pass

        def build_inputs(self, params, input_context=None):
            pass

        def train_step(self, inputs, model, optimizer, metrics=None):
            pass

        def validation_step(self, inputs, model, metrics=None):
            pass

    assert check_task_class(OwnSteps) is OwnSteps
    with pytest.raises(UserInputError, match="not a subclass of generic_trainer.Task"):
        check_task_class(dict)
    with pytest.raises(UserInputError, match="expected module:Class"):
        runner.split_task_spec("examples/penguin/task.py")
    assert runner.split_task_spec("gs://b/dir/task.py:MyTask") == ("gs://b/dir/task.py", "MyTask")
    with pytest.raises(
        UserInputError,
        match=r"--task: .*has no 'Nope'; its Task classes: IncompleteTask, LinearTask",
    ):
        runner.load_task_class(f"{TASKS / 'linear_task.py'}:Nope", "/nonexistent")
    with pytest.raises(UserInputError, match="--task: .*missing.py does not exist"):
        runner.load_task_class(f"{TASKS / 'missing.py'}:Task", "/nonexistent")


def test_a_task_module_with_a_syntax_error_is_refused_before_it_is_imported(tmp_path):
    broken = tmp_path / "broken_task.py"
    broken.write_text("import sys\nsys.exit(7)\ndef oops(:\n")  # would exit if imported
    with pytest.raises(UserInputError, match=r"--task: syntax error in .*broken_task.py line 3"):
        runner.load_task_class(f"{broken}:BrokenTask", str(tmp_path / "download"))


def test_request_accepts_task_inputs_from_flags_and_kfp(tmp_path, penguin):
    base = {"examples": str(penguin / "data"), "model_dir": str(tmp_path / "m")}
    request = build_train_request(
        {
            **base,
            "task": "pkg.tasks:MyTask",
            "params_override": "trainer.train_steps=3",
            "mode": "train",
        },
        environ={},
    )
    # the program is the Task (no run_fn module): its fields are the Task API's alone
    assert request.program == TaskProgram(
        task="pkg.tasks:MyTask", mode="train", params_override="trainer.train_steps=3"
    )
    assert request.task is request.program
    # --examples is optional with a task (the config may name the files)
    assert (
        build_train_request({"model_dir": str(tmp_path / "m"), "task": "t:T"}, environ={}).examples
        == ""
    )
    with pytest.raises(
        UserInputError, match="--task: give either --task module:Class or --module-file"
    ):
        build_train_request({**base, "task": "t:T", "module_file": "m.py"}, environ={})
    with pytest.raises(UserInputError, match="--module-file: required"):
        build_train_request(base, environ={})
    with pytest.raises(UserInputError, match="--mode: expected one of"):
        build_train_request({**base, "task": "t:T", "mode": "fit"}, environ={})
    with pytest.raises(UserInputError, match="config: not valid YAML/JSON"):
        build_train_request(
            {**base, "task": "t:T", "config": "trainer: {train_steps: 3"}, environ={}
        )
    with pytest.raises(UserInputError, match="--config-file: .*nope.yaml does not exist"):
        build_train_request(
            {**base, "task": "t:T", "config_file": [str(tmp_path / "nope.yaml")]}, environ={}
        )
    with pytest.raises(UserInputError, match="--keras: the Task API runs Keras 3"):
        build_train_request({**base, "task": "t:T", "keras": "tf_keras"}, environ={})

    # KFP: the component's `task`, `experiment`, `config` (a YAML string or a dict) and `mode`
    # parameters
    cfg = write(tmp_path / "c.yaml", {"trainer": {"train_steps": 1}})
    executor_input = {
        "inputs": {
            "parameterValues": {
                "task": "pkg.tasks:MyTask",
                "experiment": "penguin",
                "mode": "train",
                "config": {"trainer": {"train_steps": 20.0}},
                "config_file": cfg,
            },
            "artifacts": {"examples": {"artifacts": [{"name": "e", "uri": str(penguin / "data")}]}},
        },
        "outputs": {
            "artifacts": {
                "model": {
                    "artifacts": [
                        {
                            "name": "m",
                            "uri": str(tmp_path / "model"),
                            "type": {"schemaTitle": "system.Model"},
                        }
                    ]
                }
            },
            "outputFile": str(tmp_path / "out.json"),
        },
    }
    values, kfp = kfp_io.parse(artifacts=ARTIFACTS, executor_input=executor_input)
    request = build_train_request(values, environ={}, kfp=kfp)
    task = request.program
    assert (task.task, task.experiment, task.mode, task.config_files) == (
        "pkg.tasks:MyTask",
        "penguin",
        "train",
        (cfg,),
    )
    assert json.loads(task.config) == {"trainer": {"train_steps": 20}}  # KFP's floats back to ints
    assert config_lib.parse_config_text(task.config) == {"trainer": {"train_steps": 20}}


def test_importing_the_task_api_does_not_load_tensorflow():
    code = (
        "import sys, generic_trainer.task, generic_trainer.train_task, "
        "generic_trainer.task.controller, "
        "generic_trainer.task.experiment, generic_trainer.task.export; "
        "print('tensorflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_data_config_input_path_splits_into_trimmed_file_patterns():
    assert DataConfig(input_path=" /a/*, /b/* ,").file_patterns() == ["/a/*", "/b/*"]


def test_cli_strategy_wins_over_the_config_and_runtime_keys(caplog):
    import logging

    from generic_trainer.train_task import _use_gpus

    caplog.set_level(logging.INFO, "generic_trainer.task")
    mirrored = 'runtime: {distribution_strategy: mirrored, all_reduce_alg: nccl, loss_scale: "128"}'
    cfg = build_experiment(defaults(), RunInputs(strategy="one_device"), config_text=mirrored)
    assert cfg.runtime.distribution_strategy == "one_device"
    assert "--strategy one_device wins over runtime.distribution_strategy mirrored" in caplog.text
    cfg = build_experiment(
        defaults(), RunInputs(strategy="auto"), config_text=mirrored
    )  # auto: the config's
    assert cfg.runtime.distribution_strategy == "mirrored"
    cfg.trainer.train_steps = 5
    cfg.task.train_data.input_path = cfg.task.validation_data.input_path = "/x/*"
    validate(cfg, "train")
    assert (
        cfg.runtime.loss_scale == 128.0 and "all_reduce_alg='nccl'" in caplog.text
    )  # read, logged as not acted on
    for override, message in [
        ("runtime.worker_hosts=a:1", "runtime.worker_hosts: the cluster comes from TF_CONFIG"),
        ("runtime.loss_scale=big", "runtime.loss_scale: expected dynamic or a positive number"),
        ("runtime.tpu=local", "runtime.tpu: TPUs are not supported"),
        ("runtime.num_gpus=-1", "runtime.num_gpus: expected 0"),
        ("trainer.recovery_max_trials=-1", "trainer.recovery_max_trials: expected 0 or more"),
    ]:
        with pytest.raises(UserInputError, match=message):
            validate(build_experiment(cfg, params_override=override), "train")
    with pytest.raises(UserInputError, match="runtime.num_gpus: 2 GPUs asked for, 0 visible"):
        _use_gpus(2, 0)
    assert _use_gpus(0, 3) == 3
