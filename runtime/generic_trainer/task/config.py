"""Experiment configs: nested dataclasses, override layers, type coercion and a registry.

An `ExperimentConfig` has three parts with TF Model Garden's field names: `task` (what to
train: data, model, init checkpoint), `trainer` (how long and how often: steps, intervals,
checkpoints, optimizer) and `runtime` (strategy, mixed precision). A Task names its own
`TaskConfig` subclass; `build_experiment` resolves the config in this order:

  defaults (the Task's config class, or a registered experiment)
  -> run inputs: --examples/--schema/... fill fields the defaults leave unset; --train-steps and
     --eval-steps set trainer.train_steps / validation_steps
  -> each --config-file (YAML or JSON), in order
  -> the inline `config` (YAML/JSON text, the KFP parameter)
  -> --params-override a.b=c,...

Unknown keys are rejected naming the key; values are coerced to the field's type
(`"3"` -> 3 for an int, `5` -> 5.0 for a float, `"true"` -> True ...). Fields typed `dict`
are free-form and merged. No TensorFlow here.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import logging
import os
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.task.optimization_config import OptimizationConfig, OptimizerConfig, unused_blocks
from generic_trainer.task.optimization_config import check as check_optimization

log = logging.getLogger("generic_trainer.task")

STRATEGY_ALIASES = {"off": "default", "none": "default", "": "auto"}
STRATEGIES = ("auto", "default", "one_device", "mirrored", "multi_worker_mirrored")
MIXED_PRECISION = ("", "float32", "float16", "bfloat16", "mixed_float16", "mixed_bfloat16")
MODES = ("train", "eval", "train_and_eval", "continuous_eval")


# --------------------------------------------------------------------------------------------
# The config dataclasses
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class DataConfig:
    """One input pipeline (Model Garden's `DataConfig` fields that fit tf.Example files)."""

    input_path: str = ""  # file patterns, comma-separated (filled from --examples and the splits)
    global_batch_size: int = 32  # split across all replicas: input_context.get_per_replica_batch_size
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
        default_factory=lambda: DataConfig(is_training=False, drop_remainder=False))
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
    loss_upper_bound: float = 1e6  # a training loss above this (or NaN/inf) restores the last checkpoint ...
    recovery_max_trials: int = 0  # ... and retries, at most this many times (0: stop the run at once)
    recovery_begin_steps: int = 0  # a loss above the bound before this step is not a blow-up (NaN/inf always is)
    optimizer_config: OptimizationConfig = dataclasses.field(default_factory=OptimizationConfig)

    def __post_init__(self) -> None:
        if isinstance(self.optimizer_config, OptimizerConfig):  # the flat form of earlier releases
            self.optimizer_config = build_optimization_config(self.optimizer_config.as_one_of(),
                                                              "OptimizerConfig(...)")


@dataclasses.dataclass
class RuntimeConfig:
    """Where it runs (Model Garden's `RuntimeConfig` names)."""

    distribution_strategy: str = ""  # auto, off, one_device, mirrored, multi_worker_mirrored ("": --strategy)
    mixed_precision_dtype: str = ""  # float16 or bfloat16 for mixed precision; "" or float32 for none
    loss_scale: str | float | None = None  # float16 only: "dynamic" (also the default) or the initial scale
    num_gpus: int = 0  # 0: every visible GPU; N: the first N (an error when fewer are visible)
    run_eagerly: bool = False  # run steps eagerly (debugging; slow)
    seed: int | None = None  # tf.keras.utils.set_random_seed before the model is built
    # Model Garden keys read but not acted on (tf.distribute and Keras choose these here); logged when set
    all_reduce_alg: str | None = None
    num_packs: int = 1
    enable_xla: bool = False
    gpu_thread_mode: str | None = None
    per_gpu_thread_count: int = 0
    dataset_num_private_threads: int | None = None
    batchnorm_spatial_persistent: bool = False
    # Model Garden keys refused (an error when set): TPUs, and cluster addresses (use TF_CONFIG / CLUSTER_SPEC)
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


def register_experiment(name: str) -> Callable[[Callable[[], ExperimentConfig]], Callable[[], ExperimentConfig]]:
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
        known = ", ".join(registered_experiments()) or "none (register one with @register_experiment)"
        raise UserInputError(input_name, f"no experiment named {name!r}; registered: {known}")
    config = _EXPERIMENTS[name]()
    if not isinstance(config, ExperimentConfig):
        raise UserInputError(input_name, f"experiment {name!r} returned a {type(config).__name__}, "
                                         "expected an ExperimentConfig")
    return config


# --------------------------------------------------------------------------------------------
# Coercion and overrides
# --------------------------------------------------------------------------------------------


class _CoercionError(ValueError):
    pass


_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(value: Any, tp: Any) -> Any:
    """`value` as type `tp`, or _CoercionError saying what was expected."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin is typing.Union or (hasattr(types, "UnionType") and isinstance(tp, types.UnionType)):
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            if type(None) in args:
                return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg)
            except _CoercionError as e:
                errors.append(str(e))
        raise _CoercionError(" or ".join(errors) or f"expected {_type_name(tp)}")
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
        raise _CoercionError(f"expected true or false, got {value!r}")
    if tp is int:
        if isinstance(value, bool):
            raise _CoercionError(f"expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                try:
                    as_float = float(value)
                except ValueError:
                    as_float = None
                if as_float is not None and as_float.is_integer():
                    return int(as_float)
        raise _CoercionError(f"expected an integer, got {value!r}")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise _CoercionError(f"expected a number, got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise _CoercionError(f"expected a string, got {value!r}")
    if tp in (list, tuple) or origin in (list, tuple, Sequence):
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",")] if value.strip() else []
        if not isinstance(value, (list, tuple)):
            raise _CoercionError(f"expected a list, got {value!r}")
        item = args[0] if args else Any
        items = [_coerce(v, item) for v in value]
        return tuple(items) if (tp is tuple or origin is tuple) else items
    if tp is dict or origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise _CoercionError(f"expected a mapping, got {value!r}")
        return dict(value)
    if isinstance(tp, type):
        if isinstance(value, tp):
            return value
        raise _CoercionError(f"expected {tp.__name__}, got {value!r}")
    return value


def _deep_merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _field_types(obj: Any) -> dict[str, Any]:
    hints = typing.get_type_hints(type(obj))
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(obj)}


def override(config: Any, values: Mapping[str, Any], source: str, prefix: str = "") -> Any:
    """Apply `values` (a nested mapping) onto the dataclass `config` in place; returns it.

    `source` names where the values came from (`--config-file a.yaml`, `--params-override`);
    errors name it and the full dotted key.
    """
    if not isinstance(values, Mapping):
        raise UserInputError(source, f"expected a mapping of keys to values at {prefix or 'the top level'}, "
                                     f"got {type(values).__name__}")
    upgrade = getattr(config, "upgrade_keys", None)
    if upgrade is not None:
        values = upgrade(values, source)
    fields = _field_types(config)
    for key, value in values.items():
        dotted = f"{prefix}{key}"
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f" (did you mean {prefix + close[0]!r}?)" if close else ""
            section = prefix.rstrip(".") or "the experiment"
            raise UserInputError(source, f"unknown key {dotted!r}{hint}; {section} has: {', '.join(fields)}")
        current = getattr(config, key)
        tp = fields[key]
        if dataclasses.is_dataclass(current) and not isinstance(current, type):
            if value is None:
                continue
            override(current, value, source, prefix=f"{dotted}.")
            continue
        nested = _dataclass_in(tp)
        if nested is not None and isinstance(value, Mapping):  # an Optional[Dataclass] that is None now
            fresh = nested()
            override(fresh, value, source, prefix=f"{dotted}.")
            setattr(config, key, fresh)
            continue
        try:
            coerced = _coerce(value, tp)
        except _CoercionError as e:
            raise UserInputError(source, f"{dotted}: {e}") from None
        if isinstance(coerced, dict) and isinstance(current, Mapping):
            coerced = _deep_merge(current, coerced)
        setattr(config, key, coerced)
    return config


def build_optimization_config(values: Mapping[str, Any],
                              source: str = "optimizer_config") -> OptimizationConfig:
    """A `trainer.optimizer_config` from a mapping in the YAML form (unknown keys: an error naming the key)."""
    return override(OptimizationConfig(), values, source, prefix="trainer.optimizer_config.")


def _dataclass_in(tp: Any) -> type | None:
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return tp
    for arg in typing.get_args(tp):
        if dataclasses.is_dataclass(arg) and isinstance(arg, type):
            return arg
    return None


# --------------------------------------------------------------------------------------------
# Parsing override sources
# --------------------------------------------------------------------------------------------


def _yaml_load(text: str, source: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise UserInputError(source, f"not valid YAML/JSON{where}: {getattr(e, 'problem', None) or e}") from None


def load_config_file(path: str, source: str | None = None) -> dict[str, Any]:
    """A YAML (or JSON) config file as a mapping (empty file -> {})."""
    source = source or f"--config-file {path}"
    if not os.path.isfile(path):
        raise UserInputError(source, f"{path} does not exist" if not os.path.exists(path) else f"{path} is not a file")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise UserInputError(source, f"{path} is not UTF-8 text (byte {e.start}: {e.reason}); expected YAML or JSON") \
            from None
    parsed = _yaml_load(text, source)
    if parsed is None:
        return {}
    if not isinstance(parsed, Mapping):
        raise UserInputError(source, f"expected a mapping (task: ..., trainer: ...), got {type(parsed).__name__}")
    return dict(parsed)


def parse_config_text(text: str | Mapping[str, Any] | None, source: str = "config") -> dict[str, Any]:
    """Inline YAML/JSON (the KFP `config` parameter); a mapping passes through."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return {}
    parsed = text if isinstance(text, Mapping) else _yaml_load(text, source)
    if parsed is None:
        return {}
    if not isinstance(parsed, Mapping):
        raise UserInputError(source, f"expected a YAML/JSON mapping (task: ..., trainer: ...), got {parsed!r}")
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
            raise UserInputError(source, f"expected key=value pairs like trainer.train_steps=100, got {piece!r}")
    out: dict[str, Any] = {}
    for key, raw in pairs:
        if not key or any(not part for part in key.split(".")):
            raise UserInputError(source, f"bad key {key!r}; expected dotted names like task.train_data.input_path")
        value = _yaml_load(raw.strip(), source) if raw.strip() else ""
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise UserInputError(source, f"{key}: {part} is given both a value and sub-keys")
        node[parts[-1]] = value
    return out


# --------------------------------------------------------------------------------------------
# Resolution
# --------------------------------------------------------------------------------------------


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
    """An explicit --strategy (anything but auto) wins over runtime.distribution_strategy; logged when they differ."""
    if not strategy or strategy == "auto":
        return config
    configured = config.runtime.distribution_strategy
    normalized = STRATEGY_ALIASES.get(configured.lower(), configured.lower())
    if configured and normalized != STRATEGY_ALIASES.get(strategy, strategy):
        log.info("--strategy %s wins over runtime.distribution_strategy %s from the config", strategy, configured)
    config.runtime.distribution_strategy = strategy
    return config


def build_experiment(
    defaults: ExperimentConfig,
    inputs: RunInputs | None = None,
    config_files: Sequence[str] = (),
    config_text: str | Mapping[str, Any] | None = None,
    params_override: str | None = None,
) -> ExperimentConfig:
    """Resolve an experiment config: defaults -> run inputs -> config files -> config text -> overrides."""
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
    return config


def validate(config: ExperimentConfig, mode: str) -> ExperimentConfig:
    """Check the resolved config makes sense for `mode`; normalizes the strategy name."""
    if mode not in MODES:
        raise UserInputError("--mode", f"expected one of {', '.join(MODES)}, got {mode!r}")
    t, r = config.trainer, config.runtime
    strategy = STRATEGY_ALIASES.get(r.distribution_strategy.lower(), r.distribution_strategy.lower())
    if strategy == "tpu" or r.tpu:
        raise UserInputError("runtime.distribution_strategy" if strategy == "tpu" else "runtime.tpu",
                             "TPUs are not supported by generic-trainer (it trains on CPUs and GPUs): use mirrored, "
                             "multi_worker_mirrored, one_device or off, and drop runtime.tpu")
    if strategy not in STRATEGIES:
        raise UserInputError("runtime.distribution_strategy",
                             f"expected one of {', '.join(STRATEGIES)} "
                             f"(or {', '.join(a for a in STRATEGY_ALIASES if a)} for default), "
                             f"got {r.distribution_strategy!r}")
    r.distribution_strategy = strategy
    if r.mixed_precision_dtype not in MIXED_PRECISION:
        raise UserInputError("runtime.mixed_precision_dtype",
                             f"expected one of {', '.join(v for v in MIXED_PRECISION if v)} or empty, "
                             f"got {r.mixed_precision_dtype!r}")
    _check_runtime(r)
    _check_recovery(t)
    check_optimization(t.optimizer_config, t.train_steps if mode in ("train", "train_and_eval") else 0)
    if mode in ("train", "train_and_eval") and t.train_steps <= 0:
        raise UserInputError("trainer.train_steps", "required to train: set it (or pass --train-steps N)")
    for name in ("steps_per_loop", "checkpoint_interval", "summary_interval", "validation_interval", "max_to_keep"):
        if getattr(t, name) <= 0:
            raise UserInputError(f"trainer.{name}", f"expected a positive integer, got {getattr(t, name)}")
    if t.validation_steps == 0 or t.validation_steps < -1:
        raise UserInputError("trainer.validation_steps", f"expected -1 (whole set) or > 0, got {t.validation_steps}")
    if t.best_checkpoint_metric_comp not in ("higher", "lower"):
        raise UserInputError("trainer.best_checkpoint_metric_comp",
                             f"expected higher or lower, got {t.best_checkpoint_metric_comp!r}")
    if t.best_checkpoint_export_subdir and not t.best_checkpoint_eval_metric:
        raise UserInputError("trainer.best_checkpoint_eval_metric",
                             "required when trainer.best_checkpoint_export_subdir is set")
    if mode in ("train", "train_and_eval") and not config.task.train_data.input_path:
        raise UserInputError("task.train_data.input_path", "not set: pass --examples or set it in the config")
    if mode != "train" and not config.task.validation_data.input_path:
        raise UserInputError("task.validation_data.input_path", "not set: pass --examples or set it in the config")
    for data_name in ("train_data", "validation_data"):
        data = getattr(config.task, data_name)
        if data.global_batch_size <= 0:
            raise UserInputError(f"task.{data_name}.global_batch_size",
                                 f"expected a positive integer, got {data.global_batch_size}")
    return config


_IGNORED_RUNTIME = ("all_reduce_alg", "num_packs", "enable_xla", "gpu_thread_mode", "per_gpu_thread_count",
                    "dataset_num_private_threads", "batchnorm_spatial_persistent")


def _check_runtime(r: RuntimeConfig) -> None:
    if r.worker_hosts or r.task_index != -1:
        raise UserInputError("runtime.worker_hosts" if r.worker_hosts else "runtime.task_index",
                             "the cluster comes from TF_CONFIG or CLUSTER_SPEC (Vertex AI sets them), not the config: "
                             "remove runtime.worker_hosts and runtime.task_index")
    if r.num_gpus < 0:
        raise UserInputError("runtime.num_gpus",
                             f"expected 0 (every visible GPU) or a positive count, got {r.num_gpus}")
    if r.loss_scale is not None and r.loss_scale != "dynamic":
        try:
            scale = float(r.loss_scale)
        except (TypeError, ValueError):
            scale = 0.0
        if not scale > 0:
            raise UserInputError("runtime.loss_scale", f"expected dynamic or a positive number, got {r.loss_scale!r}")
        r.loss_scale = scale
    defaults = RuntimeConfig()
    ignored = [f"{k}={getattr(r, k)!r}" for k in _IGNORED_RUNTIME if getattr(r, k) != getattr(defaults, k)]
    if ignored:
        log.info("runtime keys read but not acted on (tf.distribute and Keras choose these here): %s",
                 ", ".join(ignored))


def _check_recovery(t: TrainerConfig) -> None:
    if t.recovery_max_trials < 0:
        raise UserInputError("trainer.recovery_max_trials", f"expected 0 or more, got {t.recovery_max_trials}")
    if t.recovery_begin_steps < 0:
        raise UserInputError("trainer.recovery_begin_steps", f"expected 0 or more, got {t.recovery_begin_steps}")


def as_dict(config: Any, redact_secrets: bool = True) -> dict[str, Any]:
    """The config as plain data (what params.yaml holds); secret custom_config values are masked."""
    data = dataclasses.asdict(config)
    if redact_secrets:
        from generic_trainer.redaction import redact

        task = data.get("task") if "task" in data else data
        if isinstance(task, dict) and isinstance(task.get("custom_config"), dict):
            task["custom_config"] = redact(task["custom_config"])
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
    from generic_trainer import storage

    path = os.path.join(directory, "params.yaml")
    storage.write_file_atomic(path, to_yaml(config))
    return path
