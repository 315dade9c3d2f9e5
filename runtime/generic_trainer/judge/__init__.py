"""What evaluate, infra-validate and export-tflite build on: the eval config (native or TFMA's), streaming
metrics, thresholds and bootstrap intervals, calling a SavedModel's signature with examples, the sandbox
a model runs in, blessings, warm-up requests and the TFLite conversion.
"""
