"""The request of `export-tflite`: the SavedModel, the examples to check on, the output, resolved.

No TensorFlow: the model is checked to hold a SavedModel (saved_model.pb in it or in its
`Format-Serving/`), the examples' split files and the schema to exist, the options to be valid.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from generic_trainer.artifacts import outputs, storage
from generic_trainer.artifacts.kfp_io import KfpOutputs
from generic_trainer.errors import UserInputError
from generic_trainer.intake.paths import split_patterns
from generic_trainer.intake.request import (
    existing_path,
    raw_inputs,
)
from generic_trainer.intake.values import (
    split_names,
)
from generic_trainer.tflite import options as tflite_options


@dataclasses.dataclass(frozen=True)
class ExportTfliteRequest:
    """Every input of an export-tflite run, resolved: local paths (gs:// under the gcs root)."""

    saved_model: str  # the SavedModel dir (the model dir's Format-Serving, or the dir given)
    output: str  # Format-TFLite/ is published here
    options: tflite_options.TFLiteOptions
    examples: str | None = None
    eval_splits: tuple[str, ...] = ("eval",)
    example_files: tuple[str, ...] = ()  # the eval splits' file patterns (none: random inputs)
    schema_file: str | None = None
    gcs_root: str = "/gcs"

    @property
    def tflite_dir(self) -> str:
        return os.path.join(self.output, tflite_options.TFLITE_DIR)


def build_export_tflite_request(
    values: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    kfp: KfpOutputs | None = None,
) -> ExportTfliteRequest:
    """The export-tflite request from its raw values.

    Args:
        values: the flags' values (export_options.EXPORT_TFLITE).
        environ: the environment (for the gcs root); os.environ when None.
        kfp: unused: the verb has no KFP component.

    Returns:
        The request, every path local and checked.

    Raises:
        UserInputError: a path that does not exist, a model without a SavedModel, --schema or
            --eval-splits without --examples, a bad quantization or tolerance.
    """
    from generic_trainer.fit.inputs import resolve_schema_file

    raw = raw_inputs(values, environ, kfp)
    model = storage.local_path(values["model"], raw.gcs_root)
    saved_model = outputs.serving_model_path(model)
    if not os.path.isfile(os.path.join(saved_model, "saved_model.pb")):
        raise UserInputError(
            "--model",
            f"{values['model']} holds no SavedModel (saved_model.pb in it or in its "
            f"{outputs.SERVING_DIR}/)",
        )
    options = tflite_options.check_options(
        True, values.get("tflite_quantization", "none"), values.get("tflite_tolerance")
    )
    examples = existing_path("--examples", values.get("examples"), raw.gcs_root)
    if not examples and (values.get("schema") or values.get("eval_splits")):
        flag = "--schema" if values.get("schema") else "--eval-splits"
        raise UserInputError(flag, "given without --examples")
    splits = split_names("--eval-splits", values.get("eval_splits"), ("eval",))
    schema = existing_path("--schema", values.get("schema"), raw.gcs_root)
    return ExportTfliteRequest(
        saved_model=saved_model,
        output=os.path.normpath(storage.local_path(values["output"], raw.gcs_root)),
        options=options,
        examples=examples,
        eval_splits=splits,
        example_files=split_patterns(examples or "", splits),
        schema_file=resolve_schema_file(schema) if schema else None,
        gcs_root=raw.gcs_root,
    )
