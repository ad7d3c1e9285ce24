"""GPU kernels (cupy) beyond the ones registered beside their CPU kernels, and the host-memory
declarations of GPU kernel arguments (see rill.exec.memory_types).

- `memory`: which inputs/outputs of each op stay on the host on a GPU (shapes, axes, sizes).
- `generic`: CPU kernels written against `xp` that are correct on cupy, registered for GPU too.
- `nn`: convolutions (im2col + GEMM on the device), pooling and their gradients, sparse softmax
  cross-entropy.
- `cuda`: CUDA C kernels (cupy only) for their memory-bound passes: im2col, col2im, and MaxPool
  and MaxPoolGrad over tiling windows; the simulated GPU takes the whole-array paths.
- `random`: random ops on cupy's generator, seeded per op.
- `rnn`: the fused LSTM cell and its gradient (two GEMMs and one elementwise pass, fused into
  one kernel by cupy.fuse).
- `training`: variables' gathers/scatters and every optimizer's dense and sparse update.

Every kernel here runs in CI on the simulated GPU (rill.exec.simgpu) and on a real one under the
`gpu` test marker (`cuda`'s kernels only there: tests/gpu/test_cuda_kernels.py and the samples).
"""

from rill.exec.kernels.gpu import (  # noqa: F401
    cuda,
    generic,
    loops,
    memory,
    nn,
    random,
    rnn,
    training,
)
