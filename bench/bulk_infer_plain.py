"""The reference for bench/bulk_infer.py: a plain Beam RunInference script, no generic-trainer.

Reads TFRecords of tf.Example, runs the SavedModel's serving_default with tfx_bsl's model handler
on Beam's RunInference and writes the PredictionLogs as gzipped TFRecords, one file: what a person
would write by hand for the same job. Prints {"pipeline_s": ...} (building and running the
pipeline).

  .venv/bin/python bench/bulk_infer_plain.py --model DIR/Format-Serving \
      --input 'DIR/Split-*/*.gz' --output OUT/prediction_logs \
      [--beam-args='--direct_running_mode=in_memory']
"""

from __future__ import annotations

import argparse
import json
import shlex
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--beam-args", default="")
    args = parser.parse_args()

    import apache_beam as beam
    from apache_beam.ml.inference.base import RunInference
    from apache_beam.options.pipeline_options import PipelineOptions
    from tensorflow_serving.apis import prediction_log_pb2
    from tfx_bsl.public.beam.run_inference import CreateModelHandler
    from tfx_bsl.public.proto import model_spec_pb2

    spec = model_spec_pb2.InferenceSpecType(
        saved_model_spec=model_spec_pb2.SavedModelSpec(model_path=args.model)
    )
    started = time.monotonic()
    with beam.Pipeline(options=PipelineOptions(shlex.split(args.beam_args))) as pipeline:
        _ = (
            pipeline
            | beam.io.ReadFromTFRecord(args.input)
            | RunInference(CreateModelHandler(spec))
            | beam.io.WriteToTFRecord(
                args.output,
                file_name_suffix=".gz",
                num_shards=1,
                coder=beam.coders.ProtoCoder(prediction_log_pb2.PredictionLog),
            )
        )
    print(json.dumps({"pipeline_s": time.monotonic() - started}))


if __name__ == "__main__":
    main()
