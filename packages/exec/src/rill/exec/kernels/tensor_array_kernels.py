"""Kernels for rill.graph.ops.tensor_array_ops: per-step TensorArrays.

A TensorArray lives in the step's `ctx.step_resources` and disappears when the step ends. Each
run of a TensorArrayV3 op makes a new array, named after the op and, inside a loop, the frame and
iteration it ran in. TensorArrayGradV3 looks up or creates the gradient array of (forward array,
source), so the gradient ops of one gradient computation — run once or once per iteration of a
gradient loop — all share it.

Semantics follow TensorFlow's TensorArray:

- an element is written once; a gradient array instead adds repeated writes (the partial
  gradients of several reads of one forward element), after which it may not have gradients of
  its own;
- an element written and then read may not be written again; with clear_after_read (the default)
  it may be read only once;
- reading an element that was never written returns zeros when the element shape is fully known
  (an index a gradient never reached has a zero gradient), and fails otherwise;
- every write is checked against the element shape; with identical_element_shapes the first
  write fixes the shape of the others;
- a dynamically sized array grows on writes past its end, until a gradient array is made for it;
- flow inputs carry no data: they order the ops. Writes forward their flow input.
"""

from __future__ import annotations

import threading

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels.stack_kernels import (
    create_step_resource,
    instance_name,
    lookup_or_create_step_resource,
    lookup_step_resource,
)
from rill.exec.resources import ResourceHandle, handle_array, handle_of
from rill.graph.errors import InvalidArgumentError, UnimplementedError
from rill.graph.shapes import TensorShape

__all__ = ["TensorArray", "peek_elements"]

_ARRAYS = "_tensor_arrays"
_GRADS = "_tensor_array_grads"


class _Element:
    __slots__ = ("value", "shape", "written", "read", "cleared")

    def __init__(self):
        self.value = None  # None with written=True: zeros of `shape`, made on first read
        self.shape: tuple | None = None
        self.written = False
        self.read = False
        self.cleared = False


class TensorArray:
    """The state of one TensorArray. Every public method takes the array's lock."""

    def __init__(self, name: str, dtype, size: int, element_shape: TensorShape,
                 identical_element_shapes: bool, dynamic_size: bool, clear_after_read: bool,
                 is_grad: bool = False, marked_size: int = -1, xp=np):  # fmt: skip
        self.name = name
        self.xp = xp  # the array module of the device holding the elements
        self.dtype = dtype
        self.element_shape = element_shape
        self.identical_element_shapes = identical_element_shapes
        self.dynamic_size = dynamic_size
        self.clear_after_read = clear_after_read
        self.is_grad = is_grad  # a gradient array: repeated writes add up
        self.marked_size = marked_size  # the size after the last split (-1: none)
        self.gradients_allowed = True
        self.closed = False
        self._elements = [_Element() for _ in range(size)]
        self._lock = threading.Lock()

    def _fail(self, message: str):
        return InvalidArgumentError(f"TensorArray {self.name}: {message}")

    def _check_open(self) -> None:
        if self.closed:
            raise self._fail("has already been closed")

    # -- size ------------------------------------------------------------------------------------

    def size(self) -> int:
        with self._lock:
            self._check_open()
            return len(self._elements)

    def pack_size(self) -> int:
        """How many elements concat reads: a gradient array has its forward array's split size."""
        with self._lock:
            self._check_open()
            if self.is_grad and self.marked_size >= 0:
                return self.marked_size
            return len(self._elements)

    def set_marked_size(self, size: int) -> None:
        with self._lock:
            if not self.is_grad:
                self.marked_size = size

    def merge_element_shape(self, shape: TensorShape) -> None:
        with self._lock:
            try:
                self.element_shape = self.element_shape.merge_with(shape)
            except ValueError:
                raise self._fail(
                    f"the op expects elements of shape {shape}, but the array's elements have "
                    f"shape {self.element_shape}"
                ) from None

    # -- writing ---------------------------------------------------------------------------------

    def write(self, index: int, value) -> None:
        with self._lock:
            self._write(index, value)

    def write_many(self, indices, values) -> None:
        with self._lock:
            for i, v in zip(indices, values):
                self._write(int(i), v)

    def _write(self, index: int, value) -> None:
        self._check_open()
        n = len(self._elements)
        if index < 0 or (index >= n and not self.dynamic_size):
            grow = "" if self.dynamic_size else ", and it is not dynamically sized"
            raise self._fail(f"cannot write to index {index}: the array has size {n}{grow}")
        if index >= n:
            self._elements.extend(_Element() for _ in range(index + 1 - n))
        if value.dtype != self.dtype.np:
            raise self._fail(
                f"cannot write a {value.dtype} value to index {index}: the array holds "
                f"{self.dtype.name}"
            )
        shape = tuple(value.shape)
        if not self.element_shape.is_compatible_with(shape):
            raise self._fail(
                f"cannot write a value of shape {list(shape)} to index {index}: the elements have "
                f"shape {self.element_shape} (build the TensorArray with infer_shape=False to "
                "allow elements of different shapes)"
            )
        if self.identical_element_shapes and not self.element_shape.is_fully_defined():
            self.element_shape = TensorShape(shape)
        e = self._elements[index]
        if e.read:
            raise self._fail(f"cannot write to index {index}: it has already been read")
        if e.written and not self.is_grad:
            raise self._fail(
                f"cannot write to index {index}: it has already been written (each element of "
                "a TensorArray is written once)"
            )
        if not e.written:
            e.value, e.shape, e.written = value, shape, True
            return
        if shape != e.shape:
            raise self._fail(
                f"cannot add a value of shape {list(shape)} to index {index}, which holds shape "
                f"{list(e.shape)}"
            )
        if e.value is None or e.value.size == 0:
            e.value = value
            return
        if not (self.dtype.is_floating or self.dtype.is_integer or self.dtype.is_complex):
            raise self._fail(f"cannot add up repeated writes of {self.dtype.name} values")
        e.value = e.value + value
        self.gradients_allowed = False

    # -- reading ---------------------------------------------------------------------------------

    def read(self, index: int):
        with self._lock:
            return self._read(index)

    def read_many(self, indices) -> list:
        with self._lock:
            return [self._read(int(i)) for i in indices]

    def _read(self, index: int):
        self._check_open()
        n = len(self._elements)
        # A gradient array may be read past its end: gradients that were never written are 0.
        if index < 0 or (index >= n and not self.is_grad):
            raise self._fail(f"cannot read index {index}: the array has size {n}")
        if index >= n or not self._elements[index].written:
            self._mark_zero(index)
        e = self._elements[index]
        if e.cleared:
            raise self._fail(
                f"cannot read index {index} twice: the first read cleared it (build the "
                "TensorArray with clear_after_read=False to read elements more than once)"
            )
        if e.value is None:
            e.value = self.xp.zeros(e.shape, self.dtype.np)
        value = e.value
        if self.clear_after_read:
            e.value = None
            e.cleared = True
        e.read = True
        return value

    def peek(self) -> list:
        """The elements' values in order without reading them (nothing is marked read or
        cleared): None for an element not written, read as zeros or already cleared."""
        with self._lock:
            if self.closed:
                return []
            return [e.value if e.written else None for e in self._elements]

    def _mark_zero(self, index: int) -> None:
        """An unwritten element reads as zeros of its known shape; fails when there is none."""
        n = len(self._elements)
        known = self._elements[index].shape if index < n else None
        if known is None:
            if not self.element_shape.is_fully_defined():
                raise self._fail(
                    f"cannot read index {index}: it has not been written, and the element "
                    f"shape {self.element_shape} is not fully defined (with a fully defined "
                    "element_shape, an element never written reads as zeros)"
                )
            known = self.element_shape.dims
        if index >= n:
            self._elements.extend(_Element() for _ in range(index + 1 - n))
            for e in self._elements[n:]:
                e.shape, e.written = known, True
        e = self._elements[index]
        e.shape, e.written = known, True

    # -- other -----------------------------------------------------------------------------------

    def copy_shapes_from(self, forward: TensorArray, prepend: tuple) -> None:
        """Marks the elements `forward` has written as written here, as zeros of their shapes
        (`prepend` + the forward shape); later writes add to the zeros."""
        with self._lock, forward._lock:
            if len(self._elements) != len(forward._elements):
                raise self._fail(
                    f"has size {len(self._elements)} but its forward array {forward.name} has "
                    f"size {len(forward._elements)}"
                )
            for mine, theirs in zip(self._elements, forward._elements):
                if theirs.written:
                    mine.shape, mine.written = prepend + theirs.shape, True

    def disable_dynamic_size(self) -> None:
        with self._lock:
            self.dynamic_size = False

    def close(self) -> None:
        with self._lock:
            self._elements.clear()
            self.closed = True


def _lookup(ctx, value) -> TensorArray:
    return lookup_step_resource(ctx, value, "TensorArray", (_ARRAYS, _GRADS))


def peek_elements(ctx, handle) -> list:
    """The values of the TensorArray that `handle` names, in order, without reading them (see
    TensorArray.peek): what a loop that reads one element per iteration will read."""
    return _lookup(ctx, handle).peek()


def _check_dtype(ta: TensorArray, dtype, verb: str) -> None:
    if ta.dtype is not dtype:
        raise InvalidArgumentError(
            f"TensorArray {ta.name} holds {ta.dtype.name} elements, but the op {verb} {dtype.name}"
        )


def _scalar(value, what: str) -> int:
    if np.ndim(value) != 0:
        raise InvalidArgumentError(f"{what} must be a scalar, got shape {list(np.shape(value))}")
    return int(value)


def _vector(value, what: str) -> np.ndarray:
    if np.ndim(value) != 1:
        raise InvalidArgumentError(f"{what} must be a vector, got shape {list(np.shape(value))}")
    return np.asarray(value)


def _zero_flow() -> np.ndarray:
    return np.zeros((), np.float32)


def _device_zero_flow(device):
    """On an accelerator, the flow value made once in its memory (None on a CPU: a fresh one
    each call)."""
    return None if device.device_type == "CPU" else device.from_host(_zero_flow())


# -- creation ------------------------------------------------------------------------------------


@register_kernel("TensorArrayV3", context=True)
def tensor_array_v3(dtype, element_shape, dynamic_size, clear_after_read,
                    identical_element_shapes, tensor_array_name, node, device):  # fmt: skip
    base = tensor_array_name or node.name
    zero_flow = _device_zero_flow(device)

    def compute(ctx, size):
        n = _scalar(size, "size")
        if n < 0:
            raise InvalidArgumentError(f"size must be >= 0, got {n}")
        key, name = instance_name(node.name, ctx), instance_name(base, ctx)
        create_step_resource(
            ctx, _ARRAYS, key,
            lambda: TensorArray(name, dtype, n, element_shape, identical_element_shapes,
                                dynamic_size, clear_after_read, xp=device.xp),
        )  # fmt: skip
        handle = ResourceHandle(device.name, _ARRAYS, key, "TensorArray", dtype)
        return handle_array(handle), zero_flow if zero_flow is not None else _zero_flow()

    return compute


def _grad_kernel(source: str, device, with_shape: bool):
    zero_flow = _device_zero_flow(device)

    def compute(ctx, handle, flow_in, shape_to_prepend=None):
        h = handle_of(handle)
        if h.container != _ARRAYS:
            raise InvalidArgumentError(
                f"a gradient TensorArray is made from a forward TensorArray handle, got {h!r}"
            )
        forward = _lookup(ctx, handle)
        # Once gradients are taken, the forward array may no longer grow.
        forward.disable_dynamic_size()
        size = forward.size()
        if not forward.gradients_allowed:
            raise InvalidArgumentError(
                f"cannot make a gradient TensorArray for {forward.name}: it summed repeated "
                "writes to one index, and such an array has no gradient"
            )
        prepend = ()
        elem = forward.element_shape
        if with_shape:
            prepend = tuple(int(d) for d in _vector(shape_to_prepend, "shape_to_prepend"))
            elem = TensorShape(prepend).concatenate(elem)
        key = f"{h.name}@{source}"

        def make():
            g = TensorArray(f"{forward.name}@{source}", forward.dtype, size, elem,
                            forward.identical_element_shapes, dynamic_size=False,
                            clear_after_read=True, is_grad=True,
                            marked_size=forward.marked_size, xp=forward.xp)  # fmt: skip
            g.copy_shapes_from(forward, prepend)
            return g

        g = lookup_or_create_step_resource(ctx, _GRADS, key, make)
        out = handle_array(ResourceHandle(device.name, _GRADS, key, "TensorArray", g.dtype))
        return out, zero_flow if zero_flow is not None else _zero_flow()

    return compute


@register_kernel("TensorArrayGradV3", context=True)
def tensor_array_grad_v3(source, device):
    return _grad_kernel(source, device, with_shape=False)


@register_kernel("TensorArrayGradWithShape", context=True)
def tensor_array_grad_with_shape(source, device):
    return _grad_kernel(source, device, with_shape=True)


# -- element access ------------------------------------------------------------------------------


@register_kernel("TensorArrayWriteV3", context=True)
def tensor_array_write_v3(T):
    def compute(ctx, handle, index, value, flow_in):
        i = _scalar(index, "index")
        ta = _lookup(ctx, handle)
        _check_dtype(ta, T, "writes")
        ta.write(i, value)
        return flow_in

    return compute


@register_kernel("TensorArrayReadV3", context=True)
def tensor_array_read_v3(dtype):
    def compute(ctx, handle, index, flow_in):
        i = _scalar(index, "index")
        ta = _lookup(ctx, handle)
        _check_dtype(ta, dtype, "reads")
        return ta.read(i)

    return compute


@register_kernel("TensorArrayGatherV3", context=True)
def tensor_array_gather_v3(dtype, element_shape, device):
    xp = device.xp

    def compute(ctx, handle, indices, flow_in):
        ta = _lookup(ctx, handle)
        _check_dtype(ta, dtype, "reads")
        ta.merge_element_shape(element_shape)
        idx = _vector(indices, "indices")
        if idx.size == 0:
            # TensorFlow shapes the empty result from the op's element_shape attr alone; the
            # array's shape merged with it is at least as specific, and never contradicts it.
            elem = ta.element_shape
            if not elem.is_fully_defined():
                raise UnimplementedError(
                    f"TensorArray {ta.name}: gathering no elements needs a fully defined "
                    f"element shape to shape the empty result, but it is {elem}"
                )
            return xp.zeros((0, *elem.dims), dtype.np)
        values = ta.read_many(idx)
        first = values[0].shape
        for k, v in enumerate(values):
            if v.shape != first:
                raise InvalidArgumentError(
                    f"TensorArray {ta.name} has elements of different shapes: index "
                    f"{int(idx[0])} has shape {list(first)}, index {int(idx[k])} has shape "
                    f"{list(v.shape)}"
                )
        return xp.stack(values)

    return compute


@register_kernel("TensorArrayScatterV3", context=True)
def tensor_array_scatter_v3(T, device):
    xp = device.xp

    def compute(ctx, handle, indices, value, flow_in):
        ta = _lookup(ctx, handle)
        _check_dtype(ta, T, "writes")
        idx = _vector(indices, "indices")
        if np.ndim(value) == 0:
            raise InvalidArgumentError(
                "value must be at least a vector (one row per index), got a scalar"
            )
        if idx.size != value.shape[0]:
            raise InvalidArgumentError(
                f"{idx.size} indices but value has {value.shape[0]} rows (shape "
                f"{list(value.shape)})"
            )
        if idx.size:
            top, size = int(idx.max()), ta.size()
            if top >= size and not ta.dynamic_size:
                raise InvalidArgumentError(
                    f"TensorArray {ta.name}: scatter index {top} is out of range for an array "
                    f"of size {size}"
                )
        # The rows are copied, in one copy of the value: an element must not alias the input
        # (which its producer may reuse), and every row is an element (so the copy holds no
        # row that no element refers to); the copy lives while any element does.
        rows = xp.array(value)
        ta.write_many(idx, [rows[k] for k in range(idx.size)])
        return flow_in

    return compute


@register_kernel("TensorArrayConcatV3", context=True)
def tensor_array_concat_v3(dtype, element_shape_except0, device):
    xp = device.xp

    def compute(ctx, handle, flow_in):
        ta = _lookup(ctx, handle)
        _check_dtype(ta, dtype, "reads")
        n = ta.pack_size()
        if n == 0:
            if not element_shape_except0.is_fully_defined():
                raise UnimplementedError(
                    f"TensorArray {ta.name} is empty, and concatenating no elements needs a "
                    f"fully defined element_shape_except0, but it is {element_shape_except0}"
                )
            return xp.zeros((0, *element_shape_except0.dims), dtype.np), np.zeros(0, np.int64)
        values = ta.read_many(range(n))
        rest = None
        for k, v in enumerate(values):
            if v.ndim == 0:
                raise InvalidArgumentError(
                    f"TensorArray {ta.name}: concat needs elements of rank >= 1, but index {k} "
                    "is a scalar (stack() joins scalars)"
                )
            if rest is None:
                rest = v.shape[1:]
                if not element_shape_except0.is_compatible_with(rest):
                    raise InvalidArgumentError(
                        f"TensorArray {ta.name}: element_shape_except0 is "
                        f"{element_shape_except0}, but index 0 has shape {list(v.shape)}"
                    )
            elif v.shape[1:] != rest:
                raise InvalidArgumentError(
                    f"TensorArray {ta.name} has elements of different shapes past dimension 0: "
                    f"index 0 has [?]+{list(rest)}, index {k} has shape {list(v.shape)}"
                )
        lengths = np.array([v.shape[0] for v in values], np.int64)
        return xp.concatenate(values), lengths

    return compute


@register_kernel("TensorArraySplitV3", context=True)
def tensor_array_split_v3(T, device):
    xp = device.xp

    def compute(ctx, handle, value, lengths, flow_in):
        ta = _lookup(ctx, handle)
        lens = _vector(lengths, "lengths").astype(np.int64)
        if np.ndim(value) == 0:
            raise InvalidArgumentError("value must be at least a vector, got a scalar")
        if (lens < 0).any():
            raise InvalidArgumentError(f"lengths must be >= 0, got {lens.tolist()}")
        total = int(lens.sum())
        if total != value.shape[0]:
            raise InvalidArgumentError(
                f"the lengths add up to {total}, but value has {value.shape[0]} rows (shape "
                f"{list(value.shape)})"
            )
        size, n = ta.size(), lens.size
        if ta.dynamic_size and size < n:
            size = n
        if size != n:
            raise InvalidArgumentError(
                f"TensorArray {ta.name} has size {size} but lengths has {n} entries, and the "
                "array is not dynamically sized"
            )
        _check_dtype(ta, T, "writes")
        ends = np.cumsum(lens)
        pieces = [xp.array(value[e - k : e]) for k, e in zip(lens.tolist(), ends.tolist())]
        ta.set_marked_size(n)
        ta.write_many(range(n), pieces)
        return flow_in

    return compute


@register_kernel("TensorArraySizeV3", context=True)
def tensor_array_size_v3():
    def compute(ctx, handle, flow_in):
        return np.array(_lookup(ctx, handle).size(), np.int32)

    return compute


@register_kernel("TensorArrayCloseV3", context=True)
def tensor_array_close_v3():
    def compute(ctx, handle):
        _lookup(ctx, handle).close()

    return compute
