"""The sandbox evaluate and infra-validate run a model in: a child with a time and memory limit.

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

`Limits`, `Outcome` and `failure` (why a child did not finish, in words): sandbox_outcome.py.
"""

from __future__ import annotations

import collections
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

from generic_trainer.judge.sandbox_outcome import Limits, Outcome, compact_error, size_text

log = logging.getLogger(__name__)

MEMORY_ENV = "GENERIC_TRAINER_SANDBOX_MEMORY"
PROGRESS_ENV = "GENERIC_TRAINER_SANDBOX_PROGRESS"
LOG_LEVEL_ENV = "GENERIC_TRAINER_SANDBOX_LOG_LEVEL"
TAIL_LINES = 40
POLL_S = 0.2

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


def _start(module: str, args: Sequence[str], limits: Limits, progress_file: str, what: str) -> Any:
    """`python -m module ARGS` in a new session, its output piped; logged with its limits."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=_child_env(limits, progress_file),
        start_new_session=True,
    )
    log.info(
        "%s %d started (time limit %g s%s, memory limit %s%s)",
        what,
        proc.pid,
        limits.timeout,
        " without progress" if limits.idle else "",
        size_text(limits.memory_limit),
        ", CPU only" if limits.cpu_only else "",
    )
    return proc


def _pump(proc: Any, tail: collections.deque[str], echo: bool) -> threading.Thread:
    """A thread keeping the child's last lines of output (and copying them to stderr with echo)."""

    def pump() -> None:
        for raw in iter(proc.stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip()
            if line.strip():
                tail.append(line)
                if echo:
                    print(line, file=sys.stderr, flush=True)

    reader = threading.Thread(target=pump, name="sandbox-output", daemon=True)
    reader.start()
    return reader


def _watch(proc: Any, limits: Limits, progress_file: str, outcome: Outcome) -> None:
    """Wait for the child, sampling its memory, until it exits or runs past its time limit."""
    started = last_progress = time.monotonic()
    last_mtime = None
    while True:
        try:
            outcome.code = proc.wait(timeout=POLL_S)
            return
        except subprocess.TimeoutExpired:
            pass
        peak, resident = _memory(proc.pid)
        outcome.peak_address_space = max(
            filter(None, (peak, outcome.peak_address_space)), default=None
        )
        outcome.peak_resident = max(filter(None, (resident, outcome.peak_resident)), default=None)
        try:
            mtime = os.stat(progress_file).st_mtime_ns
        except OSError:
            mtime = None
        now = time.monotonic()
        if mtime != last_mtime:
            last_mtime, last_progress = mtime, now
        if now - (last_progress if limits.idle else started) > limits.timeout:
            outcome.timed_out = True
            return


def run(
    module: str,
    args: Sequence[str],
    limits: Limits,
    work_dir: str,
    what: str = "sandbox process",
    echo: bool = False,
) -> Outcome:
    """Run `python -m module ARGS` in the sandbox; never raises for the child's faults.

    Args:
      module: the child's module.
      args: its arguments.
      limits: its time and memory limits.
      work_dir: a private directory of the caller (the progress file goes there).
      what: the child's name in the log.
      echo: copy its output to stderr line by line as well as keep it.

    Returns:
      How it ended (sandbox_outcome.failure words why it failed).
    """
    progress_file = os.path.join(work_dir, "progress")
    proc = _start(module, args, limits, progress_file, what)
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    reader = _pump(proc, tail, echo)
    started = time.monotonic()
    outcome = Outcome(pid=proc.pid, code=None, timed_out=False, tail="")
    try:
        _watch(proc, limits, progress_file, outcome)
    finally:
        if proc.poll() is None:
            _kill_group(proc)
        reader.join(timeout=10)
        proc.stdout.close()
    outcome.seconds = time.monotonic() - started
    outcome.tail = "\n".join(tail)
    outcome.stage = _read_stage(progress_file)
    return outcome


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
