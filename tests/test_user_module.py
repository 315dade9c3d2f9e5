"""user_module: the three ways to name a module (path, gs:// URI, dotted name), pins, sibling
imports."""

from __future__ import annotations

import hashlib
import os
import sys

import pytest
from conftest import gcs_upload
from generic_trainer.errors import UserCodeError, UserInputError
from generic_trainer.fit import user_module
from generic_trainer.intake.environment import storage_settings  # the edge reads the environment


def _pkg(tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "acme_models"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "trainer.py").write_text("def run_fn(fn_args):\n    return {'from': 'dotted'}\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return pkg


def test_a_dotted_module_name_imports_and_a_missing_or_pinned_one_is_refused(tmp_path, monkeypatch):
    _pkg(tmp_path, monkeypatch)
    module = user_module.load_user_module("acme_models.trainer", str(tmp_path / "dl"))
    assert user_module.get_function(module, "run_fn", "--run-fn")(None) == {"from": "dotted"}
    with pytest.raises(UserInputError, match="no module named 'acme_models.nothing'"):
        user_module.load_user_module("acme_models.nothing", str(tmp_path / "dl"))
    with pytest.raises(UserInputError, match="--module-sha256: a hash pin needs a module file"):
        user_module.load_user_module("acme_models.trainer", str(tmp_path / "dl"), sha256="0" * 64)


def test_a_local_module_imports_its_sibling_and_a_wrong_sha256_pin_is_refused(tmp_path):
    (tmp_path / "helpers_for_test_sibling.py").write_text("VALUE = 7\n")
    path = tmp_path / "module_with_sibling.py"
    path.write_text(
        "from helpers_for_test_sibling import VALUE\n\ndef run_fn(fn_args):\n    return VALUE\n"
    )
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    try:
        module = user_module.load_user_module(str(path), str(tmp_path / "dl"), sha256=sha.upper())
        assert module.run_fn(None) == 7
        with pytest.raises(UserInputError, match="differs from the pinned"):
            user_module.load_user_module(str(path), str(tmp_path / "dl"), sha256="f" * 64)
    finally:
        for name in ("module_with_sibling", "helpers_for_test_sibling"):
            sys.modules.pop(name, None)


def test_import_error_in_module_is_user_code_error_with_traceback(tmp_path):
    path = tmp_path / "broken_at_import.py"
    path.write_text("import no_such_dependency_xyz\n")
    expected = "(?s)importing module .*broken_at_import.py failed.*no_such_dependency_xyz"
    with pytest.raises(UserCodeError, match=expected):
        user_module.load_user_module(str(path), str(tmp_path / "dl"))


def test_gcs_module_brings_its_siblings(tmp_path, gcs_emulator, monkeypatch):
    host, bucket = gcs_emulator
    uri = gcs_upload(
        host,
        bucket,
        "team/m/gcs_mod_for_test.py",
        b"from gcs_sibling_for_test import X\n\ndef run_fn(fn_args):\n    return X\n",
    )
    gcs_upload(host, bucket, "team/m/gcs_sibling_for_test.py", b"X = 'sibling'\n")
    gcs_upload(
        host, bucket, "team/other/unrelated.py", b"raise SystemExit('must not be fetched')\n"
    )
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", host)
    try:
        module = user_module.load_user_module(
            uri, str(tmp_path / "dl"), settings=storage_settings(os.environ)
        )
        assert module.run_fn(None) == "sibling"
        assert sorted(p.name for p in (tmp_path / "dl").iterdir()) == [
            "gcs_mod_for_test.py",
            "gcs_sibling_for_test.py",
        ]
    finally:
        for name in ("gcs_mod_for_test", "gcs_sibling_for_test"):
            sys.modules.pop(name, None)


# --- s3:// and minio:// (KFP's on-cluster store), against moto's S3-compatible server
# -------------------------

S3_MODULE = b"from s3_sibling_for_test import X\n\ndef run_fn(fn_args):\n    return X\n"


@pytest.fixture()
def s3_server(monkeypatch):
    """moto's S3-compatible server on 127.0.0.1 (a real HTTP server, as MinIO would be); yields its
    URL."""
    from conftest import free_port
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    for name, value in {
        "AWS_ACCESS_KEY_ID": "minio",
        "AWS_SECRET_ACCESS_KEY": "minio123",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def _s3_put(endpoint: str, bucket: str, objects: dict[str, bytes]) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint)
    client.create_bucket(Bucket=bucket)
    for key, data in objects.items():
        client.put_object(Bucket=bucket, Key=key, Body=data)


@pytest.mark.parametrize(
    "scheme, env", [("s3", "AWS_ENDPOINT_URL_S3"), ("minio", "GENERIC_TRAINER_MINIO_ENDPOINT")]
)
def test_s3_and_minio_modules_bring_their_siblings(tmp_path, s3_server, monkeypatch, scheme, env):
    _s3_put(
        s3_server,
        "mlpipeline",
        {
            "team/m/s3_mod_for_test.py": S3_MODULE,
            "team/m/s3_sibling_for_test.py": b"X = 'from " + scheme.encode() + b"'\n",
            "team/other/unrelated.py": b"raise SystemExit('must not be fetched')\n",
        },
    )
    monkeypatch.setenv(env, s3_server)
    uri = f"{scheme}://mlpipeline/team/m/s3_mod_for_test.py"
    try:
        module = user_module.load_user_module(
            uri, str(tmp_path / "dl"), settings=storage_settings(os.environ)
        )
        assert module.run_fn(None) == f"from {scheme}"
        assert sorted(p.name for p in (tmp_path / "dl").iterdir()) == [
            "s3_mod_for_test.py",
            "s3_sibling_for_test.py",
        ]
        sha = hashlib.sha256(S3_MODULE).hexdigest()
        with pytest.raises(UserInputError, match="differs from the pinned"):
            user_module.load_user_module(
                uri,
                str(tmp_path / "dl2"),
                sha256=sha.replace(sha[0], "0" if sha[0] != "0" else "1"),
                settings=storage_settings(os.environ),
            )
    finally:
        for name in ("s3_mod_for_test", "s3_sibling_for_test"):
            sys.modules.pop(name, None)
    with pytest.raises(
        UserInputError,
        match=f"--module-file: {scheme}://mlpipeline/team/m/absent.py not found in "
        f"{'MinIO' if scheme == 'minio' else 'S3'}",
    ):
        user_module.fetch(
            f"{scheme}://mlpipeline/team/m/absent.py",
            str(tmp_path / "dl3"),
            settings=storage_settings(os.environ),
        )


def test_minio_endpoint_unreachable_is_named(tmp_path, monkeypatch):
    from conftest import free_port

    monkeypatch.setenv(
        "GENERIC_TRAINER_MINIO_ENDPOINT", f"http://127.0.0.1:{free_port()}"
    )  # nothing listens
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "minio")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "minio123")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with pytest.raises(
        UserInputError,
        match="--module-file: could not download minio://b/m.py from MinIO: "
        "EndpointConnectionError",
    ):
        user_module.fetch(
            "minio://b/m.py", str(tmp_path / "dl"), settings=storage_settings(os.environ)
        )


def test_mounted_s3_and_minio_modules_need_no_boto3(tmp_path, monkeypatch):
    """KFP's convention: s3://b/x is /s3/b/x, minio://b/x is /minio/b/x. A mounted file is used
    where it is."""
    from generic_trainer.artifacts import storage

    roots = {"s3://": str(tmp_path / "s3"), "minio://": str(tmp_path / "minio")}
    monkeypatch.setattr(storage, "DEFAULT_MOUNT_ROOTS", {**storage.DEFAULT_MOUNT_ROOTS, **roots})
    monkeypatch.setitem(sys.modules, "boto3", None)  # what the image gives: no boto3
    for scheme, root in roots.items():
        path = tmp_path / root / "bucket" / "mounted_mod_for_test.py"
        path.parent.mkdir(parents=True)
        path.write_text(f"def run_fn(fn_args):\n    return {scheme!r}\n")
        try:
            assert user_module.fetch(
                f"{scheme}bucket/mounted_mod_for_test.py", str(tmp_path / "dl")
            ) == str(path)
            assert (
                user_module.load_user_module(str(path), str(tmp_path / "dl")).run_fn(None) == scheme
            )  # the mount path itself
        finally:
            sys.modules.pop("mounted_mod_for_test", None)
    with pytest.raises(
        UserInputError,
        match=r"--module-file: s3://bucket/absent.py is not mounted at .*absent.py, "
        r"and boto3 .* is not installed",
    ):
        user_module.fetch("s3://bucket/absent.py", str(tmp_path / "dl"))


@pytest.mark.slow
def test_train_with_a_minio_module_file(tmp_path, s3_server):
    """`generic-trainer train --module-file minio://...` as KFP on a cluster with MinIO would run
    it."""
    import json

    from conftest import PENGUIN, run_cli

    module = b"""
import keras, numpy as np

def run_fn(fn_args):
    x = np.linspace(-1, 1, 32, dtype="float32").reshape(-1, 1)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x, 2 * x, epochs=1, verbose=0)
    model.export(fn_args.serving_model_dir)
    return {"fetched_from": 1.0}
"""
    _s3_put(s3_server, "mlpipeline", {"modules/minio_train_mod.py": module})
    proc = run_cli(
        [
            "train",
            "--examples",
            str(PENGUIN / "data"),
            "--module-file",
            "minio://mlpipeline/modules/minio_train_mod.py",
            "--model-dir",
            str(tmp_path / "model"),
            "--module-sha256",
            hashlib.sha256(module).hexdigest(),
        ],
        env={
            "GENERIC_TRAINER_MINIO_ENDPOINT": s3_server,
            "AWS_ACCESS_KEY_ID": "minio",
            "AWS_SECRET_ACCESS_KEY": "minio123",
            "AWS_DEFAULT_REGION": "us-east-1",
        },
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "model" / "Format-Serving" / "saved_model.pb").is_file()
    summary = json.loads(proc.stdout[proc.stdout.rindex('{\n  "serving_model_dir"') :])
    assert summary["metrics"]["fetched_from"] == 1.0
