"""The Task API's inputs of a train run checked into its `TaskProgram`: --task, --experiment,
--config-file, config, --params-override, --mode (fit_request.py builds the rest of the request).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from generic_trainer.artifacts import bounded_parse, storage
from generic_trainer.artifacts.files import describe as describe_path
from generic_trainer.errors import UserInputError
from generic_trainer.fit.requests import TaskProgram
from generic_trainer.intake.values import (
    ints_from_floats,
)


def task_program(
    values: Mapping[str, Any], gcs_root: str, keras: str, sha256: str | None
) -> TaskProgram:
    """The Task API's inputs: --task, --experiment, --config-file, config, --params-override,
    --mode."""
    from generic_trainer.task import config as task_config

    if keras == "tf_keras":
        raise UserInputError(
            "--keras",
            "the Task API runs Keras 3 (its own loop works under every strategy); "
            "tf_keras is for run_fn modules",
        )
    mode = values.get("mode") or "train_and_eval"
    if mode not in task_config.MODES:
        raise UserInputError(
            "--mode", f"expected one of {', '.join(task_config.MODES)}, got {mode!r}"
        )
    config_files = _config_files(values.get("config_file"), gcs_root)
    config = values.get("config")
    if isinstance(config, Mapping):
        config = json.dumps(ints_from_floats(dict(config)))
    task_config.parse_config_text(
        config or None, "config"
    )  # syntax errors now, unknown keys once the Task loads
    params_override = values.get("params_override") or None
    task_config.parse_params_override(params_override)
    return TaskProgram(
        task=values["task"],
        module_sha256=sha256,
        experiment=values.get("experiment") or None,
        config_files=config_files,
        config=config or None,
        params_override=params_override,
        mode=mode,
    )


def _config_files(given: Any, gcs_root: str) -> tuple[str, ...]:
    """--config-file's local paths (a list, "a,b" or a JSON list), each read and parsed now."""
    from generic_trainer.task import config as task_config

    files = given or []
    if isinstance(files, str):
        listed = (
            bounded_parse.load_json(files, "--config-file")
            if files.lstrip().startswith("[")
            else None
        )
        files = [f for f in (files.split(",") if listed is None else listed) if f]
    config_files = []
    for f in files:
        path = storage.local_path(str(f).strip(), gcs_root)
        if not os.path.isfile(path):
            what = f"is {describe_path(path)}" if os.path.lexists(path) else "does not exist"
            raise UserInputError(
                "--config-file",
                f"{f} {what}" + (f" (looked at {path})" if path != f else ""),
            )
        config_files.append(path)
        task_config.load_config_file(
            path, f"--config-file {f}"
        )  # broken YAML/JSON fails now, before TensorFlow
    return tuple(config_files)
