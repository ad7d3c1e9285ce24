"""Protocol buffers of rill.distributed, wire-compatible with TensorFlow's master.proto,
worker.proto, tensorflow_server.proto, named_tensor.proto, device_attributes.proto and
error_codes.proto (generated *_pb2 committed; regenerate with `make protos`).

ClusterDef / JobDef live in rill.exec.proto.cluster_pb2 (ConfigProto carries a ClusterDef) and
are re-exported here.
"""

from rill.exec.proto.cluster_pb2 import ClusterDef, JobDef

__all__ = ["ClusterDef", "JobDef"]
