"""The supervisor's own check of a run that reported success: its main output is there (and a
trained model parses as a SavedModel).

User code runs in the process that writes the run record, so it can write the record's `end` entry
itself and end the process: the record alone cannot say a run succeeded. The parent finds the main
output from the arguments (`expected`) and checks it here, without TensorFlow: a train's
`<model-dir>/Format-Serving/saved_model.pb` must parse as a SavedModel holding a MetaGraph (with
`--model-format other`, Format-Serving must hold files); a tune's
best hyperparameters and a transform's graph must be there, not empty. Verbs that run no user code
in their own process, cluster replicas (only the chief publishes) and a Task's eval modes are not
checked.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import Any

MAIN_OUTPUTS = {  # verb -> (option holding its main output, the flag that names it)
    "train": ("model_dir", "--model-dir"),
    "tune": ("best_hyperparameters_dir", "--best-hyperparameters-dir"),
    "transform": ("transform_graph", "--transform-graph"),
}
CLUSTER_ENV = ("TF_CONFIG", "CLUSTER_SPEC", "KERASTUNER_TUNER_ID")
NO_MODEL_MODES = (
    "eval",
    "continuous_eval",
)  # a Task's --mode that evaluates and publishes no model
SERVING_DIR = "Format-Serving"


def expected(
    verb: str,
    values: Mapping[str, Any] | Callable[[], Mapping[str, Any]],
    environ: Mapping[str, str],
) -> str | None:
    """The main output path a successful `verb` run must leave (absolute, local), or None
    (unchecked).

    Args:
      verb: the verb run.
      values: its raw option values, or a function giving them (flags overlaid by the executor
        input's; when it raises, the run itself reports the bad input and nothing is checked).
      environ: the environment (a cluster's replicas are not checked).

    Returns:
      The path, or None.
    """
    if verb not in MAIN_OUTPUTS or any(environ.get(name) for name in CLUSTER_ENV):
        return None
    if callable(values):
        try:
            values = values()
        except Exception:  # noqa: BLE001 (any failure is the run's to report, with exit 2)
            return None
    if verb == "train" and values.get("mode") in NO_MODEL_MODES:
        return None
    path = values.get(MAIN_OUTPUTS[verb][0])
    if not isinstance(path, str) or not path or "://" in path:
        return None  # gs:// and the like: the child maps and checks them
    if verb == "train" and values.get("model_format") == "other":
        # another framework's model (--model-format other): any files, not a SavedModel
        return os.path.join(os.path.abspath(path), SERVING_DIR)
    return os.path.abspath(path)


def problem(verb: str, path: str | None) -> str | None:
    """What is wrong with the main output `path` of a `verb` run that reported success, or None."""
    if path is None:
        return None
    flag = MAIN_OUTPUTS[verb][1]
    if verb == "train" and os.path.basename(path) != SERVING_DIR:
        return _model_problem(path, flag)
    if not os.path.isdir(path) or not os.listdir(path):
        return f"its {flag} {path} {'is empty' if os.path.isdir(path) else 'does not exist'}"
    return None


def _model_problem(model_dir: str, flag: str) -> str | None:
    pb = os.path.join(model_dir, SERVING_DIR, "saved_model.pb")
    if not os.path.isfile(pb):
        return f"its {flag} {model_dir} holds no model ({SERVING_DIR}/saved_model.pb is missing)"
    try:
        with open(pb, "rb") as f:
            model = _saved_model_class().FromString(f.read())
    except Exception as e:  # protobuf's DecodeError, or the file unreadable
        return f"{pb} is not a SavedModel ({type(e).__name__}: {e})"
    if not model.meta_graphs:
        return f"{pb} holds no MetaGraph: not a model TensorFlow can load"
    return None


@functools.lru_cache(maxsize=1)
def _saved_model_class() -> Any:
    """SavedModel's outer message (its schema version and MetaGraphs, kept as bytes), built from
    tensorflow/core/protobuf/saved_model.proto's field numbers: no TensorFlow import."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="generic_trainer/saved_model_check.proto", package="generic_trainer_check"
    )
    message = file.message_type.add(name="SavedModel")
    message.field.add(name="saved_model_schema_version", number=1, label=1, type=field.TYPE_INT64)
    message.field.add(name="meta_graphs", number=2, label=3, type=field.TYPE_BYTES)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    descriptor = pool.FindMessageTypeByName("generic_trainer_check.SavedModel")
    return message_factory.GetMessageClass(descriptor)
