"""What a sandboxed child (sandbox.py) runs under and how it ended, and why it failed, in words.

`Limits`: the time and memory the child may use. `Outcome`: how it ended (exit code, time limit,
the last lines of its output, what it was doing, the peak memory sampled). `failure(outcome,
limits)` words why a child did not finish, for a NOT_BLESSED reason: the time limit (with the
memory it had reached), the memory limit (MemoryError or an allocation failure in its output,
SIGKILL, or its address space at the limit), or a crash (exit code, signal, last line of output).
"""

from __future__ import annotations

import dataclasses
import signal

MEMORY_SIGNS = (
    "MemoryError",
    "bad_alloc",
    "Cannot allocate memory",
    "out of memory",
    "OOM when allocating",
    "ResourceExhaustedError",
    "failed to allocate",
    "failed to map segment",
)
_NOISE = ("Graph execution error", "Detected at node", "<stack traces unavailable>", 'File "')
AT_LIMIT = 0.95  # an address space this close to the limit counts as at the limit


@dataclasses.dataclass(frozen=True)
class Limits:
    """How long and how much memory the child may use.

    `timeout` seconds in total, or with `idle` since its last `progress()`; `memory_limit` bytes of
    address space (None: no limit); `cpu_only` hides the GPUs.
    """

    timeout: float
    memory_limit: int | None
    idle: bool = False
    cpu_only: bool = True


@dataclasses.dataclass
class Outcome:
    """How the child ended: its exit code (negative: the signal; None when killed at the time
    limit)."""

    pid: int
    code: int | None
    timed_out: bool
    tail: str
    stage: str = ""
    peak_address_space: int | None = None
    peak_resident: int | None = None
    seconds: float = 0.0

    @property
    def last_line(self) -> str:
        return self.tail.splitlines()[-1] if self.tail else ""


def size_text(size: int | None) -> str:
    """`8 GiB`, `300 MiB`; `none` for no size."""
    if not size:
        return "none"
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= factor:
            return f"{round(size / factor, 2):g} {unit}"
    return f"{size} bytes"


def compact_error(error: BaseException, limit: int = 600) -> str:
    """`Type: message` on one line, without TensorFlow's graph-execution boilerplate."""
    lines = [line.strip() for line in str(error).splitlines()]
    text = " ".join(line for line in lines if line and not line.startswith(_NOISE))
    return f"{type(error).__name__}: {text[:limit]}"


def is_memory_error(text: str) -> bool:
    """Whether an error text or output says an allocation failed."""
    return any(sign in text for sign in MEMORY_SIGNS)


def _memory_text(outcome: Outcome, limits: Limits) -> str:
    """`address space 7.9 GiB of its 8 GiB limit, resident 1.2 GiB` (what was sampled)."""
    parts = []
    if outcome.peak_address_space:
        limit = f" of its {size_text(limits.memory_limit)} limit" if limits.memory_limit else ""
        parts.append(f"address space {size_text(outcome.peak_address_space)}{limit}")
    if outcome.peak_resident:
        parts.append(f"resident {size_text(outcome.peak_resident)}")
    return ", ".join(parts)


def at_memory_limit(outcome: Outcome, limits: Limits) -> bool:
    """Whether the child's address space reached (nearly) its limit."""
    return bool(
        limits.memory_limit
        and outcome.peak_address_space
        and outcome.peak_address_space >= AT_LIMIT * limits.memory_limit
    )


def memory_reason(
    stage: str, limits: Limits, detail: str = "", what: str = "the serving process"
) -> str:
    """The reason for a child (`what`) that ran out of memory while `stage`, with the limit."""
    return (
        f"{what} ran out of memory{f' while {stage}' if stage else ''} (memory limit "
        f"{size_text(limits.memory_limit)}; raise --memory-limit if the model needs more)"
        + (f": {detail}" if detail else "")
    )


def _timed_out(outcome: Outcome, limits: Limits, stage: str, what: str, used: str) -> str:
    limit = f"{limits.timeout:g} s" + (" without progress" if limits.idle else "")
    if at_memory_limit(outcome, limits):
        return (
            f"{what} reached its memory limit of {size_text(limits.memory_limit)} and then "
            f"did not finish within the time limit of {limit} (it was {stage}; peak {used}): "
            "the model likely needs more memory than --memory-limit allows"
        )
    return (
        f"{what} did not finish within the time limit of {limit} (it was {stage}"
        + (f"; peak {used}" if used else "")
        + ")"
    )


def _out_of_memory(limits: Limits, code: int | None, signame: str, stage: str, what: str) -> str:
    killed = (
        " (killed by SIGKILL: the kernel's out-of-memory killer or a container limit)"
        if code == -signal.SIGKILL
        else ""
    )
    return (
        f"{what} ran out of memory while {stage} (memory limit "
        f"{size_text(limits.memory_limit)}; exit code {code}{signame}{killed}"
    )


def _likely_memory(limits: Limits, code: int | None) -> str:
    """A hint that a native crash was likely the memory limit (abort, segfault, bus error)."""
    if not limits.memory_limit or code is None:
        return ""
    if -code not in (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS):
        return ""
    return (
        f", likely at its memory limit of {size_text(limits.memory_limit)} (native code cannot "
        "report that cleanly; raise --memory-limit to check)"
    )


def failure(
    outcome: Outcome, limits: Limits, stage: str = "", what: str = "the serving process"
) -> str | None:
    """Why the child (`what`) did not finish, for a NOT_BLESSED reason.

    Args:
      outcome: how it ended.
      limits: its limits.
      stage: what it was doing (default: the last stage it reported).
      what: the child's name in the reason.

    Returns:
      The reason; None when it exited normally (code 0).
    """
    stage = stage or outcome.stage or "starting"
    used = _memory_text(outcome, limits)
    if outcome.timed_out:
        return _timed_out(outcome, limits, stage, what, used)
    code = outcome.code
    if code == 0:
        return None
    signame = f" ({signal.Signals(-code).name})" if code is not None and code < 0 else ""
    if is_memory_error(outcome.tail) or code == -signal.SIGKILL or at_memory_limit(outcome, limits):
        peak = f"; peak {used}" if used else ""
        return _out_of_memory(limits, code, signame, stage, what) + peak + ")"
    last = outcome.last_line
    return f"{what} died while {stage}: exit code {code}{signame}{_likely_memory(limits, code)}" + (
        f"; last output: {last[:300]}" if last else ""
    )
