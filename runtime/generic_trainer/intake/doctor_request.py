"""`doctor`'s request: train's flags read the way train reads them, the environment read once, here.

Nothing is refused here but a --keras value that is not a choice (argparse's): a flag train would
refuse is reported by the checks, one line each, instead of stopping at the first.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping

from generic_trainer.artifacts import storage
from generic_trainer.artifacts.kfp_io import KfpOutputs
from generic_trainer.diagnose.request import ENVIRONMENT, DoctorRequest, Place
from generic_trainer.errors import UserInputError
from generic_trainer.intake.doctor_options import TRAIN_INPUTS, TRAIN_OUTPUTS
from generic_trainer.intake.environment import storage_settings
from generic_trainer.intake.fit_options import TRAIN
from generic_trainer.intake.fit_values import speed_fields, value_checks
from generic_trainer.intake.request import (
    RawInputs,
    keras_choice,
    raw_inputs,
)

# Vertex's defaults of train's output dirs when their flag is not given.
OUTPUT_ENV = {
    "model_dir": "AIP_MODEL_DIR",
    "model_run_dir": "AIP_TENSORBOARD_LOG_DIR",
    "checkpoint_dir": "AIP_CHECKPOINT_DIR",
}


def _places(values: Mapping[str, object], environ: Mapping[str, str], gcs_root: str):
    """(inputs, outputs) as train would read them: each given value with its local path."""
    inputs = []
    for name, flag in TRAIN_INPUTS:
        value = values.get(name)
        if isinstance(value, str) and value:
            inputs.append(Place(flag, value, storage.local_path(value, gcs_root)))
    outputs = []
    for name, flag, _ in TRAIN_OUTPUTS:
        value = values.get(name) or environ.get(OUTPUT_ENV.get(name, ""), "")
        if isinstance(value, str) and value:
            local = os.path.normpath(storage.local_path(value, gcs_root))
            outputs.append(Place(flag, value, local))
    return tuple(inputs), tuple(outputs)


def flag_problems(values: Mapping[str, object], raw: RawInputs) -> tuple[str, ...]:
    """What train's own checks say of each flag's value (files are doctor's other checks)."""
    problems = []
    for check in [*value_checks(TRAIN, values, raw), functools.partial(speed_fields, values)]:
        try:
            check()
        except UserInputError as e:
            problems.append(str(e))
    return tuple(problems)


def build_doctor_request(
    values: Mapping[str, object],
    environ: Mapping[str, str] | None = None,
    kfp: KfpOutputs | None = None,
) -> DoctorRequest:
    """The doctor request of the raw values (train's flags and doctor's own).

    Args:
      values: the raw values, by flag dest.
      environ: the process environment (os.environ by default).
      kfp: unused (doctor has no component); the contract's signature.

    Returns:
      The DoctorRequest.
    """
    raw = raw_inputs(values, environ, kfp)
    keras, keras_reason = keras_choice(values, raw.environ)
    inputs, outputs = _places(values, raw.environ, raw.gcs_root)
    site = values.get("site_packages")
    return DoctorRequest(
        module_file=str(values.get("module_file") or "") or None,
        task=str(values.get("task") or "") or None,
        keras=keras,
        keras_reason=keras_reason,
        strategy=str(values.get("strategy") or "auto"),
        accelerator=str(values.get("accelerator") or "auto"),
        inputs=inputs,
        outputs=outputs,
        gcs_root=raw.gcs_root,
        environ={k: raw.environ[k] for k in ENVIRONMENT if k in raw.environ},
        storage=storage_settings(raw.environ),
        site_packages=os.path.abspath(str(site)) if site else None,
        json=bool(values.get("json")),
        flag_problems=flag_problems(values, raw),
    )
