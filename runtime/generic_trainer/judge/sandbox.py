"""The sandbox evaluate and infra-validate serve a model in: a child process with a time and a
memory limit.

Parent side: `run(command, limits)` starts `python -m <module> ARGS` in a new session (its own
process group), without the cluster variables (TF_CONFIG, CLUSTER_SPEC), on CPU when
`limits.cpu_only` (GPU drivers reserve more address space than any sensible limit), else with GPU
memory growth on (TF_FORCE_GPU_ALLOW_GROWTH, so sandboxes can share a GPU), and waits. The whole
group is killed when the child runs past `limits.timeout`: the total time, or with `limits.idle` the
time since the child last reported progress. While it runs, its address space and resident memory
are sampled from /proc. Its output (stdout and stderr) is kept (the last lines) and, with `echo`,
copied to this process's stderr as it comes.

Child side: `enter()` first (before TensorFlow loads): it sets the address-space limit (RLIMIT_AS)
the parent passed; `progress(stage)` says what it is doing (and, with `limits.idle`, that it is
alive). `python -m generic_trainer.judge.sandbox MODULE:FUNCTION SPEC RESULT` is a ready child: it
calls FUNCTION(spec dict) and writes `{"value": ...}` or `{"error": ...}` (a TrainerError with its
class, input and message; a MemoryError; anything else) to RESULT as JSON.

`failure(outcome, limits, stage)` words why a child did not finish: the time limit (with the memory
it had reached), the memory limit (MemoryError or an allocation failure in its output, SIGKILL, or
its address space at the limit), or a crash (exit code, signal, last line of output).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)

MEMORY_ENV = "GENERIC_TRAINER_SANDBOX_MEMORY"
PROGRESS_ENV = "GENERIC_TRAINER_SANDBOX_PROGRESS"
LOG_LEVEL_ENV = "GENERIC_TRAINER_SANDBOX_LOG_LEVEL"
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
TAIL_LINES = 40
POLL_S = 0.2
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


# --------------------------------------------------------------------------------------------
# Parent side
# --------------------------------------------------------------------------------------------


def _child_env(limits: Limits, progress_file: str) -> dict[str, str]:
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONUNBUFFERED": "1",
        PROGRESS_ENV: progress_file,
        LOG_LEVEL_ENV: logging.getLevelName(logging.getLogger().getEffectiveLevel()),
        # On a GPU, TensorFlow would take all of its memory at start: grow as needed, so the
        # sandboxes of
        # evaluate and infra-validate (and a training job beside them) can share one GPU.
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
    }
    if limits.cpu_only:
        env["CUDA_VISIBLE_DEVICES"] = "-1"
    if limits.memory_limit:
        env[MEMORY_ENV] = str(int(limits.memory_limit))
    else:
        env.pop(MEMORY_ENV, None)
    for name in ("TF_CONFIG", "CLUSTER_SPEC"):
        env.pop(name, None)
    return env


def _memory(pid: int) -> tuple[int | None, int | None]:
    """(peak address space, peak resident set) of a live process, from /proc (None where
    unknown)."""
    values: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmPeak", "VmHWM") and rest.split():
                    values[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError):
        pass
    return values.get("VmPeak"), values.get("VmHWM")


def _read_stage(progress_file: str) -> str:
    try:
        with open(progress_file, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return ""


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def run(
    module: str,
    args: Sequence[str],
    limits: Limits,
    work_dir: str,
    what: str = "sandbox process",
    echo: bool = False,
) -> Outcome:
    """Run `python -m module ARGS` in the sandbox; returns how it ended (never raises for the
    child's faults).

    `work_dir` is a private directory of the caller (the progress file goes there); `what` names the
    child in the log; with `echo` its output is copied to stderr line by line as well as kept.
    """
    progress_file = os.path.join(work_dir, "progress")
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=_child_env(limits, progress_file),
        start_new_session=True,
    )
    idle = " without progress" if limits.idle else ""
    log.info(
        "%s %d started (time limit %g s%s, memory limit %s%s)",
        what,
        proc.pid,
        limits.timeout,
        idle,
        size_text(limits.memory_limit),
        ", CPU only" if limits.cpu_only else "",
    )
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)

    def pump() -> None:
        for raw in iter(proc.stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip()
            if line.strip():
                tail.append(line)
                if echo:
                    print(line, file=sys.stderr, flush=True)

    reader = threading.Thread(target=pump, name="sandbox-output", daemon=True)
    reader.start()
    started = last_progress = time.monotonic()
    last_mtime = None
    outcome = Outcome(pid=proc.pid, code=None, timed_out=False, tail="")
    try:
        while True:
            try:
                outcome.code = proc.wait(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            peak, resident = _memory(proc.pid)
            outcome.peak_address_space = max(
                filter(None, (peak, outcome.peak_address_space)), default=None
            )
            outcome.peak_resident = max(
                filter(None, (resident, outcome.peak_resident)), default=None
            )
            try:
                mtime = os.stat(progress_file).st_mtime_ns
            except OSError:
                mtime = None
            now = time.monotonic()
            if mtime != last_mtime:
                last_mtime, last_progress = mtime, now
            if now - (last_progress if limits.idle else started) > limits.timeout:
                outcome.timed_out = True
                break
    finally:
        if proc.poll() is None:
            _kill_group(proc)
        reader.join(timeout=10)
        proc.stdout.close()
    outcome.seconds = time.monotonic() - started
    outcome.tail = "\n".join(tail)
    outcome.stage = _read_stage(progress_file)
    return outcome


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


def failure(
    outcome: Outcome, limits: Limits, stage: str = "", what: str = "the serving process"
) -> str | None:
    """Why the child (`what`) did not finish, for a NOT_BLESSED reason; None when it exited normally
    (code 0)."""
    stage = stage or outcome.stage or "starting"
    used = _memory_text(outcome, limits)
    if outcome.timed_out:
        limit = f"{limits.timeout:g} s" + (" without progress" if limits.idle else "")
        if at_memory_limit(outcome, limits):
            return (
                f"{what} reached its memory limit of {size_text(limits.memory_limit)} and then "
                f"did not finish within the time limit of {limit} (it was {stage}; peak {used}): "
                "the model "
                "likely needs more memory than --memory-limit allows"
            )
        return (
            f"{what} did not finish within the time limit of {limit} (it was {stage}"
            + (f"; peak {used}" if used else "")
            + ")"
        )
    code = outcome.code
    if code == 0:
        return None
    signame = f" ({signal.Signals(-code).name})" if code is not None and code < 0 else ""
    if is_memory_error(outcome.tail) or code == -signal.SIGKILL or at_memory_limit(outcome, limits):
        killed = (
            " (killed by SIGKILL: the kernel's out-of-memory killer or a container limit)"
            if code == -signal.SIGKILL
            else ""
        )
        return (
            f"{what} ran out of memory while {stage} (memory limit "
            f"{size_text(limits.memory_limit)}; exit code {code}{signame}{killed}"
            + (f"; peak {used}" if used else "")
            + ")"
        )
    likely = ""
    if (
        limits.memory_limit
        and code is not None
        and -code in (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS)
    ):
        likely = (
            f", likely at its memory limit of {size_text(limits.memory_limit)} (native code cannot "
            "report that cleanly; raise --memory-limit to check)"
        )
    last = outcome.last_line
    return f"{what} died while {stage}: exit code {code}{signame}{likely}" + (
        f"; last output: {last[:300]}" if last else ""
    )


# --------------------------------------------------------------------------------------------
# Child side
# --------------------------------------------------------------------------------------------


def enter() -> int | None:
    """In the child, first thing: apply the parent's address-space limit; returns it (None: no
    limit)."""
    limit = os.environ.get(MEMORY_ENV)
    if not limit:
        return None
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (int(limit), int(limit)))
    return int(limit)


def progress(stage: str) -> None:
    """In the child: say what it is doing now (with `Limits.idle`, this also resets the time
    limit)."""
    path = os.environ.get(PROGRESS_ENV)
    if not path:
        return
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(stage)
    os.replace(tmp, path)


def _error_json(error: BaseException) -> dict[str, Any]:
    from generic_trainer import errors

    if isinstance(error, errors.TrainerError):
        message = str(error)
        input_name = getattr(error, "input_name", None)
        if input_name and message.startswith(f"{input_name}: "):
            message = message[len(input_name) + 2 :]
        return {"class": type(error).__name__, "input_name": input_name, "message": message}
    return {"class": type(error).__name__, "message": compact_error(error)}


def raise_child_error(error: dict[str, Any]) -> None:
    """In the parent: raise the TrainerError the child reported (same class, input and message)."""
    from generic_trainer import errors

    cls = getattr(errors, error.get("class", ""), None)
    if isinstance(cls, type) and issubclass(cls, errors.UserInputError):
        raise cls(error.get("input_name") or "input", error["message"])
    if isinstance(cls, type) and issubclass(cls, errors.TrainerError):
        raise cls(error["message"])
    raise RuntimeError(f"the sandboxed process failed: {error.get('message')}")


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m generic_trainer.judge.sandbox MODULE:FUNCTION SPEC.json RESULT.json` (see the
    module docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 3:
        print(
            "usage: python -m generic_trainer.judge.sandbox MODULE:FUNCTION SPEC.json RESULT.json",
            file=sys.stderr,
        )
        return 2
    target, spec_path, result_path = argv
    enter()
    logging.basicConfig(
        level=os.environ.get(LOG_LEVEL_ENV, "INFO"),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for noisy in ("absl", "tensorflow", "h5py"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    import importlib

    module_name, _, function = target.partition(":")
    try:
        result: dict[str, Any] = {
            "value": getattr(importlib.import_module(module_name), function)(spec)
        }
    except Exception as e:  # MemoryError included: the parent decides what it means
        result = {"error": _error_json(e)}
    tmp = f"{result_path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f)
    os.replace(tmp, result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
