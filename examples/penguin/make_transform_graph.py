"""Run the penguin module's `preprocessing_fn` with tf.Transform on Beam, as TFX's Transform would.

Analyzes the raw train split (examples/penguin/data/Split-train) with Beam's DirectRunner and
writes a TFX transform graph under --out (default: examples/penguin/transform_graph/):

    transform_fn/            the transform SavedModel (with its vocabulary files)
    transformed_metadata/    schema of the transformed features
    metadata/                schema of the raw features (TFTransformOutput.raw_feature_spec needs it)

Run: .venv/bin/python examples/penguin/make_transform_graph.py [--out DIR] [--data DIR] [--schema FILE]
"""

from __future__ import annotations

import os

# Importing tensorflow_transform sets TF_USE_LEGACY_KERAS=1 when unset, which turns tf.keras
# into tf_keras for the whole process; decide it before TensorFlow is imported.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "0")

import argparse  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import apache_beam as beam  # noqa: E402
import tensorflow_transform.beam as tft_beam  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402
from generic_trainer import user_module  # noqa: E402
from google.protobuf import text_format  # noqa: E402
from tensorflow_metadata.proto.v0 import schema_pb2  # noqa: E402
from tensorflow_transform.tf_metadata import dataset_metadata  # noqa: E402
from tfx_bsl.public import tfxio  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def load_preprocessing_fn(module_file: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The `preprocessing_fn` of a TFX module file, loaded as train and tune load modules.

    The runtime's loader puts the module's folder on sys.path (it may import files beside it)
    and resolves its `tfx` imports when TFX is not installed.
    """
    with tempfile.TemporaryDirectory() as download_dir:
        module = user_module.load(module_file, download_dir)
    return user_module.get_function(module, "preprocessing_fn", "--module-file")


def write_transform_graph(out_dir: str, data_dir: str, schema_file: str, module_file: str) -> None:
    """Analyze `<data_dir>/Split-train` with the module's preprocessing_fn; write the graph to `out_dir`."""
    with open(schema_file, encoding="utf-8") as f:
        schema = text_format.Parse(f.read(), schema_pb2.Schema())
    preprocessing_fn = load_preprocessing_fn(module_file)
    raw_tfxio = tfxio.TFExampleRecord(
        file_pattern=os.path.join(data_dir, "Split-train", "*"), schema=schema, telemetry_descriptors=[])
    options = PipelineOptions(runner="DirectRunner", direct_num_workers=1, direct_running_mode="in_memory")
    with tempfile.TemporaryDirectory() as temp_dir:
        with beam.Pipeline(options=options) as pipeline, tft_beam.Context(temp_dir=temp_dir):
            raw_data = pipeline | "ReadTrain" >> raw_tfxio.BeamSource()
            transform_fn = (raw_data, raw_tfxio.TensorAdapterConfig()) | "Analyze" >> tft_beam.AnalyzeDataset(
                preprocessing_fn)
            _ = transform_fn | "WriteTransformFn" >> tft_beam.WriteTransformFn(out_dir)
            _ = dataset_metadata.DatasetMetadata(schema) | "WriteRawMetadata" >> tft_beam.WriteMetadata(
                os.path.join(out_dir, "metadata"), pipeline)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(HERE, "transform_graph"), help="transform graph directory")
    parser.add_argument("--data", default=os.path.join(HERE, "data"), help="examples dir holding Split-train/")
    parser.add_argument("--schema", default=os.path.join(HERE, "schema.pbtxt"), help="raw schema (text proto)")
    parser.add_argument("--module", default=os.path.join(HERE, "module_transform.py"),
                        help="module file defining preprocessing_fn")
    args = parser.parse_args(argv)
    write_transform_graph(args.out, args.data, args.schema, args.module)
    print(f"wrote transform graph to {args.out}")


if __name__ == "__main__":
    main()
