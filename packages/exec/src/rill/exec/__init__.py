"""The local dataflow executor and Session for rill graphs.

>>> import rill.graph as rg
>>> from rill.exec import Session
>>> with rg.Graph().as_default():
...     c = rg.constant([1.0, 2.0]) * 3.0
...     Session().run(c)
array([3., 6.], dtype=float32)
"""

from rill.exec import kernels  # noqa: F401 - registers every kernel
from rill.exec.device import CpuDevice, Device, GpuDevice
from rill.exec.proto.config_pb2 import (
    ConfigProto,
    GPUOptions,
    GraphOptions,
    OptimizerOptions,
    RunMetadata,
    RunOptions,
)
from rill.exec.session import (
    InteractiveSession,
    Session,
    register_session_factory,
    session_factory,
)
from rill.exec.variant import OptionalValue, TensorList

__version__ = "0.1.0"
