"""CPU kernels for the fused ops the planner's remapper substitutes (rill.graph.ops.fused_ops).

_FusedConv2D and _FusedMatMul run the product with the Conv2D / MatMul kernel, then add the bias
and apply the activation in place (channels-first _FusedConv2D and _FusedDepthwiseConv2dNative:
fused_conv_kernels), a cache-sized piece of rows at a time: no intermediate
tensor is allocated, and each piece is still in cache for the activation. A convolution that is
computed in blocks of output rows finishes each block right after its product. The arithmetic is
the unfused ops' own, so results are identical. _FusedMaxPoolGrad is in pool_kernels.
"""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels import intra_op, jit
from rill.exec.kernels.conv_kernels import _conv2d
from rill.exec.kernels.intra_op import parallel_for
from rill.exec.kernels.matmul_kernels import matmul
from rill.exec.kernels.nn_kernels import _HALF
from rill.graph.errors import InvalidArgumentError

# Elements per piece of the in-place epilogue (1 MiB of float32).
_PIECE = 1 << 18


def _activation(name: str, alpha: float):
    """The in-place activation for one piece (a 2-D array), exactly the unfused kernel's math."""
    if name == "Relu":
        return lambda a: np.maximum(a, 0, out=a)
    if name == "Relu6":

        def relu6(a):
            np.maximum(a, 0, out=a)
            np.minimum(a, 6, out=a)

        return relu6
    if name == "Elu":

        def elu(a):
            w = a.astype(np.float32) if a.dtype in _HALF else a
            a[...] = np.where(w > 0, w, np.expm1(np.minimum(w, 0)))

        return elu
    if name == "LeakyRelu":

        def leaky(a):
            w = a.astype(np.float32) if a.dtype in _HALF else a
            a[...] = np.where(w > 0, w, w * alpha)

        return leaky
    from rill.exec.kernels.fused_conv_kernels import extra_activation  # it imports this module

    extra = extra_activation(name)
    if extra is None:
        raise InvalidArgumentError(f"unsupported fused activation {name!r}")
    return extra


def _epilogue(fused_ops, num_args: int, leakyrelu_alpha: float, op: str):
    """fn(out, args) applying fused_ops in place to the product `out` (channels last)."""
    ops = list(fused_ops)
    if not ops or ops[0] != "BiasAdd" or len(ops) > 2 or num_args != 1:
        raise InvalidArgumentError(
            f"{op} supports fused_ops [BiasAdd] or [BiasAdd, <activation>] with one argument, "
            f"got {ops} with {num_args}"
        )
    act = _activation(ops[1], leakyrelu_alpha) if len(ops) == 2 else None

    def check(out_shape, bias):
        c = out_shape[-1]
        if bias.ndim != 1 or bias.shape[0] != c:
            raise InvalidArgumentError(
                f"bias has shape {list(bias.shape)}; it must be a vector as long as the "
                f"channel dimension of the {op} output {list(out_shape)}"
            )

    code = {None: 0, "Relu": 1, "Relu6": 2}.get(ops[1] if len(ops) == 2 else None)
    # HardSigmoid and HardSwish: the channels-first epilogue's compiled chain (its codes 3, 4).
    hard = {"HardSigmoid": 3, "HardSwish": 4}.get(ops[1] if len(ops) == 2 else None)

    def rows(piece, bias):
        """The epilogue of one piece of output rows, in place."""
        loops = jit.loops() if code is not None and piece.dtype in jit.FLOATS else None
        if loops is not None and piece.ndim == 2 and piece.flags.c_contiguous:
            loops.bias_activation(piece, bias.astype(piece.dtype, copy=False), code, 0, len(piece))
            return
        if hard is not None and piece.dtype in jit.FLOATS and jit.loops() is not None:
            if piece.ndim == 2 and piece.flags.c_contiguous:
                from rill.exec.kernels.fused_conv_kernels import _loops  # it imports this

                b = bias.astype(piece.dtype, copy=False)
                _loops().bias_activation_rows(piece, b, hard, 0, len(piece))
                return
        piece += bias
        if act is not None:
            act(piece)

    def apply(out, bias):
        check(out.shape, bias)
        if not (out.flags.c_contiguous and out.flags.writeable and out.base is None):
            out = np.array(out)  # never write into memory the product might share
        if out.size <= _PIECE:  # one piece: no reshaping or slicing
            rows(out, bias)
            return out
        flat = out.reshape(-1, out.shape[-1])
        step = max(1, _PIECE // max(out.shape[-1], 1))
        for r in range(0, flat.shape[0], step):
            rows(flat[r : r + step], bias)
        return out

    def blockwise(channels, args):
        """The epilogue for the product's own row blocks (see conv_kernels._conv2d)."""
        (bias,) = args
        check((channels,), bias)
        return lambda block: rows(block, bias)

    apply.blockwise = blockwise
    return apply


@register_kernel("_FusedConv2D", expensive=True)
def fused_conv2d(
    strides, padding, explicit_paddings, data_format, dilations, fused_ops, num_args,
    leakyrelu_alpha, filter_format, num_host_args,
):  # fmt: skip
    if data_format not in ("NHWC", "NCHW") or filter_format != "HWIO" or num_host_args:
        raise InvalidArgumentError(
            "the CPU _FusedConv2D takes NHWC or NCHW data and an HWIO filter without host "
            f"arguments, got {data_format}, {filter_format} and {num_host_args}"
        )
    if data_format == "NCHW":
        from rill.exec.kernels.fused_conv_kernels import fused_conv2d_nchw  # it imports this

        return fused_conv2d_nchw(strides, padding, explicit_paddings, dilations, fused_ops,
                                 num_args, leakyrelu_alpha)  # fmt: skip
    epilogue = _epilogue(fused_ops, num_args, leakyrelu_alpha, "_FusedConv2D")
    return _conv2d(strides, padding, explicit_paddings, data_format, dilations, epilogue)


@register_kernel("_FusedMatMul", expensive=True)
def fused_matmul(transpose_a, transpose_b, T, fused_ops, num_args, leakyrelu_alpha):
    mm = matmul(transpose_a, transpose_b, T, np)
    epilogue = _epilogue(fused_ops, num_args, leakyrelu_alpha, "_FusedMatMul")

    def compute(a, b, bias):
        return epilogue(mm(a, b), bias)

    return compute


# Elements per piece of _FusedTanhGelu (256 KiB of float32): its three passes over a piece run
# while the piece is in cache.
_GELU_PIECE = 1 << 16
# The fewest pieces per thread where it splits over threads: each piece is three calls, each
# taking the GIL back, and a split of fewer loses. ViT-small b1's [197, 1536] (5 pieces) took
# 147 µs on one thread and 238 µs in two halves (quiet, polling hand-offs).
_GELU_PIECES_PER_THREAD = 8
# Elements per piece of the float32 _FusedTanhGelu's one compiled call (about 30 µs).
_GELU_GRAIN = 1 << 15
# The fewest elements of a float32 _FusedTanhGelu split over the pool's team (about 15 µs: the
# hand-off is a microsecond or so). Through the Python pool a GPT-2-like block's [64, 1024]
# (two pieces of _GELU_GRAIN) gained nothing from a second thread.
_GELU_TEAM = 1 << 14
# Elements per piece of a split _FusedLayerNorm: ViT-small b1's [197, 384] (75 K) took 48 µs on
# one thread and 119 µs in four pieces over two.
_NORM_PIECE = 1 << 18


@register_kernel("_FusedTanhGelu")
def fused_tanh_gelu(T, coefficients):
    """d · (x · (c + tanh(b · (x + a · (x · (x · x)))))) for coefficients [a, b, c, d], each
    operation rounded to T in that order, as the unfused chain's kernels (numpy's multiply and
    add, the Tanh kernel's tanh) compute it: with the compiled loops, the operations before the
    Tanh in one pass, the tanh in place, the rest in one more pass, piece by piece (float32:
    _exp_tanh_loops.tanh_gelu32, tanh32's, one compiled call a piece; float64: numpy's tanh
    between two compiled passes); else op by op."""
    if len(coefficients) != 4:
        raise InvalidArgumentError(
            f"_FusedTanhGelu takes 4 coefficients [a, b, c, d], got {list(coefficients)}"
        )
    a, b, c, d = (T.np.type(v) for v in coefficients)
    coef = np.array([a, b, c, d], T.np)  # (tanh_gelu32_team's, for float32)

    def compute(x):
        from rill.exec.kernels.fused_conv_kernels import _loops

        loops = _loops() if x.dtype in jit.FLOATS and x.dtype == T.np else None
        if loops is None or not x.flags.c_contiguous:
            t = np.multiply(x, np.multiply(x, x))
            t = np.multiply(b, np.add(x, np.multiply(a, t)))
            return np.multiply(d, np.multiply(x, np.add(c, np.tanh(t))))
        out = np.empty(x.shape, x.dtype)
        xf, of = x.reshape(-1), out.reshape(-1)
        # float32's Tanh kernel (math_kernels) is tanh32 with the compiled loops on: so is this,
        # the three passes in one compiled call per piece.
        mod = jit.exp_tanh() if x.dtype == np.float32 else None
        if mod is not None:
            team = intra_op.team() if xf.size >= _GELU_TEAM else None
            if team is not None:  # runs of values over the team (the unsplit bits)
                mod.tanh_gelu32_team(xf, of, coef, 4, team, mod.gelu_piece_function())
                return out
            parallel_for(xf.size, lambda lo, hi: mod.tanh_gelu32(xf, of, a, b, c, d, lo, hi),
                         grain=_GELU_GRAIN)  # fmt: skip
            return out

        def pieces(lo, hi):
            for p in range(lo, hi):
                s, e = p * _GELU_PIECE, min(xf.size, (p + 1) * _GELU_PIECE)
                loops.tanh_gelu_head(xf, of, a, b, s, e)
                np.tanh(of[s:e], out=of[s:e])
                loops.tanh_gelu_tail(xf, of, c, d, s, e)

        parallel_for(-(-xf.size // _GELU_PIECE), pieces, grain=_GELU_PIECES_PER_THREAD)
        return out

    return compute


@register_kernel("_FusedLayerNorm")
def fused_layer_norm(T, epsilon):
    """((x - m) · Rsqrt(v + epsilon)) · scale + offset over x's last axis, m and v its mean and
    the mean of (x - m)², each operation as the unfused chain's kernels compute it: with the
    compiled loops one row loop (_loops.layer_norm_rows), else op by op in numpy."""
    eps = T.np.type(epsilon)

    def compute(x, scale, offset):
        n = x.shape[-1] if x.ndim else 0
        if x.ndim < 1 or scale.shape != (n,) or offset.shape != (n,):
            raise InvalidArgumentError(
                f"_FusedLayerNorm needs scale and offset as long as the input's last axis: input "
                f"{list(x.shape)}, scale {list(scale.shape)}, offset {list(offset.shape)}"
            )
        loops = jit.loops() if x.dtype in jit.FLOATS and x.flags.c_contiguous else None
        if loops is None or not 0 < n <= loops.NORM_ROW_MAX:
            from rill.exec.kernels.reduction_kernels import _mean

            with np.errstate(invalid="ignore", divide="ignore"):
                m = _mean(np, x, (x.ndim - 1,), True)
                v = _mean(np, np.square(np.subtract(x, m)), (x.ndim - 1,), True)
                inv = np.reciprocal(np.sqrt(np.add(v, eps)))
                return np.add(np.multiply(np.multiply(np.subtract(x, m), inv), scale), offset)
        rows = x.reshape(-1, n)
        out = np.empty(x.shape, x.dtype)
        flat = out.reshape(-1, n)
        s = np.ascontiguousarray(scale, x.dtype)
        o = np.ascontiguousarray(offset, x.dtype)
        parallel_for(rows.shape[0], lambda lo, hi: loops.layer_norm_rows(
            rows, s, o, eps, flat, lo, hi), grain=max(1, _NORM_PIECE // n))  # fmt: skip
        return out

    return compute
