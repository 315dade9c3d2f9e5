"""The sandboxed serving process of `infra-validate`: `python -m generic_trainer.judge.serving_probe
SPEC RESULT`.

SPEC (JSON, written by infra_validate.py): `{"model": SavedModel dir, "warmup": N, "requests":
[[base64 serialized tf.Example, ...], ...], "schema": optional schema path, "warmup_records":
[base64 serialized tf.Example, ...], "warmup_file": path}`; the first N requests are warm-ups. It
runs in sandbox.py's sandbox.

The process limits its own address space first (`sandbox.enter()`, before TensorFlow loads), then
loads the SavedModel and sends every request to `serving_default` in the signature's own input form
(signature_feed.py: serialized tf.Examples, or tensors parsed from them), timing each call. With
`warmup_records`, when every request succeeded, it writes one TF Serving warm-up request
(PredictionLog) per record to `warmup_file` and replays each, read back from the file, as TF Serving
would at load time. RESULT (JSON) is rewritten after every stage, so when the process dies (out of
memory, killed at the time limit, a crash in native code) the parent still knows how far it got.
Python errors end up in RESULT's `error`; inputs the examples cannot feed in `input_error`
(`{"input": flag, "message": ...}`); the exit code is then 0.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.judge import sandbox
from generic_trainer.judge.sandbox_outcome import compact_error
from generic_trainer.judge.signature_feed import SignatureFeed, replay


def _write(path: str, result: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f)
    os.replace(tmp, path)


def _spec(tensor_spec: Any) -> dict[str, Any]:
    shape = tensor_spec.shape.as_list() if tensor_spec.shape.rank is not None else None
    return {"dtype": tensor_spec.dtype.name, "shape": shape}


def _serve(spec: dict[str, Any], result: dict[str, Any], result_path: str) -> None:
    def stage(name: str) -> None:
        result["stage"] = name
        _write(result_path, result)
        sandbox.progress(name)

    stage("importing TensorFlow")
    import tensorflow as tf

    stage("loading the model")
    started = time.monotonic()
    try:
        loaded = tf.saved_model.load(spec["model"])
    except Exception as e:
        result["error"] = f"the model does not load: {compact_error(e)}"
        return
    result["load_seconds"] = time.monotonic() - started
    result["signatures"] = sorted(loaded.signatures)
    if "serving_default" not in loaded.signatures:
        result["error"] = (
            f"the model has no serving_default signature (it has {result['signatures'] or 'none'})"
        )
        return
    fn = loaded.signatures["serving_default"]
    result["inputs"] = {k: _spec(v) for k, v in fn.structured_input_signature[1].items()}
    result["outputs"] = {k: _spec(v) for k, v in fn.structured_outputs.items()}
    try:
        feed = SignatureFeed(fn, "--model", spec.get("schema"))
        result["feed"] = feed.describe()
        _send(spec, result, stage, fn, feed)
        if spec.get("warmup_records") and all(entry.get("ok") for entry in result["requests"]):
            _warmup(spec, result, stage, fn, feed)
    except UserInputError as e:
        prefix = f"{e.input_name}: "
        message = str(e)[len(prefix) :] if str(e).startswith(prefix) else str(e)
        result["input_error"] = {"input": e.input_name, "message": message}


def _send(
    spec: dict[str, Any],
    result: dict[str, Any],
    stage: Callable[[str], None],
    fn: Any,
    feed: SignatureFeed,
) -> None:
    import tensorflow as tf

    result["requests"] = []
    warmups = spec.get("warmup", 1)
    for i, encoded in enumerate(spec["requests"]):
        stage(
            f"serving warm-up request {i + 1}"
            if i < warmups
            else f"serving request {i + 1 - warmups}"
        )
        inputs = feed.inputs(
            [base64.b64decode(r) for r in encoded]
        )  # as a client would send them: not timed
        entry: dict[str, Any] = {"size": len(encoded), "warmup": i < warmups}
        started = time.monotonic()
        try:
            out = fn(**inputs)
            values = {k: v.numpy() for k, v in out.items()}
            entry["seconds"] = time.monotonic() - started
            entry["ok"] = True
            entry["outputs"] = {
                k: {"dtype": tf.as_dtype(v.dtype).name, "shape": list(v.shape)}
                for k, v in values.items()
            }
        except Exception as e:
            entry["ok"] = False
            entry["error"] = compact_error(e)
        result["requests"].append(entry)


def _warmup(
    spec: dict[str, Any],
    result: dict[str, Any],
    stage: Callable[[str], None],
    fn: Any,
    feed: SignatureFeed,
) -> None:
    """Write the TF Serving warm-up file, then replay every request in it as TF Serving would."""
    import tensorflow as tf

    records = [base64.b64decode(r) for r in spec["warmup_records"]]
    stage(f"writing {len(records)} warm-up requests")
    with tf.io.TFRecordWriter(spec["warmup_file"]) as writer:
        for record in records:
            writer.write(feed.warmup_record([record]))
    for i, logged in enumerate(tf.data.TFRecordDataset(spec["warmup_file"]).as_numpy_iterator()):
        stage(f"replaying warm-up request {i + 1} of {len(records)}")
        try:
            out = replay(fn, logged)
            missing = sorted(set(fn.structured_outputs) - set(out))
            if missing:
                raise ValueError(f"outputs {missing} are missing")
        except Exception as e:
            result["warmup_error"] = (
                f"warm-up request {i + 1} of the warm-up file failed when replayed: "
                f"{compact_error(e)}"
            )
            return
        result["warmup_written"] = i + 1


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 2:
        print(
            "usage: python -m generic_trainer.judge.serving_probe SPEC.json RESULT.json",
            file=sys.stderr,
        )
        return 2
    spec_path, result_path = argv
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    result: dict[str, Any] = {"stage": "starting", "pid": os.getpid()}
    limit = sandbox.enter()
    if limit:
        result["memory_limit"] = limit
    try:
        _serve(spec, result, result_path)
    except MemoryError as e:
        result["error"] = f"out of memory: MemoryError {e}"
    except (
        Exception
    ) as e:  # anything the model's code raises is a finding, not a crash of the probe
        result["error"] = compact_error(e)
    result["finished"] = result.get("stage")
    result["stage"] = "done"
    _write(result_path, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
