"""Fused int8 runs (rill.mobile.program_int8): the same bits as the per-operator path on every
int8 fixture and on hand-made convolutions, depthwise convolutions, fully-connected layers and
additions (padding, strides, dilation, multipliers, fused activations, the exact and the int64
output stages, chains whose requantization feeds the next product), LiteRT's reference
outputs, and the cases that stay per-operator."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from mobile.kernel_testing import RNG, q8, qbias, quant, qweights, sample
from mobile.tflite_builder import Op as BOp
from mobile.tflite_builder import build, litert_run, single_op

from rill.mobile import program
from rill.mobile.interpreter import Interpreter
from rill.mobile.program_int8 import FusedRun

pytest.importorskip("numba")

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "tflite"
SAME, VALID = 0, 1


pytestmark = pytest.mark.usefixtures("programs_on")


def _run(model, feeds, fused: bool, threads=None, path=None):
    old = program.set_enabled(fused)
    try:
        it = (Interpreter(model_path=path, num_threads=threads) if path
              else Interpreter(model_content=model, num_threads=threads))  # fmt: skip
        for d, x in zip(it.get_input_details(), feeds):
            if tuple(d["shape"]) != x.shape:
                it.resize_tensor_input(d["index"], x.shape)
        it.allocate_tensors()
        for d, x in zip(it.get_input_details(), feeds):
            it.set_tensor(d["index"], x)
        it.invoke()
        first = [it.get_tensor(d["index"]) for d in it.get_output_details()]
        it.invoke()  # a second run on the same arena gives the same bits
        out = [it.get_tensor(d["index"]) for d in it.get_output_details()]
        for a, b in zip(first, out):
            np.testing.assert_array_equal(a, b)
        return it, out
    finally:
        program.set_enabled(old)


def _fused_count(it) -> int:
    return sum(isinstance(f, FusedRun) for f in it._main.run)


def _check(model, feeds, fused_ops: int | None = None, path=None):
    """Fused and per-operator outputs are the same bits; `fused_ops`: how many operators the
    fused runs must hold (None: at least one)."""
    plain_it, plain = _run(model, feeds, False, path=path)
    assert _fused_count(plain_it) == 0
    it, got = _run(model, feeds, True, path=path)
    n = sum(len(f.ops) for f in it._main.run if isinstance(f, FusedRun))
    if fused_ops is None:
        assert n >= 1
    else:
        assert n == fused_ops
    for g, w in zip(got, plain):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
    return it, got


def _out(size, k, s, d, pad):
    eff = (k - 1) * d + 1
    return -(-size // s) if pad == SAME else (size - eff) // s + 1


def _out_scale(x, filt, depth: int) -> float:
    """An output scale that spreads the outputs over most of the int8 range: the accumulator's
    spread is about 74 · 73 · √depth for uniform inputs and weights."""
    sw = float(np.mean(np.atleast_1d(np.asarray(filt.scale, np.float64))))
    return float(x.scale) * sw * 74 * 73 * np.sqrt(depth) / 50


def _conv_opts(s, d, pad, act):
    return {"padding": pad, "stride_h": s, "stride_w": s, "dilation_h_factor": d,
            "dilation_w_factor": d, "fused_activation_function": act}  # fmt: skip


# -- single operators ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n,h,w,ci,co,k,s,d,pad,act,per_channel",
    [
        (1, 9, 7, 8, 16, 1, 1, 1, SAME, 0, True),  # 1x1: the product path
        (2, 5, 6, 5, 7, 1, 1, 1, VALID, 3, False),  # odd channels, per-tensor weights
        (1, 11, 10, 3, 16, 3, 2, 1, SAME, 3, True),  # MobileNet's stem: gathered windows
        (1, 8, 9, 6, 10, 3, 1, 2, SAME, 1, True),  # dilation
        (1, 12, 9, 1, 8, 5, 2, 1, SAME, 0, True),  # one input channel: tap by tap
        (2, 9, 8, 2, 16, 3, 1, 1, VALID, 2, True),  # two input channels, RELU_N1_TO_1
        (1, 6, 6, 4, 12, 1, 2, 1, VALID, 0, True),  # 1x1 with a stride: gathered
    ],
)
def test_conv2d_same_bits(n, h, w, ci, co, k, s, d, pad, act, per_channel):
    x = q8(n, h, w, ci)
    filt = qweights((co, k, k, ci), 0 if per_channel else None)
    out = q8(n, _out(h, k, s, d, pad), _out(w, k, s, d, pad), co,
             scale=_out_scale(x, filt, k * k * ci))  # fmt: skip
    model = single_op("CONV_2D", [x, filt, qbias(co, x, filt)], [out],
                      _conv_opts(s, d, pad, act), version=3)  # fmt: skip
    feeds = [sample(x)]
    _, got = _check(model, feeds, fused_ops=1)
    assert len(np.unique(got[0])) > 10  # not a saturated output
    np.testing.assert_array_equal(got[0], litert_run(model, feeds)[0])


@pytest.mark.parametrize(
    "n,h,w,c,mult,k,s,d,pad,act",
    [
        (1, 14, 14, 8, 1, 3, 1, 1, SAME, 3),  # whole-row passes (few channels, wide rows)
        (1, 9, 9, 24, 1, 3, 2, 1, SAME, 0),  # stride 2
        (2, 7, 6, 4, 2, 3, 1, 1, VALID, 1),  # multiplier 2
        (1, 10, 10, 3, 3, 3, 1, 2, SAME, 0),  # dilation, multiplier 3
        (1, 12, 12, 40, 1, 5, 2, 1, SAME, 3),  # 5x5, many channels, stride 2: in boxes
        (1, 13, 12, 40, 1, 3, 1, 1, SAME, 1),  # in boxes, 16 + 16 + 8 channels
        (1, 5, 7, 24, 1, 3, 1, 1, SAME, 3),  # copied, padded (small, few channels)
        (1, 3, 3, 40, 1, 3, 1, 1, SAME, 0),  # sides below 4: one by one
    ],
)
def test_depthwise_same_bits(n, h, w, c, mult, k, s, d, pad, act):
    x = q8(n, h, w, c)
    filt = qweights((1, k, k, c * mult), 3)
    out = q8(n, _out(h, k, s, d, pad), _out(w, k, s, d, pad), c * mult,
             scale=_out_scale(x, filt, k * k))  # fmt: skip
    opts = _conv_opts(s, d, pad, act) | {"depth_multiplier": mult}
    model = single_op("DEPTHWISE_CONV_2D", [x, filt, qbias(c * mult, x, filt)], [out], opts,
                      version=3)  # fmt: skip
    feeds = [sample(x)]
    _, got = _check(model, feeds, fused_ops=1)
    assert len(np.unique(got[0])) > 10
    np.testing.assert_array_equal(got[0], litert_run(model, feeds)[0])


@pytest.mark.parametrize(
    "shape,units,per_channel,act,bias,keep",
    [
        ((16, 32), 32, False, 0, True, False),  # the transformer block's (per-tensor weights)
        ((1, 5, 24), 40, True, 1, True, True),  # per-channel weights, RELU, keep_num_dims
        ((3, 7), 9, False, 3, False, False),  # no bias, RELU6, odd sizes (tile edges)
        ((1, 2, 3, 16), 20, False, 2, True, False),  # flattened to 6 rows, RELU_N1_TO_1
    ],
)
def test_fully_connected_same_bits(shape, units, per_channel, act, bias, keep):
    """FULLY_CONNECTED's single-rounding output stage in a fused run."""
    k = shape[-1]
    rows = int(np.prod(shape[:-1]))
    x = q8(*shape)
    filt = qweights((units, k), 0 if per_channel else None)
    out = q8(*((*shape[:-1], units) if keep else (rows, units)), scale=_out_scale(x, filt, k))
    ins = [x, filt] + ([qbias(units, x, filt)] if bias else [])
    opts = {"fused_activation_function": act, "keep_num_dims": keep}
    model = single_op("FULLY_CONNECTED", ins, [out], opts, version=7 if per_channel else 5)
    feeds = [sample(x)]
    _, got = _check(model, feeds, fused_ops=1)
    assert len(np.unique(got[0])) > 10
    np.testing.assert_array_equal(got[0], litert_run(model, feeds)[0])


def test_fully_connected_chain_with_a_residual_addition():
    """FC → FC (the first one's requantization writes the second one's centered input) → ADD
    with the chain's input: one fused run."""
    x = q8(8, 24)
    w1, w2 = qweights((32, 24), None), qweights((24, 32), None)
    h = q8(8, 32, scale=_out_scale(x, w1, 24), zp=-128)
    y = q8(8, 24, scale=float(RNG.uniform(0.6, 1.2)))
    s = q8(8, 24, scale=float(RNG.uniform(0.6, 1.2)))
    ts = [x, w1, qbias(32, x, w1), h, w2, qbias(24, h, w2), y, s]
    ops = [BOp("FULLY_CONNECTED", [0, 1, 2], [3], {"fused_activation_function": 1}, version=5),
           BOp("FULLY_CONNECTED", [3, 4, 5], [6], {"fused_activation_function": 0}, version=5),
           BOp("ADD", [6, 0], [7], {"fused_activation_function": 0})]  # fmt: skip
    model = build(ts, ops, [0], [7])
    feeds = [sample(x)]
    it, got = _check(model, feeds, fused_ops=3)
    assert _fused_count(it) == 1
    np.testing.assert_array_equal(got[0], litert_run(model, feeds)[0])


def test_int64_output_stage_where_the_folded_one_is_not_exact():
    """A bias near 2^30 puts the folded product past 2^53: the int64 stage runs instead."""
    x = q8(1, 6, 6, 8)
    filt = qweights((8, 3, 3, 8), 0)
    bias = qbias(8, x, filt)
    bias.data = (np.array([1, -1] * 4, np.int64) * (2**30 - 12345)).astype(np.int32)
    out = q8(1, 6, 6, 8, scale=float(RNG.uniform(0.2, 0.6)))
    model = single_op("CONV_2D", [x, filt, bias], [out], _conv_opts(1, 1, SAME, 0), version=3)
    it, _ = _check(model, [sample(x)], fused_ops=1)
    fused = next(f for f in it._main.run if isinstance(f, FusedRun))
    prog = fused.args[0]
    # The requant row (code 21) says not folded (its fifth parameter).
    pc, folded = 0, []
    while pc < len(prog):
        if prog[pc] == 21:
            folded.append(int(prog[pc + 2 + 4]))
        pc += 2 + int(prog[pc + 1])
    assert folded == [0]


def test_additions_alone_and_broadcast_additions_stay_per_operator():
    """A run needs a convolution (an ADD alone gains nothing); a broadcasting ADD never joins one
    (the residual block below has a fused one)."""
    a, b, y = q8(1, 5, 6, 7), q8(1, 5, 6, 7), q8(1, 5, 6, 7)
    model = single_op("ADD", [a, b], [y], {"fused_activation_function": 1})
    _check(model, [sample(a), sample(b)], fused_ops=0)
    x = q8(1, 5, 6, 4)
    filt = qweights((7, 1, 1, 4), 0)
    c, one, z = q8(1, 5, 6, 7, scale=_out_scale(x, filt, 4)), q8(1, 1, 1, 7), q8(1, 5, 6, 7)
    ts = [x, filt, qbias(7, x, filt), c, one, z]
    ops = [BOp("CONV_2D", [0, 1, 2], [3], _conv_opts(1, 1, SAME, 0), version=3),
           BOp("ADD", [3, 4], [5], {"fused_activation_function": 0})]  # fmt: skip
    feeds = [sample(x), RNG.integers(-128, 128, (1, 1, 1, 7)).astype(np.int8)]
    _check(build(ts, ops, [0, 4], [5]), feeds, fused_ops=1)


def test_large_filter_sums_stay_per_operator():
    """255 · Σ|w| ≥ 2^24 (600 input channels of ±127): float32 sums could round."""
    x = q8(1, 2, 2, 600)
    filt = quant((4, 1, 1, 600), np.int8, 0.01, 0, np.full((4, 1, 1, 600), 127, np.int8))
    out = q8(1, 2, 2, 4, scale=50.0)
    model = single_op("CONV_2D", [x, filt, qbias(4, x, filt)], [out], _conv_opts(1, 1, SAME, 0),
                      version=3)  # fmt: skip
    _check(model, [sample(x)], fused_ops=0)


# -- chains --------------------------------------------------------------------------------------


def _block_model():
    """An inverted residual block: 1x1 expand (ReLU6) → 3x3 depthwise (ReLU6) → 1x1 project →
    ADD with the block's input, then a 1x1 convolution reading the sum (the requantization of
    one convolution feeds the next one's input directly)."""
    x = q8(1, 10, 10, 8)
    e_w = qweights((24, 1, 1, 8), 0)
    e = q8(1, 10, 10, 24, scale=0.3, zp=-128)
    d_w = qweights((1, 3, 3, 24), 3)
    dd = q8(1, 10, 10, 24, scale=0.4, zp=-128)
    p_w = qweights((8, 1, 1, 24), 0)
    p = q8(1, 10, 10, 8, scale=float(RNG.uniform(0.6, 1.2)))
    s = q8(1, 10, 10, 8, scale=float(RNG.uniform(0.6, 1.2)))
    o_w = qweights((16, 1, 1, 8), 0)
    o = q8(1, 10, 10, 16, scale=float(RNG.uniform(0.5, 1.0)))
    ts = [x, e_w, qbias(24, x, e_w), e, d_w, qbias(24, e, d_w), dd, p_w, qbias(8, dd, p_w), p,
          s, o_w, qbias(16, s, o_w), o]  # fmt: skip
    ops = [BOp("CONV_2D", [0, 1, 2], [3], _conv_opts(1, 1, SAME, 3), version=3),
           BOp("DEPTHWISE_CONV_2D", [3, 4, 5], [6],
               _conv_opts(1, 1, SAME, 3) | {"depth_multiplier": 1}, version=3),
           BOp("CONV_2D", [6, 7, 8], [9], _conv_opts(1, 1, SAME, 0), version=3),
           BOp("ADD", [9, 0], [10], {"fused_activation_function": 0}),
           BOp("CONV_2D", [10, 11, 12], [13], _conv_opts(1, 1, SAME, 0), version=3)]  # fmt: skip
    return build(ts, ops, [0], [13]), x


def test_a_residual_block_is_one_fused_run():
    model, x = _block_model()
    feeds = [sample(x)]
    it, got = _check(model, feeds, fused_ops=5)
    assert _fused_count(it) == 1
    np.testing.assert_array_equal(got[0], litert_run(model, feeds)[0])


def test_same_bits_for_any_thread_count():
    model, x = _block_model()
    feeds = [sample(x)]
    outs = [_run(model, feeds, True, threads=t)[1][0] for t in (1, 2, 4)]
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])


# -- fixtures ------------------------------------------------------------------------------------


def _int8_fixtures():
    return sorted(p.relative_to(FIXTURES).as_posix() for p in FIXTURES.rglob("*int8*.tflite")
                  if p.with_suffix(".npz").exists())  # fmt: skip


@pytest.mark.parametrize("name", _int8_fixtures())
def test_int8_fixtures_same_bits_fused_and_per_operator(name):
    path = FIXTURES / name
    data = np.load(path.with_suffix(".npz"))
    it = Interpreter(model_path=str(path))
    it.allocate_tensors()
    feeds = [data[f"input_{i}"] for i in range(len(it.get_input_details()))]
    _check(None, feeds, fused_ops=None if _fused_count(it) else 0, path=str(path))


@pytest.mark.parametrize("name", ["mobilenet_v2_int8", "kws_cnn_int8", "unet_int8",
                                  "transformer_block_int8"])  # fmt: skip
def test_fused_models_agree_with_litert(name):
    data = np.load(FIXTURES / "models" / f"{name}.npz")
    it = Interpreter(model_path=str(FIXTURES / "models" / f"{name}.tflite"))
    it.allocate_tensors()
    assert _fused_count(it) >= 1
    it.set_tensor(it.get_input_details()[0]["index"], data["input_0"])
    it.invoke()
    want = data["ref_output_0"]
    np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]), want)
    checked = 0
    for key in data.files:  # every intermediate LiteRT recorded that the arena still holds
        if key.startswith("ref_tensor_"):
            i = int(key.rsplit("_", 1)[1])
            if i in it._main.clobbered or it._main.tensors[i].dtype != np.int8:
                continue
            np.testing.assert_array_equal(it.get_tensor(i), data[key], err_msg=key)
            checked += 1
    assert checked or not any(k.startswith("ref_tensor_") for k in data.files)


def test_preserve_all_tensors_keeps_every_operator_on_its_own():
    model, x = _block_model()
    it = Interpreter(model_content=model, experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    assert _fused_count(it) == 0


@pytest.mark.parametrize("var", ["RILL_JIT", "RILL_JIT_PROGRAM"])
def test_environment_turns_fused_runs_off(var):
    code = ("from rill.mobile.interpreter import Interpreter\n"
            "from rill.mobile.program_int8 import FusedRun\n"
            f"it = Interpreter(model_path={str(FIXTURES / 'cnn_int8.tflite')!r})\n"
            "it.allocate_tensors()\n"
            "print(any(isinstance(f, FusedRun) for f in it._main.run))\n")  # fmt: skip
    # Both switches on but the one under test, whatever the environment the tests run in.
    env = {**os.environ, "RILL_JIT": "1", "RILL_JIT_PROGRAM": "1"}
    for value, want in (("0", "False"), ("1", "True")):
        env[var] = value
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=300, check=True)  # fmt: skip
        assert out.stdout.strip() == want, out.stderr
