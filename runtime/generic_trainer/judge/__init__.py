"""What evaluate and infra-validate build on: the eval config (native or TFMA's), streaming metrics,
thresholds and bootstrap intervals, calling a SavedModel's signature with examples, the sandbox a model
runs in, blessings and warm-up requests. (The TFLite conversion is its own floor: `tflite/`.)
"""
