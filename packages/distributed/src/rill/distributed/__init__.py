"""The gRPC distributed runtime for rill: servers, master and worker services.

>>> import rill.graph as rg
>>> from rill.exec import Session
>>> with Server.create_local_server() as server:
...     with rg.Graph().as_default():
...         y = rg.constant(20.0) + 22.0
...         with Session(server.target) as sess:
...             float(sess.run(y))
42.0
"""

from rill.distributed import _grpc_env  # noqa: F401 - first: before grpc starts
from rill.distributed.client import GrpcSession
from rill.distributed.cluster import (
    ClusterConfigError,
    ClusterSpec,
    TFConfig,
    parse_tf_config,
    task_device_name,
)
from rill.distributed.launch import LocalCluster, local_cluster
from rill.distributed.server import Server

__all__ = [
    "ClusterConfigError",
    "ClusterSpec",
    "GrpcSession",
    "Server",
    "TFConfig",
    "parse_tf_config",
    "task_device_name",
]
__all__ += ["LocalCluster", "local_cluster"]
