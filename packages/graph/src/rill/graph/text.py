"""The text form of a graph: one op a line, and a parser that reads it back.

    %x: f32[?,784] = Placeholder(shape=[?,784])
    %dense/MatMul: f32[?,10] = MatMul(%x, %dense/w/read)
    %split: (f32[2], f32[2]) = Split(%split/axis, %v, num_split=2)
    %train: () = NoOp() ^%update_w ^%update_b @/job:ps/task:0

Attrs at their defaults are hidden, and so are attrs the parser can recover: type and length attrs
inferred from the inputs, and type attrs that only set an output's type (shown in the signature).
`verbose=True` prints every attr. Tensor attrs whose dtype and shape equal those of output 0 print
as plain values (`value=[1, 2]`, `value=fill(0)`, `value=b64"..."`), others as typed literals
(`tensor<f32[2]>[1, 2]`).

>>> from rill.graph import Graph, placeholder
>>> g = Graph()
>>> with g.as_default():
...     _ = placeholder("float32", [2], name="x") * 3.0
>>> parse_graph(format_graph(g)).to_text() == g.to_text()
True
"""

from __future__ import annotations

import base64
import re

import numpy as np

from rill.graph import dtypes
from rill.graph.dtypes import DType
from rill.graph.errors import GraphValueError
from rill.graph.op_def import NameAttrList, get_op_def, has_op
from rill.graph.shapes import TensorShape, format_dims

__all__ = ["format_graph", "format_op", "parse_graph"]

_SMALL = 16  # tensors with more elements print as base64 (exact and compact)

# The largest tensor value (in bytes; strings count 8 each) a line may declare: `fill(0)` lets a
# few bytes of text stand for any size, so sizes are checked against this before allocating.
# Assign to raise it for trusted input.
MAX_TENSOR_BYTES = 1 << 30
_MAX_NESTING = 256  # brackets inside a tensor literal (rill's maximum rank is 254)


# -- printing -----------------------------------------------------------------------------------


def _fmt_type(t) -> str:
    return f"{t.dtype.short}{format_dims(t.shape.dims)}"


def _fmt_str(s) -> str:
    if isinstance(s, bytes):
        body = "".join(
            chr(b) if 32 <= b < 127 and chr(b) not in '"\\' else f"\\x{b:02x}" for b in s
        )
        return f'b"{body}"'
    out = []
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 32:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _fmt_scalar(v, dtype: DType) -> str:
    if dtype is dtypes.string:
        return _fmt_str(v if isinstance(v, bytes) else str(v).encode())
    if dtype.is_bool:
        return "true" if v else "false"
    if dtype.is_complex:
        return (
            f"c({_fmt_scalar(v.real, dtype.real_dtype)}, {_fmt_scalar(v.imag, dtype.real_dtype)})"
        )
    if dtype.is_floating:
        return str(dtype.np.type(v))
    return str(int(v))


def _fmt_nested(arr: np.ndarray, dtype: DType) -> str:
    if arr.ndim == 0:
        return _fmt_scalar(arr[()], dtype)
    if arr.ndim == 1:
        return "[" + ", ".join(_fmt_scalar(arr[i], dtype) for i in range(arr.shape[0])) + "]"
    return "[" + ", ".join(_fmt_nested(a, dtype) for a in arr) + "]"


def _fmt_tensor_body(arr: np.ndarray, dtype: DType) -> str:
    if arr.size > 1 and dtype is not dtypes.string:
        flat = arr.reshape(-1)
        if np.all(flat == flat[0]) and not (dtype.is_floating and np.isnan(flat[0])):
            if not dtype.is_floating or np.signbit(flat).all() == np.signbit(flat[0]):
                return f"fill({_fmt_scalar(flat[0], dtype)})"
    if arr.size > _SMALL and dtype is not dtypes.string:
        raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        return 'b64"' + base64.b64encode(raw).decode() + '"'
    return _fmt_nested(arr, dtype)


def _fmt_tensor(arr: np.ndarray, like=None) -> str:
    dtype = dtypes.string if arr.dtype == object else dtypes.as_dtype(arr.dtype)
    if like is not None and like.dtype is dtype and like.shape.dims == tuple(arr.shape):
        return _fmt_tensor_body(arr, dtype)
    return f"tensor<{dtype.short}{format_dims(arr.shape)}>{_fmt_tensor_body(arr, dtype)}"


def _fmt_attr(v, typ: str | None, like=None) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, float):
        return repr(float(np.float32(v))) if not np.isfinite(v) else str(np.float32(v))
    if isinstance(v, (str, bytes)):
        return _fmt_str(v)
    if isinstance(v, DType):
        return v.short
    if isinstance(v, TensorShape):
        s = format_dims(v.dims)
        return s if typ == "shape" or (typ or "").startswith("list(shape") else f"shape{s}"
    if isinstance(v, np.ndarray):
        return _fmt_tensor(v, like)
    if isinstance(v, NameAttrList):
        return f"@{v.name}"
    if isinstance(v, (list, tuple)):
        inner = typ[5:-1] if typ and typ.startswith("list(") else None
        return "[" + ", ".join(_fmt_attr(x, inner) for x in v) + "]"
    raise TypeError(f"cannot print attr value {v!r}")


def _hidden_attrs(op) -> set[str]:
    op_def = op.op_def
    hidden = set(op_def.inferred_attrs)
    # The parser recovers an output type-list attr from the printed output types only when it
    # is the one list-sized output (ParseExampleV2 has several: print those).
    lists = sum(1 for arg in op_def.outputs if arg.type_list_attr or arg.number_attr)
    for arg in op_def.outputs:
        if arg.type_attr:
            hidden.add(arg.type_attr)
        # An empty list prints no output type to recover it from: print the attr.
        if arg.type_list_attr and lists <= 1 and op.attrs.get(arg.type_list_attr):
            hidden.add(arg.type_list_attr)
    for a in op_def.attrs:
        if a.has_default and _attr_equal(op.attrs.get(a.name), a.default):
            hidden.add(a.name)
    return hidden


def _attr_equal(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_attr_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def format_op(op, verbose: bool = False) -> str:
    outs = op.outputs
    if len(outs) == 1:
        sig = _fmt_type(outs[0])
    else:
        sig = "(" + ", ".join(_fmt_type(t) for t in outs) + ")"
    parts = []
    for t in op._inputs:
        parts.append(f"%{t.op.name}" if t.value_index == 0 else f"%{t.op.name}:{t.value_index}")
    hidden = set() if verbose else _hidden_attrs(op)
    op_def = op.op_def
    for k in _ordered_attr_names(op):
        if k in hidden:
            continue
        a = op_def.attr(k)
        like = outs[0] if outs else None
        parts.append(f"{k}={_fmt_attr(op.attrs[k], a.type if a else None, like)}")
    line = f"%{op.name}: {sig} = {op.type}({', '.join(parts)})"
    for c in op._control_inputs:
        line += f" ^%{c.name}"
    if op.device:
        line += f" @{op.device}"
    return line


def _ordered_attr_names(op) -> list[str]:
    declared = [a.name for a in op.op_def.attrs if a.name in op.attrs]
    private = sorted(k for k in op.attrs if op.op_def.attr(k) is None)
    return declared + private


def format_graph(graph, verbose: bool = False) -> str:
    return "\n".join(format_op(op, verbose) for op in graph._ops)


# -- parsing ------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<ref>\^?%[A-Za-z0-9.][A-Za-z0-9_.\-/>]*(?::\d+)?)
  | (?P<device>@/[^\s]*)
  | (?P<func>@[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<bstr>b"(?:[^"\\]|\\.)*")
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<num>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf|nan))
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[\[\](){}<>,=:?*])
    """,
    re.VERBOSE,
)


class _Tokens:
    def __init__(self, text: str, where: str):
        self.where = where
        self.toks: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN_RE.match(text, pos)
            if not m:
                raise GraphValueError(
                    f"{where}: unexpected character {text[pos]!r} at column {pos + 1}"
                )
            kind = m.lastgroup
            if kind != "ws":
                self.toks.append((kind, m.group()))
            pos = m.end()
        self.i = 0

    def peek(self, k: int = 0):
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else ("eof", "")

    def next(self):
        t = self.peek()
        self.i += 1
        return t

    def expect(self, value: str):
        kind, v = self.next()
        if v != value:
            raise GraphValueError(f"{self.where}: expected {value!r}, found {v or 'end of line'!r}")
        return v

    def error(self, what: str):
        _, v = self.peek()
        return GraphValueError(f"{self.where}: expected {what}, found {v or 'end of line'!r}")


def _unescape(body: str) -> bytes:
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            n = body[i + 1]
            if n == "x":
                out.append(int(body[i + 2 : i + 4], 16))
                i += 4
                continue
            out.extend({"n": b"\n", "t": b"\t", '"': b'"', "\\": b"\\"}.get(n, n.encode()))
            i += 2
            continue
        out.extend(ch.encode())
        i += 1
    return bytes(out)


def _parse_type(tok: _Tokens) -> tuple[DType, TensorShape]:
    kind, word = tok.next()
    if kind != "word":
        raise GraphValueError(f"{tok.where}: expected a type such as f32[?,3], found {word!r}")
    try:
        dtype = dtypes.as_dtype(word)
    except TypeError:
        raise GraphValueError(f"{tok.where}: unknown dtype {word!r}") from None
    return dtype, _parse_dims(tok)


def _parse_dims(tok: _Tokens) -> TensorShape:
    tok.expect("[")
    if tok.peek()[1] == "*":
        tok.next()
        tok.expect("]")
        return TensorShape(None)
    dims = []
    while tok.peek()[1] != "]":
        kind, v = tok.next()
        if v == "?":
            dims.append(None)
        elif kind == "num" and re.fullmatch(r"-?\d+", v) and int(v) >= -1:
            dims.append(int(v) if int(v) >= 0 else None)
        else:
            raise GraphValueError(
                f"{tok.where}: bad dimension {v!r} (a dimension is an integer >= 0 or ?)"
            )
        if tok.peek()[1] == ",":
            tok.next()
    tok.expect("]")
    return TensorShape(dims)


def _parse_scalar_token(kind: str, v: str):
    if kind == "num":
        if re.fullmatch(r"[-+]?\d+", v):
            return int(v)
        return float(v)
    if kind == "word" and v in ("true", "false"):
        return v == "true"
    if kind == "str":
        raw = _unescape(v[1:-1])
        try:
            return raw.decode()
        except UnicodeDecodeError:
            return raw
    if kind == "bstr":
        return _unescape(v[2:-1])
    raise ValueError(v)


def _parse_nested(tok: _Tokens, depth: int = 0):
    if depth > _MAX_NESTING:
        raise GraphValueError(f"{tok.where}: a tensor literal nests deeper than {_MAX_NESTING}")
    kind, v = tok.peek()
    if v == "[":
        tok.next()
        out = []
        while tok.peek()[1] != "]":
            if tok.peek()[0] == "eof":
                raise tok.error("']'")
            out.append(_parse_nested(tok, depth + 1))
            if tok.peek()[1] == ",":
                tok.next()
        tok.expect("]")
        return out
    if kind == "word" and v == "c":
        tok.next()
        tok.expect("(")
        re_ = _parse_nested(tok, depth + 1)
        tok.expect(",")
        im = _parse_nested(tok, depth + 1)
        tok.expect(")")
        try:
            return complex(re_, im)
        except (TypeError, ValueError):
            raise GraphValueError(f"{tok.where}: bad complex element c({re_!r}, {im!r})") from None
    tok.next()
    try:
        return _parse_scalar_token(kind, v)
    except ValueError:
        raise GraphValueError(f"{tok.where}: bad tensor element {v!r}") from None


def _parse_tensor_body(tok: _Tokens, dtype: DType, shape: TensorShape) -> np.ndarray:
    if not shape.is_fully_defined():
        raise GraphValueError(f"{tok.where}: a tensor value needs a fully known shape, got {shape}")
    count = 1
    for d in shape.dims:
        count *= d
    nbytes = count * (8 if dtype is dtypes.string else max(dtype.np.itemsize, 1))
    if nbytes > MAX_TENSOR_BYTES:
        raise GraphValueError(
            f"{tok.where}: a {dtype.name}{list(shape.dims)} tensor value ({nbytes} bytes) is over "
            f"the limit of {MAX_TENSOR_BYTES} bytes (rill.graph.text.MAX_TENSOR_BYTES)"
        )
    try:
        return _tensor_body(tok, dtype, shape)
    except GraphValueError:
        raise
    except (ValueError, TypeError, OverflowError) as e:  # numpy's conversions, base64
        raise GraphValueError(
            f"{tok.where}: bad {dtype.name}{list(shape.dims)} tensor value: {e}"
        ) from None


def _tensor_body(tok: _Tokens, dtype: DType, shape: TensorShape) -> np.ndarray:
    kind, v = tok.peek()
    if kind == "word" and v == "fill":
        tok.next()
        tok.expect("(")
        val = _parse_nested(tok)
        tok.expect(")")
        if dtype is dtypes.string:
            if isinstance(val, list):
                raise GraphValueError(f"{tok.where}: fill() takes one string, got a list")
            val = val if isinstance(val, bytes) else str(val).encode()
        return np.full(shape.dims, val, dtype=dtype.np)
    if kind == "word" and v == "b64":
        tok.next()
        kind, s = tok.next()
        if kind != "str":
            raise tok.error("a base64 string")
        raw = base64.b64decode(s[1:-1])
        arr = np.frombuffer(raw, dtype=dtype.np.newbyteorder("<")).astype(dtype.np)
        if arr.size != shape.num_elements():
            raise GraphValueError(
                f"{tok.where}: base64 tensor holds {arr.size} values for shape {shape}"
            )
        return arr.reshape(shape.dims)
    val = _parse_nested(tok)
    if dtype is dtypes.string:
        got = np.empty((), dtype=object)
        got[()] = val  # a scalar stays one element, whatever it holds
        if isinstance(val, list):
            got = np.array(val, dtype=object)
        if got.size == 0 and shape.num_elements() == 0:
            got = got.reshape(shape.dims)
        if got.shape != tuple(shape.dims):
            raise GraphValueError(
                f"{tok.where}: string tensor value has shape {list(got.shape)}, expected {shape}"
            )
        arr = np.empty(shape.dims, dtype=object)
        for i, s in enumerate(got.reshape(-1)):
            if isinstance(s, list):
                raise GraphValueError(f"{tok.where}: string tensor value is ragged: {val!r:.80}")
            arr.reshape(-1)[i] = s if isinstance(s, bytes) else str(s).encode()
        return arr
    arr = np.array(val, dtype=dtype.np)
    if arr.size == 0 and shape.num_elements() == 0:
        arr = arr.reshape(shape.dims)  # "[]" stands for every empty shape, e.g. [0,2]
    if arr.shape != shape.dims:
        raise GraphValueError(f"{tok.where}: tensor value has shape {arr.shape}, expected {shape}")
    return arr


def _parse_attr_value(tok: _Tokens, typ: str | None, out0):
    kind, v = tok.peek()
    if typ == "tensor" or (typ is None and v == "tensor"):
        if v == "tensor":
            tok.next()
            tok.expect("<")
            dtype, shape = _parse_type(tok)
            tok.expect(">")
            return _parse_tensor_body(tok, dtype, shape)
        if out0 is None:
            raise GraphValueError(
                f"{tok.where}: an untyped tensor value needs the op's output type"
            )
        return _parse_tensor_body(tok, out0[0], out0[1])
    if typ == "shape" or (typ is None and v == "shape"):
        if v == "shape":
            tok.next()
        return _parse_dims(tok)
    if typ == "type":
        kind, v = tok.next()
        try:
            return dtypes.as_dtype(v)
        except TypeError:
            raise GraphValueError(f"{tok.where}: unknown dtype {v!r}") from None
    if typ == "func" or kind == "func":
        kind, v = tok.next()
        if kind != "func":
            raise tok.error("a function reference @name")
        return NameAttrList(v[1:])
    if v == "[":
        inner = typ[5:-1] if typ and typ.startswith("list(") else None
        tok.next()
        out = []
        while tok.peek()[1] != "]":
            if inner == "shape":
                out.append(_parse_dims(tok))
            else:
                out.append(_parse_attr_value(tok, inner, None))
            if tok.peek()[1] == ",":
                tok.next()
        tok.expect("]")
        return tuple(out)
    tok.next()
    if kind == "word" and v not in ("true", "false", "inf", "nan"):
        try:
            return dtypes.as_dtype(v)
        except TypeError:
            raise GraphValueError(f"{tok.where}: unexpected {v!r} in an attr value") from None
    try:
        val = _parse_scalar_token(kind, v)
    except ValueError:
        raise GraphValueError(f"{tok.where}: bad attr value {v!r}") from None
    if typ == "float" and isinstance(val, int):
        val = float(val)
    return val


def _parse_line(line: str, where: str):
    from rill.graph.graph_def import NodeSpec

    tok = _Tokens(line, where)
    kind, v = tok.next()
    if kind != "ref" or v.startswith("^"):
        raise GraphValueError(f"{where}: a line starts with %name, found {v!r}")
    name = v[1:]
    tok.expect(":")
    outs = []
    if tok.peek()[1] == "(":
        tok.next()
        while tok.peek()[1] != ")":
            outs.append(_parse_type(tok))
            if tok.peek()[1] == ",":
                tok.next()
        tok.expect(")")
    else:
        outs.append(_parse_type(tok))
    tok.expect("=")
    kind, op_type = tok.next()
    if kind != "word":
        raise GraphValueError(f"{where}: expected an op type, found {op_type!r}")
    if not has_op(op_type):
        try:
            get_op_def(op_type)
        except KeyError as e:
            raise GraphValueError(f"{where}: {e.args[0]}") from None
    op_def = get_op_def(op_type)
    tok.expect("(")
    inputs, attrs = [], {}
    while tok.peek()[1] != ")":
        kind, v = tok.peek()
        if kind == "ref":
            tok.next()
            inputs.append(v[1:])
        elif kind == "word" and tok.peek(1)[1] == "=":
            tok.next()
            tok.next()
            a = op_def.attr(v)
            typ = a.type if a else _private_type(v)
            attrs[v] = _parse_attr_value(tok, typ, outs[0] if outs else None)
            if a is None and typ is not None:
                _check_private_attr(where, name, v, typ, attrs[v])
        else:
            raise tok.error("an input %name or an attr name=value")
        if tok.peek()[1] == ",":
            tok.next()
        elif tok.peek()[1] != ")":
            raise tok.error("',' or ')'")
    tok.expect(")")
    device = ""
    while tok.peek()[0] != "eof":
        kind, v = tok.next()
        if kind == "ref" and v.startswith("^"):
            inputs.append("^" + v[2:])
        elif kind == "device":
            device = v[1:]
        else:
            raise GraphValueError(f"{where}: unexpected {v!r} after the op's arguments")
    return NodeSpec(name, op_type, inputs, attrs, device, out_hints=outs, where=where)


_PRIVATE_KINDS = {"list(string)": str, "list(shape)": TensorShape, "string": (str, bytes)}


def _check_private_attr(where: str, node: str, attr: str, typ: str, value) -> None:
    """Private attrs the runtime reads (`_class`, ...) hold their declared type: the op's
    declaration does not check them (found by tools/fuzz: a `_class` of bytes or ints)."""
    want = _PRIVATE_KINDS.get(typ)
    if want is None:
        return
    ok = (
        isinstance(value, tuple) and all(isinstance(x, want) for x in value)
        if typ.startswith("list(")
        else isinstance(value, want)
    )
    if not ok:
        got = repr(value)
        got = got if len(got) <= 80 else got[:77] + "..."
        raise GraphValueError(f"{where}: node {node!r} attr {attr!r} must be a {typ}, got {got}")


def _private_type(name: str):
    from rill.graph.graph_def import _PRIVATE_ATTR_TYPES

    return _PRIVATE_ATTR_TYPES.get(name)


def parse_graph(text: str, graph=None):
    """Builds a Graph from its text form. Lines may come in any order; '#' starts a comment.

    Raises GraphValueError naming the line for a syntax error, an unknown op or a dangling input.
    """
    from rill.graph.graph import Graph
    from rill.graph.graph_def import build_nodes

    graph = graph or Graph()
    specs = []
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        try:
            specs.append(_parse_line(s, f"line {n}"))
        except RecursionError:
            raise GraphValueError(f"line {n}: brackets nest too deeply") from None
    with graph.name_scope(None):
        build_nodes(graph, specs)
    return graph
