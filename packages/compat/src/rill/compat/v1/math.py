"""`tf.math` of TensorFlow 1.x (rill.graph.math)."""

# ruff: noqa: F401, F403, E402 - a namespace of re-exports

# issue 18's math ops under their tf.math names
from rill.compat.v1._aliases import bincount
from rill.graph.math import *
from rill.graph.math import mod
from rill.graph.ops.manip_ops import cumprod, cumulative_logsumexp
from rill.graph.ops.segment_ops import (
    segment_max,
    segment_mean,
    segment_min,
    segment_prod,
    segment_sum,
    unsorted_segment_max,
    unsorted_segment_min,
    unsorted_segment_prod,
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
    erfc,
    erfinv,
    expm1,
    igamma,
    igammac,
    is_finite,
    is_inf,
    is_nan,
    lgamma,
    multiply_no_nan,
    polygamma,
    sin,
    sinh,
    tan,
    truncatediv,
    truncatemod,
    xdivy,
    xlog1py,
    xlogy,
    zeta,
)
from rill.graph.ops.special_math_ops import div_no_nan as divide_no_nan
