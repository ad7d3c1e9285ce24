"""CPU (numpy) and GPU (cupy) kernels, one module per op family (named as in rill.graph.ops).

Importing this package registers every kernel.
"""

from rill.exec.kernels import (  # noqa: F401 - imported for their registrations
    array_kernels,
    control_flow_kernels,
    conv_kernels,
    data_flow_kernels,
    depthwise_kernels,
    fused_kernels,
    gather_kernels,
    grad_kernels,
    internal_kernels,
    io_kernels,
    list_kernels,
    logic_kernels,
    math_kernels,
    matmul_kernels,
    nn_kernels,
    optional_kernels,
    pool_kernels,
    random_kernels,
    reduction_kernels,
    reshape_kernels,
    rnn_kernels,
    sequence_kernels,
    slice_kernels,
    stack_kernels,
    state_kernels,
    tensor_array_kernels,
    training_kernels,
)
