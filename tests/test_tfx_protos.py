"""TFX's proto messages declared here (`generic_trainer.tfx_dsl.protos`) against the tfx 1.21 wheel.

The wheel (downloaded once, never installed) holds `tfx/proto/*.proto` and the generated
`*_pb2.py`, whose serialized `FileDescriptorProto` is read here without running them. Each file
declared here must give exactly that descriptor (names, numbers, types, labels, oneofs, enums,
nested and map types, reserved numbers); messages filled alike must give the same bytes, JSON and
text as the wheel's descriptors (loaded into a pool of their own) give; the `tfx` import paths
serve them; and a real tfx package, when importable, wins. TFMA's config names are checked too.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from generic_trainer import tfx_hook
from generic_trainer.tfx_dsl.protos import declare, paths
from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    json_format,
    message_factory,
    text_format,
)
from test_tfx_real_modules import tfx_root  # noqa: F401 - the wheel fixture

MODULES = sorted(paths.V1_PROTO)


def _serialized(pb2_file: Path) -> bytes:
    """The serialized FileDescriptorProto a generated `_pb2.py` registers (read, not run)."""
    for node in ast.walk(ast.parse(pb2_file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "AddSerializedFile":
            return node.args[0].value
    raise AssertionError(f"{pb2_file} registers no file")


@pytest.fixture(scope="module")
def wheel_files(tfx_root) -> dict[str, bytes]:  # noqa: F811
    """`trainer_pb2` -> the wheel's serialized descriptor, for every `tfx/proto/*_pb2.py`."""
    return {p.stem: _serialized(p) for p in sorted((tfx_root / "tfx" / "proto").glob("*_pb2.py"))}


def _add_with_dependencies(pool, file) -> None:
    for dependency in file.dependencies:
        _add_with_dependencies(pool, dependency)
    try:
        pool.FindFileByName(file.name)
    except KeyError:
        pool.AddSerializedFile(file.serialized_pb)


@pytest.fixture(scope="module")
def wheel_pool(wheel_files):
    """A pool of its own holding the wheel's descriptors (and their dependencies, copied)."""
    pool = descriptor_pool.DescriptorPool()
    for stem in MODULES:
        for dependency in _module(stem).DESCRIPTOR.dependencies:
            _add_with_dependencies(pool, dependency)
        pool.AddSerializedFile(wheel_files[stem])
    return pool


def _module(stem: str):
    return importlib.import_module(f"generic_trainer.tfx_dsl.protos.{stem}")


def test_every_proto_file_of_the_wheel_is_declared(wheel_files, tfx_root):  # noqa: F811
    assert sorted(wheel_files) == MODULES
    protos = sorted(f"{p.stem}_pb2" for p in (tfx_root / "tfx" / "proto").glob("*.proto"))
    assert protos == MODULES


@pytest.mark.parametrize("stem", MODULES)
def test_declared_file_is_the_wheels_descriptor(stem, wheel_files):
    module = _module(stem)
    wheel = descriptor_pb2.FileDescriptorProto.FromString(wheel_files[stem])
    declared = declare.DECLARED[wheel.name].descriptor()
    # The whole descriptor as text first, so that a difference reads as a diff.
    assert text_format.MessageToString(declared) == text_format.MessageToString(wheel)
    assert declared.SerializeToString() == wheel_files[stem]
    registered = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(registered)
    assert registered == wheel


# file stem, message, JSON of a filled message (every kind of field: repeated, nested, oneof,
# enum, map, Any, a dependency's message).
SAMPLES = [
    ("trainer_pb2", "TrainArgs", {"splits": ["train"], "numSteps": 100}),
    ("trainer_pb2", "EvalArgs", {"splits": ["eval"], "numSteps": 5}),
    ("transform_pb2", "SplitsConfig", {"analyze": ["train"], "transform": ["train", "eval"]}),
    ("tuner_pb2", "TuneArgs", {"numParallelTrials": 3}),
    (
        "example_gen_pb2",
        "Input",
        {"splits": [{"name": "train", "pattern": "span-{SPAN}/train/*"}, {"name": "eval"}]},
    ),
    (
        "example_gen_pb2",
        "Output",
        {
            "splitConfig": {
                "splits": [{"name": "train", "hashBuckets": 3}],
                "partitionFeatureName": "u",
            }
        },
    ),
    (
        "example_gen_pb2",
        "CustomConfig",
        {
            "customConfig": {
                "@type": "type.googleapis.com/tfx.configs.StaticRange",
                "endSpanNumber": 2,
            }
        },
    ),
    ("range_config_pb2", "RangeConfig", {"rollingRange": {"startSpanNumber": 1, "numSpans": 2}}),
    (
        "pusher_pb2",
        "PushDestination",
        {"filesystem": {"baseDirectory": "/serving/m", "versioning": "UNIX_TIMESTAMP"}},
    ),
    (
        "infra_validator_pb2",
        "ServingSpec",
        {
            "tensorflowServing": {"imageName": "tfs", "tags": ["latest"], "digests": ["sha256:0"]},
            "kubernetes": {
                "serviceAccountName": "sa",
                "servingPodOverrides": {
                    "annotations": {"b": "2", "a": "1"},
                    "env": [
                        {"name": "K", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
                    ],
                    "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}},
                },
            },
            "modelName": "m",
        },
    ),
    ("infra_validator_pb2", "ValidationSpec", {"maxLoadingTimeSeconds": 60, "numTries": 3}),
    (
        "infra_validator_pb2",
        "RequestSpec",
        {
            "tensorflowServing": {"tagSet": ["serve"], "signatureNames": ["serving_default"]},
            "splitName": "eval",
            "numExamples": 10,
            "makeWarmup": True,
        },
    ),
    ("evaluator_pb2", "FeatureSlicingSpec", {"specs": [{}, {"columnForSlicing": ["hour"]}]}),
    (
        "bulk_inferrer_pb2",
        "OutputExampleSpec",
        {
            "outputColumnsSpec": [
                {"classifyOutput": {"labelColumn": "l", "scoreColumn": "s"}},
                {"predictOutput": {"outputColumns": [{"outputKey": "o", "outputColumn": "c"}]}},
            ]
        },
    ),
    ("bulk_inferrer_pb2", "ModelSpec", {"modelSignatureName": ["serving_default"], "tag": ["x"]}),
    ("bulk_inferrer_pb2", "DataSpec", {"exampleSplits": ["unlabelled"]}),
    (
        "example_diff_pb2",
        "ExampleDiffConfig",
        {
            "pairedExampleSkew": {
                "identifierFeatures": ["id"],
                "confusionConfig": [{"featureName": "f"}],
            }
        },
    ),
    (
        "distribution_validator_pb2",
        "DistributionValidatorConfig",
        {
            "defaultSliceConfig": {
                "feature": [{"path": {"step": ["f"]}, "distributionComparator": {}}],
                "numExamplesComparator": {"minFractionThreshold": 0.5},
            }
        },
    ),
]


@pytest.mark.parametrize(("stem", "name", "value"), SAMPLES, ids=[s[1] for s in SAMPLES])
def test_filled_messages_match_the_wheels_in_bytes_json_and_text(stem, name, value, wheel_pool):
    ours = json_format.ParseDict(value, getattr(_module(stem), name)())
    package = ours.DESCRIPTOR.file.package
    theirs_class = message_factory.GetMessageClass(
        wheel_pool.FindMessageTypeByName(f"{package}.{name}")
    )
    theirs = json_format.ParseDict(value, theirs_class(), descriptor_pool=wheel_pool)
    assert ours.SerializeToString(deterministic=True) == theirs.SerializeToString(
        deterministic=True
    )
    assert json_format.MessageToJson(ours) == json_format.MessageToJson(
        theirs, descriptor_pool=wheel_pool
    )
    assert text_format.MessageToString(ours) == text_format.MessageToString(
        theirs, descriptor_pool=wheel_pool
    )
    assert theirs_class.FromString(ours.SerializeToString()) == theirs
    assert text_format.Parse(text_format.MessageToString(theirs), type(ours)()) == ours


def test_messages_built_with_keywords_as_pipeline_files_build_them(wheel_pool):
    """`trainer_pb2.TrainArgs(num_steps=...)`, nested classes and module-level enum values."""
    from generic_trainer.tfx_dsl.protos import example_gen_pb2, pusher_pb2, trainer_pb2

    built = [
        trainer_pb2.TrainArgs(num_steps=2000),
        pusher_pb2.PushDestination(
            filesystem=pusher_pb2.PushDestination.Filesystem(
                base_directory="/serving", versioning=pusher_pb2.UNIX_TIMESTAMP
            )
        ),
        example_gen_pb2.Input(splits=[example_gen_pb2.Input.Split(name="s", pattern="*.csv")]),
    ]
    expected = [
        b"\x10\xd0\x0f",  # field 2 (num_steps), varint 2000
        b"\x1a\x0c\n\x08/serving0\x01",  # field 3 {field 1 "/serving", field 6 = 1}
        b"\n\n\n\x01s\x12\x05*.csv",  # field 1 {field 1 "s", field 2 "*.csv"}
    ]
    assert [m.SerializeToString() for m in built] == expected
    assert example_gen_pb2.FORMAT_TF_SEQUENCE_EXAMPLE == 7
    assert example_gen_pb2.PayloadFormat.Name(6) == "FORMAT_TF_EXAMPLE"
    file = wheel_pool.FindFileByName("tfx/proto/example_gen.proto")
    assert dict(example_gen_pb2.PayloadFormat.items()) == {
        v.name: v.number for v in file.enum_types_by_name["PayloadFormat"].values
    }


def _v1_proto_imports(tfx_root: Path) -> dict[str, list[str]]:  # noqa: F811
    """`trainer_pb2` -> the names TFX's `tfx/v1/proto/__init__.py` imports from it."""
    init = tfx_root / "tfx" / "v1" / "proto" / "__init__.py"
    found: dict[str, list[str]] = {}
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module.startswith("tfx.proto."):
            found[node.module.rpartition(".")[2]] = [a.name for a in node.names]
    return found


@pytest.fixture
def stand_ins():
    assert tfx_hook.install(), "the real tfx package is installed here; this test assumes not"
    yield
    tfx_hook.uninstall()


def test_tfx_import_paths_serve_the_messages(stand_ins, tfx_root, wheel_files):  # noqa: F811
    v1 = importlib.import_module("tfx.v1.proto")
    imports = _v1_proto_imports(tfx_root)
    assert sorted(imports) == MODULES
    for stem, names in imports.items():
        legacy = importlib.import_module(f"tfx.proto.{stem}")
        for name in names:
            assert getattr(v1, name) is getattr(legacy, name) is getattr(_module(stem), name)
        wheel = descriptor_pb2.FileDescriptorProto.FromString(wheel_files[stem])
        expected = [m.name for m in wheel.message_type] + [e.name for e in wheel.enum_type]
        expected += [v.name for e in wheel.enum_type for v in e.value]
        assert sorted(legacy.__all__) == sorted([*expected, "DESCRIPTOR"])
        assert legacy.DESCRIPTOR.name == wheel.name
    from tfx import v1 as tfx
    from tfx.proto import pusher_pb2, trainer_pb2

    assert tfx.proto.TrainArgs is trainer_pb2.TrainArgs
    assert tfx.proto.PushDestination.Filesystem is pusher_pb2.PushDestination.Filesystem
    assert tfx.proto.Filesystem is pusher_pb2.PushDestination.Filesystem
    with pytest.raises(ImportError, match="tfx.proto.nothing_pb2"):
        importlib.import_module("tfx.proto.nothing_pb2")


def test_an_importable_tfx_package_serves_its_own_proto_modules(tfx_root, tmp_path):  # noqa: F811
    """Where a tfx package is importable, the modules here are its generated modules."""
    (tmp_path / "tfx" / "proto").mkdir(parents=True)
    (tmp_path / "tfx" / "__init__.py").write_text("")
    source = tfx_root / "tfx" / "proto" / "trainer_pb2.py"
    (tmp_path / "tfx" / "proto" / "trainer_pb2.py").write_bytes(source.read_bytes())
    code = (
        "from generic_trainer.tfx_dsl.protos import trainer_pb2, tuner_pb2\n"
        "print(trainer_pb2.TrainArgs.__module__, tuner_pb2.TuneArgs.__module__)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    # trainer_pb2 is the real one; the real package has no tuner_pb2, so it is declared here.
    assert proc.stdout.split() == [
        "tfx.proto.trainer_pb2",
        "generic_trainer.tfx_dsl.protos.tuner_pb2",
    ]


def _tfma_names_of_pipeline_files(tfx_root: Path) -> set[str]:  # noqa: F811
    """The `tfma.X` names TFX's pipeline files (examples and templates) use."""
    files = [p for p in (tfx_root / "tfx").rglob("*pipeline*.py") if not p.stem.endswith("_test")]
    found = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and getattr(node.value, "id", None) == "tfma":
                found.add(node.attr)
    return found


def test_tfma_names_of_pipeline_files_are_tfma_config_messages(tfx_root):  # noqa: F811
    """TFMA 0.52 keeps them in `proto/config_pb2.py` (read here, not run: that would import TF)."""
    spec = importlib.util.find_spec("tensorflow_model_analysis")
    config = Path(spec.submodule_search_locations[0]) / "proto" / "config_pb2.py"
    file = descriptor_pb2.FileDescriptorProto.FromString(_serialized(config))
    config_names = {m.name for m in file.message_type} | {e.name for e in file.enum_type}
    used = _tfma_names_of_pipeline_files(tfx_root)
    assert {"EvalConfig", "ModelSpec", "SlicingSpec", "MetricsSpec", "MetricThreshold"} <= used
    assert used <= config_names


@pytest.mark.slow
def test_tfma_config_names_resolve_on_the_real_tfma_under_the_hook(tfx_root):  # noqa: F811
    """Under the hook, `import tensorflow_model_analysis as tfma` then `tfma.EvalConfig`, ... are
    TFMA's own config messages (TFMA 0.52 does not name them at its top level)."""
    used = sorted(_tfma_names_of_pipeline_files(tfx_root))
    code = (
        "import sys\n"
        "from generic_trainer import tfx_hook\n"
        "tfx_hook.install()\n"
        "import tensorflow_model_analysis as tfma\n"
        "from tensorflow_model_analysis.proto import config_pb2\n"
        f"for name in {used!r}:\n"
        "    assert getattr(tfma, name) is getattr(config_pb2, name), name\n"
        "config = tfma.EvalConfig(\n"
        "    model_specs=[tfma.ModelSpec(label_key='y')], slicing_specs=[tfma.SlicingSpec()],\n"
        "    metrics_specs=[tfma.MetricsSpec(metrics=[tfma.MetricConfig(\n"
        "        class_name='BinaryAccuracy', threshold=tfma.MetricThreshold(\n"
        "            change_threshold=tfma.GenericChangeThreshold(\n"
        "                direction=tfma.MetricDirection.HIGHER_IS_BETTER)))])])\n"
        "assert type(config) is config_pb2.EvalConfig\n"
        "assert 'tensorflow' in sys.modules\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


def test_tfx_generated_modules_and_these_share_one_descriptor_either_order(tfx_root):  # noqa: F811
    """TFX's generated modules (run from the wheel, in a process of their own) and the modules here
    register the same file in the default pool, first or second, and share its classes."""
    proto = tfx_root / "tfx" / "proto"
    code = (
        "import importlib.util\n"
        "def wheel(stem):\n"
        f"    spec = importlib.util.spec_from_file_location(stem, {str(proto)!r} + "
        f"f'/{{stem}}.py')\n"
        "    module = importlib.util.module_from_spec(spec)\n"
        "    spec.loader.exec_module(module)\n"
        "    return module\n"
        "theirs = wheel('trainer_pb2')\n"
        "from generic_trainer.tfx_dsl.protos import trainer_pb2, pusher_pb2\n"
        "later = wheel('pusher_pb2')\n"
        "assert trainer_pb2.TrainArgs is theirs.TrainArgs\n"
        "assert later.PushDestination.Filesystem is pusher_pb2.PushDestination.Filesystem\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
