"""Graph, Operation and Tensor: the dataflow graph that every rill package shares.

>>> g = Graph()
>>> with g.as_default():
...     x = placeholder("float32", [None, 3], name="x")
...     y = x * 2.0
>>> print(g)
%x: f32[?,3] = Placeholder(shape=[?,3])
%mul/y: f32[] = Const(value=2.0)
%mul: f32[?,3] = Mul(%x, %mul/y)
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from rill.graph import dtypes
from rill.graph.device import DeviceSpec, canonical_device
from rill.graph.dtypes import DType
from rill.graph.errors import GraphTypeError, GraphValueError
from rill.graph.op_def import OpDef, check_attr_value, get_op_def
from rill.graph.shapes import TensorShape, as_shape

__all__ = [
    "Graph",
    "Operation",
    "Tensor",
    "convert_to_tensor",
    "get_default_graph",
    "reset_default_graph",
    "placeholder",
    "constant",
]

_VALID_OP_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/>]*$")
_VALID_SCOPE_NAME = re.compile(r"^[A-Za-z0-9_.\-/>]*$")

# Source files under these directories are library code; the first frame outside them is the
# user's line recorded on each op.
_LIB_DIRS: tuple[str, ...] = ()


def _library_dirs() -> tuple[str, ...]:
    global _LIB_DIRS
    if not _LIB_DIRS:
        # Every installed rill package (they share the `rill` namespace across src trees).
        dirs = [os.path.join(os.path.abspath(p), "") for p in sys.modules["rill"].__path__]
        dirs.append(os.path.join(os.path.dirname(contextlib.__file__), ""))
        _LIB_DIRS = tuple(dirs)
    return _LIB_DIRS


def _user_source() -> tuple[str, int, str]:
    lib = _library_dirs()
    f = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(lib) and not fn.startswith("<frozen"):
            return (fn, f.f_lineno, f.f_code.co_name)
        f = f.f_back
    return ("<unknown>", 0, "<unknown>")


class Tensor:
    """A symbolic handle to output `value_index` of `op`, with a dtype and a static shape."""

    __slots__ = ("op", "value_index", "dtype", "_shape", "_consumers", "__weakref__")
    # Make numpy defer to our reflected operators (np.float32(2) * t builds a Mul).
    __array_priority__ = 100
    __array_ufunc__ = None

    def __init__(self, op: Operation, value_index: int, dtype: DType, shape: TensorShape):
        self.op = op
        self.value_index = value_index
        self.dtype = dtype
        self._shape = shape
        self._consumers: list[Operation] = []

    @property
    def graph(self) -> Graph:
        return self.op.graph

    @property
    def name(self) -> str:
        return f"{self.op.name}:{self.value_index}"

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    def set_shape(self, shape) -> None:
        """Refines the static shape; ValueError when incompatible with what is known."""
        try:
            self._shape = self._shape.merge_with(as_shape(shape))
        except ValueError as e:
            raise GraphValueError(
                f"cannot set the shape of {self.name} to {as_shape(shape)}: {e}"
            ) from None

    @property
    def device(self) -> str:
        return self.op.device

    def consumers(self) -> list[Operation]:
        return list(self._consumers)

    def eval(self, feed_dict=None, session=None):
        session = session or get_default_session()
        if session is None:
            raise ValueError("no session: pass session= or use `with sess.as_default():`")
        return session.run(self, feed_dict)

    def __repr__(self) -> str:
        return f"<Tensor {self.name!r} {self.dtype.short}{self._shape}>"

    def __bool__(self):
        raise TypeError(
            f"the truth value of symbolic tensor {self.name} is not known while building the "
            "graph; use rill.graph.cond / while_loop for data-dependent control flow"
        )

    def __iter__(self):
        rank = self._shape.rank
        if rank is None or rank == 0 or self._shape[0] is None:
            raise TypeError(f"cannot iterate over {self!r}: its first dimension is not known")
        from rill.graph.ops import array_ops

        return iter(array_ops.unstack(self, num=self._shape[0]))

    def __len__(self):
        raise TypeError(f"len() is not supported on symbolic tensor {self.name}; use .shape")

    __hash__ = object.__hash__

    @classmethod
    def _override_operator(cls, name: str, fn: Callable) -> None:
        setattr(cls, name, fn)


class Operation:
    """A node of the graph: a named, typed application of an op to tensors and attrs."""

    __slots__ = (
        "graph",
        "name",
        "type",
        "op_def",
        "_inputs",
        "_control_inputs",
        "_control_outputs",
        "attrs",
        "_device",
        "outputs",
        "source",
        "_control_flow_context",
        "_id",
        "__weakref__",
    )

    def __init__(self, graph, name, op_def, inputs, control_inputs, attrs, out_types, source):
        self.graph = graph
        self.name = name
        self.type = op_def.name
        self.op_def = op_def
        self._inputs = list(inputs)
        self._control_inputs = list(control_inputs)
        self._control_outputs: list[Operation] = []
        self.attrs = attrs
        self._device = ""
        self.outputs = [Tensor(self, i, t, _UNKNOWN) for i, t in enumerate(out_types)]
        self.source = source
        self._control_flow_context = None
        self._id = -1

    @property
    def inputs(self) -> list[Tensor]:
        return list(self._inputs)

    @property
    def control_inputs(self) -> list[Operation]:
        return list(self._control_inputs)

    @property
    def device(self) -> str:
        return self._device

    @property
    def node_def(self):
        from rill.graph.graph_def import op_to_node_def

        return op_to_node_def(self)

    @property
    def values(self) -> list[Tensor]:
        return list(self.outputs)

    def output(self, i: int = 0) -> Tensor:
        return self.outputs[i]

    def get_attr(self, name: str):
        try:
            return self.attrs[name]
        except KeyError:
            raise ValueError(f"op {self.name!r} ({self.type}) has no attr {name!r}") from None

    def colocation_groups(self) -> list[str]:
        groups = [s[5:] for s in self.attrs.get("_class", ()) if s.startswith("loc:@")]
        return groups or [self.name]

    def run(self, feed_dict=None, session=None):
        session = session or get_default_session()
        if session is None:
            raise ValueError("no session: pass session= or use `with sess.as_default():`")
        session.run(self, feed_dict)

    def _set_device(self, device) -> None:
        self._device = canonical_device(device) if isinstance(device, str) else str(device or "")

    def _set_attr(self, name: str, value) -> None:
        self.attrs[name] = value

    def _update_input(self, index: int, tensor: Tensor) -> None:
        """Rewires input `index` (used to close loops and by graph rewrites)."""
        old = self._inputs[index]
        if tensor.graph is not self.graph:
            raise GraphValueError(f"{tensor.name} is from another graph than op {self.name}")
        if old is tensor:
            return
        self._inputs[index] = tensor
        # `_consumers` holds one entry per use, so move exactly one.
        with contextlib.suppress(ValueError):
            old._consumers.remove(self)
        tensor._consumers.append(self)
        self.graph._version += 1

    def _add_control_input(self, op: Operation) -> None:
        if op not in self._control_inputs:
            self._control_inputs.append(op)
            op._control_outputs.append(self)
            self.graph._version += 1

    def _add_control_inputs(self, ops: Iterable[Operation]) -> None:
        for op in ops:
            self._add_control_input(op)

    def _remove_all_control_inputs(self) -> None:
        for op in self._control_inputs:
            with contextlib.suppress(ValueError):
                op._control_outputs.remove(self)
        self._control_inputs = []
        self.graph._version += 1

    def __repr__(self) -> str:
        return f"<Operation {self.name!r} type={self.type}>"

    def __str__(self) -> str:
        from rill.graph.text import format_op

        return format_op(self)


_UNKNOWN = TensorShape(None)


class Graph:
    """A dataflow graph: operations in creation order plus the scopes that shape new ops.

    Building is thread-safe (one lock); running a graph never mutates it.
    """

    def __init__(self):
        self._lock = threading.RLock()
        self._ops: list[Operation] = []
        self._ops_by_name: dict[str, Operation] = {}
        self._names_in_use: dict[str, int] = {}
        self._version = 0
        self._finalized = False
        self._collections: dict[str, list] = {}
        self.seed: int | None = None
        self._local = threading.local()
        self._gradient_override_map: dict[str, str] = {}

    # -- thread-local scope state (TF keeps these per thread too) ---------------------------------

    def _state(self):
        st = self._local
        if not hasattr(st, "name_scope"):
            st.name_scope = ""
            st.control_deps = []  # list of lists of Operations; None entries clear
            st.device_stack = []  # list of str | callable | None
            st.colocation_stack = []
            st.cf_context = None
        return st

    @property
    def _control_flow_context(self):
        return self._state().cf_context

    @_control_flow_context.setter
    def _control_flow_context(self, ctx):
        self._state().cf_context = ctx

    # -- naming -------------------------------------------------------------------------------

    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        scope = self._state().name_scope
        if scope:
            name = f"{scope}/{name}"
        key = name.lower()
        count = self._names_in_use.get(key, 0)
        if mark_as_used:
            self._names_in_use[key] = count + 1
        if count > 0:
            base = name
            while True:
                name = f"{base}_{count}"
                k = name.lower()
                if k not in self._names_in_use:
                    break
                count += 1
            if mark_as_used:
                self._names_in_use[k] = 1
        return name

    def get_name_scope(self) -> str:
        return self._state().name_scope

    @contextlib.contextmanager
    def name_scope(self, name: str | None):
        """Ops created inside are named `<scope>/<name>`; a scope reused gets `_1`, `_2`, ....

        A name ending in "/" re-enters that exact scope; None or "" returns to the root.
        """
        st = self._state()
        old = st.name_scope
        if not name:
            new = ""
        elif name.endswith("/"):
            new = name[:-1]
        else:
            if not _VALID_SCOPE_NAME.match(name):
                raise ValueError(f"{name!r} is not a valid scope name")
            new = self.unique_name(name)
        st.name_scope = new
        try:
            yield (new + "/") if new else ""
        finally:
            st.name_scope = old

    # -- scopes -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def control_dependencies(self, control_inputs: Iterable | None):
        """Ops created inside run after `control_inputs` (tensors or ops). None clears."""
        st = self._state()
        if control_inputs is None:
            entry = None
        else:
            entry = []
            for c in control_inputs:
                if hasattr(c, "op") and isinstance(c, Tensor):
                    c = c.op
                elif hasattr(c, "_as_control_op"):
                    c = c._as_control_op()
                elif not isinstance(c, Operation):
                    c = self.as_graph_element(c)
                    c = c.op if isinstance(c, Tensor) else c
                if c.graph is not self:
                    raise GraphValueError(f"control input {c.name} is from another graph")
                entry.append(c)
        st.control_deps.append(entry)
        try:
            yield
        finally:
            st.control_deps.pop()

    def _current_control_deps(self) -> list[Operation]:
        stack = self._state().control_deps
        start = 0
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is None:
                start = i + 1
                break
        out: list[Operation] = []
        for entry in stack[start:]:
            out.extend(entry)
        return list(dict.fromkeys(out))

    @contextlib.contextmanager
    def device(self, spec: str | Callable | None):
        """Ops created inside are placed on `spec`, merged field by field with outer scopes.

        `spec` may be a string, a DeviceSpec, a function op -> device string, or None (clears).
        """
        st = self._state()
        if isinstance(spec, DeviceSpec):
            spec = spec.to_string()
        if isinstance(spec, str):
            DeviceSpec.from_string(spec)  # validate now, not at first op
        st.device_stack.append(spec)
        try:
            yield
        finally:
            st.device_stack.pop()

    def _device_for(self, op: Operation) -> str:
        stack = self._state().device_stack
        if not stack:
            return ""
        start = 0
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is None:
                start = i + 1
                break
        # As TensorFlow: innermost first. A string scope fills the fields the op's device does
        # not set yet; a function sees the device the inner scopes gave (so a device setter can
        # merge with it) and its result is the op's device from then on.
        spec = DeviceSpec()
        for s in reversed(stack[start:]):
            if callable(s):
                op._device = spec.to_string()
                s = s(op)
                if isinstance(s, DeviceSpec):
                    s = s.to_string()
                spec = DeviceSpec.from_string(s or "")
            elif s:
                spec = DeviceSpec.from_string(s).merged(spec)
        return spec.to_string()

    @contextlib.contextmanager
    def colocate_with(self, op, ignore_existing: bool = False):
        """Ops created inside are placed with `op` (same device, `_class = ["loc:@op"]`)."""
        st = self._state()
        if op is None:
            saved = st.colocation_stack
            st.colocation_stack = []
            try:
                yield
            finally:
                st.colocation_stack = saved
            return
        if isinstance(op, Tensor):
            op = op.op
        elif hasattr(op, "_as_colocation_op"):
            op = op._as_colocation_op()
        saved = st.colocation_stack
        if ignore_existing:
            st.colocation_stack = []
        st.colocation_stack = st.colocation_stack + [op]
        # Device scopes do not apply inside a colocation scope (the colocated op decides).
        saved_dev = st.device_stack
        st.device_stack = []
        try:
            yield
        finally:
            st.colocation_stack = saved
            st.device_stack = saved_dev

    @contextlib.contextmanager
    def gradient_override_map(self, op_type_map: dict[str, str]):
        """Ops of type K created inside use the gradient registered under op_type_map[K]."""
        saved = dict(self._gradient_override_map)
        self._gradient_override_map.update(op_type_map)
        try:
            yield
        finally:
            self._gradient_override_map = saved

    # -- default graph ------------------------------------------------------------------------

    @contextlib.contextmanager
    def as_default(self):
        stack = _default_graph_stack()
        stack.append(self)
        try:
            yield self
        finally:
            stack.pop()

    # -- collections ----------------------------------------------------------------------------

    def add_to_collection(self, name: str, value) -> None:
        with self._lock:
            self._collections.setdefault(name, []).append(value)

    def add_to_collections(self, names: Iterable[str], value) -> None:
        for n in set([names] if isinstance(names, str) else names):
            self.add_to_collection(n, value)

    def get_collection(self, name: str, scope: str | None = None) -> list:
        items = list(self._collections.get(name, ()))
        if scope is None:
            return items
        rx = re.compile(scope)
        return [v for v in items if hasattr(v, "name") and rx.match(v.name)]

    def get_collection_ref(self, name: str) -> list:
        with self._lock:
            return self._collections.setdefault(name, [])

    def clear_collection(self, name: str) -> None:
        self._collections.pop(name, None)

    def get_all_collection_keys(self) -> list[str]:
        return sorted(self._collections)

    # -- lookup -------------------------------------------------------------------------------

    def get_operations(self) -> list[Operation]:
        return list(self._ops)

    def get_operation_by_name(self, name: str) -> Operation:
        op = self._ops_by_name.get(name)
        if op is None:
            raise KeyError(f"the graph has no operation named {name!r}")
        return op

    def get_tensor_by_name(self, name: str) -> Tensor:
        if ":" not in name:
            raise ValueError(
                f"{name!r} names an operation, not a tensor; a tensor name is 'op:index'"
            )
        op_name, _, idx = name.rpartition(":")
        op = self.get_operation_by_name(op_name)
        try:
            return op.outputs[int(idx)]
        except (ValueError, IndexError):
            raise KeyError(
                f"{name!r}: operation {op_name!r} has {len(op.outputs)} outputs"
            ) from None

    def as_graph_element(self, obj, allow_tensor: bool = True, allow_operation: bool = True):
        """Resolves a Tensor, Operation or name string to an element of this graph."""
        if hasattr(obj, "_as_graph_element"):
            obj = obj._as_graph_element()
        if isinstance(obj, Tensor):
            if obj.graph is not self:
                raise ValueError(f"{obj.name} is not an element of this graph")
            if not allow_tensor:
                raise TypeError(f"expected an operation, got tensor {obj.name}")
            return obj
        if isinstance(obj, Operation):
            if obj.graph is not self:
                raise ValueError(f"operation {obj.name} is not an element of this graph")
            if not allow_operation:
                raise TypeError(f"expected a tensor, got operation {obj.name}")
            return obj
        if isinstance(obj, str):
            if ":" in obj and allow_tensor:
                return self.get_tensor_by_name(obj)
            if ":" not in obj and allow_operation:
                return self.get_operation_by_name(obj)
            if ":" not in obj:
                raise ValueError(f"{obj!r} names an operation; to fetch its output use '{obj}:0'")
            raise ValueError(f"{obj!r} names a tensor where an operation was expected")
        raise TypeError(f"cannot interpret {obj!r} as a graph element")

    def __contains__(self, name: str) -> bool:
        return name in self._ops_by_name

    def __len__(self) -> int:
        return len(self._ops)

    def __bool__(self) -> bool:
        # A graph is a graph even when empty (`graph or default` must not replace it).
        return True

    @property
    def version(self) -> int:
        return self._version

    def finalize(self) -> None:
        self._finalized = True

    @property
    def finalized(self) -> bool:
        return self._finalized

    # -- creating ops -------------------------------------------------------------------------

    def create_op(
        self,
        op_type: str,
        inputs: Sequence = (),
        attrs: dict | None = None,
        name: str | None = None,
        *,
        _source: tuple | None = None,
    ) -> Operation:
        """Adds an op: converts and type-checks inputs, fills attrs, places it and infers shapes.

        `inputs` has one entry per input argument of the op; a list argument (`N * T` or a type
        list) takes a sequence of tensors. Python and numpy values become Const ops.
        """
        if self._finalized:
            raise RuntimeError("the graph is finalized and cannot be modified")
        try:
            op_def = get_op_def(op_type)
        except KeyError as e:
            raise GraphValueError(str(e.args[0])) from None
        source = _source or _user_source()
        with self._lock:
            st = self._state()
            full_name = self._op_name(name or op_type)
            where = f"{op_type} {full_name!r}"
            # Python values become Consts named under the op, as in TensorFlow ("mul/y").
            with self.name_scope(full_name + "/"):
                flat, attrs = _bind_inputs(self, op_def, inputs, dict(attrs or {}), where, source)
            attrs = _complete_attrs(op_def, attrs, where, source)
            out_types = _output_types(op_def, attrs)
            op = Operation(self, full_name, op_def, flat, (), attrs, out_types, source)
            deps = self._current_control_deps()
            if deps:
                data_ops = {t.op for t in flat}
                op._control_inputs = [c for c in deps if c not in data_ops]
            if st.colocation_stack:
                target = st.colocation_stack[-1]
                groups = []
                for c in st.colocation_stack:
                    groups.extend(c.colocation_groups())
                attrs["_class"] = tuple(sorted({f"loc:@{g}" for g in groups}))
                op._device = target._device
            else:
                op._device = self._device_for(op)
            override = self._gradient_override_map.get(op_type)
            if override is not None:
                attrs["_gradient_op_type"] = override
            ctx = st.cf_context
            if ctx is not None:
                op._control_flow_context = ctx
                ctx._add_op(op)  # may rewrite inputs (e.g. Enter for loop captures)
            _infer_shapes(op)
            self._add_op(op)
            if ctx is not None:
                ctx._after_add_op(op)
        return op

    # Whether Python operators on another graph's tensors build in this graph (capturing them)
    # rather than in the tensor's own graph.
    _capture_by_default = False

    def _capture(self, tensor: Tensor) -> Tensor | None:
        """What stands in this graph for `tensor` of another graph, or None (an error).

        A graph that traces a function (rill.train's dataset functions) overrides it to capture
        outer tensors as inputs of the function.
        """
        return None

    def _op_name(self, name: str) -> str:
        if name.endswith("/"):
            full = name[:-1]
            if full in self._ops_by_name:
                raise GraphValueError(f"an operation named {full!r} already exists")
            # A name scope opened for this op already counted the name (as TensorFlow does).
            self._names_in_use.setdefault(full.lower(), 1)
            return full
        if not _VALID_OP_NAME.match(name):
            raise GraphValueError(
                f"{name!r} is not a valid op name (letters, digits, and _ . - / >)"
            )
        return self.unique_name(name)

    def _add_op(self, op: Operation) -> None:
        op._id = len(self._ops)
        self._ops.append(op)
        self._ops_by_name[op.name] = op
        for t in op._inputs:
            t._consumers.append(op)
        for c in op._control_inputs:
            c._control_outputs.append(op)
        self._version += 1

    def _add_op_with_name(self, op: Operation) -> None:
        """Adds an op whose name was chosen by an importer (must be unused)."""
        if op.name in self._ops_by_name:
            raise GraphValueError(f"duplicate operation name {op.name!r}")
        key = op.name.lower()
        self._names_in_use[key] = self._names_in_use.get(key, 0) + 1
        self._add_op(op)

    # -- text and GraphDef --------------------------------------------------------------------

    def as_graph_def(self, add_shapes: bool = False, from_version: int | None = None):
        from rill.graph.graph_def import graph_to_graph_def

        return graph_to_graph_def(self, add_shapes=add_shapes, from_version=from_version)

    def to_text(self, verbose: bool = False) -> str:
        from rill.graph.text import format_graph

        return format_graph(self, verbose=verbose)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"<Graph with {len(self._ops)} ops>"


# -- binding inputs and attrs --------------------------------------------------------------------


def _describe_source(source) -> str:
    if not source:
        return ""
    return f" (created at {source[0]}:{source[1]} in {source[2]})"


def _bind_inputs(graph: Graph, op_def: OpDef, inputs, attrs: dict, where: str, source):
    if len(inputs) != len(op_def.inputs):
        raise GraphTypeError(
            f"{where}: expected {len(op_def.inputs)} inputs "
            f"({', '.join(a.spec() for a in op_def.inputs)}), got {len(inputs)}"
            f"{_describe_source(source)}"
        )
    bound_by: dict[str, str] = {}  # type attr -> name of the input that fixed it
    for k in list(attrs):
        if op_def.attr(k) is not None and op_def.attr(k).type == "type":
            attrs[k] = dtypes.as_dtype(attrs[k])
            bound_by[k] = "an explicit attr"
    # Pass 1: bind type attrs from inputs that are already tensors.
    for arg, value in zip(op_def.inputs, inputs):
        if arg.type_attr is None:
            continue
        vals = value if arg.number_attr else [value]
        if arg.number_attr and not isinstance(vals, (list, tuple)):
            raise GraphTypeError(
                f"{where}: input {arg.name!r} expects a list of tensors, got {value!r}"
                f"{_describe_source(source)}"
            )
        for v in vals:
            if isinstance(v, Tensor) and arg.type_attr not in attrs:
                attrs[arg.type_attr] = v.dtype
                bound_by[arg.type_attr] = f"input {arg.name!r} ({v.name})"
    # Pass 2: convert everything, check dtypes.
    flat: list[Tensor] = []
    for arg, value in zip(op_def.inputs, inputs):
        if arg.is_list:
            if isinstance(value, Tensor) or not isinstance(value, (list, tuple)):
                raise GraphTypeError(
                    f"{where}: input {arg.name!r} expects a list of tensors, got {value!r}"
                    f"{_describe_source(source)}"
                )
            vals = list(value)
            if arg.number_attr:
                n = len(vals)
                if arg.number_attr in attrs and attrs[arg.number_attr] != n:
                    raise GraphValueError(
                        f"{where}: attr {arg.number_attr}={attrs[arg.number_attr]} but input "
                        f"{arg.name!r} has {n} tensors{_describe_source(source)}"
                    )
                attrs[arg.number_attr] = n
        else:
            vals = [value]
        if arg.type_list_attr:
            want_list = attrs.get(arg.type_list_attr)
            tensors = []
            for i, v in enumerate(vals):
                hint = want_list[i] if want_list is not None and i < len(want_list) else None
                tensors.append(_convert(graph, v, hint, arg.name, where, source))
            got = tuple(t.dtype for t in tensors)
            if want_list is not None and tuple(dtypes.as_dtype(t) for t in want_list) != got:
                raise GraphTypeError(
                    f"{where}: input {arg.name!r} has types {[t.name for t in got]} but attr "
                    f"{arg.type_list_attr} says {[str(t) for t in want_list]}"
                    f"{_describe_source(source)}"
                )
            attrs[arg.type_list_attr] = got
            flat.extend(tensors)
            continue
        want = arg.type if arg.type is not None else attrs.get(arg.type_attr)
        for v in vals:
            t = _convert(graph, v, want, arg.name, where, source)
            if want is None:
                want = t.dtype
                attrs[arg.type_attr] = want
                bound_by[arg.type_attr] = f"input {arg.name!r} ({t.name})"
            elif t.dtype is not want:
                what = (
                    f"{arg.type_attr}={want.name} (set by {bound_by.get(arg.type_attr)})"
                    if arg.type_attr
                    else f"{want.name}"
                )
                raise GraphTypeError(
                    f"{where}: input {arg.name!r} ({t.name}) has dtype {t.dtype.name}, expected "
                    f"{what}{_describe_source(source)}"
                )
            flat.append(t)
    return flat, attrs


def _convert(graph: Graph, value, dtype: DType | None, arg: str, where: str, source) -> Tensor:
    if isinstance(value, Tensor):
        if value.graph is not graph:
            captured = graph._capture(value)
            if captured is not None:
                return captured
            raise GraphValueError(
                f"{where}: input {arg!r} ({value.name}) belongs to another graph"
                f"{_describe_source(source)}"
            )
        return value
    if hasattr(value, "_as_tensor"):
        return _convert(graph, value._as_tensor(dtype), dtype, arg, where, source)
    try:
        return convert_to_tensor(value, dtype=dtype, graph=graph, name=f"{arg}")
    except (TypeError, ValueError) as e:
        raise GraphTypeError(
            f"{where}: cannot convert input {arg!r} = {value!r} to a tensor"
            f"{' of dtype ' + dtype.name if dtype else ''}: {e}{_describe_source(source)}"
        ) from None


def _complete_attrs(op_def: OpDef, attrs: dict, where: str, source) -> dict:
    out = {}
    for a in op_def.attrs:
        if a.name in attrs:
            v = attrs.pop(a.name)
            try:
                out[a.name] = check_attr_value(a, v, where)
            except TypeError as e:
                raise GraphTypeError(f"{e}{_describe_source(source)}") from None
            except ValueError as e:
                raise GraphValueError(f"{e}{_describe_source(source)}") from None
        elif a.has_default:
            out[a.name] = a.default
        else:
            raise GraphValueError(
                f"{where}: missing required attr {a.name!r} ({a.type}){_describe_source(source)}"
            )
    for k, v in attrs.items():
        if not k.startswith("_"):
            known = ", ".join(a.name for a in op_def.attrs) or "none"
            raise GraphValueError(
                f"{where}: unknown attr {k!r} (the op's attrs are: {known})"
                f"{_describe_source(source)}"
            )
        out[k] = v
    return out


def _output_types(op_def: OpDef, attrs: dict) -> list[DType]:
    out: list[DType] = []
    for arg in op_def.outputs:
        if arg.type_list_attr:
            out.extend(attrs[arg.type_list_attr])
            continue
        t = arg.type if arg.type is not None else attrs[arg.type_attr]
        n = attrs[arg.number_attr] if arg.number_attr else 1
        out.extend([t] * n)
    return out


def _infer_shapes(op: Operation) -> None:
    fn = op.op_def.shape_fn
    if fn is None:
        return
    try:
        shapes = fn(op)
    except (ValueError, TypeError, IndexError) as e:
        from rill.graph.errors import describe_op

        raise GraphValueError(f"{op.type} {op.name!r}: {e}\n{describe_op(op)}") from None
    if isinstance(shapes, TensorShape) or shapes is None:
        shapes = [shapes] * len(op.outputs) if len(op.outputs) == 1 else shapes
    if shapes is None:
        return
    if len(shapes) != len(op.outputs):
        raise GraphValueError(
            f"internal: shape function of {op.type} returned {len(shapes)} shapes for "
            f"{len(op.outputs)} outputs"
        )
    for t, s in zip(op.outputs, shapes):
        t._shape = as_shape(s)


def reinfer_shapes(op: Operation) -> None:
    """Runs the op's shape function again (after an input was rewired)."""
    _infer_shapes(op)


# -- conversion of Python values ------------------------------------------------------------------


def _py_default_dtype(value) -> DType | None:
    """TensorFlow's defaults: Python floats → float32, ints → int32 (int64 if too big)."""
    if isinstance(value, (bool, np.bool_)):
        return dtypes.bool_
    if isinstance(value, (int,)):
        return dtypes.int32 if -(2**31) <= value < 2**31 else dtypes.int64
    if isinstance(value, float):
        return dtypes.float32
    if isinstance(value, complex):
        return dtypes.complex64
    if isinstance(value, (str, bytes)):
        return dtypes.string
    return None


def _to_numpy(value, dtype: DType | None) -> np.ndarray:
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        if arr.dtype.kind in "SUO":
            return np.asarray(arr, dtype=object)
        if dtype is None:
            return arr
        if arr.dtype == dtype.np:
            return arr
        if dtype.is_integer and arr.dtype.kind == "f":
            raise TypeError(f"cannot convert a {arr.dtype} array to {dtype.name} losslessly")
        if dtype.is_bool != (arr.dtype.kind == "b") and arr.size:
            raise TypeError(f"cannot convert a {arr.dtype} array to {dtype.name}")
        return arr.astype(dtype.np)
    if dtype is None:
        flat = _first_scalar(value)
        dtype = _py_default_dtype(flat) if flat is not None else dtypes.float32
        if dtype is dtypes.int32 or dtype is dtypes.float32:
            # A nested list mixing ints and floats is float; big ints make int64.
            probe = np.asarray(value)
            if probe.dtype.kind == "f":
                dtype = dtypes.float32
            elif (
                probe.dtype.kind in "iu"
                and probe.size
                and (probe.max() >= 2**31 or probe.min() < -(2**31))
            ):
                dtype = dtypes.int64
            elif probe.dtype.kind == "b":
                dtype = dtypes.bool_
            elif probe.dtype.kind == "c":
                dtype = dtypes.complex64
    if dtype is dtypes.string:
        arr = np.asarray(value, dtype=object)
        return (
            np.vectorize(lambda s: s.encode() if isinstance(s, str) else bytes(s), otypes=[object])(
                arr
            )
            if arr.size
            else arr
        )
    probe = np.asarray(value)
    if probe.dtype.kind in "SUO" and dtype is not dtypes.string:
        raise TypeError(f"cannot convert {value!r} to {dtype.name if dtype else 'a tensor'}")
    if dtype.is_integer and probe.dtype.kind == "f" and probe.size:
        raise TypeError(f"cannot convert {value!r} to {dtype.name}: it has a fractional part")
    if dtype.is_integer and probe.dtype.kind in "iu" and probe.size:
        lo, hi = dtype.min, dtype.max
        if probe.min() < lo or probe.max() > hi:
            raise TypeError(f"{value!r} is out of range for {dtype.name}")
    if dtype.is_bool and probe.dtype.kind != "b" and probe.size:
        raise TypeError(f"cannot convert {value!r} to bool")
    if probe.dtype.kind == "c" and not dtype.is_complex:
        raise TypeError(f"cannot convert complex {value!r} to {dtype.name}")
    return np.asarray(value, dtype=dtype.np)


def _first_scalar(value):
    while isinstance(value, (list, tuple)):
        if not value:
            return None
        value = value[0]
    return value


def convert_to_tensor(value, dtype=None, name: str | None = None, graph: Graph | None = None):
    """Returns `value` as a Tensor, making a Const op for Python and numpy values.

    >>> with Graph().as_default():
    ...     convert_to_tensor([1, 2]).dtype, convert_to_tensor(1.5).dtype
    (rill.int32, rill.float32)
    """
    dtype = dtypes.as_dtype(dtype) if dtype is not None else None
    if isinstance(value, Tensor):
        if dtype is not None and value.dtype is not dtype:
            raise GraphTypeError(
                f"tensor {value.name} has dtype {value.dtype.name}, expected {dtype.name}"
            )
        return value
    if hasattr(value, "_as_tensor"):
        return convert_to_tensor(value._as_tensor(dtype), dtype, name, graph)
    if isinstance(value, (list, tuple)) and any(
        isinstance(v, Tensor) or hasattr(v, "_as_tensor") for v in _flatten(value)
    ):
        from rill.graph.ops import array_ops

        return array_ops.stack([convert_to_tensor(v, dtype) for v in value], name=name or "packed")
    arr = _to_numpy(value, dtype)
    g = graph or get_default_graph()
    return constant(arr, dtype=dtype or dtypes.as_dtype(arr.dtype), name=name or "Const", graph=g)


def _flatten(value):
    for v in value:
        if isinstance(v, (list, tuple)):
            yield from _flatten(v)
        else:
            yield v


def constant(value, dtype=None, shape=None, name: str = "Const", graph: Graph | None = None):
    """A Const op holding `value` (broadcast to `shape` when given).

    >>> with Graph().as_default():
    ...     constant([[1.0, 2.0]]).shape
    TensorShape([1, 2])
    """
    dtype = dtypes.as_dtype(dtype) if dtype is not None else None
    arr = value if isinstance(value, np.ndarray) and dtype is None else _to_numpy(value, dtype)
    if dtype is None:
        dtype = dtypes.as_dtype(arr.dtype)
    if shape is not None:
        shape = tuple(as_shape(shape).as_tuple())
        if arr.size == 1:
            arr = np.full(shape, arr.reshape(()), dtype=arr.dtype)
        elif int(np.prod(shape)) == arr.size:
            arr = arr.reshape(shape)
        else:
            raise GraphValueError(f"cannot reshape a constant of {arr.size} elements to {shape}")
    g = graph or get_default_graph()
    if dtype is dtypes.string:
        arr = np.asarray(arr, dtype=object)
    return g.create_op("Const", [], {"value": arr, "dtype": dtype}, name=name).outputs[0]


def placeholder(dtype, shape=None, name: str | None = None) -> Tensor:
    """A value that must be fed when the graph runs.

    >>> with Graph().as_default():
    ...     placeholder("float32", [None, 784], name="x")
    <Tensor 'x:0' f32[?,784]>
    """
    return (
        get_default_graph()
        .create_op(
            "Placeholder",
            [],
            {"dtype": dtypes.as_dtype(dtype), "shape": as_shape(shape)},
            name=name or "Placeholder",
        )
        .outputs[0]
    )


# -- the default graph --------------------------------------------------------------------------

_GLOBAL_DEFAULT = [Graph()]
_tls = threading.local()


def _default_graph_stack() -> list:
    s = getattr(_tls, "graphs", None)
    if s is None:
        s = _tls.graphs = []
    return s


def get_default_graph() -> Graph:
    s = _default_graph_stack()
    return s[-1] if s else _GLOBAL_DEFAULT[0]


def reset_default_graph() -> None:
    if _default_graph_stack():
        raise AssertionError("reset_default_graph() called inside a `with graph.as_default()`")
    _GLOBAL_DEFAULT[0] = Graph()


def _default_session_stack() -> list:
    s = getattr(_tls, "sessions", None)
    if s is None:
        s = _tls.sessions = []
    return s


def get_default_session():
    s = _default_session_stack()
    return s[-1] if s else None


@contextlib.contextmanager
def default_session(session):
    """Makes `session` the default for Tensor.eval / Operation.run in this thread."""
    s = _default_session_stack()
    s.append(session)
    try:
        yield session
    finally:
        s.pop()
