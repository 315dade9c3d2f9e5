"""The one typed request of a run, built and validated at the edge.

CLI flags and KFP's executor input both arrive here as a dict of raw values keyed by flag name
(`examples`, `module_file`, ...). `build_train_request` checks each one (without TensorFlow),
applies Vertex's `AIP_*` defaults, and returns a frozen `TrainRequest` that the rest of the
run trusts.
"""

from __future__ import annotations

import dataclasses
import decimal
import json
import logging
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from generic_trainer import storage
from generic_trainer.errors import UserInputError
from generic_trainer.redaction import redact, secret_key_names

if TYPE_CHECKING:
    from generic_trainer.tflite_export import TFLiteOptions

KERAS_CHOICES = ("keras3", "tf_keras")
GCS_ROOT_ENV = "GENERIC_TRAINER_GCS_ROOT"
log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class KfpOutputs:
    """Where a KFP run wants its outputs: the executor-output file and each output artifact."""

    output_file: str
    # output name -> {"name", "uri", "path", "schema_title"}; "path" is the local path of "uri".
    artifacts: Mapping[str, Mapping[str, str]]
    parameters: tuple[str, ...] = ()  # the output parameters the component declares

    def path(self, name: str) -> str | None:
        art = self.artifacts.get(name)
        return art["path"] if art else None


@dataclasses.dataclass(frozen=True)
class TrainRequest:
    """Every input of a train run, resolved to local paths and typed values."""

    examples: str
    module_file: str
    model_dir: str
    model_run_dir: str
    checkpoint_dir: str
    run_fn: str = "run_fn"
    model_run_copy_dir: str | None = None  # also gets model_run_dir's logs at the end (see build_train_request)
    metrics_file: str | None = None
    report_file: str | None = None
    schema: str | None = None
    transform_graph: str | None = None
    hyperparameters: Mapping[str, Any] | None = None
    base_model: str | None = None
    train_steps: int | None = None
    eval_steps: int | None = None
    train_splits: tuple[str, ...] = ("train",)
    eval_splits: tuple[str, ...] = ("eval",)
    custom_config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    module_sha256: str | None = None
    strategy: str = "auto"
    keras: str = "keras3"
    cluster_timeout: float | None = None
    gcs_root: str = "/gcs"
    kfp: KfpOutputs | None = None
    # The Task API (`--task module:Class`); module_file is "" then.
    task: str | None = None
    experiment: str | None = None
    config_files: tuple[str, ...] = ()
    config: str | None = None  # inline YAML/JSON overrides (the KFP `config` parameter)
    params_override: str | None = None
    mode: str = "train_and_eval"
    # Speed options (--mixed-precision, --jit-compile, --steps-per-execution); None: the module's own choice.
    mixed_precision: str | None = None
    jit_compile: bool | None = None
    steps_per_execution: int | None = None
    # The serving container the model artifact names for Vertex AI Model Registry (serving_container).
    serving_image: str | None = None
    serving_accelerator: str = "cpu"
    serving_image_region: str = "us"
    tflite: TFLiteOptions | None = None  # --export-tflite (tflite_export); None: no TFLite export

    def redacted_custom_config(self) -> dict[str, Any]:
        """custom_config with secret values replaced, safe to log or write to metadata."""
        return redact(self.custom_config)


def ints_from_floats(value: Any) -> Any:
    """Undo KFP's turning nested ints into floats (`[64.0, 2.0]` -> `[64, 2]`)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: ints_from_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [ints_from_floats(v) for v in value]
    return value


def _json_object(input_name: str, value: Any) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise UserInputError(input_name, f"not valid JSON ({e.msg} at position {e.pos})") from None
    if not isinstance(value, dict):
        raise UserInputError(input_name, f"expected a JSON object ({{...}}), got {type(value).__name__}")
    return value


def load_hyperparameters(path: str, input_name: str = "--hyperparameters") -> dict[str, Any]:
    """Read a hyperparameters file, or the single file in a directory (TFX's best_hyperparameters.txt)."""
    if not os.path.exists(path):
        raise UserInputError(input_name, f"{path} does not exist")
    from generic_trainer import data

    path = data.one_file(path, input_name, usual="keras-tuner's best_hyperparameters.txt")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise UserInputError(input_name, f"{path} is not UTF-8 text (byte {e.start}: {e.reason}); expected a "
                                         "JSON object such as keras-tuner's best_hyperparameters.txt") from None
    except OSError as e:
        raise UserInputError(input_name, f"{path} cannot be read: {e.strerror or e}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserInputError(input_name, f"{path} is not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(value, dict):
        raise UserInputError(input_name, f"{path} must hold a JSON object, got {type(value).__name__}")
    return value


MAX_INT64 = 2**63 - 1
MAX_INT32 = 2**31 - 1
MAX_SECONDS = 30 * 24 * 3600  # a timeout longer than 30 days is a typo (and overflows some clocks)


def number(input_name: str, value: Any, *, integer: bool = True, minimum: float = 0, maximum: float = MAX_INT64,
           above_minimum: bool = False, default: Any = None, unit: str = "") -> Any:
    """The one check of a numeric flag or parameter: a finite number in range, else UserInputError (exit 2).

    `value` is what a flag or KFP parameter gave (a string, int or float); None or "" gives `default`.
    With `integer`, a whole number ("100", 100, 100.0, "1e3") is returned as an int; otherwise a float.
    The range is minimum <= value <= maximum (minimum < value with `above_minimum`). Infinity, NaN, booleans
    and numbers too large for the range (`1e400`) are refused with the range in the message.
    """
    if value is None or value == "":
        return default
    low = f"{'>' if above_minimum else '>='} {minimum:g}"
    high = f"{maximum}" if isinstance(maximum, int) else f"{maximum:g}"
    expected = (f"expected a {'whole number' if integer else 'number'}{' of ' + unit if unit else ''} "
                f"{low} and at most {high}, got {value!r}")
    if isinstance(value, bool):
        raise UserInputError(input_name, expected)
    try:
        exact = decimal.Decimal(value.strip() if isinstance(value, str) else value)
    except (decimal.InvalidOperation, TypeError, ValueError):
        raise UserInputError(input_name, expected) from None
    if not exact.is_finite() or (integer and exact != exact.to_integral_value()):
        raise UserInputError(input_name, expected)
    if exact > decimal.Decimal(maximum) or exact < decimal.Decimal(minimum) or (
            above_minimum and exact == decimal.Decimal(minimum)):
        raise UserInputError(input_name, expected)
    return int(exact) if integer else float(exact)


def _steps(input_name: str, value: Any) -> int | None:
    return number(input_name, value, unit="steps") or None  # TFX: num_steps 0 means "not set".


SPLIT_NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]+")


def _splits(input_name: str, value: Any, default: tuple[str, ...]) -> tuple[str, ...]:
    """Split names: each one path component (`[A-Za-z0-9_.-]+`, no `..`), none repeated.

    TFX asks only for non-empty, unique names and joins them into `<examples>/Split-<name>`; a name
    holding `/` or `..` would read outside the examples artifact, so only plain names are taken.
    """
    if value is None or value == "" or value == []:
        return default
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise UserInputError(input_name, f"expected split names such as 'train,eval', got {value!r}")
    splits = tuple(str(s).strip() for s in items if str(s).strip())
    if not splits:
        raise UserInputError(input_name, f"expected split names such as 'train,eval', got {value!r}")
    for split in splits:
        if not SPLIT_NAME_PATTERN.fullmatch(split) or ".." in split or split == ".":
            raise UserInputError(input_name, f"split name {split!r} is not allowed: expected letters, digits, "
                                             "'_', '-' and '.' only (no '/', no '..'), e.g. train,eval")
    if len(set(splits)) != len(splits):
        raise UserInputError(input_name, f"split names repeat: {', '.join(splits)}")
    return splits


def _existing(input_name: str, value: str | None, gcs_root: str) -> str | None:
    if not value:
        return None
    path = storage.local_path(value, gcs_root)
    if not os.path.exists(path):
        raise UserInputError(input_name, f"{value} does not exist" + (f" (looked at {path})" if path != value else ""))
    return path


def _out_dir(value: str | None, env: str, environ: Mapping[str, str], gcs_root: str) -> str | None:
    """An output directory: the value given, else the environment variable `env` (Vertex's AIP_*)."""
    value = value or environ.get(env)
    return os.path.normpath(storage.local_path(value, gcs_root)) if value else None


_RUN_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def _local_file(value: str | None, gcs_root: str) -> str | None:
    """An output file's local path (`gs://b/x` -> `<gcs_root>/b/x`); None when not given."""
    return storage.local_path(value, gcs_root) if value else None


def _run_namespace(values: Mapping[str, Any]) -> str | None:
    """`<run id>/<task name>` from --run-id / --task-name (KFP's placeholders), or None when not in a pipeline run.

    A value still reading `{{$...}}` is a placeholder the runner did not fill: treated as absent.
    """
    parts = []
    for key, flag in (("run_id", "--run-id"), ("task_name", "--task-name")):
        value = str(values.get(key) or "").strip()
        if not value or value.startswith("{{"):
            if value:
                log.warning("%s %s was not filled in by the pipeline runner; checkpoints are not namespaced by it",
                            flag, value)
            if key == "run_id":
                return None
            continue
        if not _RUN_PART.fullmatch(value):
            raise UserInputError(flag, f"expected a name of letters, digits, '.', '_' or '-', got {value!r}")
        parts.append(value)
    return "/".join(parts)


def _checkpoint_dir(values: Mapping[str, Any], environ: Mapping[str, str], gcs_root: str, default: str) -> str:
    """Where checkpoints go: --checkpoint-dir, else $AIP_CHECKPOINT_DIR, else `default` (inside this task's outputs).

    In a pipeline run (--run-id) the first two are base dirs shared by every run, so the run's own dir is
    `<base>/<run id>/<task name>`: a retried task finds its checkpoints again, a new run starts fresh.
    """
    base = values.get("checkpoint_dir") or environ.get("AIP_CHECKPOINT_DIR")
    if not base:
        return default
    path = os.path.normpath(storage.local_path(base, gcs_root))
    namespace = _run_namespace(values)
    if namespace:
        path = os.path.join(path, namespace)
        log.info("checkpoint dir %s: run %s's own under %s", path, namespace,
                 "--checkpoint-dir" if values.get("checkpoint_dir") else "AIP_CHECKPOINT_DIR")
    return path


def _examples(values: Mapping[str, Any], gcs_root: str) -> str:
    examples = values.get("examples")
    if not examples:
        raise UserInputError("--examples", "required: the examples directory (TFX layout Split-<name>/*.gz)")
    examples_path = storage.local_path(examples, gcs_root)
    if not os.path.isdir(examples_path):
        raise UserInputError("--examples", f"{examples} is not a directory" + (
            "" if os.path.exists(examples_path) else " (it does not exist)"))
    return examples_path


def _module_file(values: Mapping[str, Any]) -> str:
    if not values.get("module_file"):
        raise UserInputError("--module-file", "required: a .py file, a gs:// URI or a dotted module name")
    return values["module_file"]


def _keras(values: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    legacy = environ.get("TF_USE_LEGACY_KERAS", "").lower() in ("1", "true", "yes")
    keras = values.get("keras") or ("tf_keras" if legacy else "keras3")
    if keras not in KERAS_CHOICES:
        raise UserInputError("--keras", f"expected one of {', '.join(KERAS_CHOICES)}, got {keras!r}")
    return keras


MIXED_PRECISION_CHOICES = ("mixed_float16", "mixed_bfloat16")


def _speed_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """--mixed-precision, --jit-compile, --steps-per-execution (flags, or KFP parameters)."""
    policy = values.get("mixed_precision") or None
    if policy is not None and policy not in MIXED_PRECISION_CHOICES:
        raise UserInputError("--mixed-precision", f"expected one of {', '.join(MIXED_PRECISION_CHOICES)}, "
                                                  f"got {policy!r}")
    jit = values.get("jit_compile")
    if isinstance(jit, str):
        jit = {"true": True, "1": True, "false": False, "0": False, "": None}.get(jit.strip().lower(), jit)
    if jit is not None and not isinstance(jit, bool):
        raise UserInputError("--jit-compile", f"expected true or false, got {jit!r}")
    steps = values.get("steps_per_execution")  # 0: unset (the component's default; KFP needs a value for an int)
    steps = None if steps in (0, "0") else number("--steps-per-execution", steps, minimum=1, maximum=MAX_INT32,
                                                   unit="batches")
    if values.get("task"):  # the Task API's own loop is configured by its experiment config
        instead = {"mixed_precision": ("--mixed-precision", "runtime.mixed_precision_dtype=float16|bfloat16"),
                   "steps_per_execution": ("--steps-per-execution", "trainer.steps_per_loop=N"),
                   "jit_compile": ("--jit-compile", None)}
        for key, value in (("mixed_precision", policy), ("steps_per_execution", steps), ("jit_compile", jit)):
            if value is not None:
                flag, override = instead[key]
                raise UserInputError(flag, "is for run_fn modules; with --task " + (
                    f"set it in the experiment config, e.g. --params-override {override}" if override
                    else "the runtime's loop has no XLA option"))
    return {"mixed_precision": policy, "jit_compile": jit, "steps_per_execution": steps or None}


def seconds(input_name: str, value: Any, default: float | None = None) -> float | None:
    """A number of seconds > 0 (at most MAX_SECONDS), or `default` when unset."""
    return number(input_name, value, integer=False, minimum=0, above_minimum=True, maximum=MAX_SECONDS,
                  default=default, unit="seconds")


def check_gcs_timeout(environ: Mapping[str, str]) -> float | None:
    """$GENERIC_TRAINER_GCS_TIMEOUT (seconds Cloud Storage downloads may retry), checked; None when unset."""
    return seconds(storage.GCS_TIMEOUT_ENV, environ.get(storage.GCS_TIMEOUT_ENV))


def _module_sha256(values: Mapping[str, Any]) -> str | None:
    sha = values.get("module_sha256") or None
    if sha and not re.fullmatch(r"[0-9a-fA-F]{64}", sha):
        raise UserInputError("--module-sha256", "expected 64 hex digits (sha256sum of the module file)")
    return sha


def _task_fields(values: Mapping[str, Any], gcs_root: str, keras: str) -> dict[str, Any]:
    """The Task API's inputs: --task, --experiment, --config-file, config, --params-override, --mode."""
    from generic_trainer.task import config as task_config

    if keras != "keras3":
        raise UserInputError("--keras", "the Task API runs Keras 3 (its own loop works under every strategy); "
                                        "tf_keras is for run_fn modules")
    mode = values.get("mode") or "train_and_eval"
    if mode not in task_config.MODES:
        raise UserInputError("--mode", f"expected one of {', '.join(task_config.MODES)}, got {mode!r}")
    files = values.get("config_file") or []
    if isinstance(files, str):
        files = [f for f in (files.split(",") if not files.lstrip().startswith("[") else json.loads(files)) if f]
    config_files = []
    for f in files:
        path = storage.local_path(str(f).strip(), gcs_root)
        if not os.path.isfile(path):
            raise UserInputError("--config-file", f"{f} does not exist" + (f" (looked at {path})" if path != f else ""))
        config_files.append(path)
        task_config.load_config_file(path, f"--config-file {f}")  # broken YAML/JSON fails now, before TensorFlow
    config = values.get("config")
    if isinstance(config, Mapping):
        config = json.dumps(ints_from_floats(dict(config)))
    task_config.parse_config_text(config or None, "config")  # syntax errors now, unknown keys once the Task loads
    params_override = values.get("params_override") or None
    task_config.parse_params_override(params_override)
    return {"task": values["task"], "experiment": values.get("experiment") or None,
            "config_files": tuple(config_files), "config": config or None, "params_override": params_override,
            "mode": mode}


def build_train_request(
    values: Mapping[str, Any], environ: Mapping[str, str] | None = None, kfp: KfpOutputs | None = None
) -> TrainRequest:
    """Validate raw values (keyed by flag name, dashes as underscores) into a TrainRequest."""
    environ = os.environ if environ is None else environ
    gcs_root = values.get("gcs_root") or environ.get(GCS_ROOT_ENV) or "/gcs"

    def out_dir(value: str | None, env: str) -> str | None:
        return _out_dir(value, env, environ, gcs_root)

    check_gcs_timeout(environ)
    task = values.get("task") or None
    examples_path = _examples(values, gcs_root) if not task or values.get("examples") else ""
    if not task:
        _module_file(values)
    elif values.get("module_file"):
        raise UserInputError("--task", "give either --task module:Class or --module-file (run_fn), not both")
    model_dir = out_dir(values.get("model_dir"), "AIP_MODEL_DIR")
    if not model_dir:
        raise UserInputError("--model-dir", "required (or set AIP_MODEL_DIR): where the serving model goes")
    model_run_dir = out_dir(values.get("model_run_dir"), "AIP_TENSORBOARD_LOG_DIR") or os.path.join(
        model_dir, "logs")
    # Vertex AI TensorBoard uploads AIP_TENSORBOARD_LOG_DIR while the job runs: the module logs there, and the
    # logs are copied to the model-run dir given (the KFP artifact) at the end.
    tensorboard_dir = out_dir(None, "AIP_TENSORBOARD_LOG_DIR")
    model_run_copy_dir = None
    if tensorboard_dir and tensorboard_dir != model_run_dir:
        model_run_dir, model_run_copy_dir = tensorboard_dir, model_run_dir
    checkpoint_dir = _checkpoint_dir(values, environ, gcs_root, os.path.join(model_run_copy_dir or model_run_dir,
                                                                               "checkpoints"))
    keras = _keras(values, environ)
    sha = _module_sha256(values)
    hp_path = _existing("--hyperparameters", values.get("hyperparameters"), gcs_root)
    hyperparameters = load_hyperparameters(hp_path) if hp_path else None
    timeout = values.get("cluster_timeout")
    custom_config = _json_object("--custom-config", values.get("custom_config"))
    secret_key_names(custom_config)
    from generic_trainer import serving_container

    serving_image, serving_accelerator, serving_region = serving_container.check_options(
        values.get("serving_image"), values.get("serving_accelerator"), values.get("serving_image_region"))
    from generic_trainer import tflite_export

    tflite = tflite_export.check_options(values.get("export_tflite"), values.get("tflite_quantization"),
                                         values.get("tflite_tolerance"))
    return TrainRequest(
        serving_image=serving_image, serving_accelerator=serving_accelerator, serving_image_region=serving_region,
        tflite=tflite,
        examples=examples_path,
        module_file=values.get("module_file") or "",
        run_fn=values.get("run_fn") or "run_fn",
        model_dir=model_dir,
        model_run_dir=model_run_dir,
        model_run_copy_dir=model_run_copy_dir,
        checkpoint_dir=checkpoint_dir,
        metrics_file=_local_file(values.get("metrics_file"), gcs_root),
        report_file=_local_file(values.get("report_file"), gcs_root),
        schema=_existing("--schema", values.get("schema"), gcs_root),
        transform_graph=_existing("--transform-graph", values.get("transform_graph"), gcs_root),
        hyperparameters=ints_from_floats(hyperparameters) if kfp and hyperparameters else hyperparameters,
        base_model=_existing("--base-model", values.get("base_model"), gcs_root),
        train_steps=_steps("--train-steps", values.get("train_steps")),
        eval_steps=_steps("--eval-steps", values.get("eval_steps")),
        train_splits=_splits("--train-splits", values.get("train_splits"), ("train",)),
        eval_splits=_splits("--eval-splits", values.get("eval_splits"), ("eval",)),
        custom_config=ints_from_floats(custom_config) if kfp else custom_config,
        module_sha256=sha,
        strategy=values.get("strategy") or "auto",
        keras=keras,
        cluster_timeout=seconds("--cluster-timeout", timeout),
        **_speed_fields(values),
        gcs_root=gcs_root,
        kfp=kfp,
        **(_task_fields(values, gcs_root, keras) if task else {}),
    )


TUNER_RESULTS_FILE = "tuner_results.json"
TUNE_STRATEGIES = ("auto", "default", "one_device", "mirrored")


@dataclasses.dataclass(frozen=True)
class TuneRequest:
    """Every input of a tune run (a keras-tuner search from the module's tuner_fn), resolved."""

    examples: str
    module_file: str
    best_hyperparameters_dir: str
    checkpoint_dir: str
    tuner_fn: str = "tuner_fn"
    tuner_results_file: str | None = None
    metrics_file: str | None = None
    report_file: str | None = None
    schema: str | None = None
    transform_graph: str | None = None
    hyperparameters: Mapping[str, Any] | None = None
    base_model: str | None = None
    train_steps: int | None = None
    eval_steps: int | None = None
    train_splits: tuple[str, ...] = ("train",)
    eval_splits: tuple[str, ...] = ("eval",)
    custom_config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    module_sha256: str | None = None
    max_trials: int | None = None
    strategy: str = "auto"
    worker_timeout: float = 600.0
    gcs_root: str = "/gcs"
    kfp: KfpOutputs | None = None

    @property
    def working_dir(self) -> str:
        """keras-tuner's directory: stable under the checkpoint dir, so a re-run resumes the search."""
        return os.path.join(self.checkpoint_dir, "tuner")

    def redacted_custom_config(self) -> dict[str, Any]:
        return redact(self.custom_config)


def build_tune_request(
    values: Mapping[str, Any], environ: Mapping[str, str] | None = None, kfp: KfpOutputs | None = None
) -> TuneRequest:
    """Validate raw values (keyed by flag name, dashes as underscores) into a TuneRequest."""
    environ = os.environ if environ is None else environ
    gcs_root = values.get("gcs_root") or environ.get(GCS_ROOT_ENV) or "/gcs"
    check_gcs_timeout(environ)
    examples_path = _examples(values, gcs_root)
    module_file = _module_file(values)
    best_dir = values.get("best_hyperparameters_dir")
    best_dir = os.path.normpath(storage.local_path(best_dir, gcs_root)) if best_dir else None
    if not best_dir:
        raise UserInputError("--best-hyperparameters-dir",
                             "required: where best_hyperparameters.txt goes (the trainer's --hyperparameters)")
    results_file = values.get("tuner_results_file") or None
    if not results_file and values.get("tuner_results_dir"):
        results_file = os.path.join(values["tuner_results_dir"], TUNER_RESULTS_FILE)
    # Stable across restarts of the same job (same outputs): a re-run finds the search state again.
    checkpoint_dir = _checkpoint_dir(values, environ, gcs_root, best_dir + ".checkpoints")
    keras = _keras(values, environ)
    if keras != "keras3":
        raise UserInputError("--keras" if values.get("keras") else "TF_USE_LEGACY_KERAS",
                             "keras-tuner searches Keras 3 models only (it rejects tf_keras models); "
                             "use --keras keras3 / TF_USE_LEGACY_KERAS=0")
    strategy = values.get("strategy") or "auto"
    if strategy not in TUNE_STRATEGIES:
        raise UserInputError("--strategy", f"expected one of {', '.join(TUNE_STRATEGIES)} for tuning (each replica "
                                           f"runs its own trials; several replicas tune in parallel), got {strategy!r}")
    max_trials = number("--max-trials", values.get("max_trials"), maximum=MAX_INT32,
                        unit="trials (0: the tuner_fn's own)") or None
    hp_path = _existing("--hyperparameters", values.get("hyperparameters"), gcs_root)
    hyperparameters = load_hyperparameters(hp_path) if hp_path else None
    custom_config = _json_object("--custom-config", values.get("custom_config"))
    secret_key_names(custom_config)
    return TuneRequest(
        examples=examples_path,
        module_file=module_file,
        tuner_fn=values.get("tuner_fn") or "tuner_fn",
        best_hyperparameters_dir=best_dir,
        checkpoint_dir=checkpoint_dir,
        tuner_results_file=storage.local_path(results_file, gcs_root) if results_file else None,
        metrics_file=_local_file(values.get("metrics_file"), gcs_root),
        report_file=_local_file(values.get("report_file"), gcs_root),
        schema=_existing("--schema", values.get("schema"), gcs_root),
        transform_graph=_existing("--transform-graph", values.get("transform_graph"), gcs_root),
        hyperparameters=ints_from_floats(hyperparameters) if kfp and hyperparameters else hyperparameters,
        base_model=_existing("--base-model", values.get("base_model"), gcs_root),
        train_steps=_steps("--train-steps", values.get("train_steps")),
        eval_steps=_steps("--eval-steps", values.get("eval_steps")),
        train_splits=_splits("--train-splits", values.get("train_splits"), ("train",)),
        eval_splits=_splits("--eval-splits", values.get("eval_splits"), ("eval",)),
        custom_config=ints_from_floats(custom_config) if kfp else custom_config,
        module_sha256=_module_sha256(values),
        max_trials=max_trials,
        strategy=strategy,
        worker_timeout=seconds("--worker-timeout", values.get("worker_timeout"), 600.0),
        gcs_root=gcs_root,
        kfp=kfp,
    )


def _model_dir(input_name: str, value: Any, gcs_root: str, required: bool) -> str | None:
    """A model artifact dir (holding Format-Serving) or a SavedModel dir; None when absent and not required."""
    if not value:
        if required:
            raise UserInputError(input_name, "required: a model dir (<dir>/Format-Serving, as train writes it) "
                                             "or a SavedModel dir")
        return None
    path = _existing(input_name, value, gcs_root)
    if not os.path.isdir(path):
        raise UserInputError(input_name, f"{value} is not a directory")
    return path


def _required_out_dir(input_name: str, value: Any, gcs_root: str, what: str) -> str:
    if not value:
        raise UserInputError(input_name, f"required: {what}")
    return os.path.normpath(storage.local_path(value, gcs_root))


def _positive_int(input_name: str, value: Any, default: int) -> int:
    return number(input_name, value, minimum=1, maximum=MAX_INT32, default=default)


_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2, "mib": 1024**2,
               "g": 1000**3, "gb": 1000**3, "gib": 1024**3, "t": 1000**4, "tb": 1000**4, "tib": 1024**4}


def _memory_size(input_name: str, value: Any, default: int | None) -> int | None:
    """Bytes from `8GiB`, `512MiB`, `2G` or a plain number; 0 means no limit (None)."""
    if value is None or value == "":
        return default
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", str(value))
    unit = match.group(2).lower() if match else None
    if not match or unit not in _SIZE_UNITS:
        raise UserInputError(input_name, f"expected a size like 8GiB, 512MiB or 0 (no limit), got {value!r}")
    amount = decimal.Decimal(match.group(1)) * _SIZE_UNITS[unit]
    size = number(input_name, int(amount), unit="bytes (a size like 8GiB, 512MiB or 0: no limit)")
    return size or None


@dataclasses.dataclass(frozen=True)
class EvaluateRequest:
    """Every input of an evaluate run: a model (and optional baseline) on the eval split, resolved."""

    model: str
    examples: str
    eval_config: Any  # eval_config.EvalConfig
    blessing_dir: str
    baseline_model: str | None = None
    schema: str | None = None
    eval_splits: tuple[str, ...] = ("eval",)
    batch_size: int = 256
    metrics_file: str | None = None
    report_file: str | None = None
    gcs_root: str = "/gcs"
    kfp: KfpOutputs | None = None
    timeout: float = 300.0  # the sandboxed evaluation process: seconds without progress
    memory_limit: int | None = 8 * 1024**3  # its address space (DEFAULT_PROBE_MEMORY); None: no limit, GPUs


def build_evaluate_request(
    values: Mapping[str, Any], environ: Mapping[str, str] | None = None, kfp: KfpOutputs | None = None
) -> EvaluateRequest:
    """Validate raw values (keyed by flag name, dashes as underscores) into an EvaluateRequest."""
    from generic_trainer.eval_config import parse_eval_config

    environ = os.environ if environ is None else environ
    gcs_root = values.get("gcs_root") or environ.get(GCS_ROOT_ENV) or "/gcs"
    eval_config = values.get("eval_config")
    if kfp is not None and isinstance(eval_config, Mapping):
        eval_config = ints_from_floats(dict(eval_config))
    metrics_file, report_file = values.get("metrics_file"), values.get("report_file")
    return EvaluateRequest(
        model=_model_dir("--model", values.get("model"), gcs_root, required=True),
        examples=_examples(values, gcs_root),
        eval_config=parse_eval_config(eval_config, gcs_root),
        blessing_dir=_required_out_dir("--blessing-dir", values.get("blessing_dir"), gcs_root,
                                       "where the blessing (BLESSED or NOT_BLESSED) goes"),
        baseline_model=_model_dir("--baseline-model", values.get("baseline_model"), gcs_root, required=False),
        schema=_existing("--schema", values.get("schema"), gcs_root),
        eval_splits=_splits("--eval-splits", values.get("eval_splits"), ("eval",)),
        batch_size=_positive_int("--batch-size", values.get("batch_size"), 256),
        metrics_file=storage.local_path(metrics_file, gcs_root) if metrics_file else None,
        report_file=storage.local_path(report_file, gcs_root) if report_file else None,
        gcs_root=gcs_root,
        kfp=kfp,
        timeout=seconds("--timeout", values.get("timeout"), 300.0),
        memory_limit=_memory_size("--memory-limit", values.get("memory_limit"), DEFAULT_PROBE_MEMORY),
    )


DEFAULT_PROBE_MEMORY = 8 * 1024**3


@dataclasses.dataclass(frozen=True)
class InfraValidateRequest:
    """Every input of an infra-validate run: a model tried in a sandboxed serving process, resolved."""

    model: str
    examples: str
    blessing_dir: str
    model_blessing: str | None = None
    eval_splits: tuple[str, ...] = ("eval",)
    num_requests: int = 10
    batch_size: int = 8
    timeout: float = 300.0
    memory_limit: int | None = DEFAULT_PROBE_MEMORY
    metrics_file: str | None = None
    gcs_root: str = "/gcs"
    kfp: KfpOutputs | None = None


def build_infra_validate_request(
    values: Mapping[str, Any], environ: Mapping[str, str] | None = None, kfp: KfpOutputs | None = None
) -> InfraValidateRequest:
    """Validate raw values (keyed by flag name, dashes as underscores) into an InfraValidateRequest."""
    environ = os.environ if environ is None else environ
    gcs_root = values.get("gcs_root") or environ.get(GCS_ROOT_ENV) or "/gcs"
    metrics_file = values.get("metrics_file")
    model_blessing = _existing("--model-blessing", values.get("model_blessing"), gcs_root)
    if model_blessing and not os.path.isdir(model_blessing):
        raise UserInputError("--model-blessing", f"{values.get('model_blessing')} is not a directory (the "
                                                 "evaluator's blessing dir holds BLESSED or NOT_BLESSED)")
    return InfraValidateRequest(
        model=_model_dir("--model", values.get("model"), gcs_root, required=True),
        examples=_examples(values, gcs_root),
        blessing_dir=_required_out_dir("--blessing-dir", values.get("blessing_dir"), gcs_root,
                                       "where the blessing (INFRA_BLESSED or INFRA_NOT_BLESSED) goes"),
        model_blessing=model_blessing,
        eval_splits=_splits("--eval-splits", values.get("eval_splits"), ("eval",)),
        num_requests=_positive_int("--num-requests", values.get("num_requests"), 10),
        batch_size=_positive_int("--batch-size", values.get("batch_size"), 8),
        timeout=seconds("--timeout", values.get("timeout"), 300.0),
        memory_limit=_memory_size("--memory-limit", values.get("memory_limit"), DEFAULT_PROBE_MEMORY),
        metrics_file=storage.local_path(metrics_file, gcs_root) if metrics_file else None,
        gcs_root=gcs_root,
        kfp=kfp,
    )


# ----------------------------------------------------------------------------------------------------------------
# The data verbs: import-examples and transform (Beam pipelines)
# ----------------------------------------------------------------------------------------------------------------

DEFAULT_SPLITS = (("train", 2), ("eval", 1))  # CsvExampleGen's default: 2/3 train, 1/3 eval


@dataclasses.dataclass(frozen=True)
class ImportExamplesRequest:
    """Every input of an import-examples run: tables (CSV or Parquet) to TFX Examples, resolved.

    Either `input_pattern` with hash `splits` ((name, buckets), ...), or `input_splits` ((name, pattern), ...).
    Patterns and outputs are local paths (gs:// through the /gcs mount), or gs:// URIs when Beam runs
    elsewhere (a non-local `--runner` in `beam_args`).
    """

    output: str
    format: str = "csv"
    input_pattern: str | None = None
    splits: tuple[tuple[str, int], ...] = DEFAULT_SPLITS
    input_splits: tuple[tuple[str, str], ...] = ()
    schema: str | None = None
    schema_output: str | None = None  # also write schema.pbtxt here (the KFP `output_schema` artifact)
    beam_args: tuple[str, ...] = ()
    gcs_root: str = "/gcs"
    kfp: KfpOutputs | None = None


_SPLIT_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def _split_name(input_name: str, name: str) -> str:
    name = name.strip()
    if not _SPLIT_NAME.fullmatch(name):
        raise UserInputError(input_name, f"split name {name!r} must be letters, digits, '_', '-' or '.'")
    return name


def _hash_splits(value: Any) -> tuple[tuple[str, int], ...]:
    """`train:2,eval:1` -> (("train", 2), ("eval", 1)); the order decides which bucket range is whose.

    A dict is taken in its order; KFP sorts a dict parameter's keys, so the component takes the string.
    """
    if value is None or value == "" or value == {}:
        return DEFAULT_SPLITS
    items = list(value.items()) if isinstance(value, Mapping) else [
        tuple(part.split(":", 1)) if ":" in part else (part, "") for part in str(value).split(",") if part.strip()]
    splits = []
    for name, buckets in items:
        try:
            count = int(float(buckets))
        except (TypeError, ValueError):
            count = 0
        if count < 1 or float(buckets) != count:
            raise UserInputError("--splits", f"expected name:buckets pairs with whole buckets >= 1 such as "
                                             f"'train:2,eval:1', got {value!r}")
        splits.append((_split_name("--splits", name), count))
    if len({n for n, _ in splits}) != len(splits):
        raise UserInputError("--splits", f"a split name appears twice in {value!r}")
    return tuple(splits)


def _input_splits(value: Any) -> tuple[tuple[str, str], ...]:
    """`train=PATTERN,eval=PATTERN` (or a KFP dict) -> (("train", PATTERN), ("eval", PATTERN))."""
    if value is None or value == "" or value == {}:
        return ()
    items = list(value.items()) if isinstance(value, Mapping) else [
        tuple(part.split("=", 1)) if "=" in part else (part, "") for part in str(value).split(",") if part.strip()]
    out = []
    for name, pattern in items:
        if not str(pattern).strip():
            raise UserInputError("--input-splits", f"expected name=PATTERN pairs such as 'train=a/*.csv,eval=b/*.csv', "
                                                   f"got {value!r}")
        out.append((_split_name("--input-splits", name), str(pattern).strip()))
    if len({n for n, _ in out}) != len(out):
        raise UserInputError("--input-splits", f"a split name appears twice in {value!r}")
    return tuple(out)


def _data_path(value: str, gcs_root: str, local_runner: bool) -> str:
    """A path Beam reads or writes: gs:// stays a URI for a remote runner, else the local (/gcs) path."""
    if storage.is_gcs_uri(value) and not local_runner:
        return value
    return storage.local_path(value, gcs_root)


def _new_output_dir(input_name: str, value: Any, gcs_root: str, local_runner: bool, what: str) -> str:
    if not value:
        raise UserInputError(input_name, f"required: {what}")
    path = _data_path(str(value), gcs_root, local_runner)
    if not storage.is_gcs_uri(path):
        path = os.path.normpath(path)
        if os.path.isdir(path) and os.listdir(path):
            raise UserInputError(input_name, f"{value} already exists and is not empty; give a new directory "
                                             "(outputs are written whole, never over an older one)")
        if os.path.exists(path) and not os.path.isdir(path):
            raise UserInputError(input_name, f"{value} exists and is a file; expected a new directory")
    return path


def build_import_examples_request(
    values: Mapping[str, Any], environ: Mapping[str, str] | None = None, kfp: KfpOutputs | None = None
) -> ImportExamplesRequest:
    """Validate raw values (keyed by flag name, dashes as underscores) into an ImportExamplesRequest."""
    from generic_trainer.beam_run import is_local_runner, parse_beam_args

    environ = os.environ if environ is None else environ
    gcs_root = values.get("gcs_root") or environ.get(GCS_ROOT_ENV) or "/gcs"
    beam_args = parse_beam_args(values.get("beam_pipeline_args"))
    local = is_local_runner(beam_args)
    fmt = (values.get("format") or "csv").lower()
    if fmt not in ("csv", "parquet"):
        raise UserInputError("--format", f"expected csv or parquet, got {values.get('format')!r}")
    pattern = values.get("input") or values.get("input_pattern") or None
    input_splits = _input_splits(values.get("input_splits"))
    if bool(pattern) == bool(input_splits):
        raise UserInputError("--input", "give either --input PATTERN (split by hash with --splits) or "
                                        "--input-splits name=PATTERN,... (one pattern per split)")
    if input_splits and values.get("splits") not in (None, "", {}):
        raise UserInputError("--splits", "hash splits are for --input; with --input-splits each pattern is a split")
    output = values.get("output") or (kfp.path("examples") if kfp else None)
    schema_output = values.get("schema_output") or (kfp.path("output_schema") if kfp else None)
    return ImportExamplesRequest(
        output=_new_output_dir("--output", output, gcs_root, local, "the Examples directory to write "
                                                                    "(Split-<name>/*.gz and schema.pbtxt)"),
        format=fmt,
        input_pattern=_data_path(pattern, gcs_root, local) if pattern else None,
        splits=_hash_splits(values.get("splits")) if pattern else (),
        input_splits=tuple((name, _data_path(p, gcs_root, local)) for name, p in input_splits),
        schema=_existing("--schema", values.get("schema"), gcs_root),
        schema_output=_data_path(schema_output, gcs_root, local) if schema_output else None,
        beam_args=beam_args,
        gcs_root=gcs_root,
        kfp=kfp,
    )


@dataclasses.dataclass(frozen=True)
class TransformRequest:
    """Every input of a transform run (tf.Transform's analyze and transform on Beam), resolved."""

    examples: str  # local path (checked); Beam reads examples_uri
    schema: str
    module_file: str
    transform_graph: str
    examples_uri: str = ""
    preprocessing_fn: str = "preprocessing_fn"
    transformed_examples: str | None = None
    analyze_splits: tuple[str, ...] = ("train",)
    transform_splits: tuple[str, ...] = ("train", "eval")
    module_sha256: str | None = None
    beam_args: tuple[str, ...] = ()
    gcs_root: str = "/gcs"
    kfp: KfpOutputs | None = None


def build_transform_request(
    values: Mapping[str, Any], environ: Mapping[str, str] | None = None, kfp: KfpOutputs | None = None
) -> TransformRequest:
    """Validate raw values (keyed by flag name, dashes as underscores) into a TransformRequest."""
    from generic_trainer.beam_run import is_local_runner, parse_beam_args

    environ = os.environ if environ is None else environ
    gcs_root = values.get("gcs_root") or environ.get(GCS_ROOT_ENV) or "/gcs"
    beam_args = parse_beam_args(values.get("beam_pipeline_args"))
    local = is_local_runner(beam_args)
    schema = _existing("--schema", values.get("schema"), gcs_root)
    if not schema:
        raise UserInputError("--schema", "required: the raw examples' tensorflow-metadata Schema (file or its dir)")
    graph = values.get("transform_graph") or (
        kfp.path("transform_graph") if kfp else None)
    transformed = values.get("transformed_examples") or (kfp.path("transformed_examples") if kfp else None)
    graph_path = _new_output_dir("--transform-graph", graph, gcs_root, local,
                                 "where the transform graph goes (transform_fn/, transformed_metadata/, metadata/)")
    transformed_path = _new_output_dir("--transformed-examples", transformed, gcs_root, local,
                                       "") if transformed else None
    if transformed_path and transformed_path == graph_path:
        raise UserInputError("--transformed-examples", "must differ from --transform-graph")
    return TransformRequest(
        examples=_examples(values, gcs_root),
        examples_uri=_data_path(values["examples"], gcs_root, local),
        schema=schema,
        module_file=_module_file(values),
        preprocessing_fn=values.get("preprocessing_fn") or "preprocessing_fn",
        transform_graph=graph_path,
        transformed_examples=transformed_path,
        analyze_splits=_splits("--analyze-splits", values.get("analyze_splits"), ("train",)),
        transform_splits=_splits("--transform-splits", values.get("transform_splits"), ("train", "eval")),
        module_sha256=_module_sha256(values),
        beam_args=beam_args,
        gcs_root=gcs_root,
        kfp=kfp,
    )
