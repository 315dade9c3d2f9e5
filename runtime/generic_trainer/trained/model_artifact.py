"""What a model artifact holds beside `Format-Serving`, staged with it and published with it.

`stage_extras` writes, into the run's private staging dir (the sibling of the model dir that holds
the new `Format-Serving`), Vertex's predictSchemata (`schemata/`) and, when asked, the TFLite model
(`Format-TFLite/`); `publish_extras` moves each into the model dir right after `Format-Serving`
(and removes one an older model left there that this run did not make), so the extras appear only
with the model they describe. A TFLite export that fails raises `TFLiteExportError` (exit 4) before
anything is published, so the run's checkpoints stay for a retry.
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
    """Stage the schemata (and the TFLite model) of the validated SavedModel at `serving_dir`.

    Args:
        staging_root: the run's private staging dir; the extras are written into it.
        serving_dir: the staged, validated SavedModel.
        result: records `schemata` and `tflite` (the export's validation record).
        tflite: how to convert; None exports no TFLite model.
        example_files: the eval examples the TFLite model is checked on.
        schema_file: their schema.

    Raises:
        TFLiteExportError: the model does not convert or disagrees with the SavedModel (nothing
            is left in `staging_root` for it).
    """
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
    except tflite_options.TFLiteExportError:
        shutil.rmtree(os.path.join(staging_root, tflite_options.TFLITE_DIR), ignore_errors=True)
        raise


def publish_extras(staging_root: str, model_dir: str) -> None:
    """Publish each staged extra into `model_dir`; remove those of an older model this run did not
    stage."""
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
    return {}
