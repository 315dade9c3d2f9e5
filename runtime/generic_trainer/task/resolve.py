"""The experiment config of one run: resolved in override order, then checked for its mode.

`build_experiment` resolves the config in this order:

  defaults (the Task's config class, or a registered experiment)
  -> run inputs: --examples/--schema/... fill fields the defaults leave unset; --train-steps and
     --eval-steps set trainer.train_steps / validation_steps
  -> each --config-file (YAML or JSON), in order
  -> the inline `config` (YAML/JSON text, the KFP parameter)
  -> --params-override a.b=c,...

`validate` checks the result makes sense for a mode (errors name the key and what was
expected) before anything runs. No TensorFlow here.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.task.config import (
    MIXED_PRECISION,
    MODES,
    STRATEGIES,
    STRATEGY_ALIASES,
    TRAIN_MODES,
    ExperimentConfig,
    RuntimeConfig,
    TrainerConfig,
    load_config_file,
    parse_config_text,
    parse_params_override,
)
from generic_trainer.task.optimization_checks import check as check_optimization
from generic_trainer.task.optimization_config import unused_blocks
from generic_trainer.task.overrides import override

log = logging.getLogger("generic_trainer.task")


@dataclasses.dataclass(frozen=True)
class RunInputs:
    """What the run's flags (TFX inputs) offer to fields the defaults leave unset."""

    train_input_path: str = ""
    eval_input_path: str = ""
    schema_path: str = ""
    transform_graph_path: str = ""
    hyperparameters: Mapping[str, Any] | None = None
    custom_config: Mapping[str, Any] | None = None
    train_steps: int | None = None
    eval_steps: int | None = None
    strategy: str = ""


def fill_run_inputs(config: ExperimentConfig, inputs: RunInputs) -> ExperimentConfig:
    """Fill unset fields (empty paths, strategy, hyperparameters ...) from the run's inputs.

    Step counts given as run inputs (--train-steps / --eval-steps) replace the defaults' values.
    """
    task = config.task
    if inputs.train_input_path and not task.train_data.input_path:
        task.train_data.input_path = inputs.train_input_path
    if inputs.eval_input_path and not task.validation_data.input_path:
        task.validation_data.input_path = inputs.eval_input_path
    if inputs.schema_path and not task.schema_path:
        task.schema_path = inputs.schema_path
    if inputs.transform_graph_path and not task.transform_graph_path:
        task.transform_graph_path = inputs.transform_graph_path
    if inputs.hyperparameters and not task.hyperparameters:
        task.hyperparameters = dict(inputs.hyperparameters)
    if inputs.custom_config and not task.custom_config:
        task.custom_config = dict(inputs.custom_config)
    if inputs.train_steps:  # explicit step counts (--train-steps, train_args) replace the defaults'
        config.trainer.train_steps = int(inputs.train_steps)
    if inputs.eval_steps:
        config.trainer.validation_steps = int(inputs.eval_steps)
    if inputs.strategy and not config.runtime.distribution_strategy:
        config.runtime.distribution_strategy = inputs.strategy
    return config


def apply_cli_strategy(config: ExperimentConfig, strategy: str) -> ExperimentConfig:
    """An explicit --strategy (anything but auto) wins over runtime.distribution_strategy; logged
    when they differ."""
    if not strategy or strategy == "auto":
        return config
    configured = config.runtime.distribution_strategy
    normalized = STRATEGY_ALIASES.get(configured.lower(), configured.lower())
    if configured and normalized != STRATEGY_ALIASES.get(strategy, strategy):
        log.info(
            "--strategy %s wins over runtime.distribution_strategy %s from the config",
            strategy,
            configured,
        )
    config.runtime.distribution_strategy = strategy
    return config


# Model Garden's runtime keys read but not acted on
_IGNORED_RUNTIME = (
    "all_reduce_alg",
    "num_packs",
    "enable_xla",
    "gpu_thread_mode",
    "per_gpu_thread_count",
    "dataset_num_private_threads",
    "batchnorm_spatial_persistent",
)


def build_experiment(
    defaults: ExperimentConfig,
    inputs: RunInputs | None = None,
    config_files: Sequence[str] = (),
    config_text: str | Mapping[str, Any] | None = None,
    params_override: str | None = None,
) -> ExperimentConfig:
    """Resolve an experiment config: defaults -> run inputs -> config files -> config text ->
    overrides."""
    config = copy.deepcopy(defaults)
    if inputs is not None:
        fill_run_inputs(config, inputs)
    for path in config_files:
        override(config, load_config_file(path), f"--config-file {path}")
    override(config, parse_config_text(config_text), "config")
    override(config, parse_params_override(params_override), "--params-override")
    if inputs is not None:
        apply_cli_strategy(config, inputs.strategy)
    for key in unused_blocks(config.trainer.optimizer_config, defaults.trainer.optimizer_config):
        log.warning("%s is set but its one-of's type chooses another block: it is ignored", key)
    runtime_defaults = RuntimeConfig()
    ignored = [
        f"{k}={getattr(config.runtime, k)!r}"
        for k in _IGNORED_RUNTIME
        if getattr(config.runtime, k) != getattr(runtime_defaults, k)
    ]
    if ignored:
        log.info(
            "runtime keys read but not acted on (tf.distribute and Keras choose these here): %s",
            ", ".join(ignored),
        )
    return config


def validate(config: ExperimentConfig, mode: str) -> ExperimentConfig:
    """Check the resolved config makes sense for `mode`.

    Args:
      config: the resolved experiment config; its strategy name is normalized in place.
      mode: train, eval, train_and_eval or continuous_eval.

    Returns:
      `config`.

    Raises:
      UserInputError: naming the first key that is wrong.
    """
    if mode not in MODES:
        raise UserInputError("--mode", f"expected one of {', '.join(MODES)}, got {mode!r}")
    t, r = config.trainer, config.runtime
    _check_strategy(r)
    _check_runtime(r)
    _check_recovery(t)
    _check_trainer(t, mode)
    _check_data(config, mode)
    return config


def _check_strategy(r: RuntimeConfig) -> None:
    """The strategy (normalized in place: aliases, case) and the mixed-precision dtype."""
    strategy = STRATEGY_ALIASES.get(
        r.distribution_strategy.lower(), r.distribution_strategy.lower()
    )
    if strategy == "tpu" or r.tpu:
        raise UserInputError(
            "runtime.distribution_strategy" if strategy == "tpu" else "runtime.tpu",
            "TPUs are not supported by generic-trainer (it trains on CPUs and GPUs): use mirrored, "
            "multi_worker_mirrored, one_device or off, and drop runtime.tpu",
        )
    if strategy not in STRATEGIES:
        raise UserInputError(
            "runtime.distribution_strategy",
            f"expected one of {', '.join(STRATEGIES)} (or "
            f"{', '.join(a for a in STRATEGY_ALIASES if a)} for default), got "
            f"{r.distribution_strategy!r}",
        )
    r.distribution_strategy = strategy
    if r.mixed_precision_dtype not in MIXED_PRECISION:
        raise UserInputError(
            "runtime.mixed_precision_dtype",
            f"expected one of {', '.join(v for v in MIXED_PRECISION if v)} or empty, "
            f"got {r.mixed_precision_dtype!r}",
        )


def _check_trainer(t: Any, mode: str) -> None:
    """The optimizer config, train steps, intervals, validation steps and best-checkpoint keys."""
    check_optimization(t.optimizer_config, t.train_steps if mode in TRAIN_MODES else 0)
    if mode in TRAIN_MODES and t.train_steps <= 0:
        raise UserInputError(
            "trainer.train_steps", "required to train: set it (or pass --train-steps N)"
        )
    for name in (
        "steps_per_loop",
        "checkpoint_interval",
        "summary_interval",
        "validation_interval",
        "max_to_keep",
    ):
        if getattr(t, name) <= 0:
            raise UserInputError(
                f"trainer.{name}", f"expected a positive integer, got {getattr(t, name)}"
            )
    if t.validation_steps == 0 or t.validation_steps < -1:
        raise UserInputError(
            "trainer.validation_steps", f"expected -1 (whole set) or > 0, got {t.validation_steps}"
        )
    if t.best_checkpoint_metric_comp not in ("higher", "lower"):
        raise UserInputError(
            "trainer.best_checkpoint_metric_comp",
            f"expected higher or lower, got {t.best_checkpoint_metric_comp!r}",
        )
    if t.best_checkpoint_export_subdir and not t.best_checkpoint_eval_metric:
        raise UserInputError(
            "trainer.best_checkpoint_eval_metric",
            "required when trainer.best_checkpoint_export_subdir is set",
        )


def _check_data(config: ExperimentConfig, mode: str) -> None:
    """The input paths the mode reads, and positive batch sizes."""
    if mode in TRAIN_MODES and not config.task.train_data.input_path:
        raise UserInputError(
            "task.train_data.input_path", "not set: pass --examples or set it in the config"
        )
    if mode != "train" and not config.task.validation_data.input_path:
        raise UserInputError(
            "task.validation_data.input_path", "not set: pass --examples or set it in the config"
        )
    for data_name in ("train_data", "validation_data"):
        data = getattr(config.task, data_name)
        if data.global_batch_size <= 0:
            raise UserInputError(
                f"task.{data_name}.global_batch_size",
                f"expected a positive integer, got {data.global_batch_size}",
            )


def _check_runtime(r: RuntimeConfig) -> None:
    if r.worker_hosts or r.task_index != -1:
        raise UserInputError(
            "runtime.worker_hosts" if r.worker_hosts else "runtime.task_index",
            "the cluster comes from TF_CONFIG or CLUSTER_SPEC (Vertex AI sets them), not the "
            "config: remove runtime.worker_hosts and runtime.task_index",
        )
    if r.num_gpus < 0:
        raise UserInputError(
            "runtime.num_gpus",
            f"expected 0 (every visible GPU) or a positive count, got {r.num_gpus}",
        )
    if r.loss_scale is not None and r.loss_scale != "dynamic":
        try:
            scale = float(r.loss_scale)
        except (TypeError, ValueError):
            scale = 0.0
        if not scale > 0:
            raise UserInputError(
                "runtime.loss_scale", f"expected dynamic or a positive number, got {r.loss_scale!r}"
            )
        r.loss_scale = scale


def _check_recovery(t: TrainerConfig) -> None:
    if t.recovery_max_trials < 0:
        raise UserInputError(
            "trainer.recovery_max_trials", f"expected 0 or more, got {t.recovery_max_trials}"
        )
    if t.recovery_begin_steps < 0:
        raise UserInputError(
            "trainer.recovery_begin_steps", f"expected 0 or more, got {t.recovery_begin_steps}"
        )
