"""What a model artifact holds beside `Format-Serving`, staged with it and published with it.

`stage_extras` writes, into the run's private staging dir (the sibling of the model dir that holds
the new `Format-Serving`), Vertex's predictSchemata (`schemata/`) and, when asked, the TFLite model
(`Format-TFLite/`); `publish_extras` moves each into the model dir right after `Format-Serving`
(and removes one an older model left there that this run did not make), so the extras appear only
with the model they describe. A TFLite export that fails does not stop the SavedModel: it is
recorded on the result, and `raise_tflite_failure` ends the run with it once the model is published.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from typing import Any

from generic_trainer.artifacts import serving_container, storage
from generic_trainer.artifacts.results import TrainResult
from generic_trainer.errors import OutputError
from generic_trainer.tflite import export as tflite_export
from generic_trainer.tflite import options as tflite_options

log = logging.getLogger(__name__)

EXTRA_DIRS = (serving_container.SCHEMATA_DIR, tflite_options.TFLITE_DIR)
OTHER_FORMAT = "other"  # --model-format other: a model of another framework, published unchecked


def check_other_model(path: str, what: str = "run_fn") -> dict[str, Any]:
    """--model-format other: what `what` wrote to `path` is published as it is (not a SavedModel:
    no serving check, no predictSchemata); it must have written something.

    Returns:
      The model info: its format and the files at its top (`files`), no signatures.
    """
    if not os.path.isdir(path) or not os.listdir(path):
        raise OutputError(
            f"{what} wrote no model: {path} is empty. Write the model into "
            "fn_args.serving_model_dir (e.g. model.pkl, as TFX's scikit-learn module does)."
        )
    files = sorted(os.listdir(path))
    log.info(
        "--model-format other: publishing what %s wrote (%s) as it is; it is not checked as a "
        "SavedModel, and no serving signature or predictSchemata is recorded",
        what,
        ", ".join(files[:10]) + (f" and {len(files) - 10} more" if len(files) > 10 else ""),
    )
    return {"format": OTHER_FORMAT, "files": files, "signatures": []}


def stage_extras(
    staging_root: str,
    serving_dir: str,
    result: TrainResult,
    tflite: tflite_options.TFLiteOptions | None = None,
    example_files: Sequence[str] = (),
    schema_file: str | None = None,
) -> None:
    """Write the schemata (and the TFLite model) of the validated SavedModel at `serving_dir` into
    `staging_root`; records them on `result` (`schemata`, `tflite`, `tflite_error`)."""
    if result.model_info:
        result.schemata = tuple(serving_container.write_schemata(staging_root, result.model_info))
    if tflite is None:
        return
    try:
        result.tflite = tflite_export.export(
            serving_dir,
            os.path.join(staging_root, tflite_options.TFLITE_DIR),
            tflite,
            example_files,
            schema_file,
        )
    except tflite_options.TFLiteExportError as e:
        shutil.rmtree(os.path.join(staging_root, tflite_options.TFLITE_DIR), ignore_errors=True)
        result.tflite_error = str(e)
        log.error("TFLite export failed; the SavedModel is published without it: %s", e)


def publish_extras(staging_root: str, model_dir: str) -> None:
    """Publish each staged extra into `model_dir`; remove those of an older model this run did not stage."""
    for name in EXTRA_DIRS:
        staged, final = os.path.join(staging_root, name), os.path.join(model_dir, name)
        if os.path.isdir(staged):
            storage.publish_dir(staged, final)
            log.info("published %s", final)
        elif os.path.exists(final):
            trash = storage.staging_dir_for(final) + ".old"
            os.rename(final, trash)  # out of the model dir in one step, then deleted
            shutil.rmtree(trash, ignore_errors=True)
            log.info("removed %s: the older model's, not made by this run", final)


def published_schemata(model_dir: str) -> tuple[str, ...]:
    """The predictSchemata files an earlier run published with the model in `model_dir`."""
    return tuple(
        name
        for name in serving_container.SCHEMA_FILES.values()
        if os.path.isfile(os.path.join(model_dir, serving_container.SCHEMATA_DIR, name))
    )


def raise_tflite_failure(result: TrainResult) -> None:
    """End the run with the TFLite failure (exit 4) when there was one; the SavedModel is published by now."""
    if result.tflite_error:
        raise tflite_options.TFLiteExportError(
            f"{result.tflite_error}. The SavedModel is published at {result.serving_model_dir}; no "
            f"{tflite_options.TFLITE_DIR} was written (convert it later with `generic-trainer export-tflite`)"
        )


def kfp_metadata(result: TrainResult) -> dict[str, Any]:
    """The TFLite entries of the model artifact's metadata (none when no export was asked for)."""
    if result.tflite:
        record = result.tflite
        return {
            "tflite_model_path": record["path"],
            "tflite_size_bytes": record["size_bytes"],
            "tflite_quantization": record["quantization"],
            "tflite_max_abs_diff": record["max_abs_diff"],
            "tflite_tolerance": record["tolerance"],
            "tflite_validated_on": record["validated_on"],
        }
    if result.tflite_error:
        return {"tflite_error": result.tflite_error}
    return {}
