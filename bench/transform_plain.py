"""The same tf.Transform work as `generic-trainer transform`, written directly against tft_beam (the
baseline).

Analyze Split-train with the module's preprocessing_fn, write the transform graph (transform_fn,
transformed_metadata, raw metadata), transform train and eval and write them as gzipped TFRecords of
tf.Example: what the verb does, without its request, checks, staging, counters or logging.

    python bench/transform_plain.py EXAMPLES SCHEMA MODULE OUT [--direct_running_mode=in_memory ...]
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "0")

import importlib.util  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

import apache_beam as beam  # noqa: E402
import tensorflow_transform.beam as tft_beam  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402
from google.protobuf import text_format  # noqa: E402
from tensorflow_metadata.proto.v0 import schema_pb2  # noqa: E402
from tensorflow_transform.tf_metadata import dataset_metadata  # noqa: E402
from tfx_bsl.coders import example_coder  # noqa: E402
from tfx_bsl.public import tfxio  # noqa: E402


class Encode(beam.DoFn):
    def process(self, element, metadata):
        if not hasattr(self, "encoder"):
            self.encoder = example_coder.RecordBatchToExamplesEncoder(metadata.schema)
        yield from self.encoder.encode(element[0])


def main(examples: str, schema_file: str, module_file: str, out: str, beam_args: list[str]) -> None:
    with open(schema_file, encoding="utf-8") as f:
        schema = text_format.Parse(f.read(), schema_pb2.Schema())
    spec = importlib.util.spec_from_file_location("plain_module", module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    graph, transformed = os.path.join(out, "graph"), os.path.join(out, "transformed")

    def read(pipeline, split, label):
        source = tfxio.TFExampleRecord(
            file_pattern=os.path.join(examples, f"Split-{split}", "*"), schema=schema
        )
        return pipeline | label >> source.BeamSource(), source.TensorAdapterConfig()

    with (
        tempfile.TemporaryDirectory() as tmp,
        beam.Pipeline(options=PipelineOptions(beam_args)) as pipeline,
        tft_beam.Context(temp_dir=tmp),
    ):
        data, config = read(pipeline, "train", "ReadAnalyze")
        transform_fn = (data, config) | "Analyze" >> tft_beam.AnalyzeDataset(
            module.preprocessing_fn
        )
        _ = transform_fn | "WriteTransformFn" >> tft_beam.WriteTransformFn(graph)
        _ = dataset_metadata.DatasetMetadata(schema) | "WriteRaw" >> tft_beam.WriteMetadata(
            os.path.join(graph, "metadata"), pipeline
        )
        metadata = beam.pvalue.AsSingleton(transform_fn[1].deferred_metadata)
        for split in ("train", "eval"):
            raw, config = read(pipeline, split, f"Read[{split}]")
            out_data, _ = (
                (raw, config),
                transform_fn,
            ) | f"Transform[{split}]" >> tft_beam.TransformDataset(output_record_batches=True)
            _ = (
                out_data
                | f"Encode[{split}]" >> beam.ParDo(Encode(), metadata)
                | f"Write[{split}]"
                >> beam.io.WriteToTFRecord(
                    os.path.join(transformed, f"Split-{split}", "transformed_examples"),
                    file_name_suffix=".gz",
                )
            )


if __name__ == "__main__":
    main(*sys.argv[1:5], sys.argv[5:])
