"""Publishing outputs safely: private staging, one run per output dir, atomic replacement, writable
outputs.

- readers polling `Format-Serving` while it is replaced many times always find a complete directory;
- the output-dir lock: a live owner refuses a second run (naming its pid and host), a dead one is
taken over;
- every output is checked writable before TensorFlow loads (exit 2 naming the flag);
- real CLI runs: two concurrent runs on one `--model-dir` (one wins whole, the other fails at once),
  a `run_fn` writing to `serving_model_dir/../../Format-Serving`, an executor output that cannot be
  written (nothing published), staging and locks left by a killed run.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import PENGUIN, cli_env, run_cli
from generic_trainer.artifacts import outputs, storage
from generic_trainer.errors import UserInputError

# ----------------------------------------------------------------------------------------------
# Atomic replacement, seen by a reader in another process
# ----------------------------------------------------------------------------------------------

READER = r"""
import json, os, sys
final, stop, ready = sys.argv[1], sys.argv[2], sys.argv[3]
seen = bad = 0
versions = set()
while not os.path.exists(os.path.join(final, "VERSION")):
    pass
open(ready, "w").close()
while not os.path.exists(stop):
    try:
        with open(os.path.join(final, "VERSION")) as f:
            version = f.read()
        ok = (bool(version) and os.path.isfile(os.path.join(final, "saved_model.pb"))
              and os.path.isfile(os.path.join(final, "variables", "variables.index")))
        versions.add(version)
    except OSError:
        ok = False
    seen += 1
    bad += not ok
print(json.dumps({"seen": seen, "bad": bad, "versions": len(versions)}))
"""


def _fake_model(final: str, version: int) -> str:
    staging = storage.staging_dir_for(os.path.dirname(final))
    os.makedirs(os.path.join(staging, "Format-Serving", "variables"))
    for name in (
        "saved_model.pb",
        "variables/variables.index",
        "variables/variables.data-00000-of-00001",
    ):
        Path(staging, "Format-Serving", name).write_text("x" * 1000)
    Path(staging, "Format-Serving", "VERSION").write_text(str(version))
    return staging


def test_a_reader_always_sees_a_whole_model_while_it_is_replaced(tmp_path):
    """300 replacements under a reader polling in a tight loop: never a missing or partial
    Format-Serving.
    (The rename-away-then-rename-in of earlier versions showed readers no model in about half of
    them.)"""
    final = str(tmp_path / "model" / "Format-Serving")
    staging = _fake_model(final, 0)
    storage.publish_dir(os.path.join(staging, "Format-Serving"), final)
    shutil.rmtree(staging)
    stop, ready = tmp_path / "stop", tmp_path / "ready"
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, final, str(stop), str(ready)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():  # the reader has found the first model and polls from now on
            assert reader.poll() is None and time.monotonic() < deadline, "the reader did not start"
            time.sleep(0.01)
        for version in range(1, 301):
            staging = _fake_model(final, version)
            storage.publish_dir(os.path.join(staging, "Format-Serving"), final)
            shutil.rmtree(
                staging
            )  # what a run does: the old model ends where the new one was staged
    finally:
        stop.write_text("")
        out, _ = reader.communicate(timeout=60)
    result = json.loads(out)
    assert result["seen"] > 300 and result["versions"] > 1, result
    assert result["bad"] == 0, result
    assert Path(final, "VERSION").read_text() == "300"
    assert sorted(os.listdir(tmp_path)) == [
        "model",
        "ready",
        "stop",
    ]  # no staging or old copies left


def test_staging_is_outside_the_published_dir():
    staging = storage.staging_dir_for("/data/out/model")
    assert os.path.dirname(staging) == "/data/out" and os.path.basename(staging).startswith(
        ".model.staging-"
    )
    escaped = os.path.normpath(
        os.path.join(staging, "Format-Serving", "..", "..", "Format-Serving")
    )
    assert not escaped.startswith("/data/out/model")
    assert storage.staging_dir_for("/data/out/model") != staging


# ----------------------------------------------------------------------------------------------
# The output-dir lock
# ----------------------------------------------------------------------------------------------


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_lock_refuses_a_live_owner_and_takes_over_a_dead_one(tmp_path):
    model_dir = str(tmp_path / "model")
    with outputs.exclusive(model_dir, "--model-dir"):
        with pytest.raises(UserInputError) as e, outputs.exclusive(model_dir, "--model-dir"):
            pass
        message = str(e.value)
        assert message.startswith("--model-dir: ") and "is in use by another run" in message
        assert f"pid {os.getpid()} on host {socket.gethostname()}" in message
    assert not (tmp_path / ".model.lock").exists()  # released

    # Left by a SIGKILLed run on this host: taken over at once, with its staging removed.
    lock = tmp_path / ".model.lock"
    lock.write_text(
        json.dumps(
            {
                "pid": _dead_pid(),
                "host": socket.gethostname(),
                "started": time.time(),
                "run_id": "dead",
            }
        )
    )
    (tmp_path / ".model.staging-0123456789ab" / "Format-Serving").mkdir(parents=True)
    (tmp_path / "model" / ".staging").mkdir(parents=True)  # the layout of earlier versions
    with outputs.exclusive(model_dir, "--model-dir"):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
        assert sorted(os.listdir(tmp_path)) == [".model.lock", "model"] and not os.listdir(
            tmp_path / "model"
        )

    # Another host's run: refused while its heartbeat is fresh, taken over once it is stale.
    lock.write_text(
        json.dumps({"pid": 1, "host": "another-host", "started": time.time(), "run_id": "other"})
    )
    with pytest.raises(UserInputError, match="pid 1 on host another-host"):
        with outputs.exclusive(model_dir, "--model-dir"):
            pass
    old = time.time() - 3600
    os.utime(lock, (old, old))
    with outputs.exclusive(model_dir, "--model-dir"):
        assert json.loads(lock.read_text())["run_id"] != "other"


def test_the_lock_heartbeat_keeps_it_fresh(tmp_path):
    lock = storage.OutputLock(str(tmp_path / "model"), heartbeat_s=0.05)
    lock.acquire()
    try:
        old = time.time() - 3600
        os.utime(lock.path, (old, old))
        deadline = time.monotonic() + 30
        while os.stat(lock.path).st_mtime < time.time() - 60:
            assert time.monotonic() < deadline, "the heartbeat never touched the lock"
            time.sleep(0.05)
    finally:
        lock.release()
    assert not os.path.exists(lock.path)


# ----------------------------------------------------------------------------------------------
# Outputs checked writable before TensorFlow loads
# ----------------------------------------------------------------------------------------------

HEAVY = ("tensorflow", "keras", "tensorflow_transform", "tfx_bsl", "kfp", "keras_tuner")
CHECK = """
import json, sys, time
from generic_trainer.cli import main
started = time.monotonic()
code = main(sys.argv[1:])
print(json.dumps({"code": code, "seconds": time.monotonic() - started,
                  "heavy": [m for m in HEAVY if m in sys.modules]}))
""".replace("HEAVY", repr(HEAVY))


def _immutable(path: Path) -> bool:
    """Make `path` unwritable even for root (chattr +i); chmod when not root. False when neither
    works."""
    if os.geteuid() != 0:
        path.chmod(0o555)
        return True
    return (
        shutil.which("chattr") is not None
        and subprocess.run(["chattr", "+i", str(path)]).returncode == 0
    )


def _writable_again(path: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(path)])
    path.chmod(0o755)


def _train(tmp: Path, **flags: str) -> list[str]:
    args = [
        "train",
        "--examples",
        str(PENGUIN / "data"),
        "--module-file",
        str(PENGUIN / "module.py"),
        "--model-dir",
        str(tmp / "model"),
    ]
    for flag, value in flags.items():
        args += [f"--{flag.replace('_', '-')}", value]
    return args


def _tune(tmp: Path, **flags: str) -> list[str]:
    args = [
        "tune",
        "--examples",
        str(PENGUIN / "data"),
        "--module-file",
        str(PENGUIN / "module.py"),
        "--best-hyperparameters-dir",
        str(tmp / "best"),
    ]
    for flag, value in flags.items():
        args += [f"--{flag.replace('_', '-')}", value]
    return args


CASES = {
    "file-typed --model-dir": (
        lambda t: _train(t, model_dir=str(t / "afile")),
        "--model-dir",
        "is a regular file",
    ),
    "read-only --model-dir": (
        lambda t: _train(t, model_dir=str(t / "ro" / "model")),
        "--model-dir",
        "is not writable",
    ),
    "--metrics-file is a dir": (
        lambda t: _train(t, metrics_file=str(t / "adir")),
        "--metrics-file",
        "is a directory",
    ),
    "--metrics-file under a file": (
        lambda t: _train(t, metrics_file=str(t / "afile" / "m.json")),
        "--metrics-file",
        "is a regular file, not a directory",
    ),
    "--report-file in a read-only dir": (
        lambda t: _train(t, report_file=str(t / "ro" / "r.html")),
        "--report-file",
        "is not writable",
    ),
    "--executor-output-file in a read-only dir": (
        lambda t: _train(t, executor_output_file=str(t / "ro" / "out.json")),
        "--executor-output-file",
        "is not writable",
    ),
    "--model-run-dir is a file": (
        lambda t: _train(t, model_run_dir=str(t / "afile")),
        "--model-run-dir",
        "is a regular file",
    ),
    "--checkpoint-dir under a file": (
        lambda t: _train(t, checkpoint_dir=str(t / "afile" / "c")),
        "--checkpoint-dir",
        "is a regular file",
    ),
    "tune: --best-hyperparameters-dir is a file": (
        lambda t: _tune(t, best_hyperparameters_dir=str(t / "afile")),
        "--best-hyperparameters-dir",
        "is a regular file",
    ),
    "tune: read-only --metrics-file dir": (
        lambda t: _tune(t, metrics_file=str(t / "ro" / "m.json")),
        "--metrics-file",
        "is not writable",
    ),
    "tune: --tuner-results-file is a dir": (
        lambda t: _tune(t, tuner_results_file=str(t / "adir")),
        "--tuner-results-file",
        "is a directory",
    ),
    "evaluate: --blessing-dir is a file": (
        lambda t: [
            "evaluate",
            "--model",
            str(t / "adir"),
            "--examples",
            str(PENGUIN / "data"),
            "--eval-config",
            '{"label_key": "species"}',
            "--blessing-dir",
            str(t / "afile"),
        ],
        "--blessing-dir",
        "is a regular file",
    ),
    "infra-validate: read-only --metrics-file dir": (
        lambda t: [
            "infra-validate",
            "--model",
            str(t / "adir"),
            "--examples",
            str(PENGUIN / "data"),
            "--blessing-dir",
            str(t / "blessing"),
            "--metrics-file",
            str(t / "ro" / "m.json"),
        ],
        "--metrics-file",
        "is not writable",
    ),
    # The data verbs run through the same runner: their outputs are checked before Beam or
    # TensorFlow load.
    "import-examples: --output under a file": (
        lambda t: [
            "import-examples",
            "--input",
            str(t / "x.csv"),
            "--output",
            str(t / "afile" / "out"),
        ],
        "--output",
        "is a regular file, not a directory",
    ),
    "import-examples: read-only --schema-output dir": (
        lambda t: [
            "import-examples",
            "--input",
            str(t / "x.csv"),
            "--output",
            str(t / "out"),
            "--schema-output",
            str(t / "ro" / "schema"),
        ],
        "--schema-output",
        "is not writable",
    ),
    "transform: --transformed-examples under a file": (
        lambda t: [
            "transform",
            "--examples",
            str(PENGUIN / "data"),
            "--schema",
            str(PENGUIN / "data"),
            "--module-file",
            "m.py",
            "--transform-graph",
            str(t / "graph"),
            "--transformed-examples",
            str(t / "afile" / "x"),
        ],
        "--transformed-examples",
        "is a regular file",
    ),
    "transform: --executor-output-file is a dir": (
        lambda t: [
            "transform",
            "--examples",
            str(PENGUIN / "data"),
            "--schema",
            str(PENGUIN / "data"),
            "--module-file",
            "m.py",
            "--transform-graph",
            str(t / "graph"),
            "--executor-output-file",
            str(t / "adir"),
        ],
        "--executor-output-file",
        "is a directory",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_unwritable_outputs_fail_before_tensorflow_loads(tmp_path, case):
    make_args, flag, message = CASES[case]
    (tmp_path / "afile").write_text("a file")
    (tmp_path / "adir").mkdir()
    (tmp_path / "ro").mkdir()
    if "read-only" in case and not _immutable(tmp_path / "ro"):
        pytest.skip("cannot make a directory read-only here (root without chattr)")
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CHECK, *make_args(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env=cli_env(),
        )
    finally:
        _writable_again(tmp_path / "ro")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 2 and result["heavy"] == [], (result, proc.stderr[-2000:])
    assert f"failed: {flag}: " in proc.stderr and message in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "model").exists() and not list(tmp_path.glob(".*staging*"))


# ----------------------------------------------------------------------------------------------
# Real CLI runs
# ----------------------------------------------------------------------------------------------

MODULE = '''
"""A run_fn that exports a tiny SavedModel carrying its version, and misbehaves as custom_config
says."""
import os
import shutil
import time

import tensorflow as tf


def run_fn(fn_args):
    cfg = fn_args.custom_config
    # write where the published model would be if staging sat inside the model dir
    if cfg.get("escape"):
        target = os.path.join(fn_args.serving_model_dir, "..", "..", "Format-Serving")
        os.makedirs(target, exist_ok=True)
        with open(os.path.join(target, "saved_model.pb"), "w") as f:
            f.write("junk")
    if cfg.get("replace_with_file"):  # an output dir turned into a file behind the runtime's back
        shutil.rmtree(cfg["replace_with_file"])
        with open(cfg["replace_with_file"], "w") as f:
            f.write("not a directory")
    if cfg.get("wait_for"):  # hold the run open until the test says so
        while not os.path.exists(cfg["wait_for"]):
            time.sleep(0.1)
    if cfg.get("no_model"):
        return None
    module = tf.Module()
    module.version = tf.Variable(float(cfg["version"]))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def serve(x):
        return {"y": x * module.version}

    tf.saved_model.save(module, fn_args.serving_model_dir, signatures={"serving_default": serve})
    return {"version": float(cfg["version"])}
'''


@pytest.fixture()
def versioned_module(tmp_path) -> Path:
    path = tmp_path / "versioned_module.py"
    path.write_text(textwrap.dedent(MODULE))
    return path


def _args(module: Path, model_dir: Path, metrics: Path, **config) -> list[str]:
    return [
        "train",
        "--examples",
        PENGUIN / "data",
        "--module-file",
        module,
        "--model-dir",
        model_dir,
        "--metrics-file",
        metrics,
        "--custom-config",
        json.dumps(config),
    ]


def _model_version(model_dir: Path) -> float:
    import tensorflow as tf

    return float(tf.saved_model.load(str(model_dir / "Format-Serving")).version.numpy())


@pytest.mark.slow
def test_two_concurrent_runs_on_one_model_dir_one_wins_whole(versioned_module, tmp_path):
    """Started together: one run holds the model dir and publishes its model and its metrics; the
    other fails
    at once (exit 2, before TensorFlow loads) naming --model-dir and the winner's pid and host."""
    model_dir = tmp_path / "model"
    release = tmp_path / "release"
    procs = []
    for version in (1, 2):
        command = [
            sys.executable,
            "-m",
            "generic_trainer",
            *map(
                str,
                _args(
                    versioned_module,
                    model_dir,
                    tmp_path / f"metrics{version}.json",
                    version=version,
                    wait_for=str(release),
                ),
            ),
        ]
        procs.append(
            subprocess.Popen(
                command, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    try:
        deadline = time.monotonic() + 300
        while all(p.poll() is None for p in procs):  # the winner waits in run_fn for `release`
            assert time.monotonic() < deadline, "neither run ended"
            time.sleep(0.1)
    finally:
        release.write_text("")
    results = [(p, *p.communicate(timeout=300)) for p in procs]
    codes = sorted(p.returncode for p, _, _ in results)
    assert codes == [0, 2], [err[-2000:] for _, _, err in results]
    ((winner, _, _),) = [r for r in results if r[0].returncode == 0]
    ((loser, _, loser_err),) = [r for r in results if r[0].returncode == 2]
    won = procs.index(winner) + 1
    assert (
        f"--model-dir: {model_dir} is in use by another run: pid {winner.pid} on host" in loser_err
    ), loser_err
    assert (
        "resolved" not in loser_err
    )  # it failed before creating a strategy (TensorFlow never loaded)
    assert json.loads((tmp_path / f"metrics{won}.json").read_text())["version"] == won
    assert not (tmp_path / f"metrics{3 - won}.json").exists()
    assert _model_version(model_dir) == won
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["model", f"metrics{won}.json", "versioned_module.py", "release"]
    )


@pytest.mark.slow
def test_run_fn_escaping_its_staging_dir_cannot_touch_the_published_model(
    versioned_module, tmp_path
):
    """A run_fn writing to serving_model_dir/../../Format-Serving (and exporting nothing) fails with
    exit 4;
    the model published before is untouched. A killed run's lock and staging are cleaned up
    first."""
    model_dir = tmp_path / "out" / "model"
    first = run_cli(
        _args(versioned_module, model_dir, tmp_path / "m1.json", version=1), timeout=300
    )
    assert first.returncode == 0, first.stderr[-3000:]
    # What a SIGKILLed run on this host leaves behind.
    (tmp_path / "out" / ".model.lock").write_text(
        json.dumps(
            {
                "pid": _dead_pid(),
                "host": socket.gethostname(),
                "started": time.time(),
                "run_id": "killed",
            }
        )
    )
    (tmp_path / "out" / ".model.staging-0123456789ab" / "Format-Serving").mkdir(parents=True)

    bad = run_cli(
        _args(
            versioned_module, model_dir, tmp_path / "m2.json", version=2, escape=True, no_model=True
        ),
        timeout=300,
    )
    assert bad.returncode == 4, bad.stderr[-3000:]
    assert "wrote no model" in bad.stderr
    assert "took over the stale lock of a run that is gone" in bad.stderr
    assert ".model.staging-0123456789ab" in bad.stderr
    assert _model_version(model_dir) == 1
    assert sorted(os.listdir(model_dir / "Format-Serving")) == [
        "assets",
        "fingerprint.pb",
        "saved_model.pb",
        "variables",
    ]
    assert not (tmp_path / "m2.json").exists()
    # Nothing of the failed run is left but what its run_fn wrote outside the model dir.
    assert sorted(os.listdir(tmp_path / "out")) == ["Format-Serving", "model"]


@pytest.mark.slow
def test_an_executor_output_that_cannot_be_written_publishes_nothing(versioned_module, tmp_path):
    """The executor output is written before the model is published: when that fails (exit 4), no
    model."""
    out_dir = tmp_path / "kfp"
    out_dir.mkdir()
    model = {
        "name": "model",
        "uri": str(tmp_path / "model"),
        "type": {"schemaTitle": "system.Model"},
    }
    executor_input = {
        "inputs": {
            "parameterValues": {"custom_config": {"version": 1, "replace_with_file": str(out_dir)}}
        },
        "outputs": {
            "artifacts": {"model": {"artifacts": [model]}},
            "outputFile": str(out_dir / "executor_output.json"),
        },
    }
    proc = run_cli(
        [
            "train",
            "--executor-input",
            json.dumps(executor_input),
            "--examples",
            PENGUIN / "data",
            "--module-file",
            versioned_module,
        ],
        timeout=300,
    )
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert f"could not write the executor output {out_dir}/executor_output.json" in proc.stderr
    assert not (tmp_path / "model" / "Format-Serving").exists()
    assert not (
        tmp_path / "model" / "schemata"
    ).exists()  # staged with the model, so not published either
    assert not list(tmp_path.glob(".model.*"))  # no staging, no lock


def test_a_staged_dir_is_published_whole_or_not_at_all(tmp_path):
    from generic_trainer.artifacts.staged import StagedDir

    final = tmp_path / "out"
    with StagedDir(str(final)) as stage:
        (Path(stage.path) / "a.txt").write_text("new")
        assert not final.exists()
        stage.publish()
    assert (final / "a.txt").read_text() == "new"
    with pytest.raises(RuntimeError, match="before the publish"):
        with StagedDir(str(final)) as stage:
            (Path(stage.path) / "a.txt").write_text("newer")
            raise RuntimeError("failed before the publish")
    assert (final / "a.txt").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no staging left beside it


def test_the_metrics_file_is_strict_json_with_nested_nan_as_null(tmp_path):
    from generic_trainer.artifacts import outputs

    path = tmp_path / "metrics.json"
    outputs.write_metrics_file(str(path), {"ok": 1.0, "latencies_ms": [2.0, float("nan")]})

    def refuse(name):
        raise AssertionError(f"{name} in a metrics file")

    assert json.loads(path.read_text(), parse_constant=refuse) == {
        "latencies_ms": [2.0, None],
        "ok": 1.0,
    }
