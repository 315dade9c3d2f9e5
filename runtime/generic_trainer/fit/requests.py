"""The typed requests of the training verbs, train and tune (built by `intake/fit_request.py`).

Both are a `FitRequest` (the inputs they share, as TFX's Trainer and Tuner share them: examples,
schema, transform graph, hyperparameters, custom config, steps and splits, checkpoints, metrics and
report) plus their own fields. A train run adds the program it runs: a `RunFnProgram` (a TFX-style
module's run_fn) or a `TaskProgram` (a generic_trainer.Task the runtime's own loop trains); a tune
run its module's tuner_fn and the search's outputs. The types live here, under the parts that read
them (fit/, the Task path, the publisher); the face builds and checks them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from generic_trainer.artifacts.kfp_io import KfpOutputs
from generic_trainer.artifacts.redaction import redact
from generic_trainer.artifacts.storage_settings import DEFAULT_SETTINGS, StorageSettings
from generic_trainer.fit.cluster_spec import SINGLE, Cluster
from generic_trainer.tflite.options import TFLiteOptions


@dataclasses.dataclass(frozen=True)
class RunFnProgram:
    """A TFX-style user module whose run_fn(fn_args) trains and saves the model (TFX Trainer's
    contract)."""

    module_file: str
    run_fn: str = "run_fn"
    module_sha256: str | None = None
    # Speed options (--mixed-precision, --jit-compile, --steps-per-execution); None: the module's
    # own choice.
    mixed_precision: str | None = None
    jit_compile: bool | None = None
    steps_per_execution: int | None = None


@dataclasses.dataclass(frozen=True)
class TaskProgram:
    """A generic_trainer.Task (`--task module:Class`) trained by the runtime's own loop, from its
    experiment config."""

    task: str
    module_sha256: str | None = None
    experiment: str | None = None
    config_files: tuple[str, ...] = ()
    config: str | None = None  # inline YAML/JSON overrides (the KFP `config` parameter)
    params_override: str | None = None
    mode: str = "train_and_eval"


@dataclasses.dataclass(frozen=True, kw_only=True)
class FitRequest:
    """The inputs train and tune share, as TFX's Trainer and Tuner do: the examples and what the
    user's function gets of them (FnArgs), where checkpoints, metrics and the report go, the
    strategy.

    Built for both by `_fit_fields`; TrainRequest and TuneRequest add their own fields.
    """

    examples: str  # "" for a Task without --examples (its experiment config names its data)
    # --examples resolved at intake (intake/paths.split_patterns): one `<examples>/Split-<name>/*`
    # per split, TFX's FnArgs.train_files / eval_files; () for a split list the run does not read.
    train_files: tuple[str, ...] = ()
    eval_files: tuple[str, ...] = ()
    checkpoint_dir: str
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
    strategy: str = "auto"
    accelerator: str = "auto"  # auto | gpu | cpu: see fit/accelerator.py
    cache_examples: str = (
        "auto"  # auto | memory | off: the data accessor's record cache (records/example_dataset.py)
    )
    gcs_root: str = "/gcs"
    kfp: KfpOutputs | None = None
    storage: StorageSettings = DEFAULT_SETTINGS  # from the environment (intake/environment.py)
    cluster: Cluster = SINGLE  # this replica's place: TF_CONFIG / CLUSTER_SPEC, read at intake
    prefetch_to_device: bool = True  # --prefetch-to-device (fit/cluster.prefetch_device)
    # What says which GPUs are visible (PATH for nvidia-smi, CUDA_VISIBLE_DEVICES), read at intake.
    gpu_environ: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def redacted_custom_config(self) -> dict[str, Any]:
        """custom_config with secret values replaced, safe to log or write to metadata."""
        return redact(self.custom_config)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainRequest(FitRequest):
    """Every input of a train run, resolved to local paths and typed values: the program, and what
    it runs on."""

    program: RunFnProgram | TaskProgram
    model_dir: str
    model_run_dir: str
    model_run_copy_dir: str | None = (
        None  # also gets model_run_dir's logs at the end (see build_train_request)
    )
    keras: str = (
        "keras3"  # what tf.keras is for the program: keras3 or tf_keras (--keras auto resolved)
    )
    keras_reason: str = ""  # why (logged)
    cluster_timeout: float | None = None
    # The serving container the model artifact names for Vertex AI Model Registry
    # (serving_container).
    serving_image: str | None = None
    serving_accelerator: str = "cpu"
    serving_image_region: str = "us"
    tflite: TFLiteOptions | None = None  # --export-tflite (tflite/); None: no TFLite export
    model_format: str = "savedmodel"  # other: what run_fn wrote is published unchecked

    @property
    def task(self) -> TaskProgram | None:
        """The Task program, or None for a run_fn module."""
        return self.program if isinstance(self.program, TaskProgram) else None


@dataclasses.dataclass(frozen=True, kw_only=True)
class TuneRequest(FitRequest):
    """Every input of a tune run (a keras-tuner search from the module's tuner_fn), resolved."""

    module_file: str
    best_hyperparameters_dir: str
    tuner_fn: str = "tuner_fn"
    tuner_results_file: str | None = None
    module_sha256: str | None = None
    max_trials: int | None = None
    worker_timeout: float = 600.0

    @property
    def working_dir(self) -> str:
        """keras-tuner's directory: stable under the checkpoint dir, so a re-run resumes the
        search."""
        return os.path.join(self.checkpoint_dir, "tuner")
