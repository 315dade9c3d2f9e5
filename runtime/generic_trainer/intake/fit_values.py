"""The checks of train and tune that read no file: the speed flags, the custom config, tune's own
values, and every declared value check; `check_values` runs them on `vertex-job`'s container
arguments (their paths are read on the container's machine) and doctor reports each.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from generic_trainer.artifacts.redaction import secret_key_names
from generic_trainer.errors import UserInputError
from generic_trainer.intake import fit_options
from generic_trainer.intake.options import Verb
from generic_trainer.intake.request import (
    TUNE_STRATEGIES,
    RawInputs,
    existing,
    keras_choice,
    module_file,
    output_file,
    raw_inputs,
)
from generic_trainer.intake.task_program import task_program
from generic_trainer.intake.values import (
    MAX_INT32,
    ints_from_floats,
    json_object,
    number,
)
from generic_trainer.tflite import options as tflite_options

MIXED_PRECISION_CHOICES = ("mixed_float16", "mixed_bfloat16")


def speed_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """--mixed-precision, --jit-compile, --steps-per-execution (flags, or KFP parameters)."""
    policy = values.get("mixed_precision") or None
    if policy is not None and policy not in MIXED_PRECISION_CHOICES:
        raise UserInputError(
            "--mixed-precision",
            f"expected one of {', '.join(MIXED_PRECISION_CHOICES)}, got {policy!r}",
        )
    jit = values.get("jit_compile")
    if isinstance(jit, str):
        jit = {"true": True, "1": True, "false": False, "0": False, "": None}.get(
            jit.strip().lower(), jit
        )
    if jit is not None and not isinstance(jit, bool):
        raise UserInputError("--jit-compile", f"expected true or false, got {jit!r}")
    steps = values.get(
        "steps_per_execution"
    )  # 0: unset (the component's default; KFP needs a value for an int)
    steps = (
        None
        if steps in (0, "0")
        else number("--steps-per-execution", steps, minimum=1, maximum=MAX_INT32, unit="batches")
    )
    if values.get("task"):  # the Task API's own loop is configured by its experiment config
        instead = {
            "mixed_precision": (
                "--mixed-precision",
                "runtime.mixed_precision_dtype=float16|bfloat16",
            ),
            "steps_per_execution": ("--steps-per-execution", "trainer.steps_per_loop=N"),
            "jit_compile": ("--jit-compile", None),
        }
        for key, value in (
            ("mixed_precision", policy),
            ("steps_per_execution", steps),
            ("jit_compile", jit),
        ):
            if value is not None:
                flag, override = instead[key]
                raise UserInputError(
                    flag,
                    "is for run_fn modules; with --task "
                    + (
                        f"set it in the experiment config, e.g. --params-override {override}"
                        if override
                        else "the runtime's loop has no XLA option"
                    ),
                )
    return {"mixed_precision": policy, "jit_compile": jit, "steps_per_execution": steps or None}


def custom_config(raw: RawInputs) -> dict[str, Any]:
    custom_config = json_object("--custom-config", raw.values.get("custom_config"))
    secret_key_names(custom_config)
    return ints_from_floats(custom_config) if raw.kfp else custom_config


def tune_values(values: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[str, int | None]:
    """tune's own checks that read no file: Keras 3, --strategy, --max-trials."""
    keras, _ = keras_choice(values, environ)
    if keras not in ("auto", "keras3"):
        raise UserInputError(
            "--keras" if values.get("keras") else "TF_USE_LEGACY_KERAS",
            "keras-tuner searches Keras 3 models only (it rejects tf_keras models); "
            "use --keras keras3 / TF_USE_LEGACY_KERAS=0",
        )
    strategy = values.get("strategy") or "auto"
    if strategy not in TUNE_STRATEGIES:
        raise UserInputError(
            "--strategy",
            f"expected one of {', '.join(TUNE_STRATEGIES)} for tuning (each replica "
            f"runs its own trials; several replicas tune in parallel), got {strategy!r}",
        )
    max_trials = (
        number(
            "--max-trials",
            values.get("max_trials"),
            maximum=MAX_INT32,
            unit="trials (0: the tuner_fn's own)",
        )
        or None
    )
    return strategy, max_trials


def value_checks(verb: Verb, values: Mapping[str, Any], raw: RawInputs) -> list[Callable[[], Any]]:
    """The declared checks of `verb`'s given values that read no file, each ready to call (a
    UserInputError names the flag): vertex-job stops at the first, doctor reports every one."""
    return [
        functools.partial(o.check, raw, o.flag, values[o.name])
        for o in verb.options()
        if o.check and o.check not in (existing, output_file) and values.get(o.name) is not None
    ]


def check_values(verb: Verb, values: Mapping[str, Any], environ: Mapping[str, str]) -> None:
    """The checks of a train or tune request that read no file: what `vertex-job` runs on the
    container's args before it builds a job (their paths are read on the container's machine, so not
    here)."""
    raw = raw_inputs(values, environ, None)
    for check in value_checks(verb, values, raw):
        check()
    custom_config(raw)
    task = values.get("task") if verb is fit_options.TRAIN else None
    if task and values.get("module_file"):
        raise UserInputError(
            "--task", "give either --task module:Class or --module-file (run_fn), not both"
        )
    if not task:
        module_file(values)
        if not values.get("examples"):
            raise UserInputError(
                "--examples", "required: the examples directory (TFX layout Split-<name>/*.gz)"
            )
    if verb is fit_options.TUNE:
        tune_values(values, environ)
        if not values.get("best_hyperparameters_dir"):
            raise UserInputError(
                "--best-hyperparameters-dir", "required: where best_hyperparameters.txt goes"
            )
        return
    from generic_trainer.artifacts import serving_container

    keras, _ = keras_choice(values, environ)
    serving_container.check_options(
        values.get("serving_image"),
        values.get("serving_accelerator"),
        values.get("serving_image_region"),
    )
    tflite_options.check_options(
        values.get("export_tflite"),
        values.get("tflite_quantization"),
        values.get("tflite_tolerance"),
    )
    speed_fields(values)
    if task:  # its config files are read on the container's machine
        task_program({**values, "config_file": None}, raw.gcs_root, keras, None)
