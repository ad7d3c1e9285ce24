"""The gRPC distributed runtime for rill: servers, master and worker services."""

from rill.distributed.cluster import (
    ClusterConfigError,
    ClusterSpec,
    TFConfig,
    parse_tf_config,
    task_device_name,
)

__all__ = ["ClusterConfigError", "ClusterSpec", "TFConfig", "parse_tf_config", "task_device_name"]
