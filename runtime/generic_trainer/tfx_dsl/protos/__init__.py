"""TFX 1.21's `tfx/proto/*.proto` messages, declared here and wire-compatible with TFX's.

One module per TFX file, named as TFX's generated module (`trainer_pb2`, `example_gen_pb2`, ...),
defining the same names: each declares its file compactly (`declare.ProtoFile`) and registers
the descriptor protoc writes for it, so bytes, JSON and text format are TFX's. `tfx_hook` serves
them as `tfx.proto.*_pb2` and `tfx.v1.proto` (`paths`). Only protobuf is imported (and
tensorflow_metadata's protos for `distribution_validator_pb2`).
"""
