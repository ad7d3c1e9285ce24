"""TensorFlow 1.x's API over rill: `import rill.compat.v1 as tf`.

A thin facade: every function lives in the rill package that owns it (graph builders in
rill.graph, gradients in rill.autodiff, sessions in rill.exec, training in rill.train); this
package only re-exports them under TensorFlow 1.15's names and module layout, adds TF1's
deprecated aliases (`initialize_all_variables`, `arg_max`, ...) and keeps TF1's argument orders
(`tf.nn.dropout(x, keep_prob)`, `tf.cond(pred, fn1=..., fn2=...)`). `tf.app` / `tf.flags` are
absl-py's, as TensorFlow's are.

>>> import rill.compat.v1 as tf
>>> x = tf.placeholder("float", [None, 3])
>>> y = tf.reduce_sum(x * 2.0, axis=1)
>>> with tf.Session() as sess:
...     sess.run(y, {x: [[1.0, 2.0, 3.0]]})
array([12.], dtype=float32)
"""

# ruff: noqa: F401, F403, E402 - a namespace of re-exports

from __future__ import annotations

import numpy as _np

# -- rill.autodiff --------------------------------------------------------------------------------
from rill.autodiff import (
    AggregationMethod,
    IndexedSlices,
    IndexedSlicesValue,
    custom_gradient,
    gradients,
    hessians,
    not_differentiable,
)
from rill.autodiff import register_gradient as RegisterGradient
from rill.compat.v1._aliases import Assert, Print, bincount
from rill.compat.v1._aliases import print_ as print  # noqa: A004 - TensorFlow's name
from rill.compat.v1._aliases import while_loop as _tf1_while_loop

# -- rill.exec --------------------------------------------------------------------------------
from rill.exec import (
    ConfigProto,
    GPUOptions,
    GraphOptions,
    InteractiveSession,
    OptimizerOptions,
    RunMetadata,
    RunOptions,
    Session,
)

# -- rill.graph: dtypes, Graph/Tensor, every op builder, control flow, scopes ------------------
from rill.graph import *
from rill.graph import (
    DeviceSpec,
    Graph,
    Operation,
    Tensor,
    TensorShape,
    as_dtype,
    colocate_with,
    control_dependencies,
    device,
    name_scope,
    placeholder,
)
from rill.graph import bool_ as bool  # noqa: A004 - TensorFlow's name
from rill.graph import cond as _cond
from rill.graph.dtypes import int64
from rill.graph.graph import get_default_graph
from rill.graph.graph_def import import_graph_def
from rill.graph.ops.array_ops import group, no_op
from rill.graph.ops.composite_ops import tuple_ as tuple  # noqa: A004 - TensorFlow's name
from rill.graph.ops.logging_ops import check_numerics
from rill.graph.ops.logic_ops import select_v2
from rill.graph.ops.math_ops import floordiv
from rill.graph.ops.reduction_ops import argmax, argmin
from rill.graph.ops.state_ops import (
    Variable,
    global_variables,
    global_variables_initializer,
    local_variables,
    local_variables_initializer,
    trainable_variables,
    variables_initializer,
)
from rill.graph.proto.attr_value_pb2 import AttrValue
from rill.graph.proto.graph_pb2 import GraphDef
from rill.graph.proto.node_def_pb2 import NodeDef
from rill.graph.tensor_util import constant_value

# -- rill.train: variables, scopes, initializers, clipping, summaries' protos --------------------
from rill.train import (
    AUTO_REUSE,
    GraphKeys,
    VariableScope,
    add_to_collection,
    clip_by_global_norm,
    clip_by_norm,
    clip_by_value,
    constant_initializer,
    get_collection,
    get_local_variable,
    get_variable,
    get_variable_scope,
    global_norm,
    glorot_normal_initializer,
    glorot_uniform_initializer,
    no_regularizer,
    ones_initializer,
    random_normal_initializer,
    random_uniform_initializer,
    truncated_normal_initializer,
    uniform_unit_scaling_initializer,
    variable_scope,
    variance_scaling_initializer,
    zeros_initializer,
)
from rill.train.monitored_session import _report_uninitialized_variables
from rill.train.summary import Event, HistogramProto, SessionLog, Summary, SummaryMetadata

# -- TensorFlow 1.x's modules -----------------------------------------------------------------
# The star import above brought rill.graph's own namespace modules under these names; drop
# them so that the imports below load this package's modules (which add rill.train's parts).
del nn, math, random, image, linalg, errors, dtypes  # noqa: F821
from rill.compat.v1 import (
    app,
    data,
    debugging,
    dtypes,
    errors,
    flags,
    gfile,
    graph_util,
    image,
    initializers,
    io,
    layers,
    linalg,
    lite,
    logging,
    losses,
    math,
    metrics,
    nn,
    random,
    saved_model,
    sparse,
    summary,
    train,
)

__version__ = "1.15.0"  # the TensorFlow API level rill.compat.v1 follows
VERSION = __version__
GIT_VERSION = "rill-compat-0.1.0"
newaxis = None
OpError = errors.OpError


# TF1's argument order and one-variable unpacking (over rill.graph's, which the * brought in).
while_loop = _tf1_while_loop

# -- TF1's deprecated aliases (same functions, old names) ----------------------------------------
initialize_all_variables = global_variables_initializer
initialize_local_variables = local_variables_initializer
initialize_variables = variables_initializer
all_variables = global_variables
verify_tensor_all_finite = check_numerics
floor_div = floordiv
NotDifferentiable = not_differentiable
NoGradient = not_differentiable
no_gradient = not_differentiable
matrix_transpose = linalg.matrix_transpose
get_logger = logging.get_logger
get_static_value = constant_value
where_v2 = select_v2


def is_tensor(x) -> bool:
    """Whether `x` is a graph tensor (or a tensor-like rill type: Variable, IndexedSlices)."""
    return isinstance(x, (Tensor, Variable, IndexedSlices))


def arg_max(input, dimension, output_type=int64, name=None):  # noqa: A002 - TF1's names
    """TF1's `tf.arg_max(input, dimension)`: argmax with the old argument name."""
    return argmax(input, axis=dimension, output_type=output_type, name=name)


def arg_min(input, dimension, output_type=int64, name=None):  # noqa: A002 - TF1's names
    """TF1's `tf.arg_min(input, dimension)`: argmin with the old argument name."""
    return argmin(input, axis=dimension, output_type=output_type, name=name)


def cond(pred, true_fn=None, false_fn=None, strict=False, name=None, fn1=None, fn2=None):
    """TF1's `tf.cond`, which also takes the deprecated `fn1` / `fn2`."""
    true_fn = true_fn if true_fn is not None else fn1
    false_fn = false_fn if false_fn is not None else fn2
    if true_fn is None or false_fn is None:
        raise TypeError("cond needs true_fn and false_fn")
    return _cond(pred, true_fn, false_fn, name=name or "cond", strict=strict)


def report_uninitialized_variables(var_list=None, name="report_uninitialized_variables"):
    """The names of the variables in `var_list` (default: all global and local ones) that are
    not initialized, as a 1-D string tensor."""
    if var_list is None:
        var_list = global_variables() + local_variables()
    return _report_uninitialized_variables(list(var_list), name=name)


def model_variables(scope=None) -> list:
    """The variables of the "model_variables" collection."""
    return get_default_graph().get_collection(GraphKeys.MODEL_VARIABLES, scope)


def moving_average_variables(scope=None) -> list:
    """The variables of the "moving_average_variables" collection."""
    return get_default_graph().get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, scope)


def get_collection_ref(key) -> list:
    return get_default_graph().get_collection_ref(key)


def add_to_collections(names, value) -> None:
    get_default_graph().add_to_collections(names, value)


def tables_initializer(name: str = "init_all_tables"):
    """Initializes the graph's lookup tables; rill graphs built here have none, so this is a
    no-op, as TensorFlow's is for a graph without tables."""
    return no_op(name=name)


initialize_all_tables = tables_initializer


def executing_eagerly() -> bool:
    """False: rill.compat.v1 is TensorFlow 1.x's graph mode."""
    return False


def disable_v2_behavior() -> None:
    """Nothing to do: rill.compat.v1 always behaves as TensorFlow 1.x's graph mode."""


def disable_eager_execution() -> None:
    """Nothing to do: rill has no eager mode."""


def enable_resource_variables() -> None:
    """Nothing to do: rill's variables are resource variables."""


def disable_resource_variables() -> None:
    """Nothing to do: rill's variables are resource variables either way (they read and assign
    as TF1's reference variables do in a graph)."""


def enable_eager_execution(config=None, device_policy=None, execution_mode=None) -> None:
    """rill has no eager mode: a clear error rather than a graph that silently is not eager."""
    raise NotImplementedError(
        "rill.compat.v1 runs TensorFlow 1.x's graph mode only; remove enable_eager_execution()"
    )


def enable_v2_behavior() -> None:
    """rill.compat.v1 is TensorFlow 1.x's API: a clear error."""
    raise NotImplementedError("rill.compat.v1 follows TensorFlow 1.x; TF2 behaviour is not there")


def enable_control_flow_v2() -> None:
    """Nothing to do: rill's cond and while_loop are the v1 primitives (functional If/While in
    imported graphs are lowered to them)."""


disable_control_flow_v2 = disable_tensor_equality = enable_tensor_equality = (
    disable_v2_tensorshape
) = enable_v2_tensorshape = disable_resource_variables


def control_flow_v2_enabled() -> bool:
    return False


def executing_eagerly_outside_functions() -> bool:
    return False


def init_scope():
    """A scope outside any control dependencies (rill has no eager context to lift into)."""
    return get_default_graph().control_dependencies(None)


def resource_variables_enabled() -> bool:
    return True


del _np

# Partitioned variables and accumulators (TF1 top-level names).
# -- issue 18's op families under TensorFlow 1's top-level names and modules ---------------------
from rill.compat.v1 import bitwise, python_io, strings
from rill.compat.v1._more_names import (
    broadcast_dynamic_shape,
    histogram_fixed_width_bins,
    is_non_decreasing,
    is_strictly_increasing,
    lbeta,
    parallel_stack,
    scatter_div,
    scatter_max,
    scatter_min,
    scatter_mul,
    scatter_nd_add,
    scatter_nd_sub,
    scatter_nd_update,
    string_split,
    tensor_scatter_nd_max,
    tensor_scatter_nd_min,
    to_bfloat16,
)
from rill.compat.v1._nn_conv import (
    batch_to_space,
    depth_to_space,
    required_space_to_batch_paddings,
    space_to_batch,
    space_to_depth,
)
from rill.compat.v1._ops18 import (
    FixedLenFeature,
    FixedLengthRecordReader,
    ReaderBase,
    TextLineReader,
    TFRecordReader,
    VarLenFeature,
    WholeFileReader,
    parse_example,
    parse_single_example,
    random_gamma,
    random_poisson,
)
from rill.compat.v1.sparse import sparse_mask
from rill.graph.ops.accumulator_ops import ConditionalAccumulator, SparseConditionalAccumulator
from rill.graph.ops.diag_ops import (
    diag,
    diag_part,
    matrix_band_part,
    matrix_diag,
    matrix_diag_part,
    matrix_set_diag,
)
from rill.graph.ops.extra_ops import (
    cross,
    decode_base64,
    encode_base64,
    ensure_shape,
    read_file,
    rint,
    string_strip,
    string_to_hash_bucket,
    unravel_index,
    write_file,
)
from rill.graph.ops.grad_ops import unsorted_segment_sum
from rill.graph.ops.image_ops import (
    batch_to_space_nd,
    extract_image_patches,
    space_to_batch_nd,
)
from rill.graph.ops.linalg_ops import (
    cholesky,
    log_matrix_determinant,
    matrix_determinant,
    matrix_inverse,
    matrix_solve,
    matrix_solve_ls,
    matrix_triangular_solve,
    qr,
    self_adjoint_eig,
    svd,
)
from rill.graph.ops.manip_ops import cumprod, einsum, linspace, roll
from rill.graph.ops.ref_variable_ops import count_up_to
from rill.graph.ops.segment_ops import (
    segment_max,
    segment_mean,
    segment_min,
    segment_prod,
    segment_sum,
    tensor_scatter_add,
    tensor_scatter_sub,
    tensor_scatter_update,
    unsorted_segment_max,
    unsorted_segment_min,
    unsorted_segment_prod,
)
from rill.graph.ops.set_search_ops import (
    bucketize,
    histogram_fixed_width,
    searchsorted,
    setdiff1d,
    unique_with_counts,
)
from rill.graph.ops.sparse_math import (
    sparse_add,
    sparse_concat,
    sparse_fill_empty_rows,
    sparse_maximum,
    sparse_merge,
    sparse_minimum,
    sparse_reduce_max,
    sparse_reduce_max_sparse,
    sparse_reduce_sum,
    sparse_reduce_sum_sparse,
    sparse_reorder,
    sparse_reshape,
    sparse_retain,
    sparse_segment_mean,
    sparse_segment_sqrt_n,
    sparse_segment_sum,
    sparse_slice,
    sparse_softmax,
    sparse_split,
    sparse_tensor_dense_matmul,
    sparse_to_indicator,
    sparse_transpose,
)
from rill.graph.ops.special_math_ops import (
    acos,
    acosh,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    betainc,
    cosh,
    digamma,
    div_no_nan,
    erfc,
    expm1,
    igamma,
    igammac,
    is_finite,
    is_inf,
    is_nan,
    lgamma,
    polygamma,
    sin,
    sinh,
    tan,
    truncatediv,
    truncatemod,
    zeta,
)
from rill.graph.ops.string_ops import (
    as_string,
    decode_csv,
    decode_raw,
    reduce_join,
    regex_replace,
    string_join,
    string_to_hash_bucket_fast,
    string_to_hash_bucket_strong,
    string_to_number,
    substr,
)
from rill.train.init_ops import orthogonal_initializer
from rill.train.partitioned_variables import (
    fixed_size_partitioner,
    min_max_variable_partitioner,
    variable_axis_size_partitioner,
)
from rill.train.template import make_template

lin_space = linspace
tensor_scatter_nd_update = tensor_scatter_update
tensor_scatter_nd_add = tensor_scatter_add
tensor_scatter_nd_sub = tensor_scatter_sub
