"""A `Plan`'s steps in this project's image: kfp.local's DockerRunner, one container per step.

kfp.local's DockerRunner (kfp 2.17, local/docker_task_handler.py) bind-mounts only the pipeline
root (at the same path, read-write) and the workspace (at /kfp-workspace). A TFX pipeline file
hands its steps host paths elsewhere too (module files, data, a schema to import, the pusher's
destination): `host_mounts` finds every absolute path in the steps' parameters and mounts it at
the same path in the container, read-only (a file's folder, a data folder) or read-write (the
folder of the pusher's destination, which is created first: the push step locks and stages beside
it). A path the container cannot see at the same place (one that
would hide the image's own folders) is refused by name before anything runs. The containers run as
this user (uid:gid), so what they write under the pipeline root and the push destination is the
user's, as on the host.

The tfx-pipeline verb's `--docker` / `--docker-image` choose the image (`using_image`); local_run
reads it.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping
from typing import Any

from generic_trainer.artifacts import files
from generic_trainer.errors import UserInputError
from generic_trainer.tfx_dsl.steps import ParameterRef, Plan

log = logging.getLogger(__name__)

# The image's own folders: a host path mounted on one of them (or above one) would hide it.
IMAGE_DIRS = (
    "/bin",
    "/dev",
    "/etc",
    "/home/trainer",
    "/kfp-workspace",
    "/lib",
    "/lib64",
    "/opt",
    "/proc",
    "/sbin",
    "/sys",
    "/usr",
    "/var",
)
# HOME in the container: the image's /home/trainer belongs to its user 1000, the steps run as
# this host user.
CONTAINER_HOME = "/tmp"
_GLOB = "*?["
# Step parameters that hold host paths, also as relative ones (read from the host's working
# directory, which the containers work in too).
PATH_PARAMETERS = ("module_file", "input_pattern", "input_base", "artifact_uri", "push_destination")

_IMAGE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "tfx_kfp_docker_image", default=None
)


@dataclasses.dataclass(frozen=True)
class HostMount:
    """A host folder mounted at the same path in every step's container.

    Attributes:
      path: the folder.
      writable: read-write (a push destination) or read-only.
      why: the step parameter that named it (`Trainer.module_file`).
    """

    path: str
    writable: bool
    why: str


@contextlib.contextmanager
def using_image(image: str | None) -> Iterator[None]:
    """Within the block, local runs run each step in `image` (None: as host processes).

    Args:
      image: the image, as the docker engine names it.

    Yields:
      Nothing.
    """
    token = _IMAGE.set(image)
    try:
        yield
    finally:
        _IMAGE.reset(token)


def image() -> str | None:
    """The image local runs run their steps in (None: host processes)."""
    return _IMAGE.get()


def _texts(value: Any) -> Iterator[str]:
    """Every string in `value` (dicts, lists and the JSON text of protos included)."""
    if isinstance(value, str):
        if value[:1] in "{[":
            try:
                yield from _texts(json.loads(value))
                return
            except ValueError:
                pass
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _texts(item)


def _host_path(name: str, text: str) -> str | None:
    """The absolute host path `text` names: any absolute path; a relative one in a path
    parameter (a module file by its .py name), from the working directory; None: no path."""
    if text.startswith("/"):
        return os.path.normpath(text) if text.strip("/") else None
    relative = name in PATH_PARAMETERS and text and "://" not in text
    if relative and (name != "module_file" or text.endswith(".py")):
        return os.path.abspath(text)
    return None


def _step_paths(plan: Plan) -> Iterator[tuple[str, str, bool]]:
    """(`step.parameter`, absolute host path, written by the step) of every step parameter, and
    the folders dotted module names are imported from."""
    defaults = {p.name: p.default for p in plan.parameters}
    for step in plan.steps:
        for name, value in step.parameters.items():
            if isinstance(value, ParameterRef):
                value = defaults.get(value.name)
            writable = step.component == "pusher" and name == "push_destination"
            for text in _texts(value):
                path = _host_path(name, text)
                if path:
                    yield f"{step.id}.{name}", path, writable
    for folder in plan.python_path:
        yield "python_path", os.path.abspath(folder), False


def _source(path: str, writable: bool) -> str | None:
    """The host folder to mount for `path`: a destination's folder (the push step locks and
    stages beside it), a folder, a file's folder, a glob's folder; None when there is nothing
    there (the step then names the missing path, as on the host)."""
    if writable:
        return os.path.dirname(path)
    if os.path.isdir(path):
        return path
    if os.path.isfile(path):
        return os.path.dirname(path)
    cut = min((path.index(c) for c in _GLOB if c in path), default=None)
    if cut is not None and os.path.isdir(os.path.dirname(path[:cut])):
        return os.path.dirname(path[:cut])
    return None


def _hidden(path: str) -> str | None:
    """The image folder a mount at `path` would hide, if any."""
    for folder in IMAGE_DIRS:
        if files.inside(path, folder) or files.inside(folder, path):
            return folder
    return None


def host_mounts(plan: Plan) -> list[HostMount]:
    """The host folders every step's container needs besides the pipeline root (which
    kfp.local mounts); the push destinations are created (empty) on the host, their folders
    mounted read-write (the push step's lock and staging lie beside the destination).

    Args:
      plan: the plan (its root: kfp.local's pipeline root).

    Returns:
      The mounts, a folder mounted once (read-write wins), none inside another of the same or
      stronger access.

    Raises:
      UserInputError: a path the container could not see at the same place, naming the step
        parameter that gave it.
    """
    found, destinations = [], []
    for why, path, writable in _step_paths(plan):
        source = _source(path, writable)
        if source is None or files.inside(source, os.path.abspath(plan.root)):
            continue
        hidden = _hidden(source)
        if hidden:
            raise UserInputError(
                why,
                f"{path}: the steps' containers see host paths at the same place, and mounting "
                f"{source} would hide the image's {hidden}; put it elsewhere, or run without "
                "--docker",
            )
        found.append(HostMount(source, writable, why))
        destinations += [path] if writable else []
    kept: list[HostMount] = []
    for mount in sorted(found, key=lambda m: (m.path, not m.writable)):
        if not any(
            files.inside(mount.path, k.path) and (k.writable or not mount.writable) for k in kept
        ):
            kept.append(mount)
    for path in destinations:
        os.makedirs(path, exist_ok=True)
    return kept


def docker_runner(plan: Plan, mounts: list[HostMount]) -> Any:
    """kfp.local's DockerRunner for the steps: the mounts, this user, HOME in /tmp, the host's
    working directory (relative paths read as on the host), the plan's python_path.

    Args:
      plan: the plan.
      mounts: the host folders (`host_mounts`).

    Returns:
      The kfp.local.DockerRunner.
    """
    from docker.types import Mount
    from kfp import local

    environment = {"HOME": CONTAINER_HOME}
    if plan.python_path:
        environment["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in plan.python_path)
    where = {} if _hidden(os.getcwd()) else {"working_dir": os.getcwd()}
    return local.DockerRunner(
        mounts=[Mount(m.path, m.path, type="bind", read_only=not m.writable) for m in mounts],
        user=f"{os.getuid()}:{os.getgid()}",
        environment=environment,
        **where,
    )


def check_engine(image_name: str) -> None:
    """Refuse (by name) a docker mode run with no docker engine to run it on.

    Args:
      image_name: the image the steps would run.

    Raises:
      UserInputError: no docker engine answers.
    """
    import docker

    try:
        client = docker.from_env()
        try:
            client.ping()
        finally:
            client.close()
    except Exception as error:  # docker's errors: no socket, refused, no permission
        where = os.environ.get("DOCKER_HOST", "the default socket")
        raise UserInputError(
            "--docker",
            f"the steps would run in {image_name}, but no docker engine answers at {where} "
            f"({type(error).__name__}); start one (docs/running/docker.md), or run without "
            "--docker",
        ) from None


@contextlib.contextmanager
def docker_run(plan: Plan) -> Iterator[list[HostMount]]:
    """Within the block, kfp.local runs each container component in its image, with the plan's
    host folders mounted; yields the mounts.

    Args:
      plan: the plan (its root: kfp.local's pipeline root, created here).

    Yields:
      The mounts (`host_mounts`).
    """
    from kfp import local

    mounts = host_mounts(plan)
    runner = docker_runner(plan, mounts)
    os.makedirs(plan.root, exist_ok=True)
    workspace = tempfile.mkdtemp(prefix="workspace-", dir=plan.root)
    local.init(
        runner=runner,
        pipeline_root=plan.root,
        workspace_root=workspace,
        raise_on_error=True,
        enable_caching=plan.enable_cache,
    )
    for mount in mounts:
        mode = "read-write" if mount.writable else "read-only"
        log.info("docker: %s mounted %s (%s)", mount.path, mode, mount.why)
    yield mounts
