"""The inputs of a training run, checked before TensorFlow loads: examples, splits and schema.

Shared by the verbs that train (train, tune, the Task runner); reads the request, never writes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from generic_trainer.fit_request import TrainRequest, TuneRequest

log = logging.getLogger(__name__)


def resolve_schema_file(path: str | None) -> str | None:
    """A schema artifact is a dir holding one .pbtxt (TFX SchemaGen) or the file itself."""
    from generic_trainer import data

    return data.one_file(path, "--schema", "*.pbtxt", "SchemaGen's schema.pbtxt") if path else path


def check_examples_and_schema(request: TrainRequest | TuneRequest) -> tuple[list[str], list[str], str | None]:
    """Split file patterns and the schema file of a train or tune request, checked without TensorFlow.

    The records themselves are decoded against the schema once TensorFlow is loaded anyway
    (`data.check_first_records`, called as the strategy is made), before any user code runs.
    """
    from generic_trainer import data

    train_files = data.split_file_patterns(request.examples, request.train_splits)
    eval_files = data.split_file_patterns(request.examples, request.eval_splits)
    n_files = data.check_readable(train_files + eval_files)
    data.check_splits_hold_records(train_files + eval_files)
    schema_file = resolve_schema_file(request.schema)
    schema = data.load_schema(schema_file) if schema_file else None
    log.info("examples: %s (train splits %s, eval splits %s, %d files)%s", request.examples,
             ",".join(request.train_splits), ",".join(request.eval_splits), n_files,
             f"; schema {schema_file} ({len(schema.feature)} features)" if schema is not None else "")
    return train_files, eval_files, schema_file
