"""TF1 initializers: callables `init(shape, dtype=None, partition_info=None)` that build the ops
producing a variable's initial value.

Each initializer is a class with TensorFlow-1's lowercase alias (`zeros_initializer = Zeros`), so
both `zeros_initializer()` and `Zeros()` work, as in `tf.compat.v1`. The variance-scaling family
computes fans as TensorFlow does: for a convolution kernel `[..., in, out]` the receptive field
(the product of the leading dimensions) multiplies both fans.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     glorot_uniform_initializer(seed=1)([784, 10])
<Tensor 'random_uniform:0' f32[784,10]>
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rill.graph import dtypes
from rill.graph.graph import Tensor, constant
from rill.graph.ops import array_ops, random_ops
from rill.graph.shapes import TensorShape

__all__ = [
    "Initializer",
    "Zeros",
    "Ones",
    "Constant",
    "RandomUniform",
    "RandomNormal",
    "TruncatedNormal",
    "UniformUnitScaling",
    "VarianceScaling",
    "GlorotUniform",
    "GlorotNormal",
    "Identity",
    "Orthogonal",
    "orthogonal_initializer",
    "zeros_initializer",
    "ones_initializer",
    "constant_initializer",
    "random_uniform_initializer",
    "random_normal_initializer",
    "truncated_normal_initializer",
    "uniform_unit_scaling_initializer",
    "variance_scaling_initializer",
    "glorot_uniform_initializer",
    "glorot_normal_initializer",
    "identity_initializer",
    "he_normal",
    "he_uniform",
    "lecun_normal",
    "lecun_uniform",
    "compute_fans",
]

# The standard deviation of a standard normal truncated to [-2, 2]; dividing by it makes a
# truncated normal draw have the variance that variance scaling asks for.
TRUNCATED_NORMAL_STDDEV = 0.87962566103423978


def _as_shape_list(shape) -> list[int]:
    if isinstance(shape, TensorShape):
        if not shape.is_fully_defined():
            raise ValueError(f"an initializer needs a fully defined shape, got {shape}")
        return shape.as_list()
    if isinstance(shape, (int, np.integer)):
        return [int(shape)]
    return [int(d) for d in shape]


def _float_dtype(dtype, who: str) -> dtypes.DType:
    dtype = dtypes.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"{who}: expected a floating point type, got {dtype.name}")
    return dtype


def compute_fans(shape) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight of `shape`, as TensorFlow computes them.

    Scalars count 1; a vector counts its length both ways; a matrix [in, out]; a convolution
    kernel [*window, in, out] multiplies in and out by the window size.

    >>> compute_fans([3, 3, 16, 32])
    (144, 288)
    """
    shape = _as_shape_list(shape)
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = 1
    for d in shape[:-2]:
        receptive *= d
    return shape[-2] * receptive, shape[-1] * receptive


class Initializer:
    """Base class: `__call__(shape, dtype=None, partition_info=None)` returns a Tensor."""

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        raise NotImplementedError

    def get_config(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Initializer:
        config = dict(config)
        if "dtype" in config and config["dtype"] is not None:
            config["dtype"] = dtypes.as_dtype(config["dtype"])
        return cls(**config)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


class Zeros(Initializer):
    """All zeros (any dtype).

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     zeros_initializer()([2, 3]).shape
    TensorShape([2, 3])
    """

    def __init__(self, dtype=dtypes.float32):
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        dtype = dtypes.as_dtype(dtype) if dtype is not None else self.dtype
        return array_ops.zeros(_as_shape_list(shape), dtype)

    def get_config(self):
        return {"dtype": self.dtype.name}


class Ones(Initializer):
    """All ones (any dtype)."""

    def __init__(self, dtype=dtypes.float32):
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        dtype = dtypes.as_dtype(dtype) if dtype is not None else self.dtype
        return array_ops.ones(_as_shape_list(shape), dtype)

    def get_config(self):
        return {"dtype": self.dtype.name}


class Constant(Initializer):
    """The given value, laid out in row-major order over the requested shape.

    A scalar fills the shape. A list with fewer elements than the shape is padded with its last
    element (TensorFlow-1's `constant` semantics); more elements than the shape is an error.

    >>> import rill.graph as rg
    >>> from rill.exec import Session
    >>> with rg.Graph().as_default():
    ...     Session().run(constant_initializer([1.0, 2.0])([2, 2]))
    array([[1., 2.],
           [2., 2.]], dtype=float32)
    """

    def __init__(self, value=0, dtype=dtypes.float32, verify_shape: bool = False):
        if not (np.isscalar(value) or isinstance(value, (list, tuple, np.ndarray))):
            raise TypeError(
                f"Invalid type for initial value: {type(value).__name__} (expected a Python "
                "scalar, a list or tuple of values, or a numpy.ndarray)"
            )
        self.value = value
        self.dtype = dtypes.as_dtype(dtype)
        self._verify_shape = verify_shape

    def __call__(self, shape, dtype=None, partition_info=None, verify_shape=None) -> Tensor:
        dtype = dtypes.as_dtype(dtype) if dtype is not None else self.dtype
        verify = self._verify_shape if verify_shape is None else verify_shape
        dims = _as_shape_list(shape)
        arr = np.asarray(self.value)
        if verify and tuple(arr.shape) != tuple(dims):
            raise TypeError(f"Expected Tensor's shape: {tuple(dims)}, got {tuple(arr.shape)}.")
        n = int(np.prod(dims, dtype=np.int64))
        if arr.size > n:
            raise ValueError(
                f"Too many elements provided. Needed at most {n}, but received {arr.size}"
            )
        value = self.value
        if 1 < arr.size < n or (arr.size == 0 and n > 0):
            flat = arr.reshape(-1)
            fill = flat[-1:] if flat.size else np.zeros([1], arr.dtype)
            flat = np.concatenate([flat, np.repeat(fill, n - flat.size)])
            # Python values go back to Python scalars, so their dtype checks apply.
            value = flat if isinstance(self.value, np.ndarray) else flat.tolist()
        return constant(value, dtype=dtype, shape=dims)

    def get_config(self):
        return {"value": self.value, "dtype": self.dtype.name, "verify_shape": self._verify_shape}


class RandomUniform(Initializer):
    """Uniform values in [minval, maxval) (maxval defaults to 1 for floats)."""

    def __init__(self, minval=0, maxval=None, seed: int | None = None, dtype=dtypes.float32):
        self.minval = minval
        self.maxval = maxval
        self.seed = seed
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        dtype = dtypes.as_dtype(dtype) if dtype is not None else self.dtype
        return random_ops.random_uniform(
            _as_shape_list(shape), self.minval, self.maxval, dtype, seed=self.seed
        )

    def get_config(self):
        return {
            "minval": self.minval,
            "maxval": self.maxval,
            "seed": self.seed,
            "dtype": self.dtype.name,
        }


class RandomNormal(Initializer):
    """Normal values with the given mean and standard deviation."""

    def __init__(self, mean=0.0, stddev=1.0, seed: int | None = None, dtype=dtypes.float32):
        self.mean = mean
        self.stddev = stddev
        self.seed = seed
        self.dtype = _float_dtype(dtype, type(self).__name__)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        dtype = _float_dtype(dtype, type(self).__name__) if dtype is not None else self.dtype
        return random_ops.random_normal(
            _as_shape_list(shape), self.mean, self.stddev, dtype, seed=self.seed
        )

    def get_config(self):
        return {
            "mean": self.mean,
            "stddev": self.stddev,
            "seed": self.seed,
            "dtype": self.dtype.name,
        }


class TruncatedNormal(RandomNormal):
    """Normal values redrawn when more than two standard deviations from the mean."""

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        dtype = _float_dtype(dtype, type(self).__name__) if dtype is not None else self.dtype
        return random_ops.truncated_normal(
            _as_shape_list(shape), self.mean, self.stddev, dtype, seed=self.seed
        )


class UniformUnitScaling(Initializer):
    """Uniform in ±factor·sqrt(3 / input_size), input_size the product of all but the last
    dimension (of the full shape when the variable is partitioned). Deprecated in TensorFlow in
    favour of variance_scaling_initializer."""

    def __init__(self, factor: float = 1.0, seed: int | None = None, dtype=dtypes.float32):
        self.factor = factor
        self.seed = seed
        self.dtype = _float_dtype(dtype, type(self).__name__)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        dtype = _float_dtype(dtype, type(self).__name__) if dtype is not None else self.dtype
        scale_shape = _as_shape_list(shape)
        if partition_info is not None:
            scale_shape = _as_shape_list(partition_info.full_shape)
        input_size = 1.0
        for d in scale_shape[:-1]:
            input_size *= float(d)
        input_size = max(input_size, 1.0)
        limit = math.sqrt(3 / input_size) * self.factor
        return random_ops.random_uniform(
            _as_shape_list(shape), -limit, limit, dtype, seed=self.seed
        )

    def get_config(self):
        return {"factor": self.factor, "seed": self.seed, "dtype": self.dtype.name}


_MODES = ("fan_in", "fan_out", "fan_avg")
_DISTRIBUTIONS = ("normal", "uniform", "truncated_normal", "untruncated_normal")


class VarianceScaling(Initializer):
    """Values whose variance is scale / n, n the fan chosen by `mode`.

    Args:
        scale: a positive float.
        mode: "fan_in", "fan_out" or "fan_avg" (the mean of the two).
        distribution: "truncated_normal" (or its TF1 alias "normal"): a normal truncated at two
            standard deviations, with stddev sqrt(scale / n) / 0.8796..., so the draws have the
            requested variance; "untruncated_normal": stddev sqrt(scale / n); "uniform": in
            ±sqrt(3 · scale / n).

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     he = VarianceScaling(2.0, "fan_in", "untruncated_normal")  # stddev sqrt(2 / 72)
    ...     he([3, 3, 8, 16]).op.inputs[0].op.inputs[1].op.get_attr("value")
    array(0.16666667, dtype=float32)
    """

    def __init__(
        self,
        scale: float = 1.0,
        mode: str = "fan_in",
        distribution: str = "truncated_normal",
        seed: int | None = None,
        dtype=dtypes.float32,
    ):
        if scale <= 0.0:
            raise ValueError(f"`scale` must be a positive float, got {scale!r}")
        if mode not in _MODES:
            raise ValueError(f"Invalid `mode` argument {mode!r}: expected one of {_MODES}")
        distribution = distribution.lower()
        if distribution not in _DISTRIBUTIONS:
            raise ValueError(
                f"Invalid `distribution` argument {distribution!r}: expected one of "
                f"{_DISTRIBUTIONS}"
            )
        self.scale = scale
        self.mode = mode
        self.distribution = distribution
        self.seed = seed
        self.dtype = _float_dtype(dtype, type(self).__name__)

    def _scaled_variance(self, scale_shape) -> float:
        fan_in, fan_out = compute_fans(scale_shape)
        if self.mode == "fan_in":
            return self.scale / max(1.0, fan_in)
        if self.mode == "fan_out":
            return self.scale / max(1.0, fan_out)
        return self.scale / max(1.0, (fan_in + fan_out) / 2.0)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        dtype = _float_dtype(dtype, type(self).__name__) if dtype is not None else self.dtype
        dims = _as_shape_list(shape)
        scale_shape = dims
        if partition_info is not None:
            scale_shape = _as_shape_list(partition_info.full_shape)
        scale = self._scaled_variance(scale_shape)
        if self.distribution in ("normal", "truncated_normal"):
            stddev = math.sqrt(scale) / TRUNCATED_NORMAL_STDDEV
            return random_ops.truncated_normal(dims, 0.0, stddev, dtype, seed=self.seed)
        if self.distribution == "untruncated_normal":
            return random_ops.random_normal(dims, 0.0, math.sqrt(scale), dtype, seed=self.seed)
        limit = math.sqrt(3.0 * scale)
        return random_ops.random_uniform(dims, -limit, limit, dtype, seed=self.seed)

    def get_config(self):
        return {
            "scale": self.scale,
            "mode": self.mode,
            "distribution": self.distribution,
            "seed": self.seed,
            "dtype": self.dtype.name,
        }


class GlorotUniform(VarianceScaling):
    """Uniform in ±sqrt(6 / (fan_in + fan_out)) (Glorot and Bengio, 2010)."""

    def __init__(self, seed: int | None = None, dtype=dtypes.float32):
        super().__init__(1.0, "fan_avg", "uniform", seed, dtype)

    def get_config(self):
        return {"seed": self.seed, "dtype": self.dtype.name}


class GlorotNormal(VarianceScaling):
    """Truncated normal with stddev sqrt(2 / (fan_in + fan_out)) (after the truncation
    correction)."""

    def __init__(self, seed: int | None = None, dtype=dtypes.float32):
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, dtype)

    def get_config(self):
        return {"seed": self.seed, "dtype": self.dtype.name}


class Identity(Initializer):
    """gain × the identity matrix (2-D shapes only; rectangular shapes get ones on the
    diagonal)."""

    def __init__(self, gain: float = 1.0, dtype=dtypes.float32):
        self.gain = gain
        self.dtype = _float_dtype(dtype, type(self).__name__)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        dtype = _float_dtype(dtype, type(self).__name__) if dtype is not None else self.dtype
        full = _as_shape_list(shape)
        if partition_info is not None:
            full = _as_shape_list(partition_info.full_shape)
        if len(full) != 2:
            raise ValueError(f"the identity initializer only makes 2-D matrices, got shape {full}")
        if partition_info is not None and full != _as_shape_list(shape):
            raise NotImplementedError("the identity initializer of a partitioned variable")
        return constant(np.eye(*full) * self.gain, dtype=dtype)

    def get_config(self):
        return {"gain": self.gain, "dtype": self.dtype.name}


class Orthogonal(Initializer):
    """gain × a random orthogonal matrix (Saxe et al.): the Q of a QR decomposition of a
    normal draw, with signs fixed by R's diagonal; shapes of rank > 2 are flattened to
    [prod(shape[:-1]), shape[-1]]."""

    def __init__(self, gain: float = 1.0, seed: int | None = None, dtype=dtypes.float32):
        self.gain = gain
        self.seed = seed
        self.dtype = _float_dtype(dtype, type(self).__name__)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        from rill.graph.ops import math_ops
        from rill.graph.ops.array_ops import reshape, transpose
        from rill.graph.ops.diag_ops import matrix_diag_part
        from rill.graph.ops.linalg_ops import qr

        dtype = _float_dtype(dtype, type(self).__name__) if dtype is not None else self.dtype
        full = _as_shape_list(shape)
        if len(full) < 2:
            raise ValueError(f"the orthogonal initializer needs a shape of rank >= 2, got {full}")
        rows, cols = int(np.prod(full[:-1])), full[-1]
        flat = (rows, cols) if rows >= cols else (cols, rows)
        a = random_ops.random_normal(list(flat), dtype=dtype, seed=self.seed)
        q, r = qr(a, full_matrices=False)
        q = q * math_ops.sign(matrix_diag_part(r))
        if rows < cols:
            q = transpose(q)
        return self.gain * reshape(q, full)

    def get_config(self):
        return {"gain": self.gain, "seed": self.seed, "dtype": self.dtype.name}


zeros_initializer = Zeros
ones_initializer = Ones
constant_initializer = Constant
random_uniform_initializer = RandomUniform
random_normal_initializer = RandomNormal
truncated_normal_initializer = TruncatedNormal
uniform_unit_scaling_initializer = UniformUnitScaling
variance_scaling_initializer = VarianceScaling
glorot_uniform_initializer = GlorotUniform
glorot_normal_initializer = GlorotNormal
identity_initializer = Identity
orthogonal_initializer = Orthogonal


def he_normal(seed: int | None = None) -> VarianceScaling:
    """Truncated normal with variance 2 / fan_in (He et al., 2015)."""
    return VarianceScaling(2.0, "fan_in", "truncated_normal", seed)


def he_uniform(seed: int | None = None) -> VarianceScaling:
    """Uniform in ±sqrt(6 / fan_in)."""
    return VarianceScaling(2.0, "fan_in", "uniform", seed)


def lecun_normal(seed: int | None = None) -> VarianceScaling:
    """Truncated normal with variance 1 / fan_in."""
    return VarianceScaling(1.0, "fan_in", "truncated_normal", seed)


def lecun_uniform(seed: int | None = None) -> VarianceScaling:
    """Uniform in ±sqrt(3 / fan_in)."""
    return VarianceScaling(1.0, "fan_in", "uniform", seed)
