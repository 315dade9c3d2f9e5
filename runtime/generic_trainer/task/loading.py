"""Loading a Task for `train --task module:Class`: its class, its experiment config, the Task.

`load_task_class` fetches the module (a .py path, gs:// URI or dotted name), checks its sha256 and
syntax, imports it and checks the class defines what it must; `resolve_experiment` builds the
experiment config in override order (defaults -> run inputs -> config files -> inline config ->
--params-override) and checks it for the mode; `make_task` instantiates the Task.
"""

from __future__ import annotations

import inspect
import os

from generic_trainer.artifacts import storage
from generic_trainer.artifacts.storage_settings import DEFAULT_SETTINGS, StorageSettings
from generic_trainer.errors import UserInputError
from generic_trainer.fit import user_code, user_module
from generic_trainer.fit.inputs import resolve_schema_file
from generic_trainer.fit.requests import TrainRequest
from generic_trainer.task import base, config, resolve, task_registry
from generic_trainer.task.config import TRAIN_MODES

INPUT = "--task"


def split_task_spec(spec: str) -> tuple[str, str]:
    """`module:Class` -> (module, Class); module is a .py path, a gs:// URI or a dotted name."""
    module, sep, attr = (spec or "").rpartition(":")
    if (
        not sep
        or not module
        or not attr
        or not attr.replace("_", "a").isalnum()
        or module.endswith(":/")
    ):
        raise UserInputError(
            INPUT,
            f"expected module:Class (e.g. trainer/task.py:MyTask or pkg.tasks:MyTask), "
            f"got {spec!r}",
        )
    return module, attr


def _renamed(e: UserInputError) -> UserInputError:
    message = str(e)
    prefix = f"{e.input_name}: "
    return UserInputError(INPUT, message[len(prefix) :] if message.startswith(prefix) else message)


def load_task_class(
    spec: str,
    download_dir: str,
    sha256: str | None = None,
    settings: StorageSettings = DEFAULT_SETTINGS,
) -> type[base.Task]:
    """Fetch the module of `spec`, check its sha256 and syntax, import it, and return its checked
    Task class."""
    module_spec, attr = split_task_spec(spec)
    try:
        module = user_module.load_user_module(module_spec, download_dir, sha256, settings)
    except UserInputError as e:
        raise (_renamed(e) if e.input_name == user_module.INPUT else e) from None
    cls = getattr(module, attr, None) or task_registry.get_task(attr)
    if cls is None:
        tasks = sorted(
            k
            for k, v in vars(module).items()
            if inspect.isclass(v) and issubclass(v, base.Task) and v is not base.Task
        )
        raise UserInputError(
            INPUT,
            f"module {getattr(module, '__file__', module_spec)} has no {attr!r}"
            + (f"; its Task classes: {', '.join(tasks)}" if tasks else ""),
        )
    return task_registry.check_task_class(cls)


def _local(value: str, gcs_root: str) -> str:
    return (
        ",".join(storage.local_path(p.strip(), gcs_root) for p in value.split(",") if p.strip())
        if value
        else value
    )


def resolve_experiment(task_cls: type[base.Task], request: TrainRequest) -> config.ExperimentConfig:
    """The experiment config of this run, resolved in override order and checked for the program's
    mode."""
    from generic_trainer.records import example_files

    program = request.task
    if program.experiment:
        defaults = config.get_experiment(program.experiment)
        if not isinstance(defaults.task, task_cls.config_cls):
            raise UserInputError(
                "--experiment",
                f"experiment {program.experiment!r} configures a {type(defaults.task).__name__}, "
                f"but {task_cls.__name__} expects a {task_cls.config_cls.__name__}",
            )
    else:
        defaults = task_cls.default_experiment()
    inputs = _run_inputs(request)
    experiment = resolve.build_experiment(
        defaults, inputs, program.config_files, program.config, program.params_override
    )
    resolve.validate(experiment, program.mode)
    task = experiment.task
    for data_config in (task.train_data, task.validation_data):
        data_config.input_path = _local(data_config.input_path, request.gcs_root)
    for name in ("schema_path", "transform_graph_path", "init_checkpoint"):
        setattr(task, name, _local(getattr(task, name), request.gcs_root))
    if program.mode in TRAIN_MODES:
        example_files.check_readable(task.train_data.file_patterns(), "task.train_data.input_path")
    if program.mode != "train":
        example_files.check_readable(
            task.validation_data.file_patterns(), "task.validation_data.input_path"
        )
    if task.schema_path and not os.path.exists(task.schema_path):
        raise UserInputError("task.schema_path", f"{task.schema_path} does not exist")
    return experiment


def _run_inputs(request: TrainRequest) -> resolve.RunInputs:
    """What the run's flags give the experiment: the split file patterns of its mode (resolved at
    intake; the config's input_path is comma-separated), the schema, the transform graph,
    hyperparameters, custom config, steps and strategy."""
    evaluates = request.task is not None and request.task.mode != "train"
    train_path = ",".join(request.train_files)
    eval_path = ",".join(request.eval_files) if evaluates else ""  # else: a TFLite check's only
    return resolve.RunInputs(
        train_input_path=train_path,
        eval_input_path=eval_path,
        schema_path=resolve_schema_file(request.schema) or "",
        transform_graph_path=request.transform_graph or "",
        hyperparameters=request.hyperparameters,
        custom_config=request.custom_config,
        train_steps=request.train_steps,
        eval_steps=request.eval_steps,
        strategy=request.strategy,
    )


def make_task(
    task_cls: type[base.Task], experiment: config.ExperimentConfig, logging_dir: str
) -> base.Task:
    """Instantiate the Task (passing `experiment` when its __init__ takes it)."""
    params = inspect.signature(task_cls).parameters
    takes_experiment = "experiment" in params or any(
        p.kind is p.VAR_KEYWORD for p in params.values()
    )
    what = f"{task_cls.__name__}(params)"
    if takes_experiment:
        return user_code.call(
            task_cls, experiment.task, logging_dir=logging_dir, experiment=experiment, what=what
        )
    task = user_code.call(task_cls, experiment.task, logging_dir=logging_dir, what=what)
    task.experiment = experiment
    return task
