"""The Task API: Model Garden's workflow (Task + experiment config + the runtime's own loop), on Keras 3.

    from generic_trainer.task import Task, TaskConfig, ExperimentConfig, register_task, register_experiment

Usable without the CLI: `run_experiment(task, experiment, mode, checkpoint_dir, ...)`. The CLI
path (`generic-trainer train --task module:Class ...`) is `generic_trainer.task.runner`.
Importing this package does not import TensorFlow.
"""

from __future__ import annotations

from typing import Any

from generic_trainer.task.base import Task, check_task_class, get_task, register_task, task_for_config
from generic_trainer.task.config import (
    DataConfig,
    ExperimentConfig,
    RunInputs,
    RuntimeConfig,
    TaskConfig,
    TrainerConfig,
    build_experiment,
    build_optimization_config,
    get_experiment,
    override,
    parse_params_override,
    register_experiment,
    registered_experiments,
    to_yaml,
    validate,
    write_params_yaml,
)
from generic_trainer.task.optimization_config import (
    EMAConfig,
    LearningRateConfig,
    OptimizationConfig,
    OptimizerConfig,
    OptimizerTypeConfig,
    WarmupConfig,
)


def run_experiment(*args: Any, **kwargs: Any):
    """See `generic_trainer.task.controller.run_experiment`.

    Imported on the first call so that the controller (which imports this package's modules) and this
    package do not import each other; neither imports TensorFlow (it loads when the loop runs).
    """
    from generic_trainer.task.controller import run_experiment as _run

    return _run(*args, **kwargs)


__all__ = [
    "DataConfig", "EMAConfig", "ExperimentConfig", "LearningRateConfig", "OptimizationConfig", "OptimizerConfig",
    "OptimizerTypeConfig", "WarmupConfig", "RunInputs", "RuntimeConfig", "Task", "TaskConfig",
    "TrainerConfig", "build_experiment", "build_optimization_config", "check_task_class", "get_experiment", "get_task",
    "override",
    "parse_params_override", "register_experiment", "register_task", "registered_experiments", "run_experiment",
    "task_for_config", "to_yaml", "validate", "write_params_yaml",
]
