"""The `infra-validate` verb: try the model in a sandboxed serving process before it ships (TFX
InfraValidator).

This process never loads the model (nor TensorFlow). It reads `num_requests` x `batch_size`
serialized tf.Examples from the examples (plain Python, cycling when there are fewer), and starts
`python -m generic_trainer.judge.serving_probe` in sandbox.py's sandbox (a new session): the probe
limits its own address space (RLIMIT_AS; it runs on CPU, since GPU drivers reserve more than any
sensible limit), loads the SavedModel and sends a warm-up request, then the timed requests, to
`serving_default`, in the signature's own input form (signature_feed.py: serialized tf.Examples, or
tensors parsed from them through the schema). The probe is killed, with its whole process group,
when it runs past the time limit.

The model is INFRA_BLESSED when the probe loaded it and every request succeeded with exactly the
output keys the signature declares, each with the declared dtype, rank and fixed dimensions and one
row per example. Otherwise it is INFRA_NOT_BLESSED with the reason (time limit, memory, a load
error, a failing request, a wrong shape, a serving input no feature of the examples can feed: TFX's
InfraValidator gives a model its requests cannot reach a verdict too, so a pipeline's `dsl.If` skips
the push). With `--model-blessing`, a model the evaluator did not bless is INFRA_NOT_BLESSED without
being loaded. Latency is the wall time of each `serving_default` call inside the probe (p50 and p99
of the timed requests). A broken model is a result, not a failure: the verb exits 0.

With `--write-warmup N`, the probe also writes N TF Serving warm-up requests (one eval example each,
as a `PredictionLog` of a PredictRequest in the signature's input form) and replays them; when the
model is INFRA_BLESSED they are published into the model's `assets.extra/tf_serving_warmup_requests`
(a temporary file beside it, renamed into place: the file appears whole or not at all), before the
blessing is written.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import math
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from generic_trainer.artifacts import files, outputs
from generic_trainer.errors import OutputError, UserInputError
from generic_trainer.intake import judge_options, output_checks
from generic_trainer.intake.contract import KfpOutputValues, VerbContract
from generic_trainer.intake.judge_request import InfraValidateRequest, build_infra_validate_request
from generic_trainer.judge import sandbox
from generic_trainer.judge import sandbox_outcome as outcomes
from generic_trainer.judge.blessing import (
    INFRA_BLESSED_FILE,
    INFRA_NOT_BLESSED_FILE,
    NOT_BLESSED_FILE,
    read_verdict,
    write_blessing,
)
from generic_trainer.records import example_files, schemas

log = logging.getLogger(__name__)

WARMUP_DIR = "assets.extra"  # TF Serving's place for the warm-up file, inside the SavedModel
WARMUP_FILE = "tf_serving_warmup_requests"
MAX_REASONS = 5


@dataclasses.dataclass
class InfraValidateResult:
    """The verdict, and what the probe saw: load time, per-request latency, the signature."""

    blessed: bool
    reasons: list[str]
    load_seconds: float | None = None
    latencies_ms: list[float] = dataclasses.field(default_factory=list)
    requests_sent: int = 0
    requests_failed: int = 0
    batch_size: int = 0
    signature: dict[str, Any] = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    warmup_file: str | None = None  # where the warm-up requests were published
    warmup_requests: int = 0

    def percentile(self, p: float) -> float | None:
        """Nearest-rank percentile of the timed requests' latency (ms)."""
        if not self.latencies_ms:
            return None
        ordered = sorted(self.latencies_ms)
        return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]

    def metrics(self) -> dict[str, float]:
        values = {
            "blessed": float(self.blessed),
            "requests": float(self.requests_sent),
            "failed_requests": float(self.requests_failed),
            "examples_per_request": float(self.batch_size),
            "load_seconds": self.load_seconds,
            "p50_latency_ms": self.percentile(50),
            "p99_latency_ms": self.percentile(99),
            "warmup_requests": float(self.warmup_requests) if self.warmup_file else None,
        }
        return {k: v for k, v in values.items() if v is not None}

    def summary(self) -> dict[str, Any]:
        return {"blessed": self.blessed, "reasons": self.reasons, "metrics": self.metrics()}


def read_records(examples: str, splits: Sequence[str], limit: int) -> list[bytes]:
    """Up to `limit` serialized records of the splits' TFRecord files, in file order (no
    TensorFlow)."""
    patterns = example_files.split_file_patterns(examples, splits)
    example_files.check_readable(patterns)
    records: list[bytes] = []
    for path in (f for p in patterns for f in example_files.split_files(p)):
        records += example_files.read_records(
            path, limit - len(records), damaged_input="--examples"
        )
        if len(records) >= limit:
            break
    return records


WARMUP_REQUESTS = 2


def _encoded_records(request: InfraValidateRequest) -> list[str]:
    """The examples the requests (and warm-up records) are made of, base64-encoded."""
    limit = max(request.num_requests * request.batch_size, request.write_warmup)
    records = read_records(request.examples, request.eval_splits, limit)
    if not records:
        raise UserInputError(
            "--examples", f"the split(s) {', '.join(request.eval_splits)} hold no examples to send"
        )
    return [base64.b64encode(r).decode("ascii") for r in records]


def _requests(request: InfraValidateRequest, encoded: list[str]) -> list[list[str]]:
    """Two warm-up requests (1 and batch_size examples), then num_requests batches of the `encoded`
    records.

    Short data is cycled. The warm-ups are checked like the others but not timed: the first calls of
    a signature build its kernels.
    """

    def batch(i: int) -> list[str]:
        return [
            encoded[(i * request.batch_size + j) % len(encoded)] for j in range(request.batch_size)
        ]

    return [[encoded[0]], batch(0)] + [batch(i) for i in range(request.num_requests)]


def probe_limits(request: InfraValidateRequest) -> sandbox.Limits:
    """The serving process's limits: --timeout in total, --memory-limit, on CPU."""
    return sandbox.Limits(timeout=request.timeout, memory_limit=request.memory_limit)


def _run_probe(
    request: InfraValidateRequest,
    model_path: str,
    batches: list[list[str]],
    warmup: list[str],
    work: str,
) -> tuple[dict[str, Any], sandbox.Outcome]:
    """Run the probe in the sandbox (its files in `work`); returns (its result JSON, how it
    ended)."""
    spec_path, result_path = (os.path.join(work, n) for n in ("spec.json", "result.json"))
    with open(spec_path, "w", encoding="utf-8") as f:
        json.dump(
            {
                "model": model_path,
                "warmup": WARMUP_REQUESTS,
                "requests": batches,
                "schema": request.schema,
                "warmup_records": warmup,
                "warmup_file": os.path.join(work, WARMUP_FILE),
            },
            f,
        )
    outcome = sandbox.run(
        "generic_trainer.judge.serving_probe",
        [spec_path, result_path],
        probe_limits(request),
        work,
        "serving process",
    )
    result: dict[str, Any] = {}
    if os.path.isfile(result_path):
        with open(result_path, encoding="utf-8") as f:
            result = json.load(f)
    return result, outcome


def _shape_problem(
    name: str, declared: dict[str, Any], got: dict[str, Any], size: int
) -> str | None:
    if got["dtype"] != declared["dtype"]:
        return f"output {name!r} is {got['dtype']}, the signature declares {declared['dtype']}"
    shape, want = got["shape"], declared["shape"]
    if not shape or shape[0] != size:
        return (
            f"output {name!r} has shape {shape} for {size} examples; expected one row per example"
        )
    if want is not None:
        if len(want) != len(shape) or any(
            w is not None and w != s for w, s in zip(want, shape, strict=True)
        ):
            return f"output {name!r} has shape {shape}; the signature declares {want}"
    return None


def _judge_requests(
    verdict: InfraValidateResult,
    entries: list[dict[str, Any]],
    declared: dict[str, Any],
    limits: sandbox.Limits,
) -> None:
    """Count the requests the probe sent, their latency, and one reason per kind of failure into
    `verdict`."""
    failures: dict[str, list[str]] = {}  # problem -> the requests that had it
    warmups = 0
    for entry in entries:
        size = f"{entry['size']} example{'s' if entry['size'] != 1 else ''}"
        if entry.get("warmup"):
            warmups += 1
            label = f"warm-up request {warmups} ({size})"
        else:
            verdict.requests_sent += 1
            label = f"request {verdict.requests_sent} ({size})"
        problems = []
        if not entry.get("ok"):
            error = entry.get("error") or ""
            if outcomes.is_memory_error(error):
                error = (
                    f"out of memory (memory limit {outcomes.size_text(limits.memory_limit)}; raise "
                    "--memory-limit "
                    f"if the model needs more): {error}"
                )
            problems.append(f"failed: {error}")
        else:
            got = entry.get("outputs") or {}
            if sorted(got) != sorted(declared):
                problems.append(
                    f"returned outputs {sorted(got)}, the signature declares {sorted(declared)}"
                )
            for name in sorted(set(got) & set(declared)):
                problem = _shape_problem(name, declared[name], got[name], entry["size"])
                if problem:
                    problems.append(problem)
        if problems:
            verdict.requests_failed += not entry.get("warmup")
            failures.setdefault("; ".join(problems), []).append(label)
        elif not entry.get("warmup"):
            verdict.latencies_ms.append(entry["seconds"] * 1000.0)
    for problem, labels in failures.items():
        others = (
            f" and {len(labels) - 1} more request{'s' if len(labels) > 2 else ''}"
            if len(labels) > 1
            else ""
        )
        verdict.reasons.append(f"{labels[0]}{others}: {problem}")


def _judge(
    request: InfraValidateRequest, result: dict[str, Any], outcome: sandbox.Outcome
) -> InfraValidateResult:
    verdict = InfraValidateResult(
        blessed=False,
        reasons=[],
        batch_size=request.batch_size,
        load_seconds=result.get("load_seconds"),
        signature={k: result[k] for k in ("inputs", "outputs") if k in result},
    )
    limits = probe_limits(request)
    stage = result.get("finished") or result.get("stage") or "starting"
    if outcome.code != 0 or outcome.timed_out or result.get("stage") != "done":
        if outcome.code == 0 and not outcome.timed_out:  # exited without finishing its result
            outcome = dataclasses.replace(outcome, code=None)
        verdict.reasons.append(
            outcomes.failure(outcome, limits, stage) or f"the serving process stopped while {stage}"
        )
    elif result.get("error"):
        error = result["error"]
        if outcomes.is_memory_error(error):
            error = outcomes.memory_reason(stage, limits, error)
        verdict.reasons.append(error)
    elif result.get(
        "input_error"
    ):  # the examples cannot feed serving_default: a verdict, not a failed run
        verdict.reasons.append(
            f"{result['input_error']['input']}: {result['input_error']['message']}"
        )
    declared = result.get("outputs") or {}
    _judge_requests(verdict, result.get("requests") or [], declared, limits)
    if not verdict.reasons and not declared:
        verdict.reasons.append("serving_default declares no outputs")
    if not verdict.reasons and verdict.requests_sent < request.num_requests:
        verdict.reasons.append(
            f"only {verdict.requests_sent} of {request.num_requests} requests were answered"
        )
    if not verdict.reasons and request.write_warmup:
        if result.get("warmup_error"):
            verdict.reasons.append(result["warmup_error"])
        else:
            verdict.warmup_requests = result.get("warmup_written") or 0
            if verdict.warmup_requests != request.write_warmup:
                verdict.reasons.append(
                    f"only {verdict.warmup_requests} of {request.write_warmup} warm-up requests "
                    "were written and replayed"
                )
    if len(verdict.reasons) > MAX_REASONS:
        more = len(verdict.reasons) - MAX_REASONS
        verdict.reasons = verdict.reasons[:MAX_REASONS] + [f"... and {more} more"]
    verdict.blessed = not verdict.reasons
    return verdict


def run(
    request: InfraValidateRequest,
    before_publish: Callable[[InfraValidateResult], None] | None = None,
) -> InfraValidateResult:
    """Validate the model in a sandboxed serving process; write the metrics file, call
    `before_publish(result)`,
    then write the blessing."""
    started = time.monotonic()
    if request.model_blessing:
        evaluator_blessed, why = read_verdict(request.model_blessing, "model", "--model-blessing")
        if not evaluator_blessed:
            result = InfraValidateResult(
                blessed=False,
                reasons=[
                    f"the evaluator did not bless the model ({request.model_blessing}: "
                    f"{NOT_BLESSED_FILE}"
                    + (f": {'; '.join(why)}" if why else "")
                    + "); it was not loaded"
                ],
                batch_size=request.batch_size,
            )
            return _finish(request, result, started, before_publish)
        log.info("the evaluator blessed the model (%s)", request.model_blessing)
    model_path = outputs.serving_model_path(request.model)
    if not any(
        os.path.isfile(os.path.join(model_path, f)) for f in ("saved_model.pb", "saved_model.pbtxt")
    ):
        result = InfraValidateResult(
            blessed=False,
            batch_size=request.batch_size,
            reasons=[
                f"{model_path} holds no SavedModel (saved_model.pb): nothing a serving system "
                "could load"
            ],
        )
        return _finish(request, result, started, before_publish)
    if request.schema:
        schemas.load_schema(
            request.schema
        )  # a broken schema is an input error before the model loads
    warmup_target = os.path.join(model_path, WARMUP_DIR, WARMUP_FILE)
    if request.write_warmup:
        output_checks.check_writable("--write-warmup", warmup_target, "file")
    encoded = _encoded_records(request)
    batches = _requests(request, encoded)
    warmup = [encoded[i % len(encoded)] for i in range(request.write_warmup)]
    log.info(
        "sending %d warm-up + %d requests of %d tf.Examples to %s",
        WARMUP_REQUESTS,
        request.num_requests,
        request.batch_size,
        model_path,
    )
    work = tempfile.mkdtemp(prefix="infra-validate-")
    try:
        probe, outcome = _run_probe(request, model_path, batches, warmup, work)
        if outcome.tail:
            log.debug("serving process output:\n%s", outcome.tail)
        if probe.get("feed"):
            log.info("serving_default takes %s", probe["feed"])
        result = _judge(request, probe, outcome)
        if result.blessed and request.write_warmup:
            publish_warmup(os.path.join(work, WARMUP_FILE), warmup_target)
            result.warmup_file = warmup_target
            log.info(
                "wrote %d TF Serving warm-up requests (one eval example each) to %s",
                result.warmup_requests,
                warmup_target,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return _finish(request, result, started, before_publish)


def publish_warmup(source: str, target: str) -> None:
    """Copy the warm-up file into the model: a temporary sibling renamed into place (whole or not at
    all)."""
    if files.not_replaceable(target):
        raise OutputError(f"cannot write the warm-up file: {files.not_replaceable(target)}")
    if os.path.exists(target):
        log.warning("replacing the warm-up file already in the model: %s", target)
    tmp = os.path.join(
        os.path.dirname(target), f".{os.path.basename(target)}.tmp-{uuid.uuid4().hex[:8]}"
    )
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise OutputError(
            f"--write-warmup: could not write the warm-up requests to {target}: {e}"
        ) from e


def _finish(
    request: InfraValidateRequest,
    result: InfraValidateResult,
    started: float,
    before_publish: Callable[[InfraValidateResult], None] | None,
) -> InfraValidateResult:
    result.seconds = time.monotonic() - started
    if result.blessed:
        log.info(
            "INFRA_BLESSED: loaded in %.2f s; %d requests of %d examples, latency p50 %.2f ms, p99 "
            "%.2f ms",
            result.load_seconds or 0.0,
            result.requests_sent,
            result.batch_size,
            result.percentile(50),
            result.percentile(99),
        )
    else:
        log.warning("INFRA_NOT_BLESSED: %s", "; ".join(result.reasons))
    if request.metrics_file:
        body = {
            **result.summary(),
            "latencies_ms": result.latencies_ms,
            "signature": result.signature,
            "warmup_file": result.warmup_file,
        }
        outputs.write_metrics_file(request.metrics_file, body)  # strict JSON: NaN as null
    if before_publish is not None:
        before_publish(result)
    write_blessing(
        request.blessing_dir,
        result.blessed,
        result.reasons,
        INFRA_BLESSED_FILE,
        INFRA_NOT_BLESSED_FILE,
    )
    return result


def kfp_metadata(
    request: InfraValidateRequest, result: InfraValidateResult
) -> dict[str, dict[str, Any]]:
    """Metadata of each KFP output artifact (TFX's InfraBlessing properties: blessed 1|0)."""
    blessing: dict[str, Any] = {
        "blessed": int(result.blessed),
        "current_model": request.model,
        "reasons": "; ".join(result.reasons),
    }
    if result.warmup_file:
        blessing.update(warmup_file=result.warmup_file, warmup_requests=result.warmup_requests)
    blessing.update({k: v for k, v in result.metrics().items() if k.endswith(("_ms", "_seconds"))})
    return {"blessing": blessing, "metrics": result.metrics()}


def kfp_outputs(request: InfraValidateRequest, result: InfraValidateResult) -> KfpOutputValues:
    """The artifacts' metadata and, when the component declares it, the `blessed` output parameter
    (for dsl.If)."""
    blessed = (
        {"blessed": result.blessed} if request.kfp and "blessed" in request.kfp.parameters else None
    )
    return kfp_metadata(request, result), blessed


def describe(r: InfraValidateRequest) -> list[str]:
    """The log lines saying what this validation will do."""
    return [
        f"infra-validate request: model={r.model} examples={r.examples} "
        f"splits={','.join(r.eval_splits)} "
        f"model_blessing={r.model_blessing} blessing_dir={r.blessing_dir} "
        f"requests={r.num_requests:d} x {r.batch_size:d} examples timeout={r.timeout:g}s "
        f"memory_limit={r.memory_limit or 'none'} schema={r.schema} write_warmup={r.write_warmup:d}"
    ]


VERB: VerbContract[InfraValidateRequest, InfraValidateResult] = VerbContract(
    judge_options.INFRA_VALIDATE,
    build_infra_validate_request,
    describe,
    run,
    kfp_outputs,
    lambda result: result.summary(),
    lock_outputs=True,
)
