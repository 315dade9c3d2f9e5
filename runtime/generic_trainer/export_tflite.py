"""The `export-tflite` verb: a trained model's serving signature as `<output>/Format-TFLite/`.

    generic-trainer export-tflite --model DIR --output DIR [--examples DIR --schema FILE]
        [--eval-splits a,b] [--tflite-quantization none|dynamic|float16] [--tflite-tolerance X]

What `train --export-tflite` does after training, for a model already trained: the conversion and
its check against the SavedModel (tflite/export.py; on the eval examples when --examples is given,
else on random inputs), staged beside the output and published whole. `--output` may be the model
dir itself (then `Format-TFLite` lands beside `Format-Serving`). Its flags are declared in
`intake/export_options.py`; it has no KFP component, so it writes no executor output.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from generic_trainer.artifacts import outputs
from generic_trainer.artifacts.staged import StagedDir
from generic_trainer.intake.contract import VerbContract
from generic_trainer.intake.export_options import EXPORT_TFLITE
from generic_trainer.intake.export_request import ExportTfliteRequest, build_export_tflite_request

log = logging.getLogger(__name__)

# The export's validation record (tflite/export.py), with the published model's path.
ExportResult = dict[str, Any]


def describe(request: ExportTfliteRequest) -> list[str]:
    """The log line that says what will be converted, where to, and how it is checked."""
    return [
        f"export-tflite request: model={request.saved_model} output={request.output} "
        f"examples={request.examples} splits={','.join(request.eval_splits)} "
        f"quantization={request.options.quantization} tolerance={request.options.max_abs_diff:g}"
    ]


def run(
    request: ExportTfliteRequest,
    before_publish: Callable[[ExportResult], None] | None = None,
) -> ExportResult:
    """Convert and check the SavedModel, then publish `<output>/Format-TFLite` whole.

    Args:
        request: the built request.
        before_publish: called with the result right before the publish; when it raises,
            nothing is published.

    Returns:
        The export's validation record and `tflite_model`, the published model file.

    Raises:
        TFLiteExportError: the model does not convert, or its TFLite version disagrees (exit 4).
    """
    from generic_trainer.tflite import export as tflite_export

    with outputs.exclusive(request.output, "--output"):
        with StagedDir(request.tflite_dir, beside=request.output) as stage:
            record = tflite_export.export(
                request.saved_model,
                stage.path,
                request.options,
                request.example_files,
                request.schema_file,
            )
            result = {"tflite_model": os.path.join(request.output, record["path"]), **record}
            if before_publish is not None:
                before_publish(result)
            stage.publish()
    return result


VERB: VerbContract[ExportTfliteRequest, ExportResult] = VerbContract(
    EXPORT_TFLITE,
    build_export_tflite_request,
    describe,
    run,
    lambda request, result: ({}, None),
    lambda result: result,
)
