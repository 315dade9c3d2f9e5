"""How a TFLite export is asked for: --export-tflite, --tflite-quantization, --tflite-tolerance (no
TensorFlow here).

The request builders (`intake/`) and the export itself (`tflite/export.py`) share these
declarations.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from generic_trainer.errors import OutputError, UserInputError

QUANTIZATIONS = ("none", "dynamic", "float16")
# Largest absolute output difference accepted between the TFLite model and the SavedModel, by
# quantization.
DEFAULT_TOLERANCES = {"none": 1e-4, "float16": 5e-2, "dynamic": 1e-1}
TFLITE_DIR = "Format-TFLite"
TFLITE_FILE = "model.tflite"
VALIDATION_FILE = "validation.json"
MAX_EXAMPLES = 256


class TFLiteExportError(OutputError):
    """The model cannot be converted to TFLite, or its TFLite version does not agree with it (exit
    4)."""


@dataclasses.dataclass(frozen=True)
class TFLiteOptions:
    """How to convert: `quantization` one of QUANTIZATIONS; `tolerance` None means its
    DEFAULT_TOLERANCES."""

    quantization: str = "none"
    tolerance: float | None = None

    @property
    def max_abs_diff(self) -> float:
        """The tolerance: the given one, else the quantization's default."""
        return (
            self.tolerance if self.tolerance is not None else DEFAULT_TOLERANCES[self.quantization]
        )


def check_options(
    export: Any, quantization: Any = None, tolerance: Any = None
) -> TFLiteOptions | None:
    """--export-tflite, --tflite-quantization and --tflite-tolerance as TFLiteOptions (None: no
    export)."""
    if isinstance(export, str):
        if export.strip().lower() not in ("", "true", "false", "1", "0"):
            raise UserInputError("--export-tflite", f"expected true or false, got {export!r}")
        export = export.strip().lower() in ("true", "1")
    quantization = str(quantization).strip().lower() if quantization not in (None, "") else "none"
    if quantization not in QUANTIZATIONS:
        raise UserInputError(
            "--tflite-quantization",
            f"expected one of {', '.join(QUANTIZATIONS)}, got {quantization!r}",
        )
    if tolerance not in (None, ""):
        try:
            tolerance = float(tolerance)
        except (TypeError, ValueError):
            raise UserInputError(
                "--tflite-tolerance", f"expected a number, got {tolerance!r}"
            ) from None
        if not tolerance >= 0:
            raise UserInputError("--tflite-tolerance", f"expected a number >= 0, got {tolerance!r}")
    else:
        tolerance = None
    if not export:
        if quantization != "none" or tolerance is not None:
            flag = "--tflite-quantization" if quantization != "none" else "--tflite-tolerance"
            raise UserInputError(
                flag,
                "given without --export-tflite (the KFP parameter export_tflite): add it, "
                "or leave this out",
            )
        return None
    return TFLiteOptions(quantization, tolerance)
