"""TF1's `tf.nn` convolution and pooling names that compose rill's Conv/Pool ops: the 3-D ones
under their tf.nn names, the N-D dispatchers (`convolution`, `pool`, `max_pool_v2`,
`avg_pool_v2`), the transposed convolutions, and the space-to-batch helpers that dilated pooling
is built on (`with_space_to_batch`, `required_space_to_batch_paddings`, `space_to_batch`)."""

from __future__ import annotations

import numpy as np

import rill.graph as rg
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.nn import avg_pool, avg_pool1d, conv1d, conv2d, max_pool, max_pool1d
from rill.graph.ops import image_ops, pool_extra_ops, volume_ops

__all__ = [
    "atrous_conv2d_transpose",
    "avg_pool3d",
    "avg_pool_v2",
    "batch_to_space",
    "conv1d_transpose",
    "conv3d",
    "conv3d_backprop_filter_v2",
    "conv3d_transpose",
    "convolution",
    "depth_to_space",
    "max_pool3d",
    "max_pool_v2",
    "max_pool_with_argmax",
    "pool",
    "required_space_to_batch_paddings",
    "space_to_batch",
    "space_to_depth",
    "with_space_to_batch",
]


def _either(new, new_name: str, old, old_name: str):
    """TensorFlow's deprecated_argument_lookup: one of two spellings of an argument."""
    if new is not None and old is not None:
        raise ValueError(f"Cannot specify both '{new_name}' and '{old_name}'")
    return new if new is not None else old


def _sequence(value, n: int, channel_index: int, name: str) -> list[int]:
    """TensorFlow's _get_sequence: an int or n or n + 2 ints as n + 2 ints, 1 at batch and
    channel."""
    if value is None:
        value = [1]
    elif isinstance(value, (int, np.integer)):
        value = [int(value)]
    value = [int(v) for v in value]
    if len(value) == n + 2:
        return value
    if len(value) == 1:
        value = value * n
    elif len(value) != n:
        raise ValueError(f"{name} should be of length 1, {n} or {n + 2}. Received: {name}={value}")
    full = [1] * (n + 2)
    start = 1 if channel_index != 1 else 2
    full[start : start + n] = value
    return full


def _rank(x: Tensor, what: str) -> int:
    if x.shape.rank is None:
        raise ValueError(f"{what} needs an input of known rank; got shape {x.shape}")
    return x.shape.rank


# -- 3-D convolution and pooling ----------------------------------------------------------------


def conv3d(input, filter=None, strides=None, padding=None, data_format="NDHWC",  # noqa: A002
           dilations=(1, 1, 1, 1, 1), name=None, filters=None) -> Tensor:  # fmt: skip
    """`tf.nn.conv3d`: 3-D cross-correlation of [batch, depth, height, width, channels] with
    filter [depth, height, width, in_channels, out_channels] (Conv3D)."""
    filter = _either(filters, "filters", filter, "filter")
    if filter is None or strides is None or padding is None:
        raise ValueError("conv3d needs filter, strides and padding")
    return volume_ops.conv3d(input, filter, strides, padding, data_format, dilations, name=name)


def max_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None) -> Tensor:  # noqa: A002
    """`tf.nn.max_pool3d`: the maximum of each 3-D window (MaxPool3D); ksize and strides are 5
    ints, or 1 or 3 ints for the spatial dimensions."""
    ci = 1 if data_format.startswith("NC") else 4
    ksize, strides = _sequence(ksize, 3, ci, "ksize"), _sequence(strides, 3, ci, "strides")
    return volume_ops.max_pool3d(input, ksize, strides, padding, data_format, name=name)


def avg_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None) -> Tensor:  # noqa: A002
    """`tf.nn.avg_pool3d`: the mean of each 3-D window (AvgPool3D)."""
    ci = 1 if data_format.startswith("NC") else 4
    ksize, strides = _sequence(ksize, 3, ci, "ksize"), _sequence(strides, 3, ci, "strides")
    return volume_ops.avg_pool3d(input, ksize, strides, padding, data_format, name=name)


def _sizes(value) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, rg.TensorShape):
        value = value.as_list()
    return convert_to_tensor(np.asarray(value, np.int32), name="sizes")


def conv3d_transpose(value, filter=None, output_shape=None, strides=None, padding="SAME",
                     data_format="NDHWC", name=None, input=None, filters=None,  # noqa: A002
                     dilations=None) -> Tensor:  # fmt: skip
    """`tf.nn.conv3d_transpose`: the gradient of conv3d with respect to its input
    (Conv3DBackpropInputV2); filter is [depth, height, width, output_channels, in_channels].

    Raises:
        ValueError: value's channels differ from filter's in_channels, or output_shape is not
            5 long.
    """
    value = _either(input, "input", value, "value")
    filter = _either(filters, "filters", filter, "filter")
    if value is None or filter is None or output_shape is None or strides is None:
        raise ValueError("conv3d_transpose needs value, filter, output_shape and strides")
    g = get_default_graph()
    with g.name_scope(name or "conv3d_transpose") as scope:
        value = convert_to_tensor(value, name="value")
        filter = convert_to_tensor(filter, name="filter")
        ci = 1 if data_format.startswith("NC") else 4
        in_depth = value.shape.dims[ci] if value.shape.rank == 5 else None
        f_in = filter.shape.dims[4] if filter.shape.rank == 5 else None
        if in_depth is not None and f_in is not None and in_depth != f_in:
            raise ValueError(
                f"input channels ({in_depth}) do not match the filter's in_channels ({f_in})"
            )
        if not isinstance(output_shape, Tensor) and len(list(output_shape)) != 5:
            raise ValueError(f"output_shape must have 5 elements, got {list(output_shape)}")
        attrs = {
            "strides": _sequence(strides, 3, ci, "strides"),
            "dilations": _sequence(dilations, 3, ci, "dilations"),
            "padding": padding,
            "data_format": data_format,
        }
        op = g.create_op(
            "Conv3DBackpropInputV2", [_sizes(output_shape), filter, value], attrs, name=scope
        )
        return op.outputs[0]


def conv3d_backprop_filter_v2(input, filter_sizes, out_backprop, strides, padding,  # noqa: A002
                              data_format="NDHWC", dilations=(1, 1, 1, 1, 1),
                              name=None) -> Tensor:  # fmt: skip
    """`tf.nn.conv3d_backprop_filter_v2`: conv3d's gradient with respect to its filter, of
    shape filter_sizes (Conv3DBackpropFilterV2)."""
    attrs = {"strides": [int(s) for s in strides], "padding": padding,
             "data_format": data_format, "dilations": [int(d) for d in dilations]}  # fmt: skip
    inputs = [input, _sizes(filter_sizes), out_backprop]
    op = get_default_graph().create_op(
        "Conv3DBackpropFilterV2", inputs, attrs, name=name or "Conv3DBackpropFilterV2"
    )
    return op.outputs[0]


def conv1d_transpose(input, filters, output_shape, strides, padding="SAME",  # noqa: A002
                     data_format="NWC", dilations=None, name=None) -> Tensor:  # fmt: skip
    """`tf.nn.conv1d_transpose`: the gradient of conv1d with respect to its input, computed as
    conv2d's over an inserted height of 1; filters is [width, output_channels, in_channels].

    Raises:
        ValueError: data_format is not NWC or NCW, or output_shape is not 3 long.
    """
    if data_format not in ("NWC", "NCW"):
        raise ValueError(f"data_format must be 'NWC' or 'NCW'. Received: data_format={data_format}")
    g = get_default_graph()
    with g.name_scope(name or "conv1d_transpose") as scope:
        spatial = 1 if data_format == "NWC" else 2
        fmt = "NHWC" if data_format == "NWC" else "NCHW"
        ci = 2 if data_format == "NWC" else 1
        strides = [1] + _sequence(strides, 1, ci, "strides")
        dilations = [1] + _sequence(dilations, 1, ci, "dilations")
        if isinstance(output_shape, Tensor):
            out4 = rg.concat([output_shape[:spatial], [1], output_shape[spatial:]], 0)
        else:
            dims = [int(d) for d in np.asarray(output_shape).reshape(-1)]
            if len(dims) != 3:
                raise ValueError(f"output_shape must have 3 elements, got {dims}")
            out4 = dims[:spatial] + [1] + dims[spatial:]
        x = rg.expand_dims(input, spatial)
        w = rg.expand_dims(filters, 0)
        y = rg.conv2d_backprop_input(
            _sizes(out4), w, x, strides, padding, data_format=fmt, dilations=dilations
        )
        return rg.squeeze(y, [spatial], name=scope)


def atrous_conv2d_transpose(value, filters, output_shape, rate, padding, name=None) -> Tensor:
    """`tf.nn.atrous_conv2d_transpose`: the transpose of atrous_conv2d, i.e. conv2d's input
    gradient at stride 1 with the filter dilated by `rate` (NHWC).

    Raises:
        ValueError: rate < 1, padding not SAME/VALID, or channels that do not match.
    """
    if int(rate) < 1:
        raise ValueError(f"rate {rate} cannot be less than one")
    if padding not in ("SAME", "VALID"):
        raise ValueError(f"padding must be either VALID or SAME: {padding}")
    g = get_default_graph()
    with g.name_scope(name or "atrous_conv2d_transpose") as scope:
        value = convert_to_tensor(value, name="value")
        filters = convert_to_tensor(filters, name="filters")
        if value.shape.rank == 4 and filters.shape.rank == 4:
            v, f = value.shape.dims[3], filters.shape.dims[3]
            if v is not None and f is not None and v != f:
                raise ValueError(
                    f"value's input channels ({v}) do not match filters' in_channels ({f})"
                )
        static = None
        if not isinstance(output_shape, Tensor):
            static = [int(d) for d in np.asarray(output_shape).reshape(-1)]
            if len(static) != 4:
                raise ValueError(f"output_shape must have shape (4,), got {static}")
            f_out = filters.shape.dims[2] if filters.shape.rank == 4 else None
            if f_out is not None and f_out != static[3]:
                raise ValueError(
                    f"output_shape[3] ({static[3]}) does not match filters' output channels "
                    f"({f_out})"
                )
        out = rg.conv2d_backprop_input(
            _sizes(output_shape), filters, value, [1, 1, 1, 1], padding,
            dilations=[1, int(rate), int(rate), 1], name=scope,
        )  # fmt: skip
        if static is not None:
            out.set_shape(rg.TensorShape(static))
        return out


# -- N-D dispatch -------------------------------------------------------------------------------


def convolution(input, filter=None, padding=None, strides=None, dilation_rate=None,  # noqa: A002
                name=None, data_format=None, filters=None, dilations=None) -> Tensor:  # fmt: skip
    """`tf.nn.convolution`: 1-, 2- or 3-D convolution chosen by the filter's rank (conv1d,
    conv2d or conv3d); strides and dilation_rate are an int or one per spatial dimension.

    Raises:
        ValueError: a filter of rank other than 3, 4 or 5, or both spellings of an argument.
    """
    filter = _either(filters, "filters", filter, "filter")
    dilation_rate = _either(dilations, "dilations", dilation_rate, "dilation_rate")
    if filter is None or padding is None:
        raise ValueError("convolution needs filter and padding")
    g = get_default_graph()
    with g.name_scope(name or "convolution") as scope:
        input = convert_to_tensor(input, name="input")  # noqa: A001
        filter = convert_to_tensor(filter, name="filter")
        n = filter.shape.rank - 2 if filter.shape.rank is not None else None
        if n is None:
            n = _rank(input, "convolution") - 2
        if n not in (1, 2, 3):
            raise ValueError(
                f"`filters` must have rank 3, 4 or 5 (1-, 2- or 3-D convolution). Received: "
                f"filters.shape={filter.shape}"
            )
        channels_first = data_format is not None and data_format.startswith("NC")
        ci = 1 if channels_first else n + 1
        strides = _sequence(strides, n, ci, "strides")
        dilation_rate = _sequence(dilation_rate, n, ci, "dilations")
        if n == 1:
            return conv1d(input, filter, strides[2 if channels_first else 1], padding,
                          data_format=data_format or "NWC", name=scope,
                          dilations=dilation_rate[2 if channels_first else 1])  # fmt: skip
        if n == 2:
            return conv2d(input, filter, strides, padding, data_format or "NHWC",
                          dilations=dilation_rate, name=scope)  # fmt: skip
        return volume_ops.conv3d(input, filter, strides, padding, data_format or "NDHWC",
                                 dilation_rate, name=scope)  # fmt: skip


def _pool_nd(kind: str, input, ksize, strides, padding, data_format, name) -> Tensor:  # noqa: A002
    input = convert_to_tensor(input, name="input")  # noqa: A001
    if input.shape.rank is not None:
        n = input.shape.rank - 2
    elif data_format is not None:
        n = len(data_format) - 2
    else:
        raise ValueError(
            "`input` must have a static shape or a data format must be given. Received: "
            f"input.shape={input.shape} and data_format={data_format}"
        )
    if not 1 <= n <= 3:
        raise ValueError(
            f"`input.shape.rank` must be 3, 4 or 5. Received: input.shape={input.shape} of "
            f"rank {n + 2}."
        )
    ci = n + 1 if data_format is None or not data_format.startswith("NC") else 1
    ksize, strides = _sequence(ksize, n, ci, "ksize"), _sequence(strides, n, ci, "strides")
    if n == 1:
        fn = max_pool1d if kind == "MAX" else avg_pool1d
        return fn(input, ksize, strides, padding, data_format or "NWC", name=name)
    if n == 2:
        fn = max_pool if kind == "MAX" else avg_pool
        return fn(input, ksize, strides, padding, data_format or "NHWC", name=name)
    fn = volume_ops.max_pool3d if kind == "MAX" else volume_ops.avg_pool3d
    return fn(input, ksize, strides, padding, data_format or "NDHWC", name=name)


def max_pool_v2(input, ksize, strides, padding, data_format=None, name=None) -> Tensor:  # noqa: A002
    """`tf.nn.max_pool_v2` (TF2's max_pool): max pooling over 1, 2 or 3 spatial dimensions,
    chosen by the input's rank; ksize and strides are an int, N or N + 2 ints."""
    return _pool_nd("MAX", input, ksize, strides, padding, data_format, name)


def avg_pool_v2(input, ksize, strides, padding, data_format=None, name=None) -> Tensor:  # noqa: A002
    """`tf.nn.avg_pool_v2` (TF2's avg_pool): average pooling over 1, 2 or 3 spatial dimensions."""
    return _pool_nd("AVG", input, ksize, strides, padding, data_format, name)


def max_pool_with_argmax(input, ksize, strides, padding, data_format="NHWC",  # noqa: A002
                         Targmax=None, name=None, output_dtype=None,  # noqa: N803 - TF's name
                         include_batch_in_index=False):  # fmt: skip
    """`tf.nn.max_pool_with_argmax` of TF1: (max pooled values, flattened argmax indices),
    the indices int64 unless Targmax/output_dtype says int32.

    Raises:
        ValueError: data_format other than NHWC.
    """
    if data_format != "NHWC":
        raise ValueError("Data formats other than 'NHWC' are not yet supported")
    dtype = _either(output_dtype, "output_dtype", Targmax, "Targmax") or rg.int64
    ksize, strides = _sequence(ksize, 2, 3, "ksize"), _sequence(strides, 2, 3, "strides")
    return pool_extra_ops.max_pool_with_argmax(
        input, ksize, strides, padding, include_batch_in_index, dtype, name=name
    )


# -- space to batch -----------------------------------------------------------------------------


def required_space_to_batch_paddings(input_shape, block_shape, base_paddings=None, name=None):
    """`tf.required_space_to_batch_paddings`: (paddings, crops) such that input_shape padded by
    base_paddings plus paddings' extra end is divisible by block_shape, and crops removes that
    extra again after batch_to_space."""
    g = get_default_graph()
    with g.name_scope(name or "required_space_to_batch_paddings"):
        input_shape = rg.cast(convert_to_tensor(input_shape, name="input_shape"), rg.int32)
        block_shape = rg.cast(convert_to_tensor(block_shape, name="block_shape"), rg.int32)
        num_block_dims = block_shape.shape.dims[0] if block_shape.shape.rank == 1 else None
        if num_block_dims is None:
            raise ValueError(f"block_shape must be a vector of known length, got {block_shape}")
        if base_paddings is None:
            base_paddings = np.zeros([num_block_dims, 2], np.int32)
        base_paddings = rg.cast(convert_to_tensor(base_paddings, name="base_paddings"), rg.int32)
        pad_start, orig_pad_end = base_paddings[:, 0], base_paddings[:, 1]
        full_input_shape = input_shape + pad_start + orig_pad_end
        pad_end_extra = rg.floormod(block_shape - rg.floormod(full_input_shape, block_shape),
                                    block_shape)  # fmt: skip
        pad_end = orig_pad_end + pad_end_extra
        paddings = rg.stack([pad_start, pad_end], axis=1, name="paddings")
        crops = rg.stack([rg.zeros_like(pad_end_extra), pad_end_extra], axis=1, name="crops")
        return paddings, crops


def with_space_to_batch(input, dilation_rate, padding, op, filter_shape=None,  # noqa: A002
                        spatial_dims=None, data_format=None):  # fmt: skip
    """`tf.nn.with_space_to_batch`: op(converted_input, num_spatial_dims, padding) computed at
    `dilation_rate` by moving the dilation into the batch (space_to_batch_nd, op with VALID
    padding, batch_to_space_nd); at rate 1 just op(input, num_spatial_dims, padding).

    Raises:
        ValueError: dilation_rate not a vector of positive ints, SAME padding without
            filter_shape, or spatial_dims not increasing.
    """
    input = convert_to_tensor(input, name="input")  # noqa: A001
    rate = np.asarray(dilation_rate).reshape(-1).astype(np.int64)
    num_spatial_dims = rate.size
    if num_spatial_dims == 0:
        raise ValueError("dilation_rate must be a non-empty vector")
    if np.any(rate < 1):
        raise ValueError(f"dilation_rate must be positive, got {rate.tolist()}")
    if spatial_dims is None:
        first = 2 if data_format is not None and data_format.startswith("NC") else 1
        spatial_dims = range(first, first + num_spatial_dims)
    spatial_dims = [int(d) for d in spatial_dims]
    if sorted(set(spatial_dims)) != spatial_dims or spatial_dims[0] < 1:
        raise ValueError(f"spatial_dims must be a strictly increasing list of positive ints, "
                         f"got {spatial_dims}")  # fmt: skip
    if np.all(rate == 1):
        return op(input, num_spatial_dims, padding)
    if padding == "SAME":
        if filter_shape is None:
            raise ValueError("filter_shape must be specified for SAME padding")
        fs = np.asarray(filter_shape).reshape(-1).astype(np.int64)
        extra = fs + (fs - 1) * (rate - 1) - 1
        base = np.stack([extra // 2, extra - extra // 2], axis=1)
    elif padding == "VALID":
        base = np.zeros([num_spatial_dims, 2], np.int64)
    else:
        raise ValueError(f"Invalid padding method {padding!r}")
    shape = rg.shape(input)
    in_spatial = rg.stack([shape[d] for d in spatial_dims])
    paddings, crops = required_space_to_batch_paddings(in_spatial, rate, base)
    # SpaceToBatchND blocks dimensions 1..M: the ones between that are not spatial get block 1
    # and no padding.
    blocks, pads, cuts = [], [], []
    where = {d: i for i, d in enumerate(spatial_dims)}
    for d in range(1, spatial_dims[-1] + 1):
        if d in where:
            blocks.append(int(rate[where[d]]))
            pads.append(paddings[where[d]])
            cuts.append(crops[where[d]])
        else:
            blocks.append(1)
            pads.append(rg.zeros([2], rg.int32))
            cuts.append(rg.zeros([2], rg.int32))
    blocks = np.asarray(blocks, np.int32)
    converted = image_ops.space_to_batch_nd(input, blocks, rg.stack(pads))
    result = op(converted, num_spatial_dims, "VALID")
    return image_ops.batch_to_space_nd(result, blocks, rg.stack(cuts))


def pool(input, window_shape, pooling_type, padding, dilation_rate=None, strides=None,  # noqa: A002
         name=None, data_format=None, dilations=None) -> Tensor:  # fmt: skip
    """`tf.nn.pool`: N-D max or average pooling (N = len(window_shape), 1 to 3) with optional
    dilation (through with_space_to_batch, VALID padding only).

    Raises:
        ValueError: an unknown pooling_type, SAME padding with dilation, strides larger than the
            window, or strides > 1 with dilation > 1.
    """
    dilation_rate = _either(dilations, "dilations", dilation_rate, "dilation_rate")
    g = get_default_graph()
    with g.name_scope(name or f"{pooling_type.lower()}_pool") as scope:
        input = convert_to_tensor(input, name="input")  # noqa: A001
        n = len(window_shape)
        if not 1 <= n <= 3:
            raise ValueError(f"`len(window_shape)` must be 1, 2, or 3. Received: "
                             f"window_shape={window_shape} of length {n}")  # fmt: skip
        input.shape.with_rank(n + 2)
        strides = np.asarray([1] * n if strides is None else strides, np.int64).reshape(-1)
        rate = np.asarray([1] * n if dilation_rate is None else dilation_rate, np.int64)
        rate = rate.reshape(-1)
        if strides.size != n or rate.size != n:
            raise ValueError(f"strides and dilation_rate must have length {n} (len(window_shape))")
        if np.any(strides > 1) and np.any(rate > 1):
            raise ValueError(
                f"strides > 1 not supported in conjunction with dilation_rate > 1; got "
                f"strides={strides.tolist()} and dilation_rate={rate.tolist()}"
            )
        if padding == "SAME" and np.any(rate > 1):
            raise ValueError(
                f"pooling with 'SAME' padding is not implemented for `dilation_rate` > 1. "
                f"Received: padding={padding} and dilation_rate={rate.tolist()}"
            )
        if np.any(strides > np.asarray(window_shape)):
            raise ValueError(
                "`strides` > `window_shape` not supported due to inconsistency between CPU and "
                f"GPU implementations. Received: strides={strides.tolist()} and "
                f"window_shape={list(window_shape)}"
            )
        if pooling_type not in ("MAX", "AVG"):
            raise ValueError(f"{n}-D {pooling_type} pooling is not supported.")
        channels_first = data_format is not None and data_format.startswith("NC")
        if n == 1 and data_format not in (None, "NWC", "NCW"):
            raise ValueError(
                f"data_format must be either 'NWC' or 'NCW'. Received: data_format={data_format}"
            )
        first = 2 if channels_first else 1
        ci = 1 if channels_first else n + 1
        window = _sequence(list(window_shape), n, ci, "window_shape")
        step = _sequence(strides.tolist(), n, ci, "strides")

        def op(converted, _, converted_padding):
            return _pool_nd(pooling_type, converted, window, step, converted_padding,
                            data_format, scope)  # fmt: skip

        return with_space_to_batch(
            input, rate, padding, op, filter_shape=window_shape,
            spatial_dims=range(first, first + n),
        )  # fmt: skip


def space_to_batch(input, paddings, block_size=None, name=None, block_shape=None) -> Tensor:  # noqa: A002
    """`tf.space_to_batch` / `tf.nn.space_to_batch`: SpaceToBatchND of a 4-D input with the
    same block size for height and width."""
    block_size = _either(block_shape, "block_shape", block_size, "block_size")
    if block_size is None:
        raise ValueError("space_to_batch needs block_size")
    x = convert_to_tensor(input, name="input")
    x.shape.with_rank(4)
    blocks = np.asarray([int(block_size)] * 2, np.int64)
    return image_ops.space_to_batch_nd(x, blocks, paddings, name=name)


def batch_to_space(input, crops, block_size, name=None, block_shape=None) -> Tensor:  # noqa: A002
    """`tf.batch_to_space`: BatchToSpaceND of a 4-D input with one block size for height and
    width."""
    block_size = _either(block_shape, "block_shape", block_size, "block_size")
    if block_size is None:
        raise ValueError("batch_to_space needs block_size")
    x = convert_to_tensor(input, name="input")
    x.shape.with_rank(4)
    blocks = np.asarray([int(block_size)] * 2, np.int64)
    return image_ops.batch_to_space_nd(x, blocks, crops, name=name)


def space_to_depth(input, block_size, name=None, data_format="NHWC") -> Tensor:  # noqa: A002
    """`tf.nn.space_to_depth` with TF1's argument order (name before data_format)."""
    return image_ops.space_to_depth(input, block_size, data_format, name=name)


def depth_to_space(input, block_size, name=None, data_format="NHWC") -> Tensor:  # noqa: A002
    """`tf.nn.depth_to_space` with TF1's argument order (name before data_format)."""
    return image_ops.depth_to_space(input, block_size, data_format, name=name)
