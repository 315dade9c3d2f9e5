"""Shared test fixtures: paths of the bundled example, a CLI runner, free ports, a trained model
(made once per
run, shared by the xdist workers), the GCS emulator; and the order tests run in (longest first)."""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PENGUIN = REPO / "examples" / "penguin"


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a CLI subprocess: no cluster variables leaking in from outside, and no
    TF_USE_LEGACY_KERAS (a test that ran `cli.main` in this worker process set it; `--keras auto`
    reads it)."""
    leaked = ("TF_CONFIG", "CLUSTER_SPEC", "TF_USE_LEGACY_KERAS")
    env = {k: v for k, v in os.environ.items() if k not in leaked and not k.startswith("AIP_")}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def run_cli(
    args: list[str],
    env: dict[str, str] | None = None,
    timeout: float = 300,
    cwd: str | None = None,
) -> subprocess.CompletedProcess:
    """Run `python -m generic_trainer ARGS` as KFP, docker or Vertex would; returns the finished
    process."""
    return subprocess.run(
        [sys.executable, "-m", "generic_trainer", *map(str, args)],
        env=cli_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def penguin() -> Path:
    """The bundled example's directory (data/, schema.pbtxt, module.py, ...)."""
    return PENGUIN


def shared_across_workers(tmp_path_factory, name: str, make: Callable[[Path], None]) -> Path:
    """`make(dir)` run once per test session, even under pytest-xdist, whose workers would each run
    it, and when fixtures of several test modules ask for it: the first to ask makes it in a
    directory all workers of this run share (under a file lock), the others wait for it and use it.
    Returns the directory; tests only read it.
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # this run's temp dir, the parent of every worker's own
    out, done = root / f"shared-{name}", root / f"shared-{name}.done"
    with open(root / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if make() fails
        if not done.exists():
            shutil.rmtree(out, ignore_errors=True)  # a failed attempt of another worker
            out.mkdir()
            make(out)
            done.touch()
    return out


@pytest.fixture(scope="session")
def trained_penguin_model(tmp_path_factory) -> Path:
    """A model dir (with Format-Serving) trained once per session by the real CLI on the bundled
    example."""

    def train(out: Path) -> None:
        proc = run_cli(
            [
                "train",
                "--examples",
                PENGUIN / "data",
                "--module-file",
                PENGUIN / "module.py",
                "--schema",
                PENGUIN / "schema.pbtxt",
                "--model-dir",
                out / "model",
                "--train-steps",
                "300",
                "--eval-steps",
                "20",
                "--metrics-file",
                out / "metrics.json",
            ]
        )
        assert proc.returncode == 0, proc.stderr[-4000:]

    return shared_across_workers(tmp_path_factory, "trained_penguin_model", train) / "model"


@pytest.fixture()
def gcs_emulator():
    """A real gcp-storage-emulator server on 127.0.0.1; yields (host_url, bucket name)."""
    from gcp_storage_emulator.server import create_server

    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket="test-bucket")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}", "test-bucket"
    finally:
        server.stop()


def gcs_upload(host: str, bucket: str, name: str, data: bytes) -> str:
    """Upload `data` to the emulator as gs://bucket/name with google-cloud-storage; returns the
    URI."""
    from google.cloud import storage

    os.environ["STORAGE_EMULATOR_HOST"] = host
    try:
        client = storage.Client.create_anonymous_client()
        client.bucket(bucket).blob(name).upload_from_string(data)
    finally:
        del os.environ["STORAGE_EMULATOR_HOST"]
    return f"gs://{bucket}/{name}"


# Files whose tests run for minutes (real pipelines, several worker processes).
LONGEST_FIRST = (
    "test_kfp_local.py",
    "test_checkpoint_dirs.py",
    "test_multiworker.py",
    "test_tune_distributed.py",
    "test_task_multiworker.py",
    "test_hostile.py",
    "test_evaluate_tfma.py",
    "test_transform_tfx.py",
    "test_example_gen.py",
    "test_bulk_infer.py",
    "test_model_format.py",
)
# Module fixtures that cannot be shared between processes (test_kfp_local.py's one pipeline run,
# with its
# in-memory task handlers): their tests go first, all on the first worker, before any worker steals.
UNSPLIT_FIXTURES = ("kfp_run",)


def pytest_collection_modifyitems(config, items):
    """Order the tests longest first: the tests of an unsplit fixture, the e2e tests (a minute or
    more each), the other slow tests of the longest files, the other slow tests, then the fast ones
    (collection order within each).

    `make test` runs pytest-xdist with --dist worksteal: the first worker gets the first half of
    this list (the long tests), the other the second half (fast ones); a worker that runs out takes
    the back half of the other's queue, and so on. So the longest tests run early, on the first
    worker, and both workers end together on short ones.
    """
    unmarked = [
        item.nodeid
        for item in items
        if item.get_closest_marker("e2e") and not item.get_closest_marker("slow")
    ]
    if unmarked:  # `make test-fast` (-m "not slow") must never start one
        raise pytest.UsageError(f"e2e tests must be marked slow too: {', '.join(unmarked)}")

    def rank(item) -> int:
        if any(name in item.fixturenames for name in UNSPLIT_FIXTURES):
            return 0
        slow = item.get_closest_marker("slow")
        if item.get_closest_marker("e2e"):
            return 1
        if slow and item.path.name in LONGEST_FIRST:
            return 2
        return 3 if slow else 4

    items.sort(key=rank)
