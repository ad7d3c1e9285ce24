"""`tf.initializers` of TensorFlow 1.x (rill.train.init_ops; the variables' initializer ops)."""

# ruff: noqa: F401 - a namespace of re-exports

from rill.graph.ops.state_ops import global_variables_initializer as global_variables
from rill.graph.ops.state_ops import local_variables_initializer as local_variables
from rill.graph.ops.state_ops import variables_initializer as variables
from rill.train.init_ops import (
    constant_initializer as constant,
)
from rill.train.init_ops import (
    glorot_normal_initializer as glorot_normal,
)
from rill.train.init_ops import (
    glorot_uniform_initializer as glorot_uniform,
)
from rill.train.init_ops import (
    he_normal,
    he_uniform,
    lecun_normal,
    lecun_uniform,
)
from rill.train.init_ops import (
    identity_initializer as identity,
)
from rill.train.init_ops import (
    ones_initializer as ones,
)
from rill.train.init_ops import (
    orthogonal_initializer as orthogonal,
)
from rill.train.init_ops import (
    random_normal_initializer as random_normal,
)
from rill.train.init_ops import (
    random_uniform_initializer as random_uniform,
)
from rill.train.init_ops import (
    truncated_normal_initializer as truncated_normal,
)
from rill.train.init_ops import (
    uniform_unit_scaling_initializer as uniform_unit_scaling,
)
from rill.train.init_ops import (
    variance_scaling_initializer as variance_scaling,
)
from rill.train.init_ops import (
    zeros_initializer as zeros,
)


def tables_initializer(name: str = "init_all_tables"):
    """A no-op: rill graphs have no lookup tables to initialize (TensorFlow's result for a
    graph without tables)."""
    from rill.graph.ops.array_ops import no_op

    return no_op(name=name)
