"""The `infra-validate` verb: try the model in a sandboxed serving process before it ships (TFX
InfraValidator).

The examples become requests sent to `serving_default` by a probe process in a sandbox
(judge/infra_probe.py: time limit, memory limit, CPU), and what it saw becomes the verdict
(judge/infra_verdict.py): INFRA_BLESSED, or INFRA_NOT_BLESSED with the reasons. A model its requests
cannot reach gets a verdict too, as TFX's InfraValidator gives it, so a pipeline's `dsl.If` skips
the push. With `--model-blessing`, a model the evaluator did not bless is INFRA_NOT_BLESSED without
being loaded. Latency is the wall time of each `serving_default` call inside the probe (p50 and p99
of the timed requests). A broken model is a result, not a failure: the verb exits 0.

With `--write-warmup N`, the probe also writes N TF Serving warm-up requests (one eval example each,
as a `PredictionLog` of a PredictRequest in the signature's input form) and replays them; when the
model is INFRA_BLESSED they are published into the model's `assets.extra/tf_serving_warmup_requests`
(a temporary file beside it, renamed into place: the file appears whole or not at all), before the
blessing is written.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from generic_trainer.artifacts import files, outputs
from generic_trainer.errors import OutputError
from generic_trainer.intake import judge_options, output_checks
from generic_trainer.intake.contract import KfpOutputValues, VerbContract
from generic_trainer.intake.judge_request import InfraValidateRequest, build_infra_validate_request
from generic_trainer.judge import infra_probe, infra_verdict, sandbox
from generic_trainer.judge.blessing import (
    INFRA_BLESSED_FILE,
    INFRA_NOT_BLESSED_FILE,
    NOT_BLESSED_FILE,
    read_verdict,
    write_blessing,
)
from generic_trainer.judge.infra_verdict import InfraValidateResult
from generic_trainer.records import schemas

log = logging.getLogger(__name__)

WARMUP_DIR = "assets.extra"  # TF Serving's place for the warm-up file, inside the SavedModel


def probe_limits(request: InfraValidateRequest) -> sandbox.Limits:
    """The serving process's limits: --timeout in total, --memory-limit, on CPU."""
    return sandbox.Limits(timeout=request.timeout, memory_limit=request.memory_limit)


def run(
    request: InfraValidateRequest,
    before_publish: Callable[[InfraValidateResult], None] | None = None,
) -> InfraValidateResult:
    """Validate the model in a sandboxed serving process.

    Writes the metrics file, calls `before_publish(result)`, then writes the blessing.

    Args:
      request: the checked request.
      before_publish: called with the result before the blessing is written.

    Returns:
      The verdict and what the probe saw.
    """
    started = time.monotonic()
    model_path = outputs.serving_model_path(request.model)
    result = _not_blessed_by_evaluator(request) or _no_saved_model(request, model_path)
    if result is None:
        result = _probe(request, model_path)
    return _finish(request, result, started, before_publish)


def _not_blessed_by_evaluator(request: InfraValidateRequest) -> InfraValidateResult | None:
    """The verdict for a model the evaluator did not bless (None: blessed, or not asked)."""
    if not request.model_blessing:
        return None
    evaluator_blessed, why = read_verdict(request.model_blessing, "model", "--model-blessing")
    if evaluator_blessed:
        log.info("the evaluator blessed the model (%s)", request.model_blessing)
        return None
    return InfraValidateResult(
        blessed=False,
        reasons=[
            f"the evaluator did not bless the model ({request.model_blessing}: "
            f"{NOT_BLESSED_FILE}" + (f": {'; '.join(why)}" if why else "") + "); it was not loaded"
        ],
        batch_size=request.batch_size,
    )


def _no_saved_model(request: InfraValidateRequest, model_path: str) -> InfraValidateResult | None:
    """The verdict for a model directory without a SavedModel (None: it has one)."""
    if any(
        os.path.isfile(os.path.join(model_path, f)) for f in ("saved_model.pb", "saved_model.pbtxt")
    ):
        return None
    return InfraValidateResult(
        blessed=False,
        batch_size=request.batch_size,
        reasons=[
            f"{model_path} holds no SavedModel (saved_model.pb): nothing a serving system "
            "could load"
        ],
    )


def _probe(request: InfraValidateRequest, model_path: str) -> InfraValidateResult:
    """Send the requests through the probe, judge them, and publish the warm-up file if blessed."""
    if request.schema:
        schemas.load_schema(request.schema)  # a broken schema is an input error before the load
    warmup_target = os.path.join(model_path, WARMUP_DIR, infra_probe.WARMUP_FILE)
    if request.write_warmup:
        output_checks.check_writable("--write-warmup", warmup_target, "file")
    requests, warmup = infra_probe.probe_requests(
        request.eval_files,
        request.batch_size,
        request.num_requests,
        request.write_warmup,
    )
    log.info(
        "sending %d warm-up + %d requests of %d tf.Examples to %s",
        infra_probe.WARMUP_REQUESTS,
        request.num_requests,
        request.batch_size,
        model_path,
    )
    limits = probe_limits(request)
    work = tempfile.mkdtemp(prefix="infra-validate-")
    try:
        probe, outcome = infra_probe.run_probe(
            model_path, requests, warmup, request.schema, limits, work
        )
        if outcome.tail:
            log.debug("serving process output:\n%s", outcome.tail)
        if probe.get("feed"):
            log.info("serving_default takes %s", probe["feed"])
        result = infra_verdict.judge(
            probe,
            outcome,
            limits,
            batch_size=request.batch_size,
            num_requests=request.num_requests,
            write_warmup=request.write_warmup,
        )
        if result.blessed and request.write_warmup:
            publish_warmup(os.path.join(work, infra_probe.WARMUP_FILE), warmup_target)
            result.warmup_file = warmup_target
            log.info(
                "wrote %d TF Serving warm-up requests (one eval example each) to %s",
                result.warmup_requests,
                warmup_target,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


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
        f"splits={','.join(r.eval_splits)} model_blessing={r.model_blessing} "
        f"blessing_dir={r.blessing_dir} requests={r.num_requests:d} x {r.batch_size:d} examples "
        f"timeout={r.timeout:g}s memory_limit={r.memory_limit or 'none'} schema={r.schema} "
        f"write_warmup={r.write_warmup:d}"
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
