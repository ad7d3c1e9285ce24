"""Stateless random ops: the same (shape, seed) always gives the same numbers, TensorFlow's own
(Philox4x32-10 keyed by the seed pair, as TensorFlow's CPU kernels).

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     u = stateless_random_uniform([2, 3], rg.constant([1, 2], rg.int64))
>>> u.shape, u.dtype
(TensorShape([2, 3]), rill.float32)
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes, shape_fns
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.ops import array_ops, math_ops
from rill.graph.shapes import TensorShape, unknown_shape
from rill.graph.tensor_util import constant_value

__all__ = ["stateless_random_uniform", "stateless_random_normal"]


def _shape_from_input(op):
    seed = op._inputs[1].shape
    if seed.rank not in (None, 1) or (seed.rank == 1 and seed[0] not in (None, 2)):
        raise ValueError(f"seed must have shape [2], got {seed}")
    v = constant_value(op._inputs[0])
    if v is None:
        n = op._inputs[0].shape
        return [unknown_shape() if n.rank != 1 or n[0] is None else TensorShape([None] * n[0])]
    return [TensorShape([int(d) for d in v.reshape(-1)])]


_ATTRS = ["dtype: {float16, bfloat16, float32, float64} = float32", "T: {int32, int64} = int32",
          "Tseed: {int32, int64} = int64"]  # fmt: skip
defop("StatelessRandomUniform", inputs=["shape: T", "seed: Tseed"], outputs=["output: dtype"],
      attrs=_ATTRS, shape=_shape_from_input,
      doc="Uniform values in [0, 1), determined by seed.")  # fmt: skip
defop("StatelessRandomNormal", inputs=["shape: T", "seed: Tseed"], outputs=["output: dtype"],
      attrs=_ATTRS, shape=_shape_from_input,
      doc="Standard normal values (Box-Muller), determined by seed.")  # fmt: skip


def _op(op_type, shape, seed, dtype, name):
    shape = convert_to_tensor(shape, dtype=dtypes.int32, name="shape")
    seed = convert_to_tensor(seed, name="seed")
    attrs = {"dtype": dtypes.as_dtype(dtype)}
    return get_default_graph().create_op(op_type, [shape, seed], attrs,
                                         name=name or op_type).outputs[0]  # fmt: skip


def stateless_random_uniform(shape, seed, dtype=dtypes.float32, name=None) -> Tensor:
    return _op("StatelessRandomUniform", shape, seed, dtype, name)


def stateless_random_normal(shape, seed, dtype=dtypes.float32, name=None) -> Tensor:
    return _op("StatelessRandomNormal", shape, seed, dtype, name)


def _key_counter_shape(op):
    return [TensorShape([1]), TensorShape([2])]


defop("StatelessRandomGetKeyCounter", inputs=["seed: Tseed"],
      outputs=["key: uint64", "counter: uint64"], attrs=["Tseed: {int32, int64} = int64"],
      shape=_key_counter_shape,
      doc="The Philox key and counter that a seed pair scrambles to.")  # fmt: skip


def _v2_shape(op):
    v = constant_value(op._inputs[0])
    if v is None:
        return [unknown_shape()]
    return [TensorShape([int(d) for d in v.reshape(-1)])]


_V2_ATTRS = ["dtype: {float16, bfloat16, float32, float64} = float32",
             "Tshape: {int32, int64} = int32"]  # fmt: skip
defop("StatelessRandomUniformV2", inputs=["shape: Tshape", "key: uint64", "counter: uint64",
      "alg: int32"], outputs=["output: dtype"], attrs=_V2_ATTRS, shape=_v2_shape,
      doc="Uniform values in [0, 1) from an explicit key and counter (alg 1 or 3: Philox).")  # fmt: skip
defop("StatelessRandomNormalV2", inputs=["shape: Tshape", "key: uint64", "counter: uint64",
      "alg: int32"], outputs=["output: dtype"], attrs=_V2_ATTRS, shape=_v2_shape,
      doc="Standard normal values from an explicit key and counter (alg 1 or 3: Philox).")  # fmt: skip


# -- stateful samplers with parameters (their own seeded streams, as random_ops' ops) -------------


def _shape_then(param_index: int, param_first: bool):
    def shape(op):
        v = constant_value(op._inputs[0])
        head = unknown_shape() if v is None else TensorShape([int(d) for d in v.reshape(-1)])
        p = op._inputs[param_index].shape
        if head.rank is None or p.rank is None:
            return [unknown_shape()]
        return [head.concatenate(p) if param_first else head]

    return shape


def _ptn_shape(op):
    v = constant_value(op._inputs[0])
    if v is None:
        return [TensorShape([None, None])]
    return [TensorShape([int(d) for d in v.reshape(-1)])]


_SEEDS = ["seed: int = 0", "seed2: int = 0"]
defop("RandomGamma", inputs=["shape: S", "alpha: T"], outputs=["output: T"],
      attrs=[*_SEEDS, "S: {int32, int64}", "T: {float16, float32, float64}"],
      shape=_shape_then(1, True), stateful=True,
      doc="Gamma(alpha, 1) samples of shape shape + alpha.shape.")  # fmt: skip
defop("RandomPoisson", inputs=["shape: S", "rate: dtype"], outputs=["output: dtype"],
      attrs=[*_SEEDS, "S: {int32, int64}", "dtype: {float16, float32, float64}"],
      shape=_shape_then(1, True), stateful=True,
      doc="Poisson(rate) samples of shape shape + rate.shape (the output has rate's type).")  # fmt: skip
defop("RandomPoissonV2", inputs=["shape: S", "rate: R"], outputs=["output: dtype"],
      attrs=[*_SEEDS, "S: {int32, int64}", "R: {float16, float32, float64, int32, int64} = float64",
             "dtype: {float16, float32, float64, int32, int64} = int64"],
      shape=_shape_then(1, True), stateful=True,
      doc="Poisson(rate) samples of shape shape + rate.shape, of type dtype.")  # fmt: skip
defop("ParameterizedTruncatedNormal",
      inputs=["shape: T", "means: dtype", "stdevs: dtype", "minvals: dtype", "maxvals: dtype"],
      outputs=["output: dtype"],
      attrs=[*_SEEDS, "dtype: {float16, bfloat16, float32, float64}", "T: {int32, int64}"],
      shape=_ptn_shape, stateful=True,
      doc="Normal(mean, stdev) samples truncated to [minval, maxval], per batch row (shape "
      "[batch, n]; the parameters are scalars or [batch] vectors).")  # fmt: skip


# -- truncated normals and integers from the same Philox stream (issue 18) ------------------------

defop("StatelessTruncatedNormal", inputs=["shape: T", "seed: Tseed"], outputs=["output: dtype"],
      attrs=_ATTRS, shape=_shape_from_input,
      doc="Standard normal values within 2 standard deviations (rejection), determined by "
      "seed.")  # fmt: skip
defop("StatelessRandomUniformInt",
      inputs=["shape: T", "seed: Tseed", "minval: dtype", "maxval: dtype"],
      outputs=["output: dtype"],
      attrs=["dtype: {int32, int64}", "T: {int32, int64}", "Tseed: {int32, int64} = int64"],
      shape=_shape_from_input,
      doc="Integers in [minval, maxval) (bits modulo the range), determined by seed.")  # fmt: skip
defop("StatelessRandomUniformFullInt", inputs=["shape: T", "seed: Tseed"],
      outputs=["output: dtype"],
      attrs=["dtype: {int32, int64, uint32, uint64} = uint64", "T: {int32, int64} = int32",
             "Tseed: {int32, int64, uint32, uint64} = int64"],
      shape=_shape_from_input,
      doc="Integers over the whole range of dtype (the raw bits), determined by seed.")  # fmt: skip
defop("StatelessTruncatedNormalV2", inputs=["shape: Tshape", "key: uint64", "counter: uint64",
      "alg: int32"], outputs=["output: dtype"], attrs=_V2_ATTRS, shape=_v2_shape,
      doc="Truncated normal values from an explicit key and counter (Philox).")  # fmt: skip
_V2_INT = "dtype: {int32, int64, uint32, uint64}"
defop("StatelessRandomUniformIntV2", inputs=["shape: Tshape", "key: uint64", "counter: uint64",
      "alg: int32", "minval: dtype", "maxval: dtype"], outputs=["output: dtype"],
      attrs=[_V2_INT, "Tshape: {int32, int64} = int32"], shape=_v2_shape,
      doc="Integers in [minval, maxval) from an explicit key and counter (Philox).")  # fmt: skip
defop("StatelessRandomUniformFullIntV2", inputs=["shape: Tshape", "key: uint64",
      "counter: uint64", "alg: int32"], outputs=["output: dtype"],
      attrs=[_V2_INT + " = uint64", "Tshape: {int32, int64} = int32"], shape=_v2_shape,
      doc="Integers over the whole range of dtype from an explicit key and counter.")  # fmt: skip


def stateless_truncated_normal(shape, seed, dtype=dtypes.float32, name=None) -> Tensor:
    return _op("StatelessTruncatedNormal", shape, seed, dtype, name)


def stateless_random_uniform_int(shape, seed, minval, maxval, dtype=dtypes.int32,
                                 name=None) -> Tensor:  # fmt: skip
    """Integers in [minval, maxval) (`tf.random.stateless_uniform` with an integer dtype)."""
    dtype = dtypes.as_dtype(dtype)
    shape = convert_to_tensor(shape, dtype=dtypes.int32, name="shape")
    seed = convert_to_tensor(seed, name="seed")
    lo = convert_to_tensor(minval, dtype=dtype, name="minval")
    hi = convert_to_tensor(maxval, dtype=dtype, name="maxval")
    return get_default_graph().create_op("StatelessRandomUniformInt", [shape, seed, lo, hi],
                                         {"dtype": dtype},
                                         name=name or "StatelessRandomUniformInt").outputs[0]  # fmt: skip


__all__ += ["stateless_truncated_normal", "stateless_random_uniform_int"]

defop("RandomGammaGrad", inputs=["alpha: T", "sample: T"], outputs=["output: T"],
      attrs=["T: {float32, float64}"], shape=shape_fns.broadcast_binary,
      doc="d sample / d alpha of Gamma(alpha, 1) samples by implicit differentiation: "
      "-(dP(alpha, x)/dalpha) / pdf(x).")  # fmt: skip


# -- the algorithm queries and categorical sampling (issue 18, third session) ---------------------

defop("StatelessRandomGetKeyCounterAlg", inputs=["seed: Tseed"],
      outputs=["key: uint64", "counter: uint64", "alg: int32"],
      attrs=["Tseed: {int32, int64} = int64"],
      shape=lambda op: [TensorShape([1]), TensorShape([2]), TensorShape([])],
      doc="The Philox key and counter a seed pair scrambles to, and the algorithm (1: Philox).")  # fmt: skip
defop("StatelessRandomGetAlg", inputs=[], outputs=["alg: int32"],
      shape=lambda op: [TensorShape([])], stateful=True,
      doc="The counter-based algorithm the device's stateless ops use (1: Philox on CPU).")  # fmt: skip


def _stateless_multinomial_shape(op):
    from rill.graph.ops.random_ops import _multinomial_shape

    seed = op._inputs[2].shape
    if seed.rank not in (None, 1) or (seed.rank == 1 and seed[0] not in (None, 2)):
        raise ValueError(f"seed must have shape [2], got {seed}")
    return [_multinomial_shape(op)]


defop("StatelessMultinomial", inputs=["logits: T", "num_samples: int32", "seed: Tseed"],
      outputs=["output: output_dtype"],
      attrs=["T: {float32, float64, int32, uint8, int16, int8, int64, bfloat16, uint16, float16, "
             "uint32, uint64}", "Tseed: {int32, int64} = int64",
             "output_dtype: {int32, int64} = int64"],
      shape=_stateless_multinomial_shape,
      doc="num_samples class indices per row drawn from softmax(logits[row]), determined by "
      "seed (TensorFlow's Philox stream: one double per sample).")  # fmt: skip


def stateless_categorical(logits, num_samples, seed, dtype=dtypes.int64, name=None) -> Tensor:
    """`tf.random.stateless_categorical`: [batch, num_samples] class indices from logits
    [batch, num_classes], the same for the same seed (and TensorFlow's, bit for bit).

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     s = stateless_categorical(rg.constant([[0.0, 1.0, 2.0]]), 4, [7, 8])
    >>> s.shape, s.dtype
    (TensorShape([1, 4]), rill.int64)
    """
    g = get_default_graph()
    with g.name_scope(name or "stateless_categorical"):
        logits = convert_to_tensor(logits, name="logits")
        n = convert_to_tensor(num_samples, dtype=dtypes.int32, name="num_samples")
        seed = convert_to_tensor(seed, name="seed")
        attrs = {"output_dtype": dtypes.as_dtype(dtype)}
        return g.create_op("StatelessMultinomial", [logits, n, seed], attrs).outputs[0]


def stateless_multinomial(logits, num_samples, seed, output_dtype=dtypes.int64,
                          name=None) -> Tensor:  # fmt: skip
    """TensorFlow 1's name for stateless_categorical."""
    return stateless_categorical(logits, num_samples, seed, output_dtype,
                                 name or "stateless_multinomial")  # fmt: skip


__all__ += ["stateless_categorical", "stateless_multinomial"]


def _spt_shape(op):
    v = constant_value(op._inputs[0])
    if v is None:
        n = op._inputs[0].shape
        return [unknown_shape() if n.rank != 1 or n[0] is None else TensorShape([None] * n[0])]
    return [TensorShape([int(d) for d in v.reshape(-1)])]


defop("StatelessParameterizedTruncatedNormal",
      inputs=["shape: S", "seed: Tseed", "means: dtype", "stddevs: dtype", "minvals: dtype",
              "maxvals: dtype"],
      outputs=["output: dtype"],
      attrs=["S: {int32, int64}", "Tseed: {int32, int64} = int64",
             "dtype: {float16, float32, float64}"],
      shape=_spt_shape,
      doc="Normal(means, stddevs) samples truncated to [minvals, maxvals], determined by seed; "
      "shape ends with the parameters' broadcast shape.")  # fmt: skip


def stateless_parameterized_truncated_normal(shape, seed, means=0.0, stddevs=1.0, minvals=-2.0,
                                             maxvals=2.0, name=None) -> Tensor:  # fmt: skip
    """`tf.random.stateless_parameterized_truncated_normal`: the parameters broadcast together,
    shape ends with their broadcast shape; TensorFlow's numbers for the same seed."""
    g = get_default_graph()
    with g.name_scope(name or "stateless_parameterized_truncated_normal"):
        shape = convert_to_tensor(shape, dtype=dtypes.int32, name="shape")
        seed = convert_to_tensor(seed, name="seed")
        means = convert_to_tensor(means, name="means")
        dt = means.dtype
        ps = [convert_to_tensor(p, dtype=dt, name=n) for p, n in
              ((stddevs, "stddevs"), (minvals, "minvals"), (maxvals, "maxvals"))]  # fmt: skip
        return g.create_op("StatelessParameterizedTruncatedNormal", [shape, seed, means, *ps],
                           {"dtype": dt}).outputs[0]  # fmt: skip


__all__ += ["stateless_parameterized_truncated_normal"]


defop("StatelessShuffle", inputs=["value: T", "key: uint64", "counter: uint64", "alg: int32"],
      outputs=["output: T"], attrs=["T: type"], shape=lambda op: [op._inputs[0].shape],
      doc="value with its first dimension permuted (Fisher-Yates on the Philox stream), "
      "determined by key and counter.")  # fmt: skip


def stateless_shuffle(value, seed, alg="auto_select", name=None) -> Tensor:
    """`tf.random.experimental.stateless_shuffle`: value's rows in a random order that seed
    determines (TensorFlow's order, bit for bit)."""
    if alg not in ("auto_select", "philox", 1, 3):
        raise ValueError(f"stateless_shuffle: unsupported algorithm {alg!r}; rill has Philox")
    g = get_default_graph()
    with g.name_scope(name or "stateless_shuffle"):
        value = convert_to_tensor(value, name="value")
        seed = convert_to_tensor(seed, name="seed")
        key, counter = g.create_op("StatelessRandomGetKeyCounter", [seed]).outputs
        a = convert_to_tensor(1, dtype=dtypes.int32, name="alg")
        return g.create_op("StatelessShuffle", [value, key, counter, a]).outputs[0]


__all__ += ["stateless_shuffle"]


defop("StatelessRandomPoisson", inputs=["shape: T", "seed: Tseed", "lam: Rtype"],
      outputs=["output: dtype"],
      attrs=["Rtype: {float16, float32, float64, int32, int64}",
             "dtype: {float16, float32, float64, int32, int64}", "T: {int32, int64}",
             "Tseed: {int32, int64} = int64"],
      shape=_spt_shape,
      doc="Poisson(lam) samples of shape shape (ending with lam's shape), determined by seed "
      "(Knuth below rate 10, Hormann's transformed rejection above).")  # fmt: skip


def stateless_poisson(shape, seed, lam, dtype=dtypes.int32, name=None) -> Tensor:
    """`tf.random.stateless_poisson`: lam broadcast to the trailing dimensions of shape."""
    g = get_default_graph()
    with g.name_scope(name or "stateless_random_poisson"):
        shape = convert_to_tensor(shape, dtype=dtypes.int32, name="shape")
        seed = convert_to_tensor(seed, name="seed")
        lam = convert_to_tensor(lam, name="lam")
        return g.create_op("StatelessRandomPoisson", [shape, seed, lam],
                           {"dtype": dtypes.as_dtype(dtype)}).outputs[0]  # fmt: skip


__all__ += ["stateless_poisson"]


_GAMMA_T = "dtype: {float16, float32, float64}"
defop("StatelessRandomGammaV2", inputs=["shape: T", "seed: Tseed", "alpha: dtype"],
      outputs=["output: dtype"],
      attrs=[_GAMMA_T, "T: {int32, int64}", "Tseed: {int32, int64} = int64"],
      shape=_spt_shape,
      doc="Gamma(alpha, 1) samples of shape shape (ending with alpha's shape), determined by "
      "seed (Marsaglia-Tsang, TensorFlow's stream).")  # fmt: skip
defop("StatelessRandomGammaV3",
      inputs=["shape: shape_dtype", "key: uint64", "counter: uint64", "alg: int32",
              "alpha: dtype"],
      outputs=["output: dtype"], attrs=[_GAMMA_T, "shape_dtype: {int32, int64} = int32"],
      shape=_spt_shape,
      doc="Gamma(alpha, 1) samples from an explicit key and counter (Philox).")  # fmt: skip


def stateless_gamma(shape, seed, alpha, beta=None, dtype=dtypes.float32, name=None) -> Tensor:
    """`tf.random.stateless_gamma`: Gamma(alpha, beta) samples, alpha (and beta) broadcast to
    the trailing dimensions of shape; TensorFlow's numbers for the same seed."""
    g = get_default_graph()
    with g.name_scope(name or "stateless_random_gamma"):
        dtype = dtypes.as_dtype(dtype)
        shape = convert_to_tensor(shape, dtype=dtypes.int32, name="shape")
        seed = convert_to_tensor(seed, name="seed")
        alpha = convert_to_tensor(alpha, dtype=dtype, name="alpha")
        beta = convert_to_tensor(1 if beta is None else beta, dtype=dtype, name="beta")
        alpha = alpha + array_ops.zeros_like(beta)  # broadcast alpha against beta
        out = g.create_op("StatelessRandomGammaV2", [shape, seed, alpha]).outputs[0]
        # as TensorFlow, the sample stays at least the smallest positive normal number
        tiny = convert_to_tensor(float(np.finfo(dtype.np).tiny), dtype=dtype, name="tiny")
        return math_ops.maximum(tiny, out / beta)


__all__ += ["stateless_gamma"]


defop("StatelessRandomBinomial", inputs=["shape: S", "seed: Tseed", "counts: T", "probs: T"],
      outputs=["output: dtype"],
      attrs=["S: {int32, int64}", "Tseed: {int32, int64} = int64",
             "T: {float16, float32, float64, int32, int64} = float64",
             "dtype: {float16, float32, float64, int32, int64} = int64"],
      shape=_spt_shape,
      doc="Binomial(counts, probs) samples of shape shape (ending with the parameters' broadcast "
      "shape), determined by seed (inversion below count * p = 10, BTRS above).")  # fmt: skip


def stateless_binomial(shape, seed, counts, probs, output_dtype=dtypes.int32,
                       name=None) -> Tensor:  # fmt: skip
    """`tf.random.stateless_binomial`: counts and probs broadcast to the trailing dimensions of
    shape; TensorFlow's numbers for the same seed."""
    g = get_default_graph()
    with g.name_scope(name or "stateless_random_binomial"):
        shape = convert_to_tensor(shape, dtype=dtypes.int32, name="shape")
        seed = convert_to_tensor(seed, name="seed")
        probs = convert_to_tensor(probs, name="probs")
        counts = convert_to_tensor(counts, dtype=probs.dtype, name="counts")
        return g.create_op("StatelessRandomBinomial", [shape, seed, counts, probs],
                           {"dtype": dtypes.as_dtype(output_dtype)}).outputs[0]  # fmt: skip


__all__ += ["stateless_binomial"]


defop("StatelessSampleDistortedBoundingBox",
      inputs=["image_size: T", "bounding_boxes: float32", "min_object_covered: float32",
              "seed: Tseed"],
      outputs=["begin: T", "size: T", "bboxes: float32"],
      attrs=["T: {uint8, int8, int16, int32, int64}", "Tseed: {int32, int64}",
             "aspect_ratio_range: list(float) = [0.75, 1.33]",
             "area_range: list(float) = [0.05, 1.0]", "max_attempts: int = 100",
             "use_image_if_no_bounding_boxes: bool = false"],
      shape=lambda op: [TensorShape([3]), TensorShape([3]), TensorShape([1, 1, 4])],
      doc="A random crop (begin, size for Slice, and the box) of an image of image_size that "
      "covers enough of one of bounding_boxes, determined by seed.")  # fmt: skip


def stateless_sample_distorted_bounding_box(image_size, bounding_boxes, seed,
                                            min_object_covered=0.1,
                                            aspect_ratio_range=(0.75, 1.33),
                                            area_range=(0.05, 1.0), max_attempts=100,
                                            use_image_if_no_bounding_boxes=False,
                                            name=None):  # fmt: skip
    """`tf.image.stateless_sample_distorted_bounding_box`: (begin, size, bboxes)."""
    g = get_default_graph()
    with g.name_scope(name or "stateless_sample_distorted_bounding_box"):
        image_size = convert_to_tensor(image_size, name="image_size")
        boxes = convert_to_tensor(bounding_boxes, dtype=dtypes.float32, name="bounding_boxes")
        moc = convert_to_tensor(min_object_covered, dtype=dtypes.float32,
                                name="min_object_covered")  # fmt: skip
        seed = convert_to_tensor(seed, name="seed")
        attrs = {"aspect_ratio_range": [float(v) for v in aspect_ratio_range],
                 "area_range": [float(v) for v in area_range], "max_attempts": int(max_attempts),
                 "use_image_if_no_bounding_boxes": bool(use_image_if_no_bounding_boxes)}  # fmt: skip
        return tuple(g.create_op("StatelessSampleDistortedBoundingBox",
                                 [image_size, boxes, moc, seed], attrs).outputs)  # fmt: skip


__all__ += ["stateless_sample_distorted_bounding_box"]
