"""Run KFP pipelines of container components on this host, without docker: the runtime's
`generic_trainer.tfx_kfp.host_tasks` (the tfx-pipeline verb's LocalDagRunner uses the same), kept
under this name for the pipelines and tests that import it."""

from generic_trainer.tfx_kfp.host_tasks import KFP_VERSION_PREFIX, HostTaskHandler, host_runner

__all__ = ["KFP_VERSION_PREFIX", "HostTaskHandler", "host_runner"]
