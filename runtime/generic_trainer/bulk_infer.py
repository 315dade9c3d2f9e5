"""The bulk-infer verb: a model run on every example of the chosen splits, on Apache Beam's
RunInference (TFX's BulkInferrer).

As TFX's BulkInferrer: with `--model-blessing` given, a model the evaluator did not bless infers
nothing (a result, not a failure: exit 0, inferred 0, the reasons logged and in the metadata;
the outputs are published empty); without one the model is used, and a log line says so. The
model's signatures are checked (beam/infer_model.py) before the pipeline starts; the pipeline
(beam/bulk_inference.py) writes TFRecords of PredictionLog, one per example, and, when asked, the
examples with their predictions added as features (TFX's output_examples). Both outputs are
written to staging dirs beside them and renamed into place once the pipeline succeeded, the
output examples first, the inference result last.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from generic_trainer.artifacts.staged import StagedDir
from generic_trainer.beam import beam_run
from generic_trainer.beam.bulk_inference import COUNTER_PREFIX, InferencePlan, build, split_sources
from generic_trainer.beam.infer_specs import flag_of
from generic_trainer.errors import UserInputError
from generic_trainer.intake import infer_options, infer_request
from generic_trainer.intake.contract import VerbContract
from generic_trainer.intake.infer_request import BulkInferRequest
from generic_trainer.judge.blessing import read_verdict

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class BulkInferResult:
    """What a bulk-infer run did: the examples inferred per split, or why nothing was."""

    inferred: bool
    reasons: tuple[str, ...] = ()
    counts: Mapping[str, int] = dataclasses.field(default_factory=dict)
    signatures: tuple[str, ...] = ()
    seconds: float = 0.0  # the whole run, TensorFlow's import and the model's check included
    pipeline_seconds: float = 0.0  # the pipeline's run: what examples_per_second divides by

    def summary(self) -> dict[str, Any]:
        """What is printed at the end of the run."""
        if not self.inferred:
            return {"inferred": 0, "reasons": list(self.reasons)}
        total = sum(self.counts.values())
        return {
            "inferred": 1,
            "num_examples": dict(self.counts),
            "signatures": list(self.signatures),
            "seconds": round(self.seconds, 2),
            "examples_per_second": round(total / max(self.pipeline_seconds, 1e-3), 1),
        }


def _not_blessed(request: BulkInferRequest) -> tuple[str, ...]:
    """Why the model may not be used (empty: it may); TFX uses an unblessed-by-default model."""
    if not request.model_blessing:
        log.info("no --model-blessing given: the model is used as it is (as TFX's BulkInferrer)")
        return ()
    blessed, why = read_verdict(request.model_blessing, "model", "--model-blessing")
    if blessed:
        log.info("the evaluator blessed the model (%s)", request.model_blessing)
        return ()
    detail = f": {'; '.join(why)}" if why else ""
    return (
        f"the evaluator did not bless the model ({request.model_blessing}: NOT_BLESSED{detail})",
    )


def _outputs(request: BulkInferRequest) -> list[tuple[str, str]]:
    """(path, flag) of each output asked for, the inference result last (published last)."""
    both = [
        (request.output_examples, "--output-examples"),
        (request.inference_result, "--inference-result"),
    ]
    return [(path, flag) for path, flag in both if path]


def run(
    request: BulkInferRequest, before_publish: Callable[[BulkInferResult], None] | None = None
) -> BulkInferResult:
    """Infer, holding the outputs for the run (a second run into them fails at once, exit 2);
    `before_publish(result)` runs once they are staged, before they are published."""
    from generic_trainer.artifacts import outputs

    held = _outputs(request)
    with outputs.exclusive_all(held, new=tuple(flag for _, flag in held)):
        reasons = _not_blessed(request)
        if reasons:
            return _publish_empty(request, reasons, before_publish)
        return _infer(request, before_publish)


def _publish_empty(
    request: BulkInferRequest,
    reasons: tuple[str, ...],
    before_publish: Callable[[BulkInferResult], None] | None,
) -> BulkInferResult:
    result = BulkInferResult(inferred=False, reasons=reasons)
    with contextlib.ExitStack() as stack:
        stages = [stack.enter_context(StagedDir(path)) for path, _ in _outputs(request)]
        if before_publish is not None:
            before_publish(result)
        for stage in stages:
            stage.publish()
    log.warning("nothing inferred: %s", "; ".join(reasons))
    return result


def _plan(request: BulkInferRequest) -> InferencePlan:
    """The model's signatures checked, the output columns, every split's files: the pipeline's
    plan."""
    from generic_trainer.beam import infer_model

    signatures = infer_model.read_signatures(request.model, request.model_spec)
    columns = (
        infer_model.output_columns(request.output_example_spec, signatures)
        if request.output_examples
        else ()
    )
    for c in columns:
        log.info("output examples: signature %s adds %s", c.signature_name, ", ".join(c.names()))
    return InferencePlan(
        sources=split_sources(
            request.examples, request.examples_uri, request.data_splits, request.split_files
        ),
        model_path=request.model_uri,
        signature_names=tuple(s.name for s in signatures),
        tags=request.model_spec.tags,
        columns=columns,
        local=request.local_runner,
    )


def _infer(
    request: BulkInferRequest, before_publish: Callable[[BulkInferResult], None] | None
) -> BulkInferResult:
    started = time.monotonic()
    plan = _plan(request)
    files = [f for source in plan.sources.values() for f, _ in source.files]
    options = beam_run.pipeline_options(request.beam_args, beam_run.total_bytes(files))
    log.info(
        "bulk-infer: %s on splits %s (%d files); beam %s",
        ",".join(plan.signature_names),
        ",".join(plan.sources),
        len(files),
        beam_run.describe_options(options),
    )
    with contextlib.ExitStack() as stack:
        result_stage = (
            stack.enter_context(StagedDir(request.inference_result))
            if request.inference_result
            else None
        )
        examples_stage = (
            stack.enter_context(StagedDir(request.output_examples))
            if request.output_examples
            else None
        )
        piped = time.monotonic()
        counts = _run_pipeline(
            plan,
            options,
            result_stage.path if result_stage else None,
            examples_stage.path if examples_stage else None,
        )
        now = time.monotonic()
        result = BulkInferResult(
            True, (), counts, plan.signature_names, now - started, pipeline_seconds=now - piped
        )
        if before_publish is not None:
            before_publish(result)
        for stage in (examples_stage, result_stage):
            if stage is not None:
                stage.publish()
    log.info(
        "bulk-infer: %s examples in %.1f s (the pipeline %.1f s, %s examples/s)",
        dict(result.counts),
        result.seconds,
        result.pipeline_seconds,
        result.summary()["examples_per_second"],
    )
    return result


def _run_pipeline(
    plan: InferencePlan,
    options: Any,
    result_dir: str | None,
    examples_dir: str | None,
) -> dict[str, int]:
    """Run the pipeline; the examples inferred per split. A DataError (examples the model cannot
    parse, a column the examples have already) is a UserInputError naming its input."""
    import apache_beam as beam

    pipeline = beam.Pipeline(options=options)
    build(pipeline, plan, result_dir, examples_dir)
    try:
        counters = beam_run.run(pipeline)
    except Exception as e:
        message = beam_run.data_error_message(e)
        if message:
            raise UserInputError(*flag_of(message)) from None
        raise
    return beam_run.split_counts(counters, COUNTER_PREFIX, list(plan.sources))


def kfp_metadata(result: BulkInferResult) -> dict[str, dict[str, Any]]:
    """Executor-output metadata of the inference_result and output_examples artifacts."""
    if not result.inferred:
        reasons = "; ".join(result.reasons)
        return {
            "inference_result": {"inferred": 0, "reasons": reasons},
            "output_examples": {"split_names": [], "reasons": reasons},
        }
    counts = dict(result.counts)
    per_split = {f"num_examples_{split}": n for split, n in counts.items()}
    return {
        "inference_result": {
            "inferred": 1,
            "split_names": list(counts),
            "num_examples": counts,
            "signatures": list(result.signatures),
        },
        "output_examples": {"split_names": list(counts), "num_examples": counts, **per_split},
    }


VERB: VerbContract[BulkInferRequest, BulkInferResult] = VerbContract(
    infer_options.BULK_INFER,
    infer_request.build_bulk_infer_request,
    infer_request.describe,
    run,
    lambda request, result: (kfp_metadata(result), None),
    lambda result: result.summary(),
)
