"""Hostile files and paths (issue 24): outputs that are not regular files, overlapping and unmounted
outputs, non-regular entries in a split, random record payloads, damaged gzip, absurd lock files,
unbounded reads, a full disk, NaN metrics and a run_fn that changes the working directory. Most are
checked before
TensorFlow loads; the README's hostile table lists them."""

from __future__ import annotations

import errno
import gzip
import json
import os
import shutil
import socket
import struct
import sys
import time
from pathlib import Path

import pytest
from conftest import PENGUIN, run_cli
from generic_trainer.artifacts import files, outputs
from generic_trainer.errors import OutputError, UserInputError
from generic_trainer.intake import output_checks
from generic_trainer.intake.fit_request import build_train_request, load_hyperparameters

HOSTILE = Path(__file__).parent / "hostile"
HEAVY = ("tensorflow", "keras")


def _train_values(tmp_path: Path, **extra) -> dict:
    return {
        "examples": str(PENGUIN / "data"),
        "module_file": str(PENGUIN / "module.py"),
        "model_dir": str(tmp_path / "model"),
        **extra,
    }


def _check(request, executor_output_file=None):
    output_checks.check_outputs(request, executor_output_file)


# ---------------------------------------------------------------------------------------------
# Item 1: an output replaces only a regular file
# ---------------------------------------------------------------------------------------------


def _specials(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sock_path = tmp_path / "sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    links = {}
    for name, target in (
        ("link-null", "/dev/null"),
        ("link-full", "/dev/full"),
        ("link-fifo", str(fifo)),
    ):
        (tmp_path / name).symlink_to(target)
        links[name] = tmp_path / name
    return {
        "/dev/null": Path("/dev/null"),
        "/dev/full": Path("/dev/full"),
        "fifo": fifo,
        "socket": sock_path,
        **links,
    }


def test_metrics_file_that_is_not_a_regular_file_is_refused_before_anything_runs(tmp_path):
    for name, path in _specials(tmp_path).items():
        request = build_train_request(_train_values(tmp_path, metrics_file=str(path)), environ={})
        with pytest.raises(UserInputError, match="not a regular file") as e:
            _check(request)
        assert e.value.input_name == "--metrics-file", name
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


def test_executor_output_file_dev_full_is_refused(tmp_path):
    request = build_train_request(_train_values(tmp_path), environ={})
    with pytest.raises(UserInputError, match="/dev/full is a character device") as e:
        _check(request, "/dev/full")
    assert e.value.input_name == "--executor-output-file"


def test_atomic_write_never_replaces_a_special_file(tmp_path):
    for name, path in _specials(tmp_path).items():
        with pytest.raises(OutputError, match="not a regular file"):
            files.write_file_atomic(str(path), "{}")
        assert not os.path.isfile(path) or name.startswith("link"), name
    assert not list(tmp_path.glob("*.tmp-*"))
    # A symlink to a regular file: the link itself (the output's own path) is replaced, never its
    # target.
    target = tmp_path / "elsewhere.json"
    target.write_text("keep")
    (tmp_path / "out.json").symlink_to(target)
    files.write_file_atomic(str(tmp_path / "out.json"), "new")
    assert target.read_text() == "keep" and (tmp_path / "out.json").read_text() == "new"


@pytest.mark.parametrize(
    "target, kind",
    [
        ("/dev/null", "/dev/null is a character device"),
        ("/proc/self/fd/1", "/proc/self/fd/1 is a FIFO (named pipe) (it is a symlink"),
    ],
)
def test_the_cli_refuses_special_metrics_files_before_tensorflow(tmp_path, target, kind):
    proc = run_cli(
        [
            "train",
            "--examples",
            PENGUIN / "data",
            "--module-file",
            PENGUIN / "module.py",
            "--model-dir",
            tmp_path / "model",
            "--metrics-file",
            target,
        ],
        timeout=120,
    )  # stdout: a pipe
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"--metrics-file: {kind}" in proc.stderr
    assert "Format-Serving" not in os.listdir(tmp_path) and not (tmp_path / "model").exists()


# ---------------------------------------------------------------------------------------------
# Item 2: every path absolute at the edge
# ---------------------------------------------------------------------------------------------


def test_every_path_of_a_request_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(PENGUIN / "data", tmp_path / "data")
    request = build_train_request(
        {
            "examples": "data",
            "module_file": str(PENGUIN / "module.py"),
            "model_dir": "model",
            "metrics_file": "m.json",
            "report_file": "r.html",
            "checkpoint_dir": "ck",
        },
        environ={},
    )
    for field in (
        "examples",
        "model_dir",
        "model_run_dir",
        "checkpoint_dir",
        "metrics_file",
        "report_file",
    ):
        assert os.path.isabs(getattr(request, field)), field
    assert request.model_dir == str(tmp_path / "model")


# ---------------------------------------------------------------------------------------------
# Item 5: a gs:// output needs the mount
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("root_exists", [False, True])
def test_gs_output_without_the_mount_is_refused(tmp_path, root_exists):
    gcs = tmp_path / "gcs"
    if root_exists:
        gcs.mkdir()
    request = build_train_request(
        _train_values(tmp_path, model_dir="gs://bkt/run/model"),
        environ={"GENERIC_TRAINER_GCS_ROOT": str(gcs)},
    )
    with pytest.raises(UserInputError, match="gs://bkt/run/model is not mounted") as e:
        _check(request)
    assert e.value.input_name == "--model-dir" and not (gcs / "bkt").exists()
    (gcs / "bkt").mkdir(parents=True)
    _check(request)  # mounted: fine
    request = build_train_request(
        _train_values(tmp_path, metrics_file="gs://other/m.json"),
        environ={"GENERIC_TRAINER_GCS_ROOT": str(gcs)},
    )
    with pytest.raises(UserInputError, match="gs://other/m.json is not mounted"):
        _check(request)


# ---------------------------------------------------------------------------------------------
# Item 6: strict JSON, escaped metric names, non-numeric metrics named
# ---------------------------------------------------------------------------------------------


def test_nan_metrics_are_written_as_null_with_a_warning(tmp_path, caplog):
    path = tmp_path / "metrics.json"
    metrics = outputs.scalar_metrics(
        {
            "loss": float("nan"),
            "auc": float("-inf"),
            "acc": 0.5,
            "bad\nERROR forged\x00": 1.0,
            "notes": "text",
            "vec": [1, 2],
        }
    )
    outputs.write_metrics_file(str(path), metrics)
    written = json.loads(
        path.read_text(), parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}")
    )
    assert written == {"loss": None, "auc": None, "acc": 0.5, "bad\\nERROR forged\\x00": 1.0}
    log = caplog.text
    assert "metric loss is nan" in log and "metric auc is -inf" in log
    assert "notes" in log and "vec" in log and "not single numbers" in log
    assert "\nERROR forged" not in log


def test_executor_output_is_strict_json(tmp_path):
    from generic_trainer.artifacts import kfp_io
    from generic_trainer.artifacts.kfp_io import KfpOutputs

    kfp = KfpOutputs(
        output_file=str(tmp_path / "out.json"),
        artifacts={"metrics": {"name": "metrics", "uri": "x", "path": "x", "schema_title": ""}},
    )
    kfp_io.write_executor_output(kfp, {"metrics": {"loss": float("nan"), "n": [float("inf"), 1.0]}})
    body = json.loads((tmp_path / "out.json").read_text(), parse_constant=lambda c: pytest.fail(c))
    assert body["artifacts"]["metrics"]["artifacts"][0]["metadata"] == {
        "loss": None,
        "n": [None, 1.0],
    }


# ---------------------------------------------------------------------------------------------
# Item 8: a second writer of any verb's outputs fails at once, naming the holder
# ---------------------------------------------------------------------------------------------


def test_shared_checkpoint_dir_and_data_outputs_are_locked(tmp_path):
    shared = str(tmp_path / "ckpt")
    with outputs.exclusive_all(
        [(str(tmp_path / "model-a"), "--model-dir"), (shared, "--checkpoint-dir")]
    ):
        with pytest.raises(
            UserInputError, match=r"--checkpoint-dir: .* is in use by another run: pid \d+"
        ) as e:
            with outputs.exclusive_all(
                [(str(tmp_path / "model-b"), "--model-dir"), (shared, "--checkpoint-dir")]
            ):
                pass
        assert str(os.getpid()) in str(e.value)
        assert not (
            tmp_path / ".model-b.lock"
        ).exists()  # the first lock of the failed run was released
    out = tmp_path / "examples"
    with outputs.exclusive_all([(str(out), "--output")], new=("--output",)):
        out.mkdir()
        (out / "Split-train").mkdir()
    with pytest.raises(UserInputError, match="written by another run meanwhile"):
        with outputs.exclusive_all([(str(out), "--output")], new=("--output",)):
            pass


def test_a_second_import_examples_into_a_held_output_fails_at_once(tmp_path):
    """The second run, started while the first holds --output, fails at once (exit 2) naming the
    holder."""
    lock = tmp_path / ".out.lock"
    lock.write_text(
        json.dumps(
            {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "started": time.time(),
                "run_id": "first",
            }
        )
    )
    proc = run_cli(
        ["import-examples", "--input", PENGUIN / "penguins.csv", "--output", tmp_path / "out"],
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert (
        f"--output: {tmp_path / 'out'} is in use by another run: pid {os.getpid()}" in proc.stderr
    )
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------
# Item 9: overlapping dirs
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values, flag",
    [
        ({"checkpoint_dir": "{t}/model/ckpt"}, "--checkpoint-dir"),
        ({"model_dir": "{data}/model"}, "--model-dir"),
        ({"metrics_file": "{data}/Split-train/m.json"}, "--metrics-file"),
        ({"metrics_file": "{t}/ck/m.json", "checkpoint_dir": "{t}/ck"}, "--metrics-file"),
        ({"report_file": "{t}/m.json", "metrics_file": "{t}/m.json"}, "--metrics-file"),
        ({"metrics_file": "{t}/model/Format-Serving/m.json"}, "--metrics-file"),
        ({"report_file": "{t}/model/schemata/r.html"}, "--report-file"),
        ({"checkpoint_dir": "{t}/model"}, "--model-dir"),  # one path for two outputs
        ({"model_dir": "{t}", "examples": "{t}/model/data"}, "--model-dir"),
    ],
)
def test_overlapping_outputs_and_inputs_are_refused(tmp_path, values, flag):
    data = tmp_path / "data"
    shutil.copytree(PENGUIN / "data", data)
    (tmp_path / "model" / "data").mkdir(parents=True)
    shutil.copytree(PENGUIN / "data" / "Split-train", tmp_path / "model" / "data" / "Split-train")
    shutil.copytree(PENGUIN / "data" / "Split-eval", tmp_path / "model" / "data" / "Split-eval")
    values = {k: v.format(t=tmp_path, data=data) for k, v in values.items()}
    request = build_train_request(_train_values(tmp_path, examples=str(data)) | values, environ={})
    with pytest.raises(UserInputError, match="lies (inside|around)") as e:
        _check(request)
    assert e.value.input_name == flag


def test_the_default_layout_nests_without_complaint(tmp_path):
    _check(
        build_train_request(_train_values(tmp_path), environ={})
    )  # model/logs, model/logs/checkpoints
    # Output files beside the model (not in the parts a model replaces) or in its logs are fine too.
    _check(
        build_train_request(
            _train_values(
                tmp_path,
                metrics_file=str(tmp_path / "model" / "metrics.json"),
                report_file=str(tmp_path / "model" / "logs" / "r.html"),
            ),
            environ={},
        )
    )


def test_overlap_is_refused_by_the_cli_before_tensorflow(tmp_path):
    proc = run_cli(
        [
            "train",
            "--examples",
            PENGUIN / "data",
            "--module-file",
            PENGUIN / "module.py",
            "--model-dir",
            tmp_path / "model",
            "--checkpoint-dir",
            tmp_path / "model" / "ckpt",
        ],
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "--checkpoint-dir:" in proc.stderr and "lies inside --model-dir" in proc.stderr


# ---------------------------------------------------------------------------------------------
# Item 10: non-regular entries of a split
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, kind",
    [
        (lambda p: os.mkfifo(p / "data.fifo"), "FIFO"),
        (lambda p: (p / "zeros.gz").symlink_to("/dev/zero"), "character device"),
        (lambda p: (p / ".ipynb_checkpoints").mkdir(), "directory"),
        (lambda p: (p / "gone.gz").symlink_to(p / "nothing"), "which does not exist"),
    ],
)
def test_non_regular_entries_of_a_split_are_named(tmp_path, make, kind):
    from generic_trainer.records import example_files

    data = tmp_path / "data"
    shutil.copytree(PENGUIN / "data", data)
    make(data / "Split-train")
    with pytest.raises(UserInputError, match=f"split 'train': {data}/Split-train/.* is a .*{kind}"):
        example_files.split_file_patterns(str(data), ["train", "eval"])


def test_a_fifo_in_a_split_is_exit_2_before_tensorflow(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(PENGUIN / "data", data)
    os.mkfifo(data / "Split-train" / "stuck")
    proc = run_cli(
        [
            "train",
            "--examples",
            data,
            "--module-file",
            PENGUIN / "module.py",
            "--model-dir",
            tmp_path / "model",
        ],
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Split-train/stuck is a FIFO" in proc.stderr


# ---------------------------------------------------------------------------------------------
# Item 13 and damaged gzip: named by split, file and record
# ---------------------------------------------------------------------------------------------


def _tfrecord(payloads: list[bytes]) -> bytes:
    from generic_trainer.records.example_files import _masked_crc32c  # noqa: PLC2701 (the test builds framing)

    out = b""
    for p in payloads:
        header = struct.pack("<Q", len(p))
        out += (
            header
            + struct.pack("<I", _masked_crc32c(header))
            + p
            + struct.pack("<I", _masked_crc32c(p))
        )
    return out


@pytest.mark.slow
@pytest.mark.parametrize("schema", [None, str(PENGUIN / "schema.pbtxt")])
def test_random_payloads_are_bad_data_naming_split_file_and_record(tmp_path, schema):
    from generic_trainer.records import record_checks

    split = tmp_path / "Split-train"
    split.mkdir()
    rng = __import__("random").Random(24)
    payloads = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))) for _ in range(40)]
    payloads.insert(0, b"\xff\xfe\x80 not utf-8 \x81")
    (split / "random.tfrecord").write_bytes(_tfrecord(payloads))
    with pytest.raises(
        UserInputError, match=r"split 'train', .*random.tfrecord, record \d+: "
    ) as e:
        record_checks.check_first_records([str(split / "*")], schema)
    assert e.value.input_name == "--examples"


def test_damaged_gzip_names_split_and_file(tmp_path):
    from generic_trainer.records import example_files

    split = tmp_path / "Split-train"
    split.mkdir()
    good = gzip.compress(_tfrecord([b"x" * 100] * 50))
    (split / "a-good.gz").write_bytes(good)
    (split / "b-cut.gz").write_bytes(good[:-30])
    assert example_files.damaged_file([str(split / "*")]).startswith(
        f"split 'train', {split}/b-cut.gz: EOFError"
    )
    (split / "b-cut.gz").write_bytes(good + b"garbage after the stream")
    assert "b-cut.gz: BadGzipFile" in example_files.damaged_file([str(split / "*")])
    (split / "b-cut.gz").write_bytes(good)
    assert example_files.damaged_file([str(split / "*")]) is None


# ---------------------------------------------------------------------------------------------
# Lock files of any content; bounded reads; module files; a full disk
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        {"pid": 99999999999999999999999, "host": socket.gethostname()},
        {"pid": "1; rm -rf /", "host": socket.gethostname(), "started": "yesterday"},
        {"pid": -1, "host": socket.gethostname()},
        {"pid": 0},
        {"pid": True},
        {"pid": [1]},
        {"pid": 1.5, "started": 1e300},
    ],
)
def test_absurd_lock_files_are_taken_over_as_foreign(tmp_path, content, caplog):
    (tmp_path / ".model.lock").write_text(json.dumps(content))
    with outputs.exclusive(str(tmp_path / "model"), "--model-dir"):
        assert json.loads((tmp_path / ".model.lock").read_text())["pid"] == os.getpid()
    assert "took over a foreign lock file, no live run's" in caplog.text
    assert not (tmp_path / ".model.lock").exists()


def test_a_lock_file_that_is_huge_or_binary_is_foreign(tmp_path):
    (tmp_path / ".model.lock").write_bytes(b"\xff" * 200_000)
    with outputs.exclusive(str(tmp_path / "model"), "--model-dir"):
        pass
    (tmp_path / ".model.lock").write_bytes(
        b"\xff\xfe"
    )  # not UTF-8, fresh: judged by its age (held)
    with pytest.raises(UserInputError, match="has not yet recorded its pid"):
        with outputs.exclusive(str(tmp_path / "model"), "--model-dir"):
            pass


def test_a_live_lock_of_this_host_is_still_held(tmp_path):
    (tmp_path / ".model.lock").write_text(
        json.dumps(
            {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "started": time.time(),
                "run_id": "r",
            }
        )
    )
    with pytest.raises(UserInputError, match=f"pid {os.getpid()} on host"):
        with outputs.exclusive(str(tmp_path / "model"), "--model-dir"):
            pass


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/null", "fifo", "big"])
def test_hyperparameters_reads_are_bounded(tmp_path, path):
    if path == "fifo":
        os.mkfifo(tmp_path / "fifo")
    if (
        path == "big"
    ):  # sparse: 100 MiB of nothing, over every limit of the runtime's small-file reads
        with open(tmp_path / "big", "wb") as f:
            f.truncate(100 * 1024 * 1024)
    target = path if path.startswith("/") else str(tmp_path / path)
    with pytest.raises(UserInputError, match="not a regular file|over the limit") as e:
        load_hyperparameters(target)
    assert e.value.input_name == "--hyperparameters" and target in str(e.value)


@pytest.mark.parametrize("module", ["/dev/stdin", "{t}/module.txt", "{t}/module", "gs://b/module"])
def test_module_file_must_be_a_regular_py_file(tmp_path, module):
    from generic_trainer.fit import user_module

    (tmp_path / "module.txt").write_text("def run_fn(a): pass\n")
    (tmp_path / "module").write_text("def run_fn(a): pass\n")
    with pytest.raises(UserInputError, match=r"\.py") as e:
        user_module.fetch(module.format(t=tmp_path), str(tmp_path / "dl"))
    assert e.value.input_name == "--module-file"


def test_module_file_without_py_is_exit_2_before_tensorflow(tmp_path):
    (tmp_path / "module").write_text((PENGUIN / "module.py").read_text())
    code = (
        "import sys, json; from generic_trainer.cli import main; c = main(sys.argv[1:]); "
        f"print(json.dumps([c, [m for m in {HEAVY!r} if m in sys.modules]]))"
    )
    import subprocess

    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "train",
            "--examples",
            str(PENGUIN / "data"),
            "--module-file",
            str(tmp_path / "module"),
            "--model-dir",
            str(tmp_path / "m"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [2, []], proc.stderr[-2000:]
    assert "does not end in .py" in proc.stderr


@pytest.mark.parametrize("failure", ["enospc", "fsize"])
def test_a_full_disk_while_writing_is_exit_4_naming_the_path_and_leaves_no_temp_file(
    tmp_path, monkeypatch, failure
):
    path = tmp_path / "metrics.json"
    if failure == "enospc":
        real_open = open

        def full_disk(file, mode="r", *args, **kwargs):
            handle = real_open(file, mode, *args, **kwargs)
            if "x" in mode:
                handle.write = lambda text: (_ for _ in ()).throw(
                    OSError(errno.ENOSPC, "No space left on device")
                )
            return handle

        monkeypatch.setattr("builtins.open", full_disk)
        with pytest.raises(
            OutputError, match=f"could not write {path}: No space left on device"
        ) as e:
            outputs.write_metrics_file(str(path), {"loss": 1.0})
    else:
        import resource
        import subprocess

        script = (
            "import resource, signal; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
            "resource.setrlimit(resource.RLIMIT_FSIZE, (10, 10)); "
            "from generic_trainer.artifacts import outputs; import sys\n"
            "try:\n outputs.write_metrics_file(sys.argv[1], {'loss': 1.0, 'accuracy': 0.5})\n"
            "except Exception as e:\n print(type(e).__name__, e.exit_code, e)"
        )
        assert resource  # the child sets the limit
        proc = subprocess.run(
            [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60
        )
        assert proc.stdout.startswith("OutputWriteError 4 could not write"), (
            proc.stdout + proc.stderr
        )
        assert str(path) in proc.stdout
        e = None
    assert e is None or e.value.exit_code == 4
    assert not path.exists() and not list(tmp_path.glob("*.tmp-*"))


def test_tensorboard_summaries_on_a_full_disk_are_exit_4(tmp_path, monkeypatch):
    import tensorflow as tf

    def full(*args, **kwargs):
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    monkeypatch.setattr(tf.summary, "create_file_writer", full)
    with pytest.raises(
        OutputError, match=f"TensorBoard summaries in {tmp_path}/final: No space left"
    ):
        outputs.write_tensorboard_scalars(str(tmp_path), {"loss": 1.0}, step=1)


# ---------------------------------------------------------------------------------------------
# Item 2 and 6 through the CLI: a run_fn that changes directory and returns odd metrics
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_chdir_in_run_fn_keeps_relative_outputs_and_nan_metrics_become_null(tmp_path):
    proc = run_cli(
        [
            "train",
            "--examples",
            PENGUIN / "data",
            "--module-file",
            HOSTILE / "chdir_and_odd_metrics.py",
            "--model-dir",
            "model",
            "--metrics-file",
            "metrics.json",
            "--train-steps",
            "1",
        ],
        cwd=str(tmp_path),
        env={
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(HOSTILE), os.environ.get("PYTHONPATH")])
            )
        },
        timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "model" / "Format-Serving" / "saved_model.pb").is_file()
    metrics = json.loads(
        (tmp_path / "metrics.json").read_text(), parse_constant=lambda c: pytest.fail(c)
    )
    assert metrics["loss"] is None and metrics["auc"] is None and metrics["fine"] == 1.0
    assert metrics["acc\\nERROR forged: line\\x00"] == 0.5
    assert "metric loss is nan" in proc.stderr and "notes" in proc.stderr
    assert not any(line.startswith("ERROR forged") for line in proc.stderr.splitlines())


@pytest.mark.parametrize("damage", ["truncated", "garbage appended"])
def test_a_data_loss_error_while_training_names_split_and_file(tmp_path, damage):
    """What the input pipeline's DataLossError becomes (train's run_fn path and the Task loops use
    it)."""
    import tensorflow as tf
    from generic_trainer.records import record_checks

    data = tmp_path / "data"
    shutil.copytree(PENGUIN / "data", data)
    victim = sorted((data / "Split-eval").iterdir())[0]
    raw = victim.read_bytes()
    victim.write_bytes(
        raw[:-40] if damage == "truncated" else raw + b"\x00garbage after the gzip stream"
    )
    error = tf.errors.DataLossError(None, None, "corrupted record at 12345")
    bad = record_checks.decode_error(
        error, [str(data / "Split-train" / "*"), str(data / "Split-eval" / "*")], None
    )
    assert bad is not None and bad.exit_code == 2
    assert f"split 'eval', {victim}:" in str(bad) and "corrupted record at 12345" in str(bad)


def _live_lock(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "started": time.time(),
                "run_id": "the first run",
            }
        )
    )


def _heavy_after(args: list) -> tuple[int, list[str], str]:
    import subprocess

    code = (
        "import sys, json; from generic_trainer.cli import main; c = main(sys.argv[1:]); "
        f"print(json.dumps([c, [m for m in {HEAVY!r} if m in sys.modules]]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=300
    )
    code, heavy = json.loads(proc.stdout.strip().splitlines()[-1])
    return code, heavy, proc.stderr


def test_a_train_on_a_checkpoint_dir_in_use_fails_at_once(tmp_path):
    _live_lock(tmp_path / ".ck.lock")
    code, heavy, err = _heavy_after(
        [
            "train",
            "--examples",
            PENGUIN / "data",
            "--module-file",
            PENGUIN / "module.py",
            "--model-dir",
            tmp_path / "model-b",
            "--checkpoint-dir",
            tmp_path / "ck",
        ]
    )
    assert code == 2 and heavy == [], err[-2000:]  # before TensorFlow loads
    assert f"--checkpoint-dir: {tmp_path / 'ck'} is in use by another run: pid {os.getpid()}" in err
    assert not (tmp_path / ".model-b.lock").exists() and not (tmp_path / "model-b").exists()


def test_a_transform_into_a_transform_graph_in_use_fails_at_once(tmp_path):
    _live_lock(tmp_path / ".graph.lock")
    code, heavy, err = _heavy_after(
        [
            "transform",
            "--examples",
            PENGUIN / "data",
            "--schema",
            PENGUIN / "schema.pbtxt",
            "--module-file",
            PENGUIN / "module_transform.py",
            "--transform-graph",
            tmp_path / "graph",
        ]
    )
    assert code == 2 and heavy == [], err[-2000:]
    assert (
        f"--transform-graph: {tmp_path / 'graph'} is in use by another run: pid {os.getpid()}"
        in err
    )
    assert not (tmp_path / "graph").exists()
