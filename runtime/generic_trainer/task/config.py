"""Experiment configs: the nested dataclasses, the experiment registry, and their text forms.

An `ExperimentConfig` has three parts with TF Model Garden's field names: `task` (what to
train: data, model, init checkpoint), `trainer` (how long and how often: steps, intervals,
checkpoints, optimizer) and `runtime` (strategy, mixed precision). A Task names its own
`TaskConfig` subclass. The text an override comes in (config files, the inline `config`,
`--params-override a.b=c,...`) is read into mappings by `config_text.py` (re-exported here); this
module writes a resolved config as params.yaml. Applying mappings onto a config is
`overrides.py`; resolving and checking the experiment of a run is `resolve.py`. No TensorFlow here.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.task.config_text import (  # noqa: F401 (re-exported)
    load_config_file,
    parse_config_text,
    parse_params_override,
)
from generic_trainer.task.optimization_config import OptimizationConfig, OptimizerConfig
from generic_trainer.task.overrides import build_optimization_config

log = logging.getLogger("generic_trainer.task")

STRATEGY_ALIASES = {"off": "default", "none": "default", "": "auto"}
STRATEGIES = ("auto", "default", "one_device", "mirrored", "multi_worker_mirrored")
MIXED_PRECISION = ("", "float32", "float16", "bfloat16", "mixed_float16", "mixed_bfloat16")
MODES = ("train", "eval", "train_and_eval", "continuous_eval")
TRAIN_MODES = ("train", "train_and_eval")  # the modes that train (and export)


# --------------------------------------------------------------------------------------------
# The config dataclasses
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class DataConfig:
    """One input pipeline (Model Garden's `DataConfig` fields that fit tf.Example files)."""

    input_path: str = ""  # file patterns, comma-separated (filled from --examples and the splits)
    global_batch_size: int = (
        32  # split across all replicas: input_context.get_per_replica_batch_size
    )
    is_training: bool = True  # training data: shuffled and repeated forever
    drop_remainder: bool = True
    shuffle_buffer_size: int = 10000
    seed: int | None = None
    cache: bool = False

    def file_patterns(self) -> list[str]:
        """`input_path` as a list of file patterns."""
        return [p.strip() for p in self.input_path.split(",") if p.strip()]


@dataclasses.dataclass
class TaskConfig:
    """What to train. Subclass it for a Task's own fields (e.g. a typed `model`)."""

    name: str = ""
    init_checkpoint: str = ""  # restored by Task.initialize only when the run has no checkpoint yet
    model: dict = dataclasses.field(default_factory=dict)
    train_data: DataConfig = dataclasses.field(default_factory=DataConfig)
    validation_data: DataConfig = dataclasses.field(
        default_factory=lambda: DataConfig(is_training=False, drop_remainder=False)
    )
    schema_path: str = ""  # filled from --schema
    transform_graph_path: str = ""  # filled from --transform-graph
    hyperparameters: dict = dataclasses.field(default_factory=dict)  # filled from --hyperparameters
    custom_config: dict = dataclasses.field(default_factory=dict)  # filled from --custom-config


@dataclasses.dataclass
class TrainerConfig:
    """How long and how often (Model Garden's `TrainerConfig` names)."""

    train_steps: int = 0  # 0: not set (filled from --train-steps; required to train)
    validation_steps: int = -1  # -1: the whole validation set (filled from --eval-steps)
    validation_interval: int = 1000
    steps_per_loop: int = 100  # steps inside one tf.function call
    checkpoint_interval: int = 1000
    max_to_keep: int = 5
    summary_interval: int = 100
    best_checkpoint_export_subdir: str = ""  # under the checkpoint dir; "" disables best export
    best_checkpoint_eval_metric: str = ""
    best_checkpoint_metric_comp: str = "higher"  # higher or lower
    continuous_eval_timeout: int = 3600  # seconds continuous_eval waits for a new checkpoint
    loss_upper_bound: float = (
        1e6  # a training loss above this (or NaN/inf) restores the last checkpoint ...
    )
    recovery_max_trials: int = (
        0  # ... and retries, at most this many times (0: stop the run at once)
    )
    recovery_begin_steps: int = (
        0  # a loss above the bound before this step is not a blow-up (NaN/inf always is)
    )
    optimizer_config: OptimizationConfig = dataclasses.field(default_factory=OptimizationConfig)

    def __post_init__(self) -> None:
        if isinstance(self.optimizer_config, OptimizerConfig):  # the flat form of earlier releases
            self.optimizer_config = build_optimization_config(
                self.optimizer_config.as_one_of(), "OptimizerConfig(...)"
            )


@dataclasses.dataclass
class RuntimeConfig:
    """Where it runs (Model Garden's `RuntimeConfig` names)."""

    distribution_strategy: str = (
        ""  # auto, off, one_device, mirrored, multi_worker_mirrored ("": --strategy)
    )
    mixed_precision_dtype: str = (
        ""  # float16 or bfloat16 for mixed precision; "" or float32 for none
    )
    loss_scale: str | float | None = (
        None  # float16 only: "dynamic" (also the default) or the initial scale
    )
    num_gpus: int = 0  # 0: every visible GPU; N: the first N (an error when fewer are visible)
    run_eagerly: bool = False  # run steps eagerly (debugging; slow)
    seed: int | None = None  # tf.keras.utils.set_random_seed before the model is built
    # Model Garden keys read but not acted on (tf.distribute and Keras choose these here); logged
    # when set
    all_reduce_alg: str | None = None
    num_packs: int = 1
    enable_xla: bool = False
    gpu_thread_mode: str | None = None
    per_gpu_thread_count: int = 0
    dataset_num_private_threads: int | None = None
    batchnorm_spatial_persistent: bool = False
    # Model Garden keys refused (an error when set): TPUs, and cluster addresses (use TF_CONFIG /
    # CLUSTER_SPEC)
    tpu: str | None = None
    worker_hosts: str | None = None
    task_index: int = -1


@dataclasses.dataclass
class ExperimentConfig:
    """A whole experiment: task + trainer + runtime."""

    task: TaskConfig = dataclasses.field(default_factory=TaskConfig)
    trainer: TrainerConfig = dataclasses.field(default_factory=TrainerConfig)
    runtime: RuntimeConfig = dataclasses.field(default_factory=RuntimeConfig)


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------

_EXPERIMENTS: dict[str, Callable[[], ExperimentConfig]] = {}


def register_experiment(
    name: str,
) -> Callable[[Callable[[], ExperimentConfig]], Callable[[], ExperimentConfig]]:
    """Decorator: register a zero-argument factory returning an ExperimentConfig under `name`."""

    def decorator(factory: Callable[[], ExperimentConfig]) -> Callable[[], ExperimentConfig]:
        if name in _EXPERIMENTS and _EXPERIMENTS[name] is not factory:
            existing = _EXPERIMENTS[name]
            if getattr(existing, "__qualname__", None) != getattr(factory, "__qualname__", None):
                raise ValueError(f"experiment {name!r} is already registered by {existing!r}")
        _EXPERIMENTS[name] = factory
        return factory

    return decorator


def registered_experiments() -> list[str]:
    """The names of the registered experiments, sorted."""
    return sorted(_EXPERIMENTS)


def get_experiment(name: str, input_name: str = "--experiment") -> ExperimentConfig:
    """A fresh ExperimentConfig from the factory registered as `name`."""
    if name not in _EXPERIMENTS:
        known = (
            ", ".join(registered_experiments()) or "none (register one with @register_experiment)"
        )
        raise UserInputError(input_name, f"no experiment named {name!r}; registered: {known}")
    config = _EXPERIMENTS[name]()
    if not isinstance(config, ExperimentConfig):
        raise UserInputError(
            input_name,
            f"experiment {name!r} returned a {type(config).__name__}, expected an ExperimentConfig",
        )
    return config


# --------------------------------------------------------------------------------------------
# Text forms (the override sources are read in config_text.py)
# --------------------------------------------------------------------------------------------


def as_dict(config: Any, redact_secrets: bool = True) -> dict[str, Any]:
    """The config as plain data (what params.yaml holds).

    Args:
      config: a config dataclass.
      redact_secrets: mask the values of keys whose names say secret, at any depth (custom_config's
        and its `secret_keys`; redaction.redact).

    Returns:
      Plain dicts, lists and scalars.
    """
    data = dataclasses.asdict(config)
    if redact_secrets:
        from generic_trainer.artifacts.redaction import redact

        return redact(data)
    return data


def to_yaml(config: Any) -> str:
    """The config as YAML (secret values masked, `as_dict`), fields in declaration order."""
    import yaml

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value

    return yaml.safe_dump(plain(as_dict(config)), sort_keys=False, default_flow_style=False)


def write_params_yaml(config: ExperimentConfig, directory: str) -> str:
    """Write the resolved config to `<directory>/params.yaml` (atomically); returns the path."""
    from generic_trainer.artifacts import storage

    path = os.path.join(directory, "params.yaml")
    storage.write_file_atomic(path, to_yaml(config))
    return path
