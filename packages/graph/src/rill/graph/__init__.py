"""The rill IR: dtypes, shapes, the op registry, Graph / Operation / Tensor, GraphDef and text.

>>> import rill.graph as rg
>>> g = rg.Graph()
>>> with g.as_default():
...     x = rg.placeholder(rg.float32, [None, 784], name="x")
...     w = rg.constant(0.0, shape=[784, 10], name="w")
...     y = rg.matmul(x, w)
>>> y
<Tensor 'MatMul:0' f32[?,10]>
"""

from rill.graph import errors, nest, ops  # noqa: F401 - declares every op
from rill.graph.control_flow import case, cond, switch_case, while_loop
from rill.graph.device import DeviceSpec
from rill.graph.dtypes import *  # noqa: F403
from rill.graph.dtypes import DType, as_dtype
from rill.graph.functional_ops import foldl, foldr, map_fn, scan
from rill.graph.graph import (
    Graph,
    Operation,
    Tensor,
    constant,
    convert_to_tensor,
    default_session,
    get_default_graph,
    get_default_session,
    placeholder,
    reset_default_graph,
)
from rill.graph.graph_def import import_graph_def, make_ndarray, make_tensor_proto
from rill.graph.op_def import RuleRegistry, all_op_defs, defop, get_op_def
from rill.graph.ops.array_ops import *  # noqa: F403
from rill.graph.ops.candidate_sampling_ops import *  # noqa: F403
from rill.graph.ops.check_ops import *  # noqa: F403
from rill.graph.ops.composite_ops import *  # noqa: F403
from rill.graph.ops.control_flow_ops import *  # noqa: F403
from rill.graph.ops.conv_ops import *  # noqa: F403
from rill.graph.ops.data_flow_ops import *  # noqa: F403
from rill.graph.ops.embedding_ops import *  # noqa: F403
from rill.graph.ops.gather_ops import *  # noqa: F403
from rill.graph.ops.io_ops import *  # noqa: F403
from rill.graph.ops.list_ops import *  # noqa: F403
from rill.graph.ops.logging_ops import *  # noqa: F403
from rill.graph.ops.logic_ops import *  # noqa: F403
from rill.graph.ops.math_ops import *  # noqa: F403
from rill.graph.ops.matmul_ops import *  # noqa: F403
from rill.graph.ops.nn_ops import *  # noqa: F403
from rill.graph.ops.optional_ops import *  # noqa: F403
from rill.graph.ops.pool_ops import *  # noqa: F403
from rill.graph.ops.random_ops import *  # noqa: F403
from rill.graph.ops.reduction_ops import *  # noqa: F403
from rill.graph.ops.reshape_ops import *  # noqa: F403
from rill.graph.ops.script_ops import numpy_function, py_func, py_function
from rill.graph.ops.sequence_ops import *  # noqa: F403
from rill.graph.ops.slice_ops import *  # noqa: F403
from rill.graph.ops.sparse_ops import *  # noqa: F403
from rill.graph.ops.stack_ops import *  # noqa: F403
from rill.graph.ops.state_ops import *  # noqa: F403
from rill.graph.ops.summary_ops import *  # noqa: F403
from rill.graph.ops.tensor_array_ops import *  # noqa: F403
from rill.graph.ops.training_ops import *  # noqa: F403
from rill.graph.shapes import TensorShape, as_shape
from rill.graph.sparse_tensor import SparseTensor, SparseTensorValue, sparse_placeholder
from rill.graph.text import format_graph, parse_graph

# isort: split
# TensorFlow's namespaces (tf.nn, tf.math, ...) and module-level scopes (tf.device, ...). The
# scope functions come last: `device` replaces the rill.graph.device module as the attribute.
from rill.graph import image, linalg, math, nn, random
from rill.graph.ops.math_impl import *  # noqa: F403
from rill.graph.ops.nn_impl import *  # noqa: F403
from rill.graph.scopes import colocate_with, control_dependencies, device, name_scope

__version__ = "0.1.0"
