"""The sandboxed serving process of `infra-validate`: `python -m generic_trainer.serving_probe SPEC RESULT`.

SPEC (JSON, written by infra_validate.py): `{"model": SavedModel dir, "warmup": N, "requests": [[base64
serialized tf.Example, ...], ...]}`; the first N requests are warm-ups. It runs in sandbox.py's sandbox.

The process limits its own address space first (`sandbox.enter()`, before TensorFlow loads), then loads the
SavedModel, checks that `serving_default` takes serialized tf.Examples (one 1-D string tensor) and
sends every request, timing each call. RESULT (JSON) is rewritten after every stage, so when the
process dies (out of memory, killed at the time limit, a crash in native code) the parent still
knows how far it got. Python errors end up in RESULT's `error`; the exit code is then 0.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from generic_trainer import sandbox
from generic_trainer.sandbox import compact_error


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
        result["error"] = f"the model has no serving_default signature (it has {result['signatures'] or 'none'})"
        return
    fn = loaded.signatures["serving_default"]
    inputs = fn.structured_input_signature[1]
    result["inputs"] = {k: _spec(v) for k, v in inputs.items()}
    result["outputs"] = {k: _spec(v) for k, v in fn.structured_outputs.items()}
    if len(inputs) != 1 or next(iter(inputs.values())).dtype != tf.string or \
            next(iter(inputs.values())).shape.rank not in (None, 1):
        described = ", ".join(f"{k}: {v['dtype']}{v['shape']}" for k, v in result["inputs"].items())
        result["error"] = (f"serving_default takes {{{described}}}, not serialized tf.Examples (one 1-D string "
                           "tensor): a serving system sending tf.Examples cannot call it")
        return
    input_key = next(iter(inputs))
    result["requests"] = []
    warmups = spec.get("warmup", 1)
    for i, encoded in enumerate(spec["requests"]):
        stage(f"serving warm-up request {i + 1}" if i < warmups else f"serving request {i + 1 - warmups}")
        batch = tf.constant([base64.b64decode(r) for r in encoded], dtype=tf.string)
        entry: dict[str, Any] = {"size": len(encoded), "warmup": i < warmups}
        started = time.monotonic()
        try:
            out = fn(**{input_key: batch})
            values = {k: v.numpy() for k, v in out.items()}
            entry["seconds"] = time.monotonic() - started
            entry["ok"] = True
            entry["outputs"] = {k: {"dtype": tf.as_dtype(v.dtype).name, "shape": list(v.shape)}
                                for k, v in values.items()}
        except Exception as e:
            entry["ok"] = False
            entry["error"] = compact_error(e)
        result["requests"].append(entry)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 2:
        print("usage: python -m generic_trainer.serving_probe SPEC.json RESULT.json", file=sys.stderr)
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
    except Exception as e:  # anything the model's code raises is a finding, not a crash of the probe
        result["error"] = compact_error(e)
    result["finished"] = result.get("stage")
    result["stage"] = "done"
    _write(result_path, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
