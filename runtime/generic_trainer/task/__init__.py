"""The Task API: Model Garden's workflow (Task + experiment config + the runtime's own loop), on
Keras 3.

    from generic_trainer.task import Task, TaskConfig, ExperimentConfig
    from generic_trainer.task import register_task, register_experiment

Usable without the CLI: `run_experiment(task, experiment, mode, checkpoint_dir, ...)`, the same
entry the CLI path (`generic-trainer train --task module:Class ...`, `train_task.py`, beside
train.py) runs.

The package, one job per module:
  base.py                the Task class (what to train)
  task_registry.py       Task classes by name and config class; the check a Task class must pass
  config.py              the experiment config dataclasses, registry and params.yaml
  config_text.py         the text an override comes in (files, `config`, --params-override)
  overrides.py           applying override mappings onto configs (unknown keys refused, values
                         coerced)
  resolve.py             one run's config: override order, then checks for the mode
  loading.py             the CLI path's Task: its class loaded and checked, its config resolved
  optimization_config.py trainer.optimizer_config (Model Garden's one-of form; the flat form read)
  optimization_checks.py its checks, before TensorFlow starts
  optimizer_blocks.py    its optimizer, learning-rate, warm-up and EMA blocks
  optimizers.py, schedules.py, layerwise.py, ema.py   what that config builds
  experiment.py          run_experiment: builds the parts below, runs a mode, exports
  state.py               the model, optimizer, metrics, EMA, global step and their checkpoint
  train_loop.py          the inner training loop (N steps per tf.function call)
  eval_loop.py           the inner evaluation loop (one pass over the validation data)
  controller.py          the outer loop: when to train, evaluate, checkpoint, recover and stop
  restore.py             where a run starts: its newest readable checkpoint, else initialize
  train_progress.py      the training progress lines (steps/s, ETA)
  divergence.py          a loss blow-up: restore the last checkpoint and train again, or stop
  summaries.py           the TensorBoard summary writers (chief only)
  continuous_eval.py     continuous_eval: each new checkpoint another process writes, evaluated
  experiment_result.py   what a run did (ExperimentResult)
  checkpoints.py         warm starts (init_checkpoint) and the best-checkpoint exporter
  export.py              the serving SavedModel (serving_default runs Task.inference_step)
Importing this package does not import TensorFlow.
"""

from __future__ import annotations

from generic_trainer.task.base import Task
from generic_trainer.task.config import (
    DataConfig,
    ExperimentConfig,
    RuntimeConfig,
    TaskConfig,
    TrainerConfig,
    get_experiment,
    parse_params_override,
    register_experiment,
    registered_experiments,
    to_yaml,
    write_params_yaml,
)
from generic_trainer.task.experiment import run_experiment
from generic_trainer.task.optimization_config import OptimizationConfig, OptimizerConfig
from generic_trainer.task.optimizer_blocks import (
    EMAConfig,
    LearningRateConfig,
    OptimizerTypeConfig,
    WarmupConfig,
)
from generic_trainer.task.overrides import build_optimization_config, override
from generic_trainer.task.resolve import RunInputs, build_experiment, validate
from generic_trainer.task.task_registry import (
    check_task_class,
    get_task,
    register_task,
    task_for_config,
)

__all__ = [
    "DataConfig",
    "EMAConfig",
    "ExperimentConfig",
    "LearningRateConfig",
    "OptimizationConfig",
    "OptimizerConfig",
    "OptimizerTypeConfig",
    "WarmupConfig",
    "RunInputs",
    "RuntimeConfig",
    "Task",
    "TaskConfig",
    "TrainerConfig",
    "build_experiment",
    "build_optimization_config",
    "check_task_class",
    "get_experiment",
    "get_task",
    "override",
    "parse_params_override",
    "register_experiment",
    "register_task",
    "registered_experiments",
    "run_experiment",
    "task_for_config",
    "to_yaml",
    "validate",
    "write_params_yaml",
]
