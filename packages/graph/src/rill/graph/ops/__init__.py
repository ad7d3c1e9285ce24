"""Op declarations and their builder functions, one module per op family.

Importing this package declares every op; a malformed declaration fails the import.
"""

from rill.graph.ops import (  # noqa: F401 - imported for their declarations
    array_ops,
    control_flow_ops,
    conv_ops,
    data_flow_ops,
    fused_ops,
    gather_ops,
    grad_ops,
    internal_ops,
    io_ops,
    list_ops,
    logic_ops,
    math_ops,
    matmul_ops,
    nn_ops,
    optional_ops,
    pool_ops,
    random_ops,
    reduction_ops,
    reshape_ops,
    rnn_ops,
    sequence_ops,
    slice_ops,
    stack_ops,
    state_ops,
    tensor_array_ops,
    training_ops,
)
