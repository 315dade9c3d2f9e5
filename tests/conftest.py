"""Shared test fixtures: paths of the bundled example, a CLI runner, free ports, a trained model."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PENGUIN = REPO / "examples" / "penguin"


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a CLI subprocess: no cluster variables leaking in from outside."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "CLUSTER_SPEC") and not k.startswith("AIP_")}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def run_cli(args: list[str], env: dict[str, str] | None = None, timeout: float = 300, cwd: str | None = None,
            ) -> subprocess.CompletedProcess:
    """Run `python -m generic_trainer ARGS` as KFP, docker or Vertex would; returns the finished process."""
    return subprocess.run(
        [sys.executable, "-m", "generic_trainer", *map(str, args)],
        env=cli_env(env), capture_output=True, text=True, timeout=timeout, cwd=cwd,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def penguin() -> Path:
    """The bundled example's directory (data/, schema.pbtxt, module.py, ...)."""
    return PENGUIN


@pytest.fixture(scope="session")
def trained_penguin_model(tmp_path_factory) -> Path:
    """A model dir (with Format-Serving) trained once per session by the real CLI on the bundled example."""
    out = tmp_path_factory.mktemp("trained")
    proc = run_cli([
        "train", "--examples", PENGUIN / "data", "--module-file", PENGUIN / "module.py",
        "--schema", PENGUIN / "schema.pbtxt", "--model-dir", out / "model", "--train-steps", "300",
        "--eval-steps", "20", "--metrics-file", out / "metrics.json",
    ])
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out / "model"


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
    """Upload `data` to the emulator as gs://bucket/name with google-cloud-storage; returns the URI."""
    from google.cloud import storage

    os.environ["STORAGE_EMULATOR_HOST"] = host
    try:
        client = storage.Client.create_anonymous_client()
        client.bucket(bucket).blob(name).upload_from_string(data)
    finally:
        del os.environ["STORAGE_EMULATOR_HOST"]
    return f"gs://{bucket}/{name}"


# Files whose tests run for minutes (real pipelines, several worker processes): started first, so that under
# pytest-xdist (`make test` runs `-n auto`) no worker is left alone with a long test at the end of the run.
LONGEST_FIRST = ("test_kfp_local.py", "test_checkpoint_dirs.py", "test_multiworker.py", "test_tune_distributed.py",
                 "test_task_multiworker.py", "test_hostile.py")


def pytest_collection_modifyitems(config, items):
    """Order the tests: the longest files first, then the other slow tests, then the fast ones (stable within)."""
    def rank(item) -> int:
        if item.path.name in LONGEST_FIRST:
            return 0
        return 1 if item.get_closest_marker("slow") else 2

    items.sort(key=rank)
