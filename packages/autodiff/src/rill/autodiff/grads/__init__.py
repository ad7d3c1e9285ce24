"""Gradient functions, one module per op family (named as in rill.graph.ops)."""

from rill.autodiff.grads import (  # noqa: F401 - imported for their registrations
    array_grad,
    control_flow_grad,
    conv_grad,
    gather_grad,
    list_grad,
    math_grad,
    matmul_grad,
    nn_grad,
    optional_grad,
    pool_grad,
    reduction_grad,
    rnn_grad,
    sequence_grad,
    slice_grad,
    state_grad,
    tensor_array_grad,
)
