"""CPU kernels for the channels-first fused convolutions the remapper makes of imported (ONNX,
PyTorch-made) models: _FusedDepthwiseConv2dNative, the NCHW _FusedConv2D (its epilogue, and for
few input channels its convolution, conv_nchw), and the activations beyond TensorFlow's four
that such models spell out as chains of ops (Sigmoid, Swish, HardSigmoid, HardSwish).

An NCHW depthwise convolution with float32/float64 data runs as one compiled loop per
(image, channel) plane (`_conv_loops`, numba): each output row is summed in a small buffer,
tap by tap in the numpy kernel's order, and gets its bias and activation while in cache — no
window copies, no temporaries. The epilogues are compiled loops too: bias, Relu, Relu6,
HardSigmoid and HardSwish in one pass; float64 Sigmoid and Swish in two passes around numpy's exp
(the Sigmoid kernel's), on cache-sized pieces. Everything is bit-identical to the unfused chain
except the float32 Sigmoid and Swish, one compiled pass with their own exp (within 4 ulp of the
exact value: _conv_loops.sigmoid32); without numba (RILL_JIT=0) the kernels run the unfused
ops' code. (conv_nchw's sums run in
another order than Conv2D's: see there.)
"""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels import conv_nchw, intra_op, jit, pointwise
from rill.exec.kernels.conv_kernels import _CONV_KW, _conv2d, _Window
from rill.exec.kernels.depthwise_kernels import depthwise_conv2d_native
from rill.exec.kernels.intra_op import parallel_blocks, parallel_for, scratch
from rill.graph.errors import InvalidArgumentError

# Elements per piece of the in-place epilogue (1 MiB of float32).
_PIECE = 1 << 18
# The fewest elements per thread where an epilogue splits over threads, at batch 1 and above.
# At batch 1 a split loses more in the next kernels (half their input in the other core's
# cache) than it saves: EfficientNet-B0 ½ b1 with default threads 9.7 ms from 2^18 values a
# thread, 9.3 from 2^19. At batch 8 its Swish epilogues (an exp per value) pay split finer:
# EfficientNet-B0 ½ b8 56.4-56.8 ms from 2^19, 51.1-55.8 from 2^17 (same process, alternating,
# two runs).
_SPLIT_PIECE = 1 << 19
_SPLIT_PIECE_BATCH = 1 << 17


def _split_rows(out: np.ndarray, plane: int, rows: int = 1) -> int:
    """The grain, in planes, of an epilogue over out's [n·c, plane] planes (at least rows)."""
    piece = _SPLIT_PIECE if out.shape[0] == 1 else _SPLIT_PIECE_BATCH
    return max(rows, piece // max(plane, 1))


# The plain depthwise op, whose kernel runs depthwise_nchw with no bias and no activation.
_PLAIN = "DepthwiseConv2dNative"
# Output elements per chunk of the depthwise loop, activated right after it (256 KiB of float32).
_CHUNK = 1 << 16
# Multiply-adds per piece of a depthwise convolution split over threads: a hand-off and a
# worker's wake-up cost 10-50 µs, so 65536 (~16 µs of work) made MobileNetV3-small slower on
# two threads than on one (b1 7.6 vs 5.6 ms); 2^20 was best at batch 1 and 8.
_DW_GRAIN = 1 << 20
# At batch 1, splits lose more than the split kernel's own time shows: the next kernel on the
# calling thread finds half its input in the other core's cache. Default threads, same process,
# alternating: EfficientNet-B0 ½ b1 10.1 ms with 2^20 per depthwise piece and 2^22 per
# pointwise half (one thread 9.4), 9.1 with these; SqueezeNet b1 9.8 -> 9.3 (one thread 9.8);
# at batch 8 a coarser depthwise grain was slower (MobileNetV3-small 25.3 -> 27.0 ms).
_DW_GRAIN_B1 = 1 << 22
# The fewest multiply-adds of a batch-1 by-channel depthwise convolution split over the pool's
# team: its copies to and from channels-last cost more than its sums, so fewer than a GEMM's
# (pointwise.TEAM_GRAIN) make about 5 µs.
_DW_TEAM_GRAIN = 1 << 15
# The fewest elements of a float32 convolution's output whose compiled epilogue splits over
# the pool's team (about 5 µs of Swish).
_EPILOGUE_TEAM_SIZE = 1 << 13
# The fewest multiply-adds of a batch-1 pointwise product split in exact halves over threads.
_B1_HALVES = 1 << 24
# The activations the compiled loops apply themselves (their code), and the others.
_LOOP_CODES = {None: 0, "Relu": 1, "Relu6": 2, "HardSigmoid": 3, "HardSwish": 4}
# The activations whose exp is numpy's, between two compiled passes (their value is Swish's).
_EXP_CODES = {"Sigmoid": False, "Swish": True}
EXTRA_ACTIVATIONS = frozenset({"Sigmoid", "Swish", "HardSigmoid", "HardSwish"})


def _loops():
    """The compiled loops (_conv_loops), or None where the numpy code runs."""
    return jit.conv_loops()


def _sigmoid_into(a: np.ndarray, t: np.ndarray) -> None:
    """t = Sigmoid's kernel applied to a: 1 / (1 + exp(-a)) in its three passes."""
    np.negative(a, out=t)
    np.exp(t, out=t)
    t += a.dtype.type(1)
    np.reciprocal(t, out=t)


def _hard_sigmoid_into(a: np.ndarray, t: np.ndarray) -> None:
    """t = the imported HardSigmoid chain Maximum(Minimum(AddV2(Mul(1/6, a), 1/2), 1), 0)."""
    dt = a.dtype.type
    np.multiply(dt(1.0 / 6.0), a, out=t)
    t += dt(0.5)
    np.minimum(t, dt(1), out=t)
    np.maximum(t, dt(0), out=t)


def extra_activation(name: str):
    """fn(piece) applying activation `name` in place to a contiguous float32/float64 array, with
    the unfused chain's operations (float32 Sigmoid and Swish: _conv_loops.sigmoid32, where
    numba runs); None for a name not in EXTRA_ACTIVATIONS."""
    if name not in EXTRA_ACTIVATIONS:
        return None

    def apply(a: np.ndarray) -> None:
        if a.dtype not in jit.FLOATS:
            raise InvalidArgumentError(
                f"the fused activation {name} takes float32 or float64, got {a.dtype}"
            )
        loops = _loops()
        if (
            loops is not None
            and name in _EXP_CODES
            and a.dtype == np.float32
            and a.flags.c_contiguous
        ):
            flat = a.reshape(-1)
            loops.sigmoid32_flat(flat, _EXP_CODES[name], 0, flat.size)
            return
        t = scratch("fused_activation", a.size, a.dtype).reshape(a.shape)
        if name in ("Sigmoid", "Swish"):
            _sigmoid_into(a, t)
        else:
            _hard_sigmoid_into(a, t)
        if name in ("Sigmoid", "HardSigmoid"):
            a[...] = t
        else:
            np.multiply(a, t, out=a)

    return apply


def _check_ops(fused_ops, num_args: int, op: str):
    ops = list(fused_ops)
    if not ops or ops[0] != "BiasAdd" or len(ops) > 2 or num_args != 1:
        raise InvalidArgumentError(
            f"{op} supports fused_ops [BiasAdd] or [BiasAdd, <activation>] with one argument, "
            f"got {ops} with {num_args}"
        )
    return ops[1] if len(ops) == 2 else None


def _check_bias(bias: np.ndarray, out_shape, axis: int, op: str) -> None:
    if bias.ndim != 1 or bias.shape[0] != out_shape[axis]:
        raise InvalidArgumentError(
            f"bias has shape {list(bias.shape)}; it must be a vector as long as the channel "
            f"dimension {axis} of the {op} output {list(out_shape)}"
        )


def _exp_activation(loops, planes, bias, swish: bool, r0: int, r1: int) -> None:
    """Sigmoid or Swish (after + bias, when bias has elements) on rows [r0, r1) of planes, in
    place. float32: one compiled pass with its own exp (_conv_loops.sigmoid32, within 4 ulp of
    the exact value, not numpy's bits); float64: two compiled passes around numpy's exp on a
    scratch copy, all in cache (the unfused kernels' bits)."""
    if planes.dtype == np.float32:
        loops.sigmoid32_planes(planes, bias, swish, r0, r1)
        return
    t = scratch("fused_activation", (r1 - r0) * planes.shape[1], planes.dtype)
    t = t.reshape(r1 - r0, planes.shape[1])
    loops.sigmoid_head(planes, bias, t, r0, r1)
    np.exp(t, out=t)
    loops.sigmoid_tail(planes, t, swish, r0, r1)


def nchw_epilogue(fused_ops, num_args: int, leakyrelu_alpha: float, op: str):
    """fn(out, bias) applying fused_ops in place to a channels-first product `out`."""
    act_name = _check_ops(fused_ops, num_args, op)
    code = _LOOP_CODES.get(act_name)
    exp_swish = _EXP_CODES.get(act_name)
    # The numpy activation after the bias (where no compiled loop applies it).
    if act_name is None or act_name in ("Relu", "Relu6"):
        act = None
    elif act_name in EXTRA_ACTIVATIONS:
        act = extra_activation(act_name)
    else:
        from rill.exec.kernels.fused_kernels import _activation

        act = _activation(act_name, leakyrelu_alpha)

    def apply(out: np.ndarray, bias: np.ndarray) -> np.ndarray:
        _check_bias(bias, out.shape, 1, op)
        if not (out.flags.c_contiguous and out.flags.writeable and out.base is None):
            out = np.array(out)  # never write into memory the product might share
        if out.size == 0:
            return out
        c = out.shape[1]
        planes = out.reshape(out.shape[0] * c, -1)
        bias = bias.astype(out.dtype, copy=False)
        loops = _loops() if out.dtype in jit.FLOATS else None
        rows = max(1, _PIECE // max(planes.shape[1], 1))
        if loops is not None and exp_swish is not None:
            rows = max(1, _CHUNK // max(planes.shape[1], 1))
        if (loops is not None and out.dtype == np.float32
                and (exp_swish is not None or code is not None) and planes.shape[0] > 1
                and out.size >= _EPILOGUE_TEAM_SIZE):  # fmt: skip
            team = intra_op.team()
            if team is not None:  # runs of planes over the pool's team (the unsplit bits)
                kind, arg = (0, code) if exp_swish is None else (1, int(exp_swish))
                loops.epilogue_team(planes, np.ascontiguousarray(bias), kind, arg, 4, team,
                                    loops.epilogue_piece_function())  # fmt: skip
                return out

        def run(lo, hi):
            for r0 in range(lo, hi, rows):
                r1 = min(hi, r0 + rows)
                piece = planes[r0:r1]
                if loops is not None and exp_swish is not None:
                    _exp_activation(loops, planes, bias, exp_swish, r0, r1)
                elif loops is not None and code is not None:
                    loops.bias_activation_planes(planes, bias, code, r0, r1)
                else:
                    if loops is not None:
                        loops.bias_activation_planes(planes, bias, 0, r0, r1)
                    else:
                        piece += bias[np.arange(r0, r1) % c][:, None]
                        if code == 1 or code == 2:
                            np.maximum(piece, 0, out=piece)
                            if code == 2:
                                np.minimum(piece, 6, out=piece)
                    if act is not None:
                        act(piece)

        parallel_for(planes.shape[0], run, grain=_split_rows(out, planes.shape[1], rows))
        return out

    # The compiled activation code, with which (the compiled loops on) the epilogue is just
    # bias_activation_planes: a convolution may apply it as it writes its output
    # (conv_winograd.winograd_nchw). None: no compiled activation.
    apply.code = code if exp_swish is None else None
    return apply


# The most output positions per plane for which an NCHW depthwise convolution (multiplier 1, 16
# channels or more) runs with the channels innermost (_conv_loops.depthwise_nchw_by_channel).
# One thread, alone: on MobileNetV3's and EfficientNet's 14×14 outputs of 96-576 channels it
# takes 0.53-0.82 of the plane-by-plane loop's time (240×14×14 5×5: 0.176 -> 0.094 ms), on
# 7×7 ones about half; on 28×28 outputs 1.3-1.7 times it, on larger planes far more.
_BY_CHANNEL_OUTPUTS = 256
# With a 5×5 filter, since its copies move 8×8 blocks: up to this many. A 5×5 filter
# sums 25 taps for each element copied, so the copies weigh less: EfficientNet-B0 ½'s 28×28
# outputs, 96 channels stride 2 and 144 channels stride 1, took 119 -> 83 and 119 -> 100 µs,
# the whole model 3.93 -> 3.79 ms (one thread, same process, alternating). 3×3 filters on 56×56
# planes took 1.6 times as long.
_BY_CHANNEL_WIDE = 1024

# The most input channels for which _FusedConv2D runs conv_nchw (first layers, where Conv2D's
# NHWC patches copy in short runs). On the benchmark models' RGB stems it took 6-45% less time
# (3×3 stride 2 to 64 channels: 2.1 → 1.2 ms); from 16 channels on Conv2D's kernel was faster.
_NCHW_CHANNELS = 4


def fused_conv2d_nchw(strides, padding, explicit_paddings, dilations, fused_ops, num_args,
                      leakyrelu_alpha):  # fmt: skip
    """_FusedConv2D's compute(x, w, bias) for NCHW data (compute(x, w, bias, side) for
    fused_ops [BiasAdd, Add(, Relu)])."""
    op = "_FusedConv2D"
    if fused_ops and fused_ops[0] == "Mul":
        return _input_scaled(strides, padding, explicit_paddings, dilations, list(fused_ops),
                             num_args, leakyrelu_alpha, op)  # fmt: skip
    if len(fused_ops) >= 2 and fused_ops[1] == "Add":
        return _conv_bias_add(strides, padding, explicit_paddings, dilations, list(fused_ops),
                              num_args, op)  # fmt: skip
    act_name = _check_ops(fused_ops, num_args, op)
    epilogue = nchw_epilogue(fused_ops, num_args, leakyrelu_alpha, op)
    plain = _conv2d(strides, padding, explicit_paddings, "NCHW", dilations, epilogue)
    win = _Window(strides, dilations, padding, explicit_paddings, "NCHW")
    code = _LOOP_CODES.get(act_name)
    exp_swish = _EXP_CODES.get(act_name)
    act = None
    if code is None and exp_swish is None:
        from rill.exec.kernels.fused_kernels import _activation

        act = _activation(act_name, leakyrelu_alpha)

    pointwise = _is_pointwise(win)

    def compute(x, w, bias):
        if pointwise and x.ndim == 4 and x.shape[0] == 1 and (code is not None
                                                             or exp_swish is not None):  # fmt: skip
            out = _pointwise_b1(x, w, bias, code, exp_swish=exp_swish)
            if out is not None:
                return out
        if pointwise and w.shape[:2] == (1, 1):
            out = _pointwise(x, w, bias, code, exp_swish, epilogue)
            if out is not None:
                return out
        elif w.ndim == 4 and w.shape[:2] == (1, 1) and _loops() is not None:
            sampled = _sampled(win, x, w)  # a strided 1×1 filter: its sampled input at stride 1
            out = None if sampled is None else _pointwise(sampled, w, bias, code, exp_swish,
                                                          epilogue)  # fmt: skip
            if out is not None:
                return out
        if not conv_nchw.usable(x, w) or x.shape[1] > _NCHW_CHANNELS:
            return plain(x, w, bias)
        if bias.ndim != 1 or bias.shape[0] != w.shape[3]:
            _check_bias(bias, (x.shape[0], w.shape[3]), 1, op)
        if exp_swish is not None and x.dtype == np.float32:  # the bands activate themselves
            return conv_nchw.nchw_conv(x, w, win, bias, 0, exp_swish)
        out = conv_nchw.nchw_conv(x, w, win, bias, code or 0)
        if code is None and out.size:
            planes = out.reshape(-1, out.shape[2] * out.shape[3])
            rows = max(1, _CHUNK // max(planes.shape[1], 1))
            loops = _loops()

            def run(lo, hi):
                for r0 in range(lo, hi, rows):
                    r1 = min(hi, r0 + rows)
                    if exp_swish is not None:
                        _exp_activation(loops, planes, bias[:0], exp_swish, r0, r1)
                    else:
                        act(planes[r0:r1])

            parallel_for(planes.shape[0], run, grain=_split_rows(out, planes.shape[1], rows))
        return out

    return compute


def _sampled(win, x, w):
    """For a 1×1 filter w with strides over x (NCHW) and no padding before the input, x at the
    sampled positions, copied contiguous (the input of the same convolution at stride 1, which
    conv_kernels' channels-first path multiplies too, so the same bits); else None."""
    if (x.ndim != 4 or w.ndim != 4 or w.shape[:2] != (1, 1) or win.strides == (1, 1)
            or win.dilations != (1, 1)):  # fmt: skip
        return None
    h, wd = x.shape[2], x.shape[3]
    oh, ow, pads = win.resolve(h, wd, 1, 1)
    sh, sw = win.strides
    if pads != (0, 0) or (oh - 1) * sh >= h or (ow - 1) * sw >= wd or not x.size:
        return None
    return np.ascontiguousarray(x[:, :, : (oh - 1) * sh + 1 : sh, : (ow - 1) * sw + 1 : sw])


def _is_pointwise(win) -> bool:
    """Whether a 1×1 filter under window `win` is a pointwise product (stride 1, no padding)."""
    return (win.strides == (1, 1) and win.dilations == (1, 1)
            and (win.explicit is None or not any(map(any, win.explicit))))  # fmt: skip


def _input_scaled(strides, padding, explicit_paddings, dilations, ops, num_args, alpha, op):
    """compute(x, w, s, bias) for fused_ops [Mul, BiasAdd(, activation)] (compute(x, w, s, bias,
    side) for [Mul, BiasAdd, Add(, Relu)]): the convolution of x·s (s [n, c, 1, 1], a
    squeeze-excite gate), + bias (+ the residual side input), the activation. A 1×1 stride-1 unpadded
    filter forms x·s one image at a time inside the product's input pass (numpy's multiply, so
    the bits of Mul's); any other case multiplies first and runs the [BiasAdd(, activation)]
    kernel."""
    residual = len(ops) >= 3 and ops[2] == "Add"
    if num_args != (3 if residual else 2) or len(ops) < 2:
        raise InvalidArgumentError(
            f"{op} supports fused_ops [Mul, BiasAdd(, <activation>)] with two arguments or "
            f"[Mul, BiasAdd, Add(, Relu)] with three, got {ops} with {num_args}"
        )
    inner = fused_conv2d_nchw(strides, padding, explicit_paddings, dilations, ops[1:],
                              num_args - 1, alpha)  # fmt: skip

    def check(x, s):
        if s.ndim != 4 or x.ndim != 4 or s.shape != (x.shape[0], x.shape[1], 1, 1):
            raise InvalidArgumentError(
                f"the scale of {op}'s Mul has shape {list(s.shape)}; it must be [batch, "
                f"channels, 1, 1] of the input {list(x.shape)}"
            )

    if residual:

        def compute_residual(x, w, s, bias, side):
            check(x, s)
            if s.dtype == x.dtype:
                return inner(x, w, bias, side, s)
            return inner(x * s, w, bias, side)

        return compute_residual

    act_name = ops[2] if len(ops) == 3 else None
    code = _LOOP_CODES.get(act_name)
    exp_swish = _EXP_CODES.get(act_name)
    epilogue = nchw_epilogue(ops[1:], 1, alpha, op)
    pointwise = _is_pointwise(_Window(strides, dilations, padding, explicit_paddings, "NCHW"))

    def compute(x, w, s, bias):
        check(x, s)
        if pointwise and x.shape[0] == 1 and s.dtype == x.dtype:
            # One image: x·s as the product packs x (Mul's bits), else x·s whole first.
            out = None
            if code is not None or exp_swish is not None:
                out = _pointwise_b1(x, w, bias, code, exp_swish=exp_swish, scale=s)
            if out is None and w.ndim == 4 and w.shape[:2] == (1, 1):
                out = _pointwise(x, w, bias, code, exp_swish, epilogue, s)
            return out if out is not None else inner(_gated(x, s), w, bias)
        if pointwise and w.ndim == 4 and w.shape[:2] == (1, 1) and s.dtype == x.dtype:
            out = _pointwise(x, w, bias, code, exp_swish, epilogue, s)
            if out is not None:
                return out
        return inner(x * s, w, bias)

    return compute


# The least output positions per plane for which a gated pointwise product with a residual
# (fused_ops [Mul, BiasAdd, Add]) runs image by image, each image's residual pass right after
# its product, rather than the batch's products through the team and then the residual pass.
# (When the gate was multiplied in a pass of its own, that pass image by image took 20% less
# time at batch 8 on 56×56 planes; on 14×14 and 7×7 planes, none.)
_SCALED_PLANE = 1024


def _pointwise_product(x, w, s=None, after=None, codes=None):
    """x [n, c, h, w] ⋆ a 1×1 filter w [1, 1, c, o] → [n, o, h, w] for a stride-1, unpadded
    NCHW convolution: one GEMM per image on the input as it is, W [o, c] · X [c, h·w] (the
    operands and GEMM of _conv_forward's channels-first 1×1 case, so the same bits). With a
    gate s [n, c, 1, 1] the input is x·s (fused_ops [Mul, ...]). With several images and
    `after`, after(out, i) runs on image i's planes right after its product, on the same thread,
    while they are in cache (the caller's epilogue, elementwise, so the bits do not change).
    Returns (out, done), done telling whether `after` ran (else the caller applies its
    epilogue); None where that case does not apply (the general path then runs). With several
    images, `codes` (bias, code), the same epilogue as `after` in compiled form, lets the
    batch's products run through the team with it in registers (pointwise.batch), where a
    worker polls. A gate scales x's rows as the product packs them (pointwise.matmul's
    `scale`: numpy's multiply's bits, with no pass over x of its own: MobileNetV3-small b1
    2-4% faster)."""
    if (
        x.ndim != 4
        or w.ndim != 4
        or x.dtype != w.dtype
        or x.dtype not in jit.FLOATS
        or w.shape[2] != x.shape[1]
        or not x.flags.c_contiguous
        or not x.size
        or not w.size
        or (s is not None and not _gate_fits(x, s))
    ):
        return None
    n, c, h, wd = x.shape
    o = w.shape[3]
    out = np.empty((n, o, h, wd), x.dtype)
    per_image = out.reshape(n, o, h * wd)
    wt = w.reshape(c, o).T
    xs = x.reshape(n, c, h * wd)
    gates = None if s is None else np.ascontiguousarray(s).reshape(n, c)
    if n == 1:  # split over threads from _B1_HALVES
        pointwise.matmul(wt, xs[0], per_image[0], _B1_HALVES,
                         scale=None if gates is None else gates[0])  # fmt: skip
        return out, False
    if codes is not None:
        # The whole batch's products through the team, the epilogue in registers (the Python
        # pool's image pieces: MobileNetV3-small b8, default threads, 7.75 -> 7.20 ms).
        bias, code = codes
        if pointwise.batch(wt, xs, per_image, bias, code, gates):
            return out, True

    def image(i):
        pointwise.matmul(wt, xs[i], per_image[i], pointwise.NO_SPLIT,
                         scale=None if gates is None else gates[i])  # fmt: skip
        if after is not None:
            # The epilogue of image i while its planes are in cache: at batch 8 a pass over
            # the whole output after the products read it all back from memory (MobileNetV3's
            # 16 -> 72 expansion on 56×56 with Relu, one thread: 1.10 -> 0.96 ms).
            after(out, i)

    parallel_blocks(n, image, n * h * wd * c * o)
    return out, after is not None


def _batch_product(x, w, s=None):
    """x [n, c, h, w] (times a gate s [n, c, 1, 1], as pointwise.batch scales it) ⋆ a 1×1
    filter w [1, 1, c, o] for n > 1 images through the pool's team (pointwise.batch, no
    epilogue: each image's product has the bits of its own call), or None where that does not
    run (the compiled product off, no polling worker, too little work)."""
    if (
        w.ndim != 4
        or w.shape[:3] != (1, 1, x.shape[1])
        or x.dtype != w.dtype
        or x.dtype not in jit.FLOATS
        or not x.flags.c_contiguous
        or not x.size
        or not w.size
        or (s is not None and not _gate_fits(x, s))
    ):
        return None
    mod = pointwise._mod()
    if mod is None:
        return None
    n, c, h, wd = x.shape
    o = w.shape[3]
    out = np.empty((n, o, h, wd), x.dtype)
    gates = None if s is None else np.ascontiguousarray(s).reshape(n, c)
    if pointwise.batch(w.reshape(c, o).T, x.reshape(n, c, h * wd), out.reshape(n, o, h * wd),
                       np.zeros(o, x.dtype), mod.RAW, gates):  # fmt: skip
        return out
    return None


def _gate_fits(x, s) -> bool:
    """Whether s is a squeeze-excite gate of x [n, c, h, w]: [n, c, 1, 1] of x's dtype."""
    return s.dtype == x.dtype and s.shape == (x.shape[0], x.shape[1], 1, 1)


def _gated(x, s):
    """x · s for x [n, c, h, w] and a gate s [n, c, 1, 1] of x's dtype: numpy's multiply, or its
    bits from the compiled loop (_conv_loops.scale_planes) where it runs."""
    loops = _loops()
    if (
        loops is None
        or x.dtype not in jit.FLOATS
        or s.dtype != x.dtype
        or x.ndim != 4
        or s.shape != (x.shape[0], x.shape[1], 1, 1)
        or not x.flags.c_contiguous
        or not x.size
    ):
        return np.multiply(x, s)
    out = np.empty(x.shape, x.dtype)
    planes = x.shape[0] * x.shape[1]
    loops.scale_planes(x.reshape(planes, -1), np.ascontiguousarray(s).reshape(planes),
                       out.reshape(planes, -1), 0, planes)  # fmt: skip
    return out


def _b1_fits(c: int, o: int, hw: int, exp_swish) -> bool:
    """Whether one image's [o, c] · [c, hw] product and its epilogue take _pointwise_b1's one
    call each: not threads.matmul's halves, an epilogue split over threads, or (Sigmoid /
    Swish) the epilogue's cache-sized pieces."""
    if c * o * hw >= _B1_HALVES or o >= 2 * max(1, _SPLIT_PIECE // hw):
        return False
    return exp_swish is None or o * hw <= _CHUNK


def _pointwise_b1(x, w, bias, code, side=None, relu=False, exp_swish=None, scale=None):
    """_pointwise for one image, a compiled activation `code` (or, for float32, Sigmoid or
    Swish: exp_swish False or True) and an output one epilogue call covers, with as few Python
    steps as may be: a batch-1 MobileNet's pointwise and squeeze-excite layers are a few
    microseconds of product each, and the general path's checks and views cost about as much
    (the same operations: np.matmul of the transposed filter and the input, then
    bias_activation_planes, sigmoid32_planes, or with a residual `side` bias_side_activation
    (Relu when relu); so the same bits). With `scale` [1, c, 1, 1] (a gate of x's dtype) the
    input is x · scale: the compiled product scales x as it packs it (pointwise.matmul), else
    x · scale is formed first (_gated). None where it does not apply."""
    loops = _loops()
    dt = x.dtype
    if exp_swish is not None and (dt != np.float32 or side is not None):
        return None  # float64 Sigmoid / Swish: numpy's exp, on the general path
    if (
        loops is None
        or w.ndim != 4
        or w.dtype != dt
        or bias.dtype != dt
        or dt not in jit.FLOATS
        or not x.flags.c_contiguous
        or bias.ndim != 1
    ):
        return None
    _, c, h, wd = x.shape
    kh, kw, kc, o = w.shape
    hw = h * wd
    if (kh, kw, kc) != (1, 1, c) or bias.shape[0] != o or not x.size or not o:
        return None
    if not _b1_fits(c, o, hw, exp_swish):
        return None
    if side is not None and (
        side.shape != (1, o, h, wd) or side.dtype != dt or not side.flags.c_contiguous
    ):
        return None
    out = np.empty((1, o, h, wd), dt)
    planes = out.reshape(o, hw)
    wt, xs = w.reshape(c, o).T, x.reshape(c, hw)
    if scale is not None:
        if not _gate_fits(x, scale):
            return None
        if pointwise.compiled(wt, xs, planes) is None:  # (planes under a vector)
            xs, scale = _gated(x, scale).reshape(c, hw), None
        else:
            scale = np.ascontiguousarray(scale).reshape(c)
    fuse = exp_swish is None and side is None
    if pointwise.matmul(wt, xs, planes, _B1_HALVES, bias if fuse else None,
                        code if fuse else None, scale):  # fmt: skip
        return out  # the bias and activation applied in registers
    if exp_swish is not None:
        loops.sigmoid32_planes(planes, bias, exp_swish, 0, o)
    elif side is None:
        loops.bias_activation_planes(planes, bias, code, 0, o)
    else:
        loops.bias_side_activation(planes, bias, side.reshape(o, hw), relu, 0, o)
    return out


def _pointwise(x, w, bias, code, exp_swish, epilogue, s=None):
    """The lean path of a 1×1, stride-1, unpadded NCHW _FusedConv2D (the expand, project and
    squeeze-excite layers of MobileNet-like models): _pointwise_product, then the compiled bias
    and activation pass, with none of Conv2D's general checks and views between them (the
    epilogue is nchw_epilogue's, so the bits are the general path's). None where that path
    does not apply."""
    if bias.ndim != 1 or bias.shape[0] != w.shape[-1]:
        return None
    loops = _loops()
    if loops is None or (code is None and exp_swish is None):
        return None
    bias = bias.astype(x.dtype, copy=False)
    got = _pointwise_product(x, w, s, _image_epilogue(loops, bias, code, exp_swish),
                             None if exp_swish is not None else (bias, code))  # fmt: skip
    if got is None:
        return None
    out, done = got
    if done:
        return out
    if exp_swish is not None:
        return epilogue(out, bias)
    planes = out.reshape(out.shape[0] * out.shape[1], -1)
    rows = _split_rows(out, planes.shape[1])
    if planes.shape[0] < 2 * rows:
        loops.bias_activation_planes(planes, bias, code, 0, planes.shape[0])
    else:
        parallel_for(planes.shape[0], lambda lo, hi: loops.bias_activation_planes(
            planes, bias, code, lo, hi), grain=rows)  # fmt: skip
    return out


def _image_epilogue(loops, bias, code, exp_swish):
    """after(out, i) for _pointwise_product: + bias and the activation (compiled `code`, or
    Sigmoid / Swish when exp_swish is not None) on image i's planes of out, the operations of
    nchw_epilogue's compiled passes (elementwise, so the same bits)."""

    def after(out, i):
        o = out.shape[1]
        planes = out.reshape(out.shape[0] * o, -1)
        if exp_swish is None:
            loops.bias_activation_planes(planes, bias, code, i * o, (i + 1) * o)
            return
        rows = max(1, _CHUNK // max(planes.shape[1], 1))
        for r0 in range(i * o, (i + 1) * o, rows):
            _exp_activation(loops, planes, bias, exp_swish, r0, min((i + 1) * o, r0 + rows))

    return after


def _conv_bias_add(strides, padding, explicit_paddings, dilations, ops, num_args, op):
    """NCHW convolution + bias + a side input of the output's shape (a residual) [then Relu],
    the bias, the side input and the Relu in one compiled pass (BiasAdd's, AddV2's and Relu's
    arithmetic: the same values as the unfused chain)."""
    if ops not in (["BiasAdd", "Add"], ["BiasAdd", "Add", "Relu"]) or num_args != 2:
        raise InvalidArgumentError(
            f"{op} supports fused_ops [BiasAdd, Add] or [BiasAdd, Add, Relu] with two "
            f"arguments, got {ops} with {num_args}"
        )
    relu = len(ops) == 3

    def residual(out, bias, side):
        """The epilogue after a product: + bias, + side, Relu (in one compiled pass)."""
        if not (out.flags.c_contiguous and out.flags.writeable and out.base is None):
            out = np.array(out)
        _check_bias(bias, out.shape, 1, op)
        if side.shape != out.shape:
            raise InvalidArgumentError(
                f"the side input of {op}'s Add has shape {list(side.shape)}; it must have the "
                f"output's shape {list(out.shape)}"
            )
        if out.size == 0:
            return out
        bias = bias.astype(out.dtype, copy=False)
        side = np.ascontiguousarray(side.astype(out.dtype, copy=False))
        loops = _loops() if out.dtype in jit.FLOATS else None
        if loops is None:
            out += bias[:, None, None]
            out += side
            if relu:
                np.maximum(out, 0, out=out)
            return out
        planes = out.reshape(out.shape[0] * out.shape[1], -1)
        sides = side.reshape(planes.shape)
        rows = _split_rows(out, planes.shape[1])
        parallel_for(planes.shape[0],
                     lambda lo, hi: loops.bias_side_activation(planes, bias, sides, relu, lo, hi),
                     grain=rows)  # fmt: skip
        return out

    # The Winograd path may apply it as it writes its output (conv_winograd.winograd_nchw).
    residual.code, residual.residual = (1 if relu else 0), True
    plain = _conv2d(strides, padding, explicit_paddings, "NCHW", dilations, residual)
    win = _Window(strides, dilations, padding, explicit_paddings, "NCHW")
    pointwise = _is_pointwise(win)

    def after(bias, side):
        """The residual epilogue of one image (for _pointwise_product), on checked inputs."""
        loops = _loops()

        def run(out, i):
            o = out.shape[1]
            planes = out.reshape(out.shape[0] * o, -1)
            loops.bias_side_activation(planes, bias, side.reshape(planes.shape), relu, i * o,
                                       (i + 1) * o)  # fmt: skip

        return run

    def compute(x, w, bias, side, s=None):
        if (pointwise and x.ndim == 4 and x.shape[0] > 1
                and (s is None or (s.dtype == x.dtype and x.shape[2] * x.shape[3] < _SCALED_PLANE))):  # fmt: skip
            # Several images on small planes: the batch's products (x·s as they pack x) through
            # the team (no epilogue in registers), then the residual pass split over threads.
            out = _batch_product(x, w, s)
            if out is not None:
                return residual(out, bias, side)
        if pointwise and x.ndim == 4 and x.shape[0] == 1 and (s is None or s.dtype == x.dtype):
            # One image: the product (x·s as it packs x, else numpy's x·s first).
            out = _pointwise_b1(x, w, bias, 0, side, relu, scale=s)
            if out is not None:
                return out
        out = None
        x0 = x
        sampled = None if pointwise or _loops() is None else _sampled(win, x, w)
        if sampled is not None:
            x = sampled
        if ((pointwise or sampled is not None) and w.ndim == 4 and w.shape[:2] == (1, 1)
                and _loops() is not None):  # fmt: skip
            tail = None
            if (x.ndim == 4 and x.dtype in jit.FLOATS and bias.ndim == 1
                    and bias.shape[0] == w.shape[3]
                    and side.shape == (x.shape[0], w.shape[3], x.shape[2], x.shape[3])):  # fmt: skip
                bias = bias.astype(x.dtype, copy=False)
                side = np.ascontiguousarray(side.astype(x.dtype, copy=False))
                tail = after(bias, side)
            got = _pointwise_product(x, w, s, tail)
            if got is not None:
                out, done = got
                if done:
                    return out
        if out is None:
            return plain(x0 if s is None else x0 * s, w, bias, side)
        return residual(out, bias, side)

    return compute


@register_kernel("_FusedDepthwiseConv2dNative", **_CONV_KW)
def fused_depthwise_conv2d_native(
    strides, padding, explicit_paddings, data_format, dilations, fused_ops, num_args,
    leakyrelu_alpha,
):  # fmt: skip
    op = "_FusedDepthwiseConv2dNative"
    act_name = _check_ops(fused_ops, num_args, op)
    plain = depthwise_conv2d_native(strides, padding, explicit_paddings, data_format, dilations)
    win = _Window(strides, dilations, padding, explicit_paddings, data_format)
    if data_format == "NCHW":
        epilogue = nchw_epilogue(fused_ops, num_args, leakyrelu_alpha, op)
    else:
        from rill.exec.kernels.fused_kernels import _epilogue

        epilogue = _epilogue(fused_ops, num_args, leakyrelu_alpha, op)
    code = _LOOP_CODES.get(act_name)
    exp_swish = _EXP_CODES.get(act_name)
    compiled = win.nchw and (code is not None or exp_swish is not None)

    def compute(x, w, bias):
        loops = _loops() if compiled and x.dtype in jit.FLOATS else None
        if loops is None or x.ndim != 4 or w.ndim != 4 or w.dtype != x.dtype or not x.size:
            return epilogue(plain(x, w), bias)
        got = depthwise_nchw(loops, win, x, w, bias, code, exp_swish, op)
        return epilogue(plain(x, w), bias) if got is None else got

    return compute


def depthwise_nchw(loops, win, x, w, bias, code, exp_swish, op: str):
    """The compiled NCHW depthwise convolution of x [n, c, h, w] and w [kh, kw, c, mult] (both
    contiguous-able, one float dtype): the sums, then + bias (none where bias is empty) and
    the compiled activation `code` (or Sigmoid / Swish for exp_swish False / True). Its sums are
    the numpy path's (_forward_nchw: 0 + each tap's product in the same order, no fused
    multiply-add), so with an empty bias and code 0 the bits are DepthwiseConv2dNative's own.
    None where it does not apply (an empty output or filter)."""
    n, c, h, wd = x.shape
    kh, kw, kc, mult = w.shape
    if kc != c:
        raise InvalidArgumentError(f"input depth {c} differs from the filter's depth {kc}")
    oh, ow, (top, left) = win.resolve(h, wd, kh, kw)
    out = np.empty((n, c * mult, oh, ow), x.dtype)
    if bias.size or op != _PLAIN:
        _check_bias(bias, out.shape, 1, op)
    if out.size == 0 or not w.size:
        return None
    (sh, sw), (dh, dw) = win.strides, win.dilations
    hp = max((oh - 1) * sh + (kh - 1) * dh + 1, top + h)
    wp = max((ow - 1) * sw + (kw - 1) * dw + 1, left + wd)
    x = np.ascontiguousarray(x)
    w = np.ascontiguousarray(w)
    bias = np.ascontiguousarray(bias.astype(x.dtype, copy=False))
    per_plane = max(1, oh * ow * kh * kw)

    planes = out.reshape(n * c * mult, oh * ow)
    rows = max(1, _CHUNK // (oh * ow))
    by_channel = (
        mult == 1
        and c >= 16
        and oh * ow <= (_BY_CHANNEL_WIDE if kh == kw == 5 else _BY_CHANNEL_OUTPUTS)
    )
    # Over the pool's team: runs of whole vectors of channels of an image (by channel: two
    # vectors or more at batch 1; several images, an image a piece or two) or runs of planes
    # (EfficientNet-B0 ½ b8, default threads, 18.4 -> 18.0 ms against the Python pool's
    # pieces), with the unsplit bits.
    team = None
    if ((exp_swish is None or x.dtype == np.float32)
            and n * c * mult * per_plane >= _DW_TEAM_GRAIN
            and (c * x.itemsize >= 128 or n > 1 if by_channel else n * c * mult > 1)):  # fmt: skip
        team = intra_op.team()
    if team is not None:
        run_team, piece = ((loops.depthwise_by_channel_team, loops.by_channel_piece_function)
                           if by_channel else
                           (loops.depthwise_planes_team, loops.planes_piece_function))  # fmt: skip
        run_team(x, w, bias, out, sh, sw, dh, dw, top, left, hp, wp, code or 0,
                 -1 if exp_swish is None else int(exp_swish), max(1, 4 // n) if by_channel else 4,
                 team, piece(x.dtype))  # fmt: skip
        return out
    if by_channel:
        if n == 1 and (exp_swish is None or x.dtype == np.float32):
            # One piece, on the caller: no closure, no split (float32 Sigmoid / Swish:
            # sigmoid32 after the sums, elementwise, so the bits of the pieces below).
            loops.depthwise_nchw_by_channel(x, w, bias, out, sh, sw, dh, dw, top, left, hp,
                                            wp, code or 0, 0, 1)  # fmt: skip
            if exp_swish is not None:
                for r0 in range(0, c, rows):
                    loops.sigmoid32_planes(planes, bias[:0], exp_swish, r0, min(c, r0 + rows))
            return out

        def images(lo, hi):
            loops.depthwise_nchw_by_channel(x, w, bias, out, sh, sw, dh, dw, top, left,
                                            hp, wp, code or 0, lo, hi)  # fmt: skip
            if exp_swish is not None:
                for r0 in range(lo * c, hi * c, rows):
                    r1 = min(hi * c, r0 + rows)
                    _exp_activation(loops, planes, bias[:0], exp_swish, r0, r1)

        parallel_for(n, images, grain=max(1, _DW_GRAIN // (c * per_plane)))
        return out

    def run(lo, hi):
        for r0 in range(lo, hi, rows):
            r1 = min(hi, r0 + rows)
            loops.depthwise_nchw(x, w, bias, out, sh, sw, dh, dw, top, left, hp, wp,
                                 code or 0, r0, r1)  # fmt: skip
            if exp_swish is not None:  # while the planes are in cache
                _exp_activation(loops, planes, bias[:0], exp_swish, r0, r1)

    grain = _DW_GRAIN if n > 1 else _DW_GRAIN_B1
    parallel_for(n * c * mult, run, grain=max(1, grain // per_plane))
    return out


# The activations a _FusedSqueezeExcite applies after each of its products ("" for none).
SQUEEZE_ACTIVATIONS = ("", "Relu", "Relu6", "HardSigmoid", "HardSwish", "Sigmoid", "Swish")


@register_kernel("_FusedSqueezeExcite")
def fused_squeeze_excite(T, activations):
    """The gate of a squeeze-excite block: Mean(x, [2, 3], keep_dims) → 1×1 NCHW _FusedConv2D
    [BiasAdd(, activations[0])] → 1×1 NCHW _FusedConv2D [BiasAdd(, activations[1])], as those
    kernels compute it. One image (the batch-1 inference of MobileNetV3 and EfficientNet) takes
    their lean paths' own calls with nothing between them: the compiled row sums of the Mean
    kernel (_conv_loops.row_pairwise_sums: numpy's pairwise sums), then per product np.matmul
    of the transposed filter and the column of values, and the compiled bias and activation
    (_pointwise_b1's: bias_activation_planes, or float32 sigmoid32_planes), so the same bits.
    Without the three kernels' Python and the executor's hand-offs between them
    MobileNetV3-small b1 took 3-4.5% less time and EfficientNet-B0 ½ b1 2-2.5% (one thread
    and default threads, same process, runs alternating). Several images run the three
    kernels' computes one after the other."""
    op = "_FusedSqueezeExcite"
    acts = list(activations)
    if len(acts) != 2 or any(a not in SQUEEZE_ACTIVATIONS for a in acts):
        raise InvalidArgumentError(
            f"{op} takes two activations, each one of {list(SQUEEZE_ACTIVATIONS)}, got {acts}"
        )
    from rill.exec.kernels import reduction_kernels

    convs = [fused_conv2d_nchw([1, 1, 1, 1], "VALID", [], [1, 1, 1, 1],
                               ["BiasAdd", *([a] if a else [])], 1, 0.2) for a in acts]  # fmt: skip
    codes = [_LOOP_CODES.get(a or None) for a in acts]
    exps = [_EXP_CODES.get(a) for a in acts]
    dt = T.np

    def check(x, w1, b1, w2, b2):
        if x.ndim != 4 or w1.ndim != 4 or w2.ndim != 4 or b1.ndim != 1 or b2.ndim != 1:
            raise InvalidArgumentError(
                f"{op} takes x [n, c, h, w], filters [1, 1, c, r] and [1, 1, r, o] and biases "
                f"[r] and [o], got {list(x.shape)}, {list(w1.shape)}, {list(b1.shape)}, "
                f"{list(w2.shape)} and {list(b2.shape)}"
            )
        c, r, o = x.shape[1], w1.shape[3], w2.shape[3]
        if (
            w1.shape[:3] != (1, 1, c)
            or w2.shape[:3] != (1, 1, r)
            or b1.shape != (r,)
            or (b2.shape != (o,))
        ):
            raise InvalidArgumentError(
                f"{op}: the filters [1, 1, c, r] and [1, 1, r, o] and biases [r] and [o] do not "
                f"fit x {list(x.shape)} and each other: {list(w1.shape)}, {list(b1.shape)}, "
                f"{list(w2.shape)}, {list(b2.shape)}"
            )

    def lean(loops, i, v, w, b):
        """_pointwise_b1 of the column v [c, 1] (one image's values) for product i, or None
        where that path does not apply."""
        c, o = w.shape[2], w.shape[3]
        if (exps[i] is not None and dt != np.float32) or not _b1_fits(c, o, 1, exps[i]):
            return None
        out = np.empty((1, o, 1, 1), dt)
        col = out.reshape(o, 1)
        np.matmul(w.reshape(c, o).T, v, out=col)
        if exps[i] is not None:
            loops.sigmoid32_planes(col, b, exps[i], 0, o)
        else:
            loops.bias_activation_planes(col, b, codes[i], 0, o)
        return out

    def compute(x, w1, b1, w2, b2):
        check(x, w1, b1, w2, b2)
        loops = _loops()
        c, hw = x.shape[1], x.shape[2] * x.shape[3]
        if (
            x.shape[0] == 1
            and loops is not None
            and x.dtype == dt
            and all(a.dtype == dt for a in (w1, b1, w2, b2))
            and x.flags.c_contiguous
            and hw
            and c
            and w1.shape[3]
            and w2.shape[3]
        ):
            if x.size < reduction_kernels._ROWS_GRAIN:  # one piece: the Mean kernel's call
                m = np.empty((c, 1), dt)
                loops.row_pairwise_sums(x.reshape(c, hw), m.reshape(c),
                                        reduction_kernels._program(hw), True, 0, c)  # fmt: skip
            else:
                m = reduction_kernels._trailing(np, x, (2, 3), True).reshape(c, 1)
            h = lean(loops, 0, m, w1, b1)
            if h is not None:
                g = lean(loops, 1, h.reshape(-1, 1), w2, b2)
                return g if g is not None else convs[1](h, w2, b2)
            return convs[1](convs[0](m.reshape(1, c, 1, 1), w1, b1), w2, b2)
        m = reduction_kernels._mean(np, x, (2, 3), True)
        return convs[1](convs[0](m, w1, b1), w2, b2)

    return compute
