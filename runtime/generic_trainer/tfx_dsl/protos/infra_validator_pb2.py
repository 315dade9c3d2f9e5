"""TFX 1.21's `tfx/proto/infra_validator.proto`: `ServingSpec` and its serving binaries and
platforms, `ValidationSpec`, `RequestSpec` (declared as `declare` says)."""

from generic_trainer.tfx_dsl.protos import declare as _declare

_FILE = _declare.ProtoFile(
    "tfx/proto/infra_validator.proto",
    "tfx.components.infra_validator",
    {
        "ServingSpec": [
            "oneof serving_binary TensorFlowServing tensorflow_serving = 1",
            "oneof serving_platform LocalDockerConfig local_docker = 2",
            "oneof serving_platform KubernetesConfig kubernetes = 3",
            "string model_name = 4",
        ],
        "TensorFlowServing": [
            "string image_name = 3",
            "repeated string tags = 1",
            "repeated string digests = 2",
        ],
        "LocalDockerConfig": [
            "string client_base_url = 1",
            "string client_api_version = 2",
            "int32 client_timeout_seconds = 3",
            "string host_ip_address = 4",
        ],
        "KubernetesConfig": [
            "string service_account_name = 1",
            "int32 active_deadline_seconds = 2",
            "PodOverrides serving_pod_overrides = 3",
        ],
        "PodOverrides": [
            "map<string, string> annotations = 1",
            "repeated EnvVar env = 2",
            "Resources resources = 3",
        ],
        "EnvVar": ["string name = 1", "string value = 2", "EnvVarSource value_from = 3"],
        "EnvVarSource": ["SecretKeySelector secret_key_ref = 4", "reserved 1, 2, 3"],
        "SecretKeySelector": ["string name = 1", "string key = 2"],
        "Resources": [
            "map<string, string> requests = 1",
            "map<string, string> limits = 2",
            "map<string, string> claims = 3",
        ],
        "ValidationSpec": ["int32 max_loading_time_seconds = 1", "int32 num_tries = 2"],
        "RequestSpec": [
            "oneof kind TensorFlowServingRequestSpec tensorflow_serving = 1",
            "string split_name = 2",
            "int32 num_examples = 3",
            "bool make_warmup = 4",
        ],
        "TensorFlowServingRequestSpec": [
            "repeated string tag_set = 1",
            "repeated string signature_names = 2",
        ],
    },
)
globals().update(_declare.build(_FILE, __name__))
