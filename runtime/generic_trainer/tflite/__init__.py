"""TFLite: a SavedModel's serving_default converted to `model.tflite` and checked against it.

A floor under the verbs, shared by `train --export-tflite` (through `trained/model_artifact.py`) and
the `export-tflite` verb:
  options.py      how an export is asked for (no TensorFlow): TFLiteOptions, check_options, names
  export.py       the conversion and the files it writes
  check.py        the conversion's check: eval examples fed to both models, outputs compared
  cut.py          a serialized-tf.Example signature cut at its ParseExample op (TFLite takes the
                  features)
  parse_graph.py  the frozen graph read around that op: features' tensors, consumed tensors, tables
"""
