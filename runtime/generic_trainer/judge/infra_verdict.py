"""infra-validate's verdict: what the serving probe (serving_probe.py) saw, judged.

The model is INFRA_BLESSED when the probe loaded it and every request succeeded with exactly the
output keys the signature declares, each with the declared dtype, rank and fixed dimensions and one
row per example. Otherwise the verdict holds the reasons (at most MAX_REASONS, one per kind of
failure): the probe's ending (time limit, memory, a load error), a failing request, a wrong shape, a
serving input no feature of the examples can feed, warm-up requests not all written.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from generic_trainer.judge import sandbox_outcome as outcomes

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
        """Nearest-rank percentile `p` (0-100) of the timed requests' latency in ms (None: none)."""
        if not self.latencies_ms:
            return None
        ordered = sorted(self.latencies_ms)
        return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]

    def metrics(self) -> dict[str, float]:
        """The run's numbers by name (those the run has: no latency when no request succeeded)."""
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
        """The verb's summary: the verdict, its reasons and the metrics."""
        return {"blessed": self.blessed, "reasons": self.reasons, "metrics": self.metrics()}


def judge(
    probe: dict[str, Any],
    outcome: outcomes.Outcome,
    limits: outcomes.Limits,
    *,
    batch_size: int,
    num_requests: int,
    write_warmup: int,
) -> InfraValidateResult:
    """Judge what the serving probe reported.

    Args:
      probe: the probe's result JSON (empty when it wrote none).
      outcome: how the probe's process ended.
      limits: the limits it ran under, for the reasons.
      batch_size: examples per request.
      num_requests: the timed requests asked for.
      write_warmup: the warm-up requests asked for (0: none).

    Returns:
      The verdict, `blessed` when no reason was found.
    """
    verdict = InfraValidateResult(
        blessed=False,
        reasons=[],
        batch_size=batch_size,
        load_seconds=probe.get("load_seconds"),
        signature={k: probe[k] for k in ("inputs", "outputs") if k in probe},
    )
    ending = _ending_reason(probe, outcome, limits)
    if ending:
        verdict.reasons.append(ending)
    declared = probe.get("outputs") or {}
    _judge_requests(verdict, probe.get("requests") or [], declared, limits)
    if not verdict.reasons and not declared:
        verdict.reasons.append("serving_default declares no outputs")
    if not verdict.reasons and verdict.requests_sent < num_requests:
        verdict.reasons.append(
            f"only {verdict.requests_sent} of {num_requests} requests were answered"
        )
    if not verdict.reasons and write_warmup:
        _judge_warmup(verdict, probe, write_warmup)
    if len(verdict.reasons) > MAX_REASONS:
        more = len(verdict.reasons) - MAX_REASONS
        verdict.reasons = verdict.reasons[:MAX_REASONS] + [f"... and {more} more"]
    verdict.blessed = not verdict.reasons
    return verdict


def _ending_reason(
    probe: dict[str, Any], outcome: outcomes.Outcome, limits: outcomes.Limits
) -> str | None:
    """Why the probe did not get to judge requests: its process's ending, a load error, or examples
    that cannot feed serving_default (a verdict, not a failed run); None when it finished."""
    stage = probe.get("finished") or probe.get("stage") or "starting"
    if outcome.code != 0 or outcome.timed_out or probe.get("stage") != "done":
        if outcome.code == 0 and not outcome.timed_out:  # exited without finishing its result
            outcome = dataclasses.replace(outcome, code=None)
        return (
            outcomes.failure(outcome, limits, stage) or f"the serving process stopped while {stage}"
        )
    if probe.get("error"):
        error = probe["error"]
        if outcomes.is_memory_error(error):
            error = outcomes.memory_reason(stage, limits, error)
        return error
    if probe.get("input_error"):
        return f"{probe['input_error']['input']}: {probe['input_error']['message']}"
    return None


def _judge_warmup(verdict: InfraValidateResult, probe: dict[str, Any], write_warmup: int) -> None:
    """The warm-up requests' part of the verdict: all `write_warmup` written and replayed."""
    if probe.get("warmup_error"):
        verdict.reasons.append(probe["warmup_error"])
        return
    verdict.warmup_requests = probe.get("warmup_written") or 0
    if verdict.warmup_requests != write_warmup:
        verdict.reasons.append(
            f"only {verdict.warmup_requests} of {write_warmup} warm-up requests "
            "were written and replayed"
        )


def _judge_requests(
    verdict: InfraValidateResult,
    entries: list[dict[str, Any]],
    declared: dict[str, Any],
    limits: outcomes.Limits,
) -> None:
    """Count the requests, their latency, and one reason per kind of failure into `verdict`."""
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
        problems = _request_problems(entry, declared, limits)
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


def _request_problems(
    entry: dict[str, Any], declared: dict[str, Any], limits: outcomes.Limits
) -> list[str]:
    """What was wrong with one request: its error, or outputs other than the signature declares."""
    if not entry.get("ok"):
        error = entry.get("error") or ""
        if outcomes.is_memory_error(error):
            error = (
                f"out of memory (memory limit {outcomes.size_text(limits.memory_limit)}; raise "
                f"--memory-limit if the model needs more): {error}"
            )
        return [f"failed: {error}"]
    got = entry.get("outputs") or {}
    problems = []
    if sorted(got) != sorted(declared):
        problems.append(
            f"returned outputs {sorted(got)}, the signature declares {sorted(declared)}"
        )
    for name in sorted(set(got) & set(declared)):
        problem = _shape_problem(name, declared[name], got[name], entry["size"])
        if problem:
            problems.append(problem)
    return problems


def _shape_problem(
    name: str, declared: dict[str, Any], got: dict[str, Any], size: int
) -> str | None:
    """What is wrong with output `name` of a `size`-example request (None: nothing)."""
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
