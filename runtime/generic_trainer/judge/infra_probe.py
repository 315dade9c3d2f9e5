"""infra-validate's serving probe run: the requests made of the examples, the sandboxed process.

The verb's process never loads the model (nor TensorFlow). It reads `num_requests` x `batch_size`
serialized tf.Examples from the examples (plain Python, cycling when there are fewer) and starts
`python -m generic_trainer.judge.serving_probe` in sandbox.py's sandbox: the probe loads the
SavedModel, sends two warm-up requests, then the timed ones, to `serving_default` in the
signature's own input form, writes the TF Serving warm-up file when asked, and reports in a JSON
file that infra_verdict.py judges.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Sequence
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.judge import sandbox
from generic_trainer.records import example_files

WARMUP_FILE = "tf_serving_warmup_requests"  # TF Serving's name, in the SavedModel's assets.extra
WARMUP_REQUESTS = 2  # untimed requests first (1 and batch_size examples): they build the kernels


def read_records(patterns: Sequence[str], limit: int) -> list[bytes]:
    """Read serialized records without TensorFlow, in file order.

    Args:
      patterns: the splits' file patterns (the request's eval_files), in order.
      limit: the most records to read.

    Returns:
      Up to `limit` serialized records of the splits' TFRecord files.
    """
    example_files.check_readable(patterns)
    records: list[bytes] = []
    for path in (f for p in patterns for f in example_files.split_files(p)):
        records += example_files.read_records(
            path, limit - len(records), damaged_input="--examples"
        )
        if len(records) >= limit:
            break
    return records


def probe_requests(
    patterns: Sequence[str], batch_size: int, num_requests: int, write_warmup: int
) -> tuple[list[list[str]], list[str]]:
    """The probe's requests and warm-up records, made of the examples (base64, cycled when short).

    Args:
      patterns: the file patterns of the splits the examples come from (the request's
        eval_files).
      batch_size: examples per request.
      num_requests: the timed requests.
      write_warmup: the warm-up records to write (0: none).

    Returns:
      (the WARMUP_REQUESTS warm-up requests then the timed ones, the warm-up records).

    Raises:
      UserInputError: the splits hold no examples.
    """
    limit = max(num_requests * batch_size, write_warmup)
    records = read_records(patterns, limit)
    if not records:
        splits = ", ".join(example_files.split_name(p) for p in patterns)
        raise UserInputError("--examples", f"the split(s) {splits} hold no examples to send")
    encoded = [base64.b64encode(r).decode("ascii") for r in records]

    def batch(i: int) -> list[str]:
        return [encoded[(i * batch_size + j) % len(encoded)] for j in range(batch_size)]

    requests = [[encoded[0]], batch(0)] + [batch(i) for i in range(num_requests)]
    return requests, [encoded[i % len(encoded)] for i in range(write_warmup)]


def run_probe(
    model_path: str,
    requests: list[list[str]],
    warmup: list[str],
    schema: str | None,
    limits: sandbox.Limits,
    work: str,
) -> tuple[dict[str, Any], sandbox.Outcome]:
    """Run the serving probe in the sandbox.

    Args:
      model_path: the SavedModel to load.
      requests: the requests from `probe_requests`.
      warmup: the warm-up records to write and replay.
      schema: the schema that parses examples for a signature taking tensors (None: none).
      limits: the probe's time and memory limits.
      work: a private directory for its files; the warm-up file is written there as WARMUP_FILE.

    Returns:
      (the probe's result JSON, empty when it wrote none; how its process ended).
    """
    spec_path, result_path = (os.path.join(work, n) for n in ("spec.json", "result.json"))
    with open(spec_path, "w", encoding="utf-8") as f:
        json.dump(
            {
                "model": model_path,
                "warmup": WARMUP_REQUESTS,
                "requests": requests,
                "schema": schema,
                "warmup_records": warmup,
                "warmup_file": os.path.join(work, WARMUP_FILE),
            },
            f,
        )
    outcome = sandbox.run(
        "generic_trainer.judge.serving_probe",
        [spec_path, result_path],
        limits,
        work,
        "serving process",
    )
    result: dict[str, Any] = {}
    if os.path.isfile(result_path):
        with open(result_path, encoding="utf-8") as f:
            result = json.load(f)
    return result, outcome
