"""The pusher (TFX's Pusher, filesystem destination), on real files through the real CLI and KFP's
executor input: a blessed model's SavedModel goes to <destination>/<Unix seconds>/ whole
(saved_model.pb last, staged then renamed), a model that is not blessed is exit 0 with pushed 0 and
the reason, an existing version dir is left alone, gs:// goes through the /gcs mount file by file,
and bad input is exit 2 before anything is written. The push of a real trained model, loaded back
from the pushed dir, is in the mnist pipeline (test_mnist_pipeline.py).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from conftest import run_cli
from generic_trainer import push
from generic_trainer.artifacts import storage
from generic_trainer.errors import OutputError, UserInputError
from generic_trainer.intake.push_request import build_push_request

# A SavedModel's layout, with contents that tell the files apart (push copies bytes; it never loads
# the model).
MODEL_FILES = {
    "saved_model.pb": b"\x08\x01graph" * 50,
    "fingerprint.pb": b"fp",
    "keras_metadata.pb": b"km",
    "variables/variables.index": b"index",
    "variables/variables.data-00000-of-00001": os.urandom(4096),
    "assets/vocab.txt": b"Adelie\nChinstrap\nGentoo\n",
    "assets.extra/tf_serving_warmup_requests": b"warm",
}


def _model(root: Path) -> Path:
    """A trainer model dir: <root>/Format-Serving holding a SavedModel's files, and the trainer's
    other files."""
    for rel, data in MODEL_FILES.items():
        path = root / "Format-Serving" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (root / "Format-TFLite").mkdir()
    (root / "Format-TFLite" / "model.tflite").write_bytes(b"tflite")
    return root


def _blessing(path: Path, marker: str, reasons: str = "") -> Path:
    path.mkdir(parents=True)
    (path / marker).write_text(reasons)
    return path


def _files(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@pytest.fixture()
def setup(tmp_path):
    model = _model(tmp_path / "model")
    return {
        "model": model,
        "blessed": _blessing(tmp_path / "eval_blessing", "BLESSED"),
        "infra_blessed": _blessing(tmp_path / "infra_blessing", "INFRA_BLESSED"),
        "dest": tmp_path / "serving" / "penguin",
        "tmp": tmp_path,
    }


def _push(setup, *extra, dest=None):
    return run_cli(
        [
            "push",
            "--model",
            setup["model"],
            "--model-blessing",
            setup["blessed"],
            "--push-destination",
            dest or setup["dest"],
            *extra,
        ],
        timeout=120,
    )


def test_a_blessed_model_is_pushed_whole_as_a_serving_version(setup):
    before = int(time.time())
    proc = _push(setup, "--infra-blessing", setup["infra_blessed"])
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    version = summary["pushed_version"]
    assert summary["pushed"] == 1 and before <= int(version) <= int(time.time())
    assert summary["pushed_destination"] == str(setup["dest"] / version)
    assert os.listdir(setup["dest"]) == [version]  # no staging left beside it
    # the SavedModel itself (TF Serving's layout), byte for byte; not the trainer's other formats
    assert _files(setup["dest"] / version) == MODEL_FILES
    assert (
        "the evaluator blessed the model" in proc.stderr
        and "the infra-validator blessed the model" in proc.stderr
    )
    assert "saved_model.pb last" in proc.stderr


def test_saved_model_pb_is_copied_last_and_the_version_appears_in_one_rename(setup, monkeypatch):
    copied, renamed = [], []
    real_copy = shutil.copyfile
    monkeypatch.setattr(
        shutil, "copyfile", lambda src, dst: (copied.append((src, dst)), real_copy(src, dst))[1]
    )
    real_rename = storage.rename_no_replace
    monkeypatch.setattr(
        storage, "rename_no_replace", lambda a, b: (renamed.append((a, b)), real_rename(a, b))[1]
    )
    request = build_push_request(
        {
            "model": str(setup["model"]),
            "model_blessing": str(setup["blessed"]),
            "push_destination": str(setup["dest"]),
        }
    )
    seen = []
    result = push.run(
        request, before_publish=lambda r: seen.append(sorted(os.listdir(setup["dest"])))
    )
    target = setup["dest"] / result.version
    pushes = [Path(src).relative_to(setup["model"] / "Format-Serving") for src, dst in copied]
    assert str(pushes[-1]) == "saved_model.pb" and len(pushes) == len(MODEL_FILES)
    assert all(
        Path(dst).parent.name.startswith(f".{result.version}.staging-")
        or Path(dst).parent.parent.name.startswith(f".{result.version}.staging-")
        for _, dst in copied
    )
    # the executor output is written while only the hidden staging dir is there; then one rename
    # publishes it
    assert len(seen[0]) == 1 and seen[0][0].startswith(f".{result.version}.staging-")
    assert [Path(b) for _, b in renamed] == [target]
    assert _files(target) == MODEL_FILES


def test_gs_destination_goes_through_the_mount_file_by_file_saved_model_last(setup, monkeypatch):
    gcs = setup["tmp"] / "gcs"
    gcs.mkdir()
    renamed = []
    real_rename = os.rename
    monkeypatch.setattr(os, "rename", lambda a, b: (renamed.append(b), real_rename(a, b))[1])
    request = build_push_request(
        {
            "model": str(setup["model"]),
            "model_blessing": str(setup["blessed"]),
            "push_destination": "gs://bucket/serving/penguin/",
            "gcs_root": str(gcs),
        }
    )
    assert request.on_gcs_fuse and request.destination_uri == "gs://bucket/serving/penguin"
    result = push.run(request)
    target = gcs / "bucket" / "serving" / "penguin" / result.version
    assert result.destination == f"gs://bucket/serving/penguin/{result.version}"
    # Cloud Storage FUSE renames a directory object by object: the files are moved one by one
    # instead
    moved = [str(Path(p).relative_to(target)) for p in renamed]
    assert moved[-1] == "saved_model.pb" and sorted(moved) == sorted(MODEL_FILES)
    assert _files(target) == MODEL_FILES and os.listdir(target.parent) == [result.version]


def test_a_failed_copy_leaves_no_version_and_no_staging(setup, monkeypatch):
    real_copy = shutil.copyfile
    calls = []

    def disk_full(src, dst):
        calls.append(src)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device", dst)
        return real_copy(src, dst)

    monkeypatch.setattr(shutil, "copyfile", disk_full)
    request = build_push_request(
        {
            "model": str(setup["model"]),
            "model_blessing": str(setup["blessed"]),
            "push_destination": str(setup["dest"]),
        }
    )
    with pytest.raises(OutputError) as err:
        push.run(request)
    assert (
        err.value.exit_code == 4
        and "--push-destination" in str(err.value)
        and "No space left" in str(err.value)
    )
    assert os.listdir(setup["dest"]) == []


def test_not_blessed_is_exit_0_pushed_0_with_the_reason(setup):
    not_blessed = _blessing(setup["tmp"] / "nb", "NOT_BLESSED", "accuracy 0.61 < lower bound 0.8\n")
    proc = run_cli(
        [
            "push",
            "--model",
            setup["model"],
            "--model-blessing",
            not_blessed,
            "--push-destination",
            setup["dest"],
        ]
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "pushed": 0,
        "reasons": [
            f"the evaluator did not bless the model ({not_blessed}: NOT_BLESSED: accuracy 0.61 < "
            "lower bound 0.8)"
        ],
    }
    assert "not pushed: the evaluator did not bless the model" in proc.stderr
    assert not setup["dest"].exists()
    # blessed by the evaluator, not by the infra-validator: not pushed either
    infra_no = _blessing(
        setup["tmp"] / "inb", "INFRA_NOT_BLESSED", "request 1 (8 examples): failed: boom\n"
    )
    proc = _push(setup, "--infra-blessing", infra_no)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["reasons"] == [
        f"the infra-validator did not bless the model ({infra_no}: INFRA_NOT_BLESSED: request 1 (8 "
        "examples): "
        "failed: boom)"
    ]
    assert not setup["dest"].exists()


def test_an_existing_version_gets_the_next_free_version(setup):
    """Push never reports a path it did not write: whatever holds the versions of the seconds the
    push may land in (another model, a file, an empty dir, a dangling symlink), it is left alone and
    the model goes to the next free version (TFX's Pusher would report the existing dir)."""
    now = int(time.time())
    dest = setup["dest"]
    dest.mkdir(parents=True)
    for i, version in enumerate(range(now, now + 60)):
        path = dest / str(version)
        if i % 4 == 0:
            path.mkdir()
            (path / "saved_model.pb").write_bytes(b"the model already serving")
        elif i % 4 == 1:
            path.write_bytes(b"a file")
        elif i % 4 == 2:
            path.mkdir()
        else:
            os.symlink(setup["tmp"] / "nowhere", path)
    before = {p.name: (p.is_symlink(), p.is_dir()) for p in dest.iterdir()}
    proc = _push(setup)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    version = summary["pushed_version"]
    assert summary["pushed"] == 1 and int(version) >= now + 60
    assert summary["pushed_destination"] == str(dest / version)
    assert _files(dest / version) == MODEL_FILES  # the path reported holds the model
    assert "exists already (it was left alone): pushed as version" in proc.stderr
    assert {p.name: (p.is_symlink(), p.is_dir()) for p in dest.iterdir() if p.name != version} == (
        before
    )
    assert (dest / str(now) / "saved_model.pb").read_bytes() == b"the model already serving"


def test_executor_input_form_writes_tfx_pushed_model_properties(setup):
    out = setup["tmp"] / "kfp"

    def artifact(name, title, uri):
        return {
            "artifacts": [
                {"name": name, "type": {"schemaTitle": title}, "uri": str(uri), "metadata": {}}
            ]
        }

    def executor_input(blessing, infra):
        return {
            "inputs": {
                "parameterValues": {
                    "push_destination": json.dumps(
                        {"filesystem": {"base_directory": str(setup["dest"])}}
                    )
                },  # TFX's PushDestination works too
                "artifacts": {
                    "model": artifact("m", "system.Model", setup["model"]),
                    "model_blessing": artifact("b", "system.Artifact", blessing),
                    "infra_blessing": artifact("i", "system.Artifact", infra),
                },
            },
            "outputs": {
                "artifacts": {
                    "pushed_model": artifact("p", "system.Artifact", out / "pushed_model")
                },
                "outputFile": str(out / "executor_output.json"),
            },
        }

    proc = run_cli(
        [
            "push",
            "--executor-input",
            json.dumps(executor_input(setup["blessed"], setup["infra_blessed"])),
        ]
    )
    assert proc.returncode == 0, proc.stderr
    written = json.loads((out / "executor_output.json").read_text())["artifacts"]["pushed_model"][
        "artifacts"
    ][0]
    version = written["metadata"]["pushed_version"]
    assert written["metadata"] == {
        "pushed": 1,
        "pushed_destination": str(setup["dest"] / version),
        "pushed_version": version,
    }
    assert written["uri"] == str(out / "pushed_model")
    assert (
        _files(setup["dest"] / version) == MODEL_FILES == _files(out / "pushed_model")
    )  # TFX keeps a copy there

    infra_no = _blessing(
        setup["tmp"] / "inb", "INFRA_NOT_BLESSED", "serving_default declares no outputs\n"
    )
    shutil.rmtree(out)
    proc = run_cli(
        ["push", "--executor-input", json.dumps(executor_input(setup["blessed"], infra_no))]
    )
    assert proc.returncode == 0, proc.stderr
    written = json.loads((out / "executor_output.json").read_text())["artifacts"]["pushed_model"][
        "artifacts"
    ][0]
    assert written["metadata"] == {
        "pushed": 0,
        "reasons": f"the infra-validator did not bless the model ({infra_no}: "
        "INFRA_NOT_BLESSED: serving_default declares no outputs)",
    }
    assert os.listdir(setup["dest"]) == [version] and os.listdir(out / "pushed_model") == []


def test_bad_input_is_exit_2_before_anything_is_written(setup):
    tmp, model, blessed, dest = setup["tmp"], setup["model"], setup["blessed"], setup["dest"]
    empty = tmp / "empty"
    empty.mkdir()
    (tmp / "a_file").write_text("x")
    no_model = tmp / "no_model"
    (no_model / "Format-Serving").mkdir(parents=True)
    cases = [
        (
            ["--model", model, "--model-blessing", empty, "--push-destination", dest],
            "--model-blessing: " + f"{empty} holds neither BLESSED nor NOT_BLESSED",
        ),
        (
            [
                "--model",
                model,
                "--model-blessing",
                setup["infra_blessed"],
                "--push-destination",
                dest,
            ],
            "it holds INFRA_BLESSED: was --model-blessing given the other validator's blessing?",
        ),
        (
            [
                "--model",
                model,
                "--model-blessing",
                blessed,
                "--infra-blessing",
                blessed,
                "--push-destination",
                dest,
            ],
            "--infra-blessing: ",
        ),
        (
            ["--model", no_model, "--model-blessing", blessed, "--push-destination", dest],
            "--model: " + f"{no_model / 'Format-Serving'} holds no SavedModel (saved_model.pb)",
        ),
        (
            ["--model", tmp / "nope", "--model-blessing", blessed, "--push-destination", dest],
            "--model: ",
        ),
        (["--model", model, "--model-blessing", blessed], "--push-destination: required"),
        (
            ["--model", model, "--model-blessing", blessed, "--push-destination", tmp / "a_file"],
            "a_file is a regular file; expected a directory for the pushed versions",
        ),
        (
            [
                "--model",
                model,
                "--model-blessing",
                blessed,
                "--push-destination",
                model / "serving",
            ],
            "lies inside the model being pushed",
        ),
        (
            [
                "--model",
                model,
                "--model-blessing",
                blessed,
                "--push-destination",
                "gs://b/serving",
                "--gcs-root",
                tmp / "no_mount",
            ],
            "Cloud Storage FUSE mount at",
        ),
        (
            ["--model", model, "--model-blessing", blessed, "--push-destination", "s3://b/serving"],
            "expected a directory or a gs:// URI",
        ),
        (
            [
                "--model",
                model,
                "--model-blessing",
                blessed,
                "--push-destination",
                '{"filesystem": {}}',
            ],
            "only TFX's filesystem destination is supported",
        ),
        (
            [
                "--model",
                model,
                "--model-blessing",
                blessed,
                "--push-destination",
                '{"filesystem": {"base_directory": "/tmp/x", "versioning": "SEMVER"}}',
            ],
            "versioning 'SEMVER'",
        ),
    ]
    for args, needle in cases:
        proc = run_cli(["push", *args], timeout=60)
        assert proc.returncode == 2 and needle in proc.stderr, (args, proc.stderr)
    assert (
        not dest.exists() and not (model / "serving").exists() and not (tmp / "no_mount").exists()
    )


def test_a_symbolic_link_in_the_model_is_refused_and_nothing_is_copied(setup):
    secret = setup["tmp"] / "secret.txt"
    secret.write_text("not part of any model")
    os.symlink(secret, setup["model"] / "Format-Serving" / "assets" / "link.txt")
    proc = _push(setup)
    assert proc.returncode == 2, proc.stderr
    assert (
        f"link.txt is a symlink to {secret} (a regular file); only directories and regular files "
        "are copied" in proc.stderr
    )
    assert not setup["dest"].exists() or os.listdir(setup["dest"]) == []


def test_a_savedmodel_dir_itself_is_pushed_too(setup):
    request = build_push_request(
        {
            "model": str(setup["model"] / "Format-Serving"),
            "model_blessing": str(setup["blessed"]),
            "push_destination": str(setup["dest"]),
        }
    )
    result = push.run(request)
    assert result.pushed and _files(setup["dest"] / result.version) == MODEL_FILES
    with pytest.raises(UserInputError):
        build_push_request(
            {
                "model": str(setup["model"]),
                "model_blessing": str(setup["blessed"]),
                "push_destination": str(setup["model"] / "Format-Serving" / "v"),
            }
        )
