"""Experiment configs: the nested dataclasses, the experiment registry, and their text forms.

An `ExperimentConfig` has three parts with TF Model Garden's field names: `task` (what to
train: data, model, init checkpoint), `trainer` (how long and how often: steps, intervals,
checkpoints, optimizer) and `runtime` (strategy, mixed precision). A Task names its own
`TaskConfig` subclass. This module also reads the text an override comes in (config files,
the inline `config`, `--params-override a.b=c,...`) into mappings, and writes a resolved config
as params.yaml. Applying mappings onto a config is `overrides.py`; resolving and checking the
experiment of a run is `resolve.py`. No TensorFlow here.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from generic_trainer.artifacts import bounded_parse
from generic_trainer.errors import UserInputError
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
# Parsing override sources
# --------------------------------------------------------------------------------------------


def _yaml_load(text: str, source: str) -> Any:
    """YAML (or JSON) text within the bounds of `bounded_parse` (nesting, alias expansion, size)."""
    return bounded_parse.load_yaml(text, source)


def load_config_file(path: str, source: str | None = None) -> dict[str, Any]:
    """A YAML (or JSON) config file as a mapping (empty file -> {})."""
    source = source or f"--config-file {path}"
    parsed = _yaml_load(bounded_parse.read_text(path, source), source)
    if parsed is None:
        return {}
    if not isinstance(parsed, Mapping):
        raise UserInputError(
            source, f"expected a mapping (task: ..., trainer: ...), got {type(parsed).__name__}"
        )
    return dict(parsed)


def parse_config_text(
    text: str | Mapping[str, Any] | None, source: str = "config"
) -> dict[str, Any]:
    """Inline YAML/JSON (the KFP `config` parameter); a mapping passes through."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return {}
    parsed = (
        bounded_parse.check_depth(text, source)
        if isinstance(text, Mapping)
        else _yaml_load(text, source)
    )
    if parsed is None:
        return {}
    if not isinstance(parsed, Mapping):
        raise UserInputError(
            source, f"expected a YAML/JSON mapping (task: ..., trainer: ...), got {parsed!r}"
        )
    return dict(parsed)


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets and quotes."""
    parts, depth, quote, current = [], 0, None, []
    for ch in text:
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return parts


def parse_params_override(text: str | None, source: str = "--params-override") -> dict[str, Any]:
    """`a.b=c,d.e=[1,2]` (or a YAML mapping) as a nested mapping; values are read as YAML scalars.

    A comma-separated piece without `=` continues the previous value (`input_path=a/*,b/*`).
    """
    if text is None or not text.strip():
        return {}
    stripped = text.strip()
    if stripped.startswith("{") or "\n" in stripped:
        return parse_config_text(stripped, source)
    pairs: list[list[str]] = []
    for piece in _split_top_level(stripped):
        if "=" in piece and not piece.split("=", 1)[0].strip().startswith(("[", "{", "'", '"')):
            key, value = piece.split("=", 1)
            pairs.append([key.strip(), value])
        elif pairs:
            pairs[-1][1] += "," + piece
        else:
            raise UserInputError(
                source, f"expected key=value pairs like trainer.train_steps=100, got {piece!r}"
            )
    out: dict[str, Any] = {}
    for key, raw in pairs:
        if not key or any(not part for part in key.split(".")):
            raise UserInputError(
                source, f"bad key {key!r}; expected dotted names like task.train_data.input_path"
            )
        value = _yaml_load(raw.strip(), source) if raw.strip() else ""
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise UserInputError(source, f"{key}: {part} is given both a value and sub-keys")
        node[parts[-1]] = value
    return bounded_parse.check_depth(out, source)


def as_dict(config: Any, redact_secrets: bool = True) -> dict[str, Any]:
    """The config as plain data (what params.yaml holds); the values of keys whose names say secret,
    at
    any depth (custom_config's, and its `secret_keys`), are masked (redaction.redact)."""
    data = dataclasses.asdict(config)
    if redact_secrets:
        from generic_trainer.artifacts.redaction import redact

        return redact(data)
    return data


def to_yaml(config: Any) -> str:
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
