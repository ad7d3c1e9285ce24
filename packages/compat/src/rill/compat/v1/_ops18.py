"""TensorFlow 1.15's names and signatures for the op families of issue 18 (linear algebra,
images, strings, tf.Example parsing, readers, random samplers), over rill.graph's builders:
thin wrappers where TensorFlow's arguments differ, re-exported by the tf.* namespaces."""

from __future__ import annotations

from rill.exec.tfrecord import TFRecordWriter, tf_record_iterator
from rill.graph import dtypes
from rill.graph.graph import convert_to_tensor, get_default_graph
from rill.graph.ops import (
    array_ops,
    diag_ops,
    example_ops,
    image_ops,
    linalg_ops,
    math_ops,
    reader_ops,
    reduction_ops,
    reshape_ops,
    stateless_random_ops,
)
from rill.graph.ops.random_ops import get_seed
from rill.graph.sparse_tensor import SparseTensor

__all__ = ["TFRecordWriter", "tf_record_iterator"]

# -- tf.linalg ------------------------------------------------------------------------------------


def logdet(matrix, name=None):
    """log(det(matrix)) of Hermitian positive definite matrices, through their Cholesky factor."""
    chol = linalg_ops.cholesky(matrix, name=name)
    return 2.0 * reduction_ops.reduce_sum(
        math_ops.log(math_ops.abs(diag_ops.matrix_diag_part(chol))), axis=-1
    )


def eigvalsh(tensor, name=None):
    return linalg_ops.self_adjoint_eig(tensor, name=name)[0]


def lstsq(matrix, rhs, l2_regularizer=0.0, fast=True, name=None):
    return linalg_ops.matrix_solve_ls(matrix, rhs, l2_regularizer, fast, name)


# -- tf.image -------------------------------------------------------------------------------------


class ResizeMethod:
    BILINEAR = 0
    NEAREST_NEIGHBOR = 1
    BICUBIC = 2
    AREA = 3


def resize_images(images, size, method=ResizeMethod.BILINEAR, align_corners=False,
                  preserve_aspect_ratio=False, name=None):  # fmt: skip
    """TF1's tf.image.resize_images for 4-D NHWC images (3-D ones get a batch of one)."""
    if preserve_aspect_ratio:
        raise NotImplementedError("resize_images(preserve_aspect_ratio=True) is not supported")
    images = convert_to_tensor(images, name="images")
    single = images.shape.rank == 3
    if single:
        images = reshape_ops.expand_dims(images, 0)
    size = convert_to_tensor(size, dtype=dtypes.int32, name="size")
    if method == ResizeMethod.BILINEAR:
        out = image_ops.resize_bilinear(images, size, align_corners=align_corners, name=name)
    elif method == ResizeMethod.NEAREST_NEIGHBOR:
        out = image_ops.resize_nearest_neighbor(images, size, align_corners=align_corners,
                                                name=name)  # fmt: skip
    elif method == ResizeMethod.BICUBIC:
        out = image_ops.resize_bicubic(images, size, align_corners=align_corners, name=name)
    elif method == ResizeMethod.AREA:
        out = image_ops.resize_area(images, size, align_corners=align_corners, name=name)
    else:
        raise ValueError(f"resize_images: unknown method {method!r}")
    return reshape_ops.squeeze(out, [0]) if single else out


# -- tf.io: tf.Example parsing with feature specs ---------------------------------------------------


class FixedLenFeature:
    """A dense feature: its shape, dtype and default (TensorFlow's tf.io.FixedLenFeature)."""

    def __init__(self, shape, dtype, default_value=None):
        self.shape, self.dtype, self.default_value = list(shape), dtype, default_value


class VarLenFeature:
    """A feature of any length, parsed into a SparseTensor (tf.io.VarLenFeature)."""

    def __init__(self, dtype):
        self.dtype = dtype


def _specs(features: dict):
    dense, sparse = {}, {}
    for key in sorted(features):
        f = features[key]
        if isinstance(f, FixedLenFeature):
            dense[key] = (f.dtype, f.shape, f.default_value)
        elif isinstance(f, VarLenFeature):
            sparse[key] = f.dtype
        else:
            raise ValueError(f"feature {key!r}: unsupported feature spec {type(f).__name__}")
    return dense, sparse


def _wrap(parsed: dict, sparse) -> dict:
    return {k: SparseTensor(*v) if k in sparse else v for k, v in parsed.items()}


def parse_example(serialized, features, name=None, example_names=None):
    del example_names
    dense, sparse = _specs(features)
    return _wrap(example_ops.parse_example(serialized, dense, sparse, name), sparse)


def parse_single_example(serialized, features, name=None, example_names=None):
    del example_names
    dense, sparse = _specs(features)
    return _wrap(example_ops.parse_single_example(serialized, dense, sparse, name), sparse)


# -- readers (tf.TFRecordReader, ...) ----------------------------------------------------------------


class ReaderBase:
    """A reader resource in the graph (TF1's tf.ReaderBase): read(queue), read_up_to, ..."""

    def __init__(self, handle):
        self._reader_ref = handle

    @property
    def reader_ref(self):
        return self._reader_ref

    @staticmethod
    def _queue_ref(queue):
        return getattr(queue, "queue_ref", queue)

    def read(self, queue, name=None):
        return reader_ops.reader_read(self._reader_ref, self._queue_ref(queue), name)

    def read_up_to(self, queue, num_records, name=None):
        return reader_ops.reader_read_up_to(self._reader_ref, self._queue_ref(queue), num_records,
                                            name)  # fmt: skip

    def num_records_produced(self, name=None):
        return reader_ops.reader_num_records_produced(self._reader_ref, name)

    def num_work_units_completed(self, name=None):
        return reader_ops.reader_num_work_units_completed(self._reader_ref, name)

    def reset(self, name=None):
        return reader_ops.reader_reset(self._reader_ref, name)


class TFRecordReader(ReaderBase):
    def __init__(self, name=None, options=None):
        compression = "" if options is None else getattr(options, "compression_type", options)
        compression = {None: "", 0: "", 1: "ZLIB", 2: "GZIP"}.get(compression, compression)
        super().__init__(reader_ops.tf_record_reader(str(compression or ""), name))


class TextLineReader(ReaderBase):
    def __init__(self, skip_header_lines=None, name=None):
        super().__init__(reader_ops.text_line_reader(skip_header_lines or 0, name))


class WholeFileReader(ReaderBase):
    def __init__(self, name=None):
        super().__init__(reader_ops.whole_file_reader(name))


class FixedLengthRecordReader(ReaderBase):
    def __init__(self, record_bytes, header_bytes=None, footer_bytes=None, hop_bytes=None,
                 name=None, encoding=None):  # fmt: skip
        super().__init__(reader_ops.fixed_length_record_reader(
            record_bytes, header_bytes or 0, footer_bytes or 0, hop_bytes or 0, encoding or "",
            name))  # fmt: skip


class TFRecordCompressionType:
    NONE, ZLIB, GZIP = 0, 1, 2


class TFRecordOptions:
    def __init__(self, compression_type=None):
        self.compression_type = {None: "", 0: "", 1: "ZLIB", 2: "GZIP"}.get(
            compression_type, compression_type
        )


# -- tf.random ------------------------------------------------------------------------------------


def stateless_uniform(shape, seed, minval=0, maxval=None, dtype=dtypes.float32, name=None):
    dtype = dtypes.as_dtype(dtype)
    if dtype.is_integer:
        if maxval is None:
            raise ValueError("stateless_uniform with an integer dtype needs maxval")
        return stateless_random_ops.stateless_random_uniform_int(shape, seed, minval, maxval,
                                                                 dtype, name)  # fmt: skip
    u = stateless_random_ops.stateless_random_uniform(shape, seed, dtype, name)
    lo = convert_to_tensor(minval, dtype=dtype)
    hi = convert_to_tensor(1 if maxval is None else maxval, dtype=dtype)
    return u * (hi - lo) + lo


def stateless_normal(shape, seed, mean=0.0, stddev=1.0, dtype=dtypes.float32, name=None):
    z = stateless_random_ops.stateless_random_normal(shape, seed, dtype, name)
    return z * convert_to_tensor(stddev, dtype=dtype) + convert_to_tensor(mean, dtype=dtype)


def stateless_truncated_normal(shape, seed, mean=0.0, stddev=1.0, dtype=dtypes.float32,
                               name=None):  # fmt: skip
    z = stateless_random_ops.stateless_truncated_normal(shape, seed, dtype, name)
    return z * convert_to_tensor(stddev, dtype=dtype) + convert_to_tensor(mean, dtype=dtype)


def _seeds(seed):
    s1, s2 = get_seed(seed)
    return {"seed": s1 or 0, "seed2": s2 or 0}


def random_gamma(shape, alpha, beta=None, dtype=dtypes.float32, seed=None, name=None):
    """Gamma(alpha, beta) samples of shape shape + broadcast(alpha, beta).shape (RandomGamma,
    divided by beta)."""
    dtype = dtypes.as_dtype(dtype)
    shape = convert_to_tensor(shape, dtype=dtypes.int32, name="shape")
    alpha = convert_to_tensor(alpha, dtype=dtype, name="alpha")
    if beta is not None:
        beta = convert_to_tensor(beta, dtype=dtype, name="beta")
        alpha = alpha + array_ops.zeros_like(beta)
    g = get_default_graph().create_op("RandomGamma", [shape, alpha], _seeds(seed),
                                      name=name or "random_gamma").outputs[0]  # fmt: skip
    return g if beta is None else g / beta


def random_poisson(lam, shape, dtype=dtypes.float32, seed=None, name=None):
    """TF1's tf.random.poisson(lam, shape): samples of shape shape + lam.shape (RandomPoissonV2)."""
    lam = convert_to_tensor(lam, name="lam")
    shape = convert_to_tensor(shape, dtype=dtypes.int32, name="shape")
    attrs = {**_seeds(seed), "dtype": dtypes.as_dtype(dtype)}
    return get_default_graph().create_op("RandomPoissonV2", [shape, lam], attrs,
                                         name=name or "random_poisson").outputs[0]  # fmt: skip


# -- tf.math --------------------------------------------------------------------------------------
