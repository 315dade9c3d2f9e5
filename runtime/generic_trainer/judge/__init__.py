"""What evaluate and infra-validate build on: the eval config (TFMA's, or the short form written as
TFMA's), TFMA's pipeline run as TFX's Evaluator runs it and its result read back, calling a
SavedModel's signature with examples, the sandbox a model runs in, blessings and warm-up requests.
(The TFLite conversion is its own floor: `tflite/`.)
"""
