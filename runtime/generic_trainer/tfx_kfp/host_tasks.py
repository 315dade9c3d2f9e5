"""Run KFP pipelines of container components on this host, without docker.

`kfp.local.SubprocessRunner` only runs lightweight Python components and `DockerRunner` needs a
docker engine. `host_runner()` keeps everything else of kfp.local (its executor input, its
placeholder resolution, its reading back of the executor output and artifacts) and only swaps the
step that starts a task: the resolved container command runs as a host process, so `generic-trainer`
must be on PATH (e.g. the project's .venv/bin). The image is not used.

Uses kfp.local internals (task_dispatcher's handler lookup); pinned to kfp 2.17.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator, Mapping

KFP_VERSION_PREFIX = "2.17."


class HostTaskHandler:
    """A kfp.local task handler that runs a container component's resolved command on the host."""

    env: Mapping[str, str] = {}
    timeout_s: float | None = None

    def __init__(
        self, image: str, full_command: list[str], pipeline_root: str, runner, env_vars=None
    ) -> None:
        self.image = image
        self.full_command = list(full_command)
        self.pipeline_root = pipeline_root
        self.env_vars = dict(env_vars or {})
        self.output = ""  # the task's stdout and stderr, once run

    def run(self):
        from kfp.local import status

        env = {**os.environ, **self.env, **self.env_vars}
        # Only the program and verb: the rest carries the executor input, parameter values included.
        print(f"[host-runner] {self.image}: {' '.join(self.full_command[:2])} ...", flush=True)
        try:
            proc = subprocess.run(
                self.full_command,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=self.timeout_s,
                check=False,
            )
        except FileNotFoundError as e:
            print(
                f"[host-runner] cannot start {self.full_command[0]!r}: {e} (is it on PATH?)",
                flush=True,
            )
            return status.Status.FAILURE
        except subprocess.TimeoutExpired as e:
            self.output = e.output or ""
            print(
                self.output,
                f"[host-runner] {self.full_command[0]} ran past {self.timeout_s} s; killed",
                flush=True,
            )
            return status.Status.FAILURE
        self.output = proc.stdout
        print(proc.stdout, flush=True)
        return status.Status.SUCCESS if proc.returncode == 0 else status.Status.FAILURE


@contextlib.contextmanager
def host_runner(
    pipeline_root: str,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    enable_caching: bool = False,
) -> Iterator[str]:
    """Within the block, `kfp.local` runs container components as host processes; yields the
    pipeline root.

    `env` is added to each task's environment (e.g. PATH with generic-trainer on it); `timeout_s`
    bounds each task; `enable_caching` turns on kfp.local's cache of task outputs (under
    `<pipeline_root>/.kfp_cache`; a task with caching off in its options still runs).
    """
    import kfp
    from kfp import local
    from kfp.local import task_dispatcher

    if not kfp.__version__.startswith(KFP_VERSION_PREFIX):
        raise RuntimeError(
            f"host_runner relies on kfp.local internals of kfp {KFP_VERSION_PREFIX}*, "
            f"found {kfp.__version__}"
        )
    handler = type(
        "BoundHostTaskHandler", (HostTaskHandler,), {"env": dict(env or {}), "timeout_s": timeout_s}
    )
    original = task_dispatcher.subprocess_task_handler.SubprocessTaskHandler
    os.makedirs(pipeline_root, exist_ok=True)
    workspace = tempfile.mkdtemp(prefix="workspace-", dir=pipeline_root)
    local.init(
        runner=local.SubprocessRunner(use_venv=False),
        pipeline_root=pipeline_root,
        workspace_root=workspace,
        raise_on_error=True,
        enable_caching=enable_caching,
    )
    task_dispatcher.subprocess_task_handler.SubprocessTaskHandler = handler
    try:
        yield pipeline_root
    finally:
        task_dispatcher.subprocess_task_handler.SubprocessTaskHandler = original
