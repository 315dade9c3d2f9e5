"""Apache Beam for the data verbs (import-examples, transform): options, running, errors,
publishing.

`--beam-pipeline-args` pass through to Beam's `PipelineOptions` unchanged (e.g.
`--runner=DataflowRunner
--project=P --region=R --temp_location=gs://b/tmp`). Without a runner, Beam's DirectRunner runs here
with one worker per CPU core (`--direct_num_workers`) in `DEFAULT_RUNNING_MODE` (bench/README.md
measured the modes); arguments given win over these defaults.

Errors in data that a worker finds (a cell that does not parse) are raised as `DataError`, whose
message carries a marker: whatever way the runner wraps the worker's exception (in-process, another
process, Dataflow), `data_error_message` finds the one-line cause again.

Outputs are written to a staging directory beside the final one and renamed into place when the
pipeline has succeeded, so they appear whole or not at all. Beam is imported inside the functions.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.artifacts import storage
from generic_trainer.errors import UserInputError

BEAM_ARGS_INPUT = "--beam-pipeline-args"
# Below this much input the DirectRunner runs in this process (in_memory, one worker): starting
# worker processes (each imports Beam, and TensorFlow for tf.Transform) costs more than their
# parallelism gains on small data; above it, one worker process per core (multi_processing).
# bench/README.md has the measurements.
SMALL_INPUT_BYTES = 64 << 20
METRICS_NAMESPACE = "generic_trainer"
_MARK = "[generic-trainer data error] "
# Beam re-raises a worker's exception as a new one of its type (adding "[while running ...]"): the
# marker then repeats.
_MARK_RE = re.compile("(?:" + re.escape(_MARK) + r")+([^\n]*)")
_LOCAL_RUNNERS = ("directrunner", "direct", "fnapirunner", "prismrunner", "")


class DataError(ValueError):
    """Bad input data found inside the pipeline; the message names the file, line and column."""

    def __init__(self, message: str):
        super().__init__(_MARK + message)


def parse_beam_args(value: Any) -> tuple[str, ...]:
    """Beam arguments from a flag value (one shell-quoted string, or several) or a KFP list
    parameter."""
    if value is None or value == "" or value == []:
        return ()
    items = [value] if isinstance(value, str) else list(value)
    args: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise UserInputError(
                BEAM_ARGS_INPUT, f"expected strings like '--runner=DataflowRunner', got {item!r}"
            )
        try:
            args.extend(shlex.split(item))
        except ValueError as e:
            raise UserInputError(BEAM_ARGS_INPUT, f"cannot split {item!r}: {e}") from None
    if args and not args[0].startswith("--"):
        raise UserInputError(
            BEAM_ARGS_INPUT, f"{args[0]!r} is not a Beam option (expected --name=value)"
        )
    return tuple(args)


def _given(args: Sequence[str], name: str) -> bool:
    return any(a == f"--{name}" or a.startswith(f"--{name}=") for a in args)


def runner_name(args: Sequence[str]) -> str:
    """The runner the arguments choose ('' for Beam's default, the DirectRunner)."""
    for i, arg in enumerate(args):
        if arg.startswith("--runner="):
            return arg.split("=", 1)[1]
        if arg == "--runner" and i + 1 < len(args):
            return args[i + 1]
    return ""


def is_local_runner(args: Sequence[str]) -> bool:
    """True when the pipeline runs on this machine (so local and /gcs paths work for its I/O)."""
    return runner_name(args).lower() in _LOCAL_RUNNERS


def cpu_count() -> int:
    """CPU cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def pipeline_args(args: Sequence[str], input_bytes: int | None = None) -> list[str]:
    """The arguments given, plus the DirectRunner defaults they do not set.

    Small (or unknown-size) input: `in_memory`, one worker. Input of SMALL_INPUT_BYTES or more:
    `multi_processing` with one worker per core. Given values win.
    """
    full = list(args)
    if not is_local_runner(args):
        return full
    mode = next((a.split("=", 1)[1] for a in args if a.startswith("--direct_running_mode=")), None)
    if mode is None:
        mode = (
            "multi_processing"
            if (input_bytes or 0) >= SMALL_INPUT_BYTES and cpu_count() > 1
            else "in_memory"
        )
        full.append(f"--direct_running_mode={mode}")
    if not _given(args, "direct_num_workers"):
        full.append(f"--direct_num_workers={1 if mode == 'in_memory' else cpu_count()}")
    return full


def pipeline_options(args: Sequence[str], input_bytes: int | None = None) -> Any:
    """Beam PipelineOptions from `args` (see pipeline_args); unknown options are Beam's to judge."""
    from apache_beam.options.pipeline_options import PipelineOptions

    return PipelineOptions(pipeline_args(args, input_bytes))


def in_process_options(args: Sequence[str]) -> Any:
    """PipelineOptions for a pipeline that runs in this process unless `args` say otherwise.

    Without a runner or running mode given, the pipeline runs in_memory on Beam's FnApiRunner,
    named: since Beam 2.68 the DirectRunner first tries Prism, which downloads a binary from GitHub
    at run time (offline it logs the failure and falls back to the FnApiRunner); Beam's advice for
    a pipeline that must run locally is to name the FnApiRunner.
    """
    from apache_beam.options.pipeline_options import PipelineOptions

    full = pipeline_args(args)
    if runner_name(args) == "" and "--direct_running_mode=in_memory" in full:
        full.append("--runner=FnApiRunner")
    return PipelineOptions(full)


def total_bytes(paths: Sequence[str]) -> int | None:
    """Summed size of local files (None when some are not local)."""
    if any("://" in p for p in paths):
        return None
    return sum(os.path.getsize(p) for p in paths if os.path.isfile(p))


def describe_options(options: Any) -> str:
    """The options that matter for a log line: runner, workers, running mode, project, region."""
    from apache_beam.options.pipeline_options import (
        DirectOptions,
        GoogleCloudOptions,
        StandardOptions,
    )

    runner = options.view_as(StandardOptions).runner or "DirectRunner"
    parts = [f"runner={runner}"]
    if runner_name([f"--runner={runner}"]).lower() in _LOCAL_RUNNERS:
        direct = options.view_as(DirectOptions)
        parts += [
            f"direct_num_workers={direct.direct_num_workers}",
            f"direct_running_mode={direct.direct_running_mode}",
        ]
    else:
        gcp = options.view_as(GoogleCloudOptions)
        parts += [
            f"project={gcp.project}",
            f"region={gcp.region}",
            f"temp_location={gcp.temp_location}",
        ]
    return " ".join(parts)


def run(pipeline: Any) -> dict[str, int]:
    """Run a built pipeline to the end; returns its counters in METRICS_NAMESPACE (name ->
    value)."""
    from apache_beam.metrics.metric import MetricsFilter

    result = pipeline.run()
    result.wait_until_finish()
    counters: dict[str, int] = {}
    for counter in result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))[
        "counters"
    ]:
        try:
            value = counter.committed
        except Exception:  # some runners only report attempted values
            value = None
        if value is None:
            value = counter.attempted
        counters[counter.key.metric.name] = counters.get(counter.key.metric.name, 0) + int(
            value or 0
        )
    return counters


def data_error_message(exc: BaseException) -> str | None:
    """The one-line DataError message carried by `exc` (however the runner wrapped it), or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        text = (
            str(exc) + "\n" + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        )
        match = _MARK_RE.search(text)
        if match:
            return match.group(1).strip()
        exc = exc.__cause__ or exc.__context__
    return None


def discard(*staging_dirs: str | None) -> None:
    """Remove staging dirs of a failed run."""
    for path in staging_dirs:
        if not path:
            continue
        if storage.is_gcs_uri(path):
            from apache_beam.io.filesystems import FileSystems

            try:
                FileSystems.delete([path.rstrip("/") + "/"])
            except Exception:  # nothing was written, or it is gone already
                pass
        else:
            shutil.rmtree(path, ignore_errors=True)


def open_binary(path: str) -> Any:
    """A binary reader of a local path (plain `open`) or a URI Beam knows (gs://...)."""
    if "://" not in path:
        return open(path, "rb")
    from apache_beam.io.filesystems import CompressionTypes, FileSystems

    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def match_files(pattern: str) -> list[str]:
    """Files matching a glob pattern (local, or a URI Beam knows), sorted."""
    if "://" not in pattern:
        import glob

        return sorted(p for p in glob.glob(pattern) if os.path.isfile(p))
    from apache_beam.io.filesystems import FileSystems

    return sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)


def write_text(path: str, text: str) -> None:
    """Write a small text file (local, or a URI Beam knows)."""
    if "://" not in path:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.create(path) as f:
        f.write(text.encode("utf-8"))


def join(base: str, *parts: str) -> str:
    """os.path.join for local paths and URIs alike."""
    if "://" in base:
        return "/".join([base.rstrip("/"), *parts])
    return os.path.join(base, *parts)


def split_counts(counters: Mapping[str, int], prefix: str, splits: Sequence[str]) -> dict[str, int]:
    """Per-split counts from counters named `<prefix><split>` (0 for a split that got nothing)."""
    return {split: int(counters.get(prefix + split, 0)) for split in splits}
