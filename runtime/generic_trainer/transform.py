"""The transform verb: a module's `preprocessing_fn` through tensorflow-transform on Apache Beam
(TFX Transform).

Writes what TFX's Transform writes, so `tft.TFTransformOutput`, TFX modules and
`train --transform-graph` read it as they read TFX's:

    <transform-graph>/transform_fn/            the transform SavedModel (vocabularies in its assets)
    <transform-graph>/transformed_metadata/    schema of the transformed features
    <transform-graph>/metadata/                schema of the raw features (raw_feature_spec needs
    it) <transformed-examples>/Split-<name>/transformed_examples-NNNNN-of-MMMMM.gz   (when asked)
    <updated-analyzer-cache>/<dataset key>/    tf.Transform's analyzer cache (when asked)

As TFX: `custom_config` is bound to preprocessing_fn when it takes it; the `train` split is
analyzed and every split transformed unless asked otherwise; several Examples dirs (spans) are
analyzed together, and with an earlier run's analyzer cache the spans it saw are not analyzed
again (beam/tft_cache.py). The module loads as train's does (gs://, files beside it,
--module-sha256). The analyze splits are read once for the analyzers and the transform splits
once more to transform them (beam/tft_pipeline.py). Outputs go to staging dirs, renamed into place
on success. The caller decides TF_USE_LEGACY_KERAS before this module is imported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import logging
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any

from generic_trainer.artifacts.staged import StagedDir
from generic_trainer.beam import beam_run, tft_pipeline
from generic_trainer.errors import UserCodeError, UserInputError
from generic_trainer.fit import user_code, user_module
from generic_trainer.intake import transform_options, transform_request
from generic_trainer.intake.contract import VerbContract
from generic_trainer.intake.transform_request import TransformRequest

log = logging.getLogger(__name__)

STATS_FN = "stats_options_updater_fn"  # TFX's Transform calls it for its statistics


@dataclasses.dataclass(frozen=True)
class TransformResult:
    """What a transform run wrote."""

    transform_graph: str
    transformed_examples: str | None
    counts: Mapping[str, int]
    raw_feature_count: int
    feature_count: int
    seconds: float
    analyzer_cache: Mapping[str, Any] | None = None  # dataset_keys, cached_datasets

    def summary(self) -> dict[str, Any]:
        return {
            "transform_graph": self.transform_graph,
            "transformed_examples": self.transformed_examples,
            "num_examples": dict(self.counts),
            "raw_feature_count": self.raw_feature_count,
            "feature_count": self.feature_count,
            "seconds": round(self.seconds, 2),
            **({"analyzer_cache": dict(self.analyzer_cache)} if self.analyzer_cache else {}),
        }


class _GuardedFn:
    """The user's preprocessing_fn, remembering the first exception it raised (tf.Transform traces
    it)."""

    def __init__(self, fn: Callable, name: str):
        self.fn, self.name, self.error = fn, name, None

    def __call__(self, inputs: Any) -> Any:
        # the raw exception goes on through tf.Transform; user_code maps it once the pipeline
        # stopped
        try:
            outputs = user_code.call_raw(self.fn, inputs, what=self.name)
        except BaseException as e:  # sys.exit() too: never an ending of the process
            if self.error is None:
                self.error = e
            raise
        if not isinstance(outputs, dict) or not outputs:
            self.error = self.error or TypeError(
                f"{self.name} must return a non-empty dict of tensors, got {type(outputs).__name__}"
            )
            raise self.error
        return outputs


def _load_fn(request: TransformRequest, download_dir: str) -> _GuardedFn:
    """preprocessing_fn, with custom_config bound when it takes one (as TFX's Transform binds
    it)."""
    module = user_module.load_user_module(
        request.module_file, download_dir, request.module_sha256, request.storage
    )
    fn = user_module.get_function(module, request.preprocessing_fn, "--preprocessing-fn")
    user_module.pickle_by_value(module)  # Beam's multi_processing workers need not import it
    if _takes_custom_config(fn):
        log.info(
            "transform: %s takes custom_config: bound to --custom-config (%d keys)",
            request.preprocessing_fn,
            len(request.custom_config),
        )
        fn = functools.partial(fn, custom_config=dict(request.custom_config))
    elif request.custom_config:
        log.warning(
            "transform: %s takes no custom_config argument: --custom-config is not passed to it",
            request.preprocessing_fn,
        )
    if callable(getattr(module, STATS_FN, None)):
        log.info(
            "transform: the module's %s is not called: transform computes no statistics "
            "(TFX's pre- and post-transform statistics are not written)",
            STATS_FN,
        )
    return _GuardedFn(fn, request.preprocessing_fn)


def _takes_custom_config(fn: Callable) -> bool:
    try:
        return "custom_config" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _user_error(guarded: _GuardedFn) -> BaseException:
    return user_code.error_for(guarded.error, guarded.name)


def run(
    request: TransformRequest, before_publish: Callable[[TransformResult], None] | None = None
) -> TransformResult:
    """Analyze, write the transform graph, the transformed examples and the analyzer cache (when
    asked). Its outputs are held for the run: a second run into them fails at once (exit 2) naming
    this one. `before_publish(result)` runs once all are staged, before they are published."""
    from generic_trainer.artifacts import outputs

    held = [
        (request.transform_graph, "--transform-graph"),
        (request.transformed_examples, "--transformed-examples"),
        (request.updated_analyzer_cache, "--updated-analyzer-cache"),
    ]
    with outputs.exclusive_all(held, new=tuple(flag for _, flag in held)):
        result = _transform(request, before_publish)
        if request.records_dir and request.updated_analyzer_cache:  # for a later run's resolve
            from generic_trainer.artifacts.storage import local_path
            from generic_trainer.tfx_kfp import model_records

            cache = local_path(request.updated_analyzer_cache, request.gcs_root)  # not gs://
            model_records.record_artifact(request.records_dir, "TransformCache", cache)
        return result


def _transform(
    request: TransformRequest, before_publish: Callable[[TransformResult], None] | None
) -> TransformResult:
    from generic_trainer.records.schemas import load_schema

    started = time.monotonic()
    schema = load_schema(request.schema)
    plan, split_dirs = tft_pipeline.make_plan(
        schema,
        request.example_dirs(),
        request.split_files,
        request.analyze_splits,
        request.transform_splits if request.transformed_examples else None,
        request.analyzer_cache,
        request.gcs_root,
    )
    finals = (request.transform_graph, request.transformed_examples, request.updated_analyzer_cache)
    with tempfile.TemporaryDirectory(prefix="transform-module-") as download_dir:
        guarded = _load_fn(request, download_dir)
        input_files = [e.path for d in split_dirs for e in os.scandir(d) if e.is_file()]
        options = beam_run.pipeline_options(request.beam_args, beam_run.total_bytes(input_files))
        _log_start(request, plan, len(schema.feature), options)
        with contextlib.ExitStack() as stack:
            stages = [stack.enter_context(StagedDir(f)) if f else None for f in finals]
            paths = [stage.path if stage else None for stage in stages]
            plan = dataclasses.replace(
                plan, graph_dir=paths[0], examples_dir=paths[1], cache_out=paths[2]
            )
            counters, cache_info = _run_guarded(guarded, options, plan)
            result = TransformResult(
                transform_graph=request.transform_graph,
                transformed_examples=request.transformed_examples,
                counts=beam_run.split_counts(
                    counters, tft_pipeline.COUNTER_PREFIX, tuple(plan.transform)
                ),
                raw_feature_count=len(schema.feature),
                feature_count=len(tft_pipeline.transformed_schema(paths[0]).feature),
                seconds=time.monotonic() - started,
                analyzer_cache=cache_info,
            )
            if before_publish is not None:
                before_publish(result)
            for stage in (stages[1], stages[2], stages[0]):  # the transform graph last
                if stage is not None:
                    stage.publish()
    _log_end(request, result)
    return result


def _log_start(
    request: TransformRequest, plan: tft_pipeline.Plan, features: int, options: Any
) -> None:
    log.info(
        "transform: analyze %s of %d Examples dir(s), transform %s, %d raw features%s; beam %s",
        ",".join(request.analyze_splits),
        len(request.example_dirs()),
        ",".join(plan.transform) if request.transformed_examples else "(no examples written)",
        features,
        f"; analyzer cache from {request.analyzer_cache}" if request.analyzer_cache else "",
        beam_run.describe_options(options),
    )


def _log_end(request: TransformRequest, result: TransformResult) -> None:
    counts = result.counts
    log.info(
        "transform: wrote the transform graph to %s (%d features)%s%s in %.1f s",
        request.transform_graph,
        result.feature_count,
        f" and {', '.join(f'{n} {s}' for s, n in counts.items())} transformed examples "
        f"to {request.transformed_examples}"
        if counts
        else "",
        f", the analyzer cache to {request.updated_analyzer_cache}"
        if request.updated_analyzer_cache
        else "",
        result.seconds,
    )


def _run_guarded(guarded: _GuardedFn, options: Any, plan: tft_pipeline.Plan) -> tuple[Any, Any]:
    """Run the pipeline in a tf.Transform context; an error of preprocessing_fn is the user's (exit
    3).

    Returns:
      The Beam counters and the analyzer cache's summary (None without a cache).
    """
    import apache_beam as beam
    import tensorflow_transform.beam as tft_beam

    pipeline = beam.Pipeline(options=options)
    temp_dir = beam_run.join(plan.graph_dir, ".temp_path")
    try:
        with tft_beam.Context(temp_dir=temp_dir):
            cache_info = tft_pipeline.build(pipeline, plan, guarded)
            counters = beam_run.run(pipeline)
    except (UserInputError, UserCodeError):
        raise
    except BaseException:  # what preprocessing_fn raised, as tf.Transform or Beam passed it on
        if guarded.error is not None:
            raise _user_error(guarded) from None
        raise
    if guarded.error is not None:
        raise _user_error(guarded)
    beam_run.discard(temp_dir)
    return counters, cache_info


def kfp_metadata(request: TransformRequest, result: TransformResult) -> dict[str, dict[str, Any]]:
    """Executor-output metadata of the transform_graph and transformed_examples artifacts."""
    graph = {
        "analyze_splits": list(request.analyze_splits),
        "feature_count": result.feature_count,
        "raw_feature_count": result.raw_feature_count,
        "preprocessing_fn": request.preprocessing_fn,
    }
    examples: dict[str, Any] = {
        "split_names": list(result.counts),
        "num_examples": dict(result.counts),
        "feature_count": result.feature_count,
    }
    for split, n in result.counts.items():
        examples[f"num_examples_{split}"] = n
    cache = dict(result.analyzer_cache or {})
    return {
        "transform_graph": graph,
        "transformed_examples": examples,
        "updated_analyzer_cache": cache,
    }


VERB: VerbContract[TransformRequest, TransformResult] = VerbContract(
    transform_options.TRANSFORM,
    transform_request.build_transform_request,
    transform_request.describe_transform,
    run,
    lambda request, result: (kfp_metadata(request, result), None),
    lambda result: result.summary(),
)
