"""Hostile paths and trees (issue 31, causes 1-5, 8, 12, 13, 17; issue 30's point 6): push's
versions, locks on every output and on the model read, outputs against every input, blessing
markers, push's staging on SIGTERM, bounded walks, paths classified, lock liveness, compression per
file, empty feature names. Real files, the real CLI in this process (push imports no TensorFlow).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import time
from pathlib import Path

import pytest
from conftest import run_cli
from generic_trainer import cli, evaluate, infra_validate, push
from generic_trainer.artifacts import lock_owner, outputs
from generic_trainer.errors import Preempted, UserInputError
from generic_trainer.fit import accelerator
from generic_trainer.intake.push_request import build_push_request

MODEL = {
    "saved_model.pb": b"graph" * 20,
    "variables/variables.index": b"index",
    "variables/variables.data-00000-of-00001": b"data" * 100,
}


def _model(root: Path) -> Path:
    for rel, data in MODEL.items():
        (root / "Format-Serving" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "Format-Serving" / rel).write_bytes(data)
    return root


def _blessing(path: Path, *markers: str) -> Path:
    path.mkdir(parents=True)
    for marker in markers:
        (path / marker).write_text("")
    return path


def _main(argv: list, capsys) -> tuple[int, str]:
    code = cli.main([str(a) for a in argv], end_process=False)
    return code, capsys.readouterr().err


def _entries(directory: Path) -> list[str]:
    return os.listdir(directory) if directory.exists() else []


def _deep_tree(top: Path, levels: int) -> None:
    """`top/d/d/...` `levels` deep (os.makedirs itself recurses)."""
    for _ in range(levels):
        top.mkdir(exist_ok=True)
        top = top / "d"


def _remove_tree(top: Path) -> None:
    """Remove `top` bottom-up without recursion (pytest's cleanup, shutil.rmtree, recurse per
    level and fail on a tree 1,100 deep)."""
    order, pending = [], [str(top)]
    while pending:
        order.append(pending.pop())
        pending += [e.path for e in os.scandir(order[-1]) if e.is_dir(follow_symlinks=False)]
    for path in reversed(order):
        for entry in os.scandir(path):
            if not entry.is_dir(follow_symlinks=False):
                os.unlink(entry.path)
        os.rmdir(path)


def _live_lock(directory: Path) -> Path:
    """The lock file a live run of this host holds on `directory` (this process)."""
    lock = directory.parent / f".{directory.name}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    owner = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
    lock.write_text(json.dumps({**owner, "run_id": "other"}))
    return lock


@pytest.fixture()
def pushing(tmp_path):
    model = _model(tmp_path / "model")
    blessed = _blessing(tmp_path / "blessing", "BLESSED")
    dest = tmp_path / "serving"
    argv = ["push", "--model", model, "--model-blessing", blessed, "--push-destination", dest]
    return {"tmp": tmp_path, "model": model, "blessed": blessed, "dest": dest, "argv": argv}


# --- cause 1: push never reports a path it did not write ---


def test_a_version_that_appears_during_the_push_is_not_reported(pushing):
    request = build_push_request(
        {"model": str(pushing["model"]), "push_destination": str(pushing["dest"])}
    )
    reported = []

    def before_publish(result):  # KFP's executor output is written here
        reported.append(result.version)
        if len(reported) == 1:  # someone else's dir of that name appears meanwhile
            (pushing["dest"] / result.version).mkdir()
            (pushing["dest"] / result.version / "other").write_text("not ours")

    result = push.run(request, before_publish)
    first = reported[0]
    assert result.version == reported[-1] == str(int(first) + 1)
    assert os.listdir(pushing["dest"] / first) == ["other"]
    assert sorted(os.listdir(pushing["dest"] / result.version)) == ["saved_model.pb", "variables"]


# --- cause 2: every output locked (push, evaluate, infra-validate: the face's shared mechanism) ---


def test_push_takes_its_output_locks_and_reads_the_model_under_its_lock(pushing, capsys):
    tmp, argv = pushing["tmp"], pushing["argv"]
    for held, flag in (
        (tmp / "pushed", "--pushed-model-dir"),
        (pushing["dest"], "--push-destination"),
        (pushing["model"], "--model"),
    ):
        lock = _live_lock(held)
        code, err = _main([*argv, "--pushed-model-dir", tmp / "pushed"], capsys)
        assert code == 2, err
        assert f"{flag}: {held} is" in err and f"pid {os.getpid()}" in err, err
        assert not (tmp / "pushed").exists() and _entries(pushing["dest"]) == []
        lock.unlink()
    code, err = _main([*argv, "--pushed-model-dir", tmp / "pushed"], capsys)
    assert code == 0, err
    assert not [n for n in os.listdir(tmp) if n.endswith(".lock")]  # all released


def test_evaluate_and_infra_validate_lock_their_blessing_dir(pushing, capsys, penguin):
    """Two evaluates (or infra-validates) into one --blessing-dir: the second fails at once."""
    blessing = pushing["tmp"] / "verdict"
    _live_lock(blessing)
    common = [
        "--model",
        pushing["model"],
        "--examples",
        penguin / "data",
        "--blessing-dir",
        blessing,
    ]
    config = json.dumps({"label_key": "species"})
    for verb in (["evaluate", "--eval-config", config], ["infra-validate"]):
        code, err = _main([*verb, *common], capsys)
        assert code == 2 and f"--blessing-dir: {blessing} is in use by another run" in err, err
        assert not blessing.exists()
    assert evaluate.VERB.lock_outputs and infra_validate.VERB.lock_outputs


def test_a_model_that_changes_while_it_is_copied_is_not_pushed(pushing, monkeypatch):
    request = build_push_request(
        {
            "model": str(pushing["model"]),
            "model_blessing": str(pushing["blessed"]),
            "push_destination": str(pushing["dest"]),
        }
    )
    real_copy = shutil.copyfile

    def copy_while_a_train_publishes(src, dst):
        real_copy(src, dst)
        index = pushing["model"] / "Format-Serving" / "variables" / "variables.index"
        index.write_bytes(b"another model's index")  # what a publish meanwhile does
        return dst

    monkeypatch.setattr(shutil, "copyfile", copy_while_a_train_publishes)
    with pytest.raises(UserInputError, match="changed while they were copied"):
        push.run(request)
    assert os.listdir(pushing["dest"]) == []  # no version, no staging


# --- cause 3: outputs inside inputs ---


def test_an_output_on_an_input_is_refused_before_anything_is_written(pushing, capsys):
    tmp, argv = pushing["tmp"], pushing["argv"]
    infra = _blessing(tmp / "infra", "INFRA_BLESSED")
    for pushed, flag in ((pushing["blessed"], "--model-blessing"), (infra, "--infra-blessing")):
        extra = ["--infra-blessing", infra, "--pushed-model-dir", pushed]
        code, err = _main([*argv, *extra], capsys)
        assert code == 2 and f"lies inside the input {flag}" in err, err
    assert os.listdir(pushing["blessed"]) == ["BLESSED"] and os.listdir(infra) == ["INFRA_BLESSED"]
    out = pushing["model"] / "Format-Serving" / "tflite"
    code, err = _main(["export-tflite", "--model", pushing["model"], "--output", out], capsys)
    assert code == 2 and "lies inside the input --model" in err and not out.exists(), err


def test_every_verbs_path_inputs_come_from_its_declaration(tmp_path, capsys, penguin):
    from generic_trainer.intake.output_checks import verb_inputs

    inputs = {v.name: {flag for _, flag in verb_inputs(v)} for v in cli.DECLARATIONS}
    assert {"--model", "--model-blessing", "--infra-blessing"} <= inputs["push"]
    assert {"--model", "--baseline-model", "--eval-config", "--schema"} <= inputs["evaluate"]
    assert {"--module-file", "--hyperparameters", "--config-file"} <= inputs["train"]
    assert all("--executor-output-file" not in flags for flags in inputs.values())
    model = tmp_path / "model"
    model.mkdir()
    (model / "hp.json").write_text('{"learning_rate": 0.1}')  # replaced when the model publishes
    argv = ["train", "--examples", penguin / "data", "--module-file", penguin / "module.py"]
    code, err = _main([*argv, "--model-dir", model, "--hyperparameters", model / "hp.json"], capsys)
    assert code == 2 and "lies around the input --hyperparameters" in err, err


# --- cause 4: blessing markers ---


@pytest.mark.parametrize(
    "flag, markers, needle",
    [
        ("--model-blessing", ("BLESSED", "NOT_BLESSED"), "holds both BLESSED and NOT_BLESSED"),
        (
            "--infra-blessing",
            ("INFRA_BLESSED", "INFRA_NOT_BLESSED"),
            "holds both INFRA_BLESSED and INFRA_NOT_BLESSED",
        ),
        ("--model-blessing", ("BLESSED/",), "BLESSED is a directory; the marker"),
        ("--model-blessing", ("BLESSED@",), "BLESSED is a dangling symlink to"),
    ],
)
def test_a_blessing_holds_exactly_one_regular_marker(pushing, capsys, flag, markers, needle):
    blessing = pushing["tmp"] / "b"
    blessing.mkdir()
    for marker in markers:
        if marker.endswith("/"):
            (blessing / marker[:-1]).mkdir()
        elif marker.endswith("@"):
            os.symlink(pushing["tmp"] / "nowhere", blessing / marker[:-1])
        else:
            (blessing / marker).write_text("")
    code, err = _main([*pushing["argv"], flag, blessing], capsys)
    assert code == 2 and f"{flag}: " in err and needle in err, err
    assert not pushing["dest"].exists()


def test_without_a_blessing_the_model_is_pushed_with_a_warning(pushing, capsys):
    argv = ["push", "--model", pushing["model"], "--push-destination", pushing["dest"]]
    code, err = _main(argv, capsys)
    assert code == 0 and "no blessing was given" in err, err
    assert len(os.listdir(pushing["dest"])) == 1
    not_blessed = _blessing(pushing["tmp"] / "nb", "NOT_BLESSED")
    code, err = _main([*argv, "--model-blessing", not_blessed], capsys)
    assert code == 0 and "not pushed: the evaluator did not bless" in err, err
    assert len(os.listdir(pushing["dest"])) == 1


# --- cause 5: push's staging on SIGTERM, stale staging swept ---


def test_sigterm_removes_the_partial_copy_and_the_next_push_sweeps_a_dead_one(pushing, monkeypatch):
    request = build_push_request(
        {
            "model": str(pushing["model"]),
            "model_blessing": str(pushing["blessed"]),
            "push_destination": str(pushing["dest"]),
        }
    )
    real_copy, calls, previous = shutil.copyfile, [], signal.getsignal(signal.SIGTERM)

    def copy_then_sigterm(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # the real signal, to this process
        return real_copy(src, dst)

    monkeypatch.setattr(shutil, "copyfile", copy_then_sigterm)
    with pytest.raises(Preempted, match="the partial copy .* was removed"):
        push.run(request)
    assert os.listdir(pushing["dest"]) == [] and ".staging-" in calls[0]
    assert signal.getsignal(signal.SIGTERM) == previous  # the handler is put back
    monkeypatch.undo()
    dead = pushing["dest"] / ".1700000000.staging-0123456789ab"  # a SIGKILLed push's
    (dead / "variables").mkdir(parents=True)
    proc = run_cli([*pushing["argv"]], timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "removed" in proc.stderr and not dead.exists()
    assert [n for n in os.listdir(pushing["dest"]) if n.startswith(".")] == []


# --- cause 6 (first case): push walks the model iteratively, within a bound ---


def test_a_model_thousands_of_dirs_deep_is_refused_with_a_message(pushing, capsys):
    deep = pushing["model"] / "Format-Serving" / "assets"
    _deep_tree(deep, 1100)
    try:
        code, err = _main(pushing["argv"], capsys)
    finally:
        _remove_tree(deep)
    assert code == 2 and "nests directories deeper than 64 levels" in err, err
    assert _entries(pushing["dest"]) == []


# --- cause 8: paths of an unexpected type ---


def test_locks_that_are_not_regular_files_are_reported_and_left_alone(tmp_path):
    lock = tmp_path / ".model.lock"
    lock.mkdir()
    with pytest.raises(UserInputError, match=r"\.model\.lock is a directory, not a lock file"):
        with outputs.exclusive(str(tmp_path / "model"), "--model-dir"):
            pass
    lock.rmdir()
    os.symlink(tmp_path / "gone", lock)
    with pytest.raises(UserInputError, match="is a dangling symlink to .*gone, not a lock file"):
        with outputs.exclusive(str(tmp_path / "model"), "--model-dir"):
            pass
    assert lock.is_symlink() and not (tmp_path / "model").exists()


def test_destinations_outputs_and_schemas_say_what_the_path_is(pushing, capsys, tmp_path):
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    argv = ["push", "--model", pushing["model"], "--push-destination", tmp_path / "dangling"]
    code, err = _main(argv, capsys)
    assert code == 2 and "dangling is a dangling symlink to" in err, err
    os.mkfifo(tmp_path / "schema.pbtxt")
    from generic_trainer.records.schemas import load_schema

    with pytest.raises(UserInputError, match=r"schema.pbtxt is a FIFO \(named pipe\); expected"):
        load_schema(str(tmp_path / "schema.pbtxt"))
    with pytest.raises(UserInputError, match="/dev/zero is a character device"):
        load_schema("/dev/zero")
    (tmp_path / "real_out").mkdir()
    os.symlink(tmp_path / "real_out", tmp_path / "out_link")
    argv = ["import-examples", "--input", tmp_path / "x.csv", "--output", tmp_path / "out_link"]
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    code, err = _main(argv, capsys)
    assert code == 2 and "out_link is a symlink to" in err and "give the directory" in err, err


def test_gpus_are_counted_from_character_devices_only(tmp_path):
    (tmp_path / "nvidia0").write_bytes(b"")  # a regular file of that name is no GPU
    os.symlink("/dev/null", tmp_path / "nvidia1")  # a character device (as the runtime mounts)
    found = accelerator.detect({"PATH": ""}, dev_dir=str(tmp_path))
    assert found.found == 1 and "nvidia1" in found.evidence and "nvidia0" not in found.evidence


# --- cause 12: a lock's liveness by pid and process start time, never the pid alone ---


def test_a_reused_pid_does_not_hold_a_lock(tmp_path):
    me = lock_owner.process_started(os.getpid())
    assert me is not None
    lock = tmp_path / ".model.lock"
    base = {"pid": os.getpid(), "host": socket.gethostname(), "run_id": "previous"}
    # A restarted container: its supervisor has the pid the previous run recorded, but started
    # after that run took the lock (old record: no start time of its own).
    lock.write_text(json.dumps({**base, "started": me - 60}))
    with outputs.exclusive(str(tmp_path / "model"), "--model-dir"):
        assert json.loads(lock.read_text())["run_id"] != "previous"
    # A record with the process start time: another process with that pid is not the owner.
    lock.write_text(json.dumps({**base, "started": time.time(), "pid_started": me - 3600}))
    with outputs.exclusive(str(tmp_path / "model"), "--model-dir"):
        pass
    # The owner itself (pid and start time agree) still holds it.
    lock.write_text(json.dumps({**base, **lock_owner.identity(os.getpid()), "started": me + 1}))
    with pytest.raises(UserInputError, match="in use by another run"):
        with outputs.exclusive(str(tmp_path / "model"), "--model-dir"):
            pass
    if lock_owner.process_started(1) is not None:  # pid 1, after a restart: not the owner
        lock.write_text(
            json.dumps({**base, "pid": 1, "started": lock_owner.process_started(1) - 5})
        )
        with outputs.exclusive(str(tmp_path / "model"), "--model-dir"):
            pass


# --- cause 13: compression per file, by content ---


@pytest.mark.slow
def test_a_split_of_gzipped_and_plain_files_of_one_suffix_reads_whole(tmp_path):
    import gzip

    import tensorflow as tf
    from generic_trainer.records.example_files import compression_fn

    split = tmp_path / "Split-train"
    split.mkdir()
    for name, value in (("a.gz", b"one"), ("b.gz", b"two")):
        with tf.io.TFRecordWriter(str(split / name)) as writer:
            writer.write(value)
    (split / "a.gz").write_bytes(gzip.compress((split / "a.gz").read_bytes()))
    compression_of = compression_fn([str(split / "*")])
    records = []
    for name in ("a.gz", "b.gz"):
        path = str(split / name)
        records += list(tf.data.TFRecordDataset(path, compression_of(path)).as_numpy_iterator())
    assert records == [b"one", b"two"]


# --- cause 17: an empty feature name ---


def test_import_examples_refuses_an_empty_feature_name_naming_the_file(tmp_path):
    """TFRecord input (CSV and Parquet headers are refused alike: test_hostile_files)."""
    from generic_trainer.beam import tfrecords
    from generic_trainer.records import example_protos

    example = example_protos.example_class()()
    example.features.feature["x"].int64_list.value.append(1)
    example.features.feature[""].int64_list.value.append(2)
    payload = example.SerializeToString()
    crc = tfrecords.masked_crc32c
    header = struct.pack("<Q", len(payload))
    record = header + struct.pack("<I", crc(header)) + payload + struct.pack("<I", crc(payload))
    path = tmp_path / "data.tfrecord"
    path.write_bytes(record)
    facts = {"rows": 0, "columns": {}, "seen": {}}
    with pytest.raises(ValueError, match="data.tfrecord record 1: a feature has an empty name"):
        list(tfrecords.file_records(str(path), lambda p: open(p, "rb"), None, facts))


def test_the_copy_of_the_logs_walks_them_iteratively_and_copies_no_link(tmp_path):
    """The TensorBoard logs user code wrote are copied beside --model-run-dir: a tree 1,100 dirs
    deep is cut at the bound and a symlink (to a file outside) left out, with a warning; no
    RecursionError, nothing outside the logs copied."""
    logs = tmp_path / "logs"
    (logs / "train").mkdir(parents=True)
    (logs / "train" / "events.out.tfevents.1").write_bytes(b"events")
    os.symlink("/etc/hostname", logs / "train" / "link")
    _deep_tree(logs / "deep", 1100)
    try:
        outputs.copy_model_run(str(logs), str(tmp_path / "copy"))
        assert (tmp_path / "copy" / "train" / "events.out.tfevents.1").read_bytes() == b"events"
        assert not (tmp_path / "copy" / "train" / "link").exists()
        assert (tmp_path / "copy" / "deep").is_dir()  # down to the bound
    finally:
        _remove_tree(logs / "deep")
        _remove_tree(tmp_path / "copy")
