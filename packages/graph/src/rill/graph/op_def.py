"""The op registry: every op is declared once with `defop`, in TensorFlow's attr grammar.

A declaration is parsed at import time into frozen dataclasses; a malformed one raises
`OpDefError` and so fails the import of the module that declares it.

>>> d = get_op_def("MatMul")
>>> [a.name for a in d.inputs], d.attr("transpose_a").default
(['a', 'b'], False)

Other packages attach behaviour to ops by name through a `RuleRegistry` (kernels, gradients,
converters); registering a rule for an op that is not declared fails at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from rill.graph import dtypes
from rill.graph.dtypes import DType
from rill.graph.errors import RillError
from rill.graph.shapes import TensorShape

__all__ = [
    "ArgDef",
    "AttrDef",
    "OpDef",
    "OpDefError",
    "RuleRegistry",
    "all_op_defs",
    "defop",
    "get_op_def",
    "has_op",
    "rule_registries",
]

_NO_DEFAULT = object()

ATTR_TYPES = (
    "string", "int", "float", "bool", "type", "shape", "tensor", "func",
    "list(string)", "list(int)", "list(float)", "list(bool)", "list(type)", "list(shape)",
    "list(tensor)", "list(func)",
)  # fmt: skip

_TYPE_SETS = {
    "numbertypes": dtypes.NUMBER_TYPES,
    "realnumbertypes": dtypes.REAL_NUMBER_TYPES,
    "floattypes": dtypes.FLOAT_TYPES,
    "integertypes": dtypes.INTEGER_TYPES,
    "alltypes": dtypes.ALL_TYPES,
}

_TF_TYPE_NAMES = {"float": dtypes.float32, "double": dtypes.float64, "half": dtypes.float16}


class OpDefError(RillError, ValueError):
    """A malformed op declaration or rule registration."""


@dataclass(frozen=True)
class ArgDef:
    """One input or output argument.

    Exactly one of `type`, `type_attr`, `type_list_attr` is set. `number_attr` makes the argument
    a list of `number_attr` tensors of one type (`values: N * T`).
    """

    name: str
    type: DType | None = None
    type_attr: str | None = None
    number_attr: str | None = None
    type_list_attr: str | None = None
    is_ref: bool = False

    @property
    def is_list(self) -> bool:
        return self.number_attr is not None or self.type_list_attr is not None

    def spec(self) -> str:
        t = self.type.name if self.type is not None else (self.type_attr or self.type_list_attr)
        if self.number_attr:
            t = f"{self.number_attr} * {t}"
        return f"{self.name}: {t}"


@dataclass(frozen=True)
class AttrDef:
    name: str
    type: str
    default: object = _NO_DEFAULT
    allowed: tuple | None = None
    minimum: int | None = None

    @property
    def has_default(self) -> bool:
        return self.default is not _NO_DEFAULT

    def spec(self) -> str:
        s = f"{self.name}: {self.type}"
        if self.allowed is not None:
            s += " in {" + ", ".join(str(a) for a in self.allowed) + "}"
        if self.minimum is not None:
            s += f" >= {self.minimum}"
        if self.has_default:
            s += f" = {self.default!r}"
        return s


@dataclass(frozen=True)
class OpDef:
    name: str
    inputs: tuple[ArgDef, ...]
    outputs: tuple[ArgDef, ...]
    attrs: tuple[AttrDef, ...]
    shape_fn: Callable | None = None
    is_stateful: bool = False
    is_commutative: bool = False
    is_aggregate: bool = False
    allows_uninitialized_input: bool = False
    doc: str = ""
    _attr_map: dict = field(default_factory=dict, compare=False, repr=False)
    # Attrs that are set by inference from the inputs (type and number attrs used by inputs).
    inferred_attrs: frozenset = frozenset()

    def attr(self, name: str) -> AttrDef | None:
        return self._attr_map.get(name)

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("_")


_REGISTRY: dict[str, OpDef] = {}
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ARG_RE = re.compile(
    r"^\s*(?P<name>[a-z_][a-z0-9_]*)\s*:\s*(?:(?P<num>[A-Za-z_][A-Za-z0-9_]*)\s*\*\s*)?"
    r"(?P<ref>Ref\()?\s*(?P<type>[A-Za-z_][A-Za-z0-9_]*)\s*\)?\s*$"
)
_ATTR_RE = re.compile(
    r"^\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*:\s*"
    r"(?P<type>list\(\s*\w+\s*\)|list\(\s*\{[^}]*\}\s*\)|\{[^}]*\}|\w+)"
    r"\s*(?:>=\s*(?P<min>-?\d+))?\s*(?:=\s*(?P<default>.+?))?\s*$",
    re.DOTALL,  # a string default may hold a newline (PrintV2's end)
)


def _parse_type_name(text: str, where: str) -> DType:
    text = text.strip()
    t = _TF_TYPE_NAMES.get(text)
    if t is not None:
        return t
    if text.startswith("DT_"):
        text = text[3:].lower()
        t = _TF_TYPE_NAMES.get(text)
        if t is not None:
            return t
    try:
        return dtypes.as_dtype(text)
    except TypeError as e:
        raise OpDefError(f"{where}: unknown type {text!r}") from e


def _split_top(text: str) -> list[str]:
    """Splits on commas outside brackets and quotes."""
    out, depth, cur, quote = [], 0, [], None
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "[({":
            depth += 1
        elif ch in "])}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _parse_scalar_default(text: str, typ: str, where: str):
    text = text.strip()
    if typ == "string":
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            return text[1:-1]
        raise OpDefError(f"{where}: string default must be quoted, got {text!r}")
    if typ == "int":
        try:
            return int(text)
        except ValueError as e:
            raise OpDefError(f"{where}: bad int default {text!r}") from e
    if typ == "float":
        try:
            return float(np.float32(float(text)))  # attrs hold float32 values, as GraphDef does
        except ValueError as e:
            raise OpDefError(f"{where}: bad float default {text!r}") from e
    if typ == "bool":
        if text in ("true", "false"):
            return text == "true"
        raise OpDefError(f"{where}: bool default must be true or false, got {text!r}")
    if typ == "type":
        return _parse_type_name(text, where)
    if typ == "shape":
        if text in ("?", "unknown", "*", "[*]"):
            return TensorShape(None)
        if not (text.startswith("[") and text.endswith("]")):
            raise OpDefError(f"{where}: shape default must be [d0,d1,...] or [*], got {text!r}")
        inner = text[1:-1].strip()
        if inner == "*":
            return TensorShape(None)
        dims = (
            []
            if not inner
            else [None if d.strip() in ("?", "-1") else int(d) for d in inner.split(",")]
        )
        return TensorShape(dims)
    raise OpDefError(f"{where}: attrs of type {typ} cannot have a default")


def _parse_default(text: str, typ: str, where: str):
    if typ.startswith("list("):
        inner_t = typ[5:-1]
        text = text.strip()
        if not (text.startswith("[") and text.endswith("]")):
            raise OpDefError(f"{where}: list default must be [...], got {text!r}")
        return tuple(_parse_scalar_default(p, inner_t, where) for p in _split_top(text[1:-1]))
    return _parse_scalar_default(text, typ, where)


def _parse_attr(spec: str, op_name: str) -> AttrDef:
    where = f"op {op_name} attr {spec!r}"
    m = _ATTR_RE.match(spec)
    if not m:
        raise OpDefError(f"{where}: does not match 'name: type [>= min] [= default]'")
    name, typ = m.group("name"), m.group("type").replace(" ", "")
    allowed = None
    if typ.startswith("{"):
        body = [p.strip() for p in _split_top(typ[1:-1])]
        if not body:
            raise OpDefError(f"{where}: empty allowed-value set")
        if all(p[:1] in "'\"" for p in body):
            typ, allowed = "string", tuple(p[1:-1] for p in body)
        else:
            types: list[DType] = []
            for p in body:
                types.extend(_TYPE_SETS.get(p) or [_parse_type_name(p, where)])
            typ, allowed = "type", tuple(dict.fromkeys(types))
    elif typ.startswith("list({"):  # a list of types from a set: list({float32, int64})
        types = []
        for p in _split_top(typ[6:-2]):
            types.extend(_TYPE_SETS.get(p.strip()) or [_parse_type_name(p.strip(), where)])
        typ, allowed = "list(type)", tuple(dict.fromkeys(types))
    elif typ.startswith("list(") and typ[5:-1] in _TYPE_SETS:
        typ, allowed = "list(type)", _TYPE_SETS[typ[5:-1]]
    elif typ in _TYPE_SETS:
        typ, allowed = "type", _TYPE_SETS[typ]
    if typ not in ATTR_TYPES:
        raise OpDefError(f"{where}: unknown attr type {typ!r}; expected one of {ATTR_TYPES}")
    minimum = m.group("min")
    if minimum is not None:
        if typ not in ("int",) and not typ.startswith("list("):
            raise OpDefError(f"{where}: '>=' applies only to int and list attrs")
        minimum = int(minimum)
    default = _NO_DEFAULT
    if m.group("default") is not None:
        default = _parse_default(m.group("default"), typ, where)
        if allowed is not None:
            vals = default if isinstance(default, tuple) else (default,)
            for v in vals:
                if v not in allowed:
                    raise OpDefError(f"{where}: default {v!r} is not among the allowed values")
        if minimum is not None:
            n = len(default) if isinstance(default, tuple) else default
            if n < minimum:
                raise OpDefError(f"{where}: default {default!r} is below the minimum {minimum}")
    return AttrDef(name, typ, default, allowed, minimum)


def _parse_arg(spec: str, op_name: str, attrs: dict[str, AttrDef]) -> ArgDef:
    where = f"op {op_name} argument {spec!r}"
    m = _ARG_RE.match(spec)
    if not m:
        raise OpDefError(f"{where}: does not match 'name: [N *] type'")
    name, num, typ, ref = m.group("name"), m.group("num"), m.group("type"), bool(m.group("ref"))
    if num is not None:
        a = attrs.get(num)
        if a is None or a.type != "int":
            raise OpDefError(f"{where}: {num!r} must be an int attr of this op")
    if typ in attrs:
        a = attrs[typ]
        if a.type == "type":
            return ArgDef(name, type_attr=typ, number_attr=num, is_ref=ref)
        if a.type == "list(type)":
            if num is not None:
                raise OpDefError(f"{where}: a type-list argument cannot also have a number attr")
            return ArgDef(name, type_list_attr=typ, is_ref=ref)
        raise OpDefError(f"{where}: attr {typ!r} is a {a.type}, not a type")
    return ArgDef(name, type=_parse_type_name(typ, where), number_attr=num, is_ref=ref)


def defop(
    name: str,
    *,
    inputs: Iterable[str] = (),
    outputs: Iterable[str] = (),
    attrs: Iterable[str] = (),
    shape: Callable | None = None,
    stateful: bool = False,
    commutative: bool = False,
    aggregate: bool = False,
    allows_uninitialized_input: bool = False,
    doc: str = "",
) -> OpDef:
    """Declares an op. Raises OpDefError when the declaration is malformed or a duplicate."""
    if not _NAME_RE.match(name):
        raise OpDefError(f"op name {name!r} is not a valid identifier")
    if name in _REGISTRY:
        raise OpDefError(f"op {name} is declared twice")
    attr_list = [_parse_attr(s, name) for s in attrs]
    attr_map: dict[str, AttrDef] = {}
    for a in attr_list:
        if a.name in attr_map:
            raise OpDefError(f"op {name}: attr {a.name!r} declared twice")
        attr_map[a.name] = a
    ins = tuple(_parse_arg(s, name, attr_map) for s in inputs)
    outs = tuple(_parse_arg(s, name, attr_map) for s in outputs)
    seen = set()
    for arg in ins + outs:
        key = ("in" if arg in ins else "out", arg.name)
        if key in seen:
            raise OpDefError(f"op {name}: argument {arg.name!r} declared twice")
        seen.add(key)
    inferred = set()
    for arg in ins:
        for a in (arg.type_attr, arg.number_attr, arg.type_list_attr):
            if a:
                inferred.add(a)
    if shape is None and outs:
        raise OpDefError(f"op {name}: a shape function is required for an op with outputs")
    op = OpDef(
        name=name,
        inputs=ins,
        outputs=outs,
        attrs=tuple(attr_list),
        shape_fn=shape,
        is_stateful=stateful,
        is_commutative=commutative,
        is_aggregate=aggregate,
        allows_uninitialized_input=allows_uninitialized_input,
        doc=doc,
        _attr_map=attr_map,
        inferred_attrs=frozenset(inferred),
    )
    _REGISTRY[name] = op
    return op


def get_op_def(name: str) -> OpDef:
    op = _REGISTRY.get(name)
    if op is None:
        hint = _close_names(name)
        raise KeyError(f"unknown op {name!r}" + (f"; did you mean {hint}?" if hint else ""))
    return op


def has_op(name: str) -> bool:
    return name in _REGISTRY


def all_op_defs() -> list[OpDef]:
    return sorted(_REGISTRY.values(), key=lambda d: d.name)


def _close_names(name: str) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(_REGISTRY), n=3)
    return " or ".join(repr(c) for c in close)


def check_attr_value(attr: AttrDef, value, where: str):
    """Validates and normalizes `value` for `attr`; raises TypeError / ValueError naming `where`."""
    typ = attr.type
    if typ.startswith("list("):
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise TypeError(f"{where}: attr {attr.name!r} expects a {typ}, got {value!r}")
        inner = typ[5:-1]
        out = tuple(_check_scalar(inner, v, attr, where) for v in value)
        if attr.minimum is not None and len(out) < attr.minimum:
            raise ValueError(
                f"{where}: attr {attr.name!r} needs at least {attr.minimum} items, got {len(out)}"
            )
    else:
        out = _check_scalar(typ, value, attr, where)
        if attr.minimum is not None and out < attr.minimum:
            raise ValueError(f"{where}: attr {attr.name!r} must be >= {attr.minimum}, got {out}")
    if attr.allowed is not None:
        for v in out if isinstance(out, tuple) else (out,):
            if v not in attr.allowed:
                shown = ", ".join(str(a) for a in attr.allowed)
                raise (TypeError if typ.endswith("type") or typ.endswith("type)") else ValueError)(
                    f"{where}: attr {attr.name!r} = {v} is not allowed; expected one of {{{shown}}}"
                )
    return out


def _check_scalar(typ: str, v, attr: AttrDef, where: str):
    bad = TypeError(f"{where}: attr {attr.name!r} expects {typ}, got {v!r}")
    if typ == "int":
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise bad
        return int(v)
    if typ == "float":
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise bad
        return float(np.float32(v))  # stored as float32 in GraphDef: round now so trips are exact
    if typ == "bool":
        if not isinstance(v, (bool, np.bool_)):
            raise bad
        return bool(v)
    if typ == "string":
        if isinstance(v, bytes):
            try:
                return v.decode()
            except UnicodeDecodeError:
                return v
        if not isinstance(v, str):
            raise bad
        return v
    if typ == "type":
        try:
            return dtypes.as_dtype(v)
        except TypeError as e:
            raise TypeError(f"{where}: attr {attr.name!r}: {e}") from e
    if typ == "shape":
        from rill.graph.shapes import as_shape

        try:
            return as_shape(v)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{where}: attr {attr.name!r} expects a shape, got {v!r}") from e
    if typ == "tensor":
        if not isinstance(v, np.ndarray):
            v = np.asarray(v)
        return v
    if typ == "func":
        if isinstance(v, str):
            return NameAttrList(v)
        if not isinstance(v, NameAttrList):
            raise bad
        return v
    raise bad


@dataclass(frozen=True)
class NameAttrList:
    """A function reference in an attr (GraphDef's NameAttrList)."""

    name: str
    attr: tuple = ()


class RuleRegistry:
    """A table of rules keyed by op name (and an optional extra key), owned by one package.

    Registration refuses ops that are not declared and duplicate keys, so mistakes fail at import.

    >>> reg = RuleRegistry("example")
    >>> reg.register("MatMul", "rule-for-matmul")
    'rule-for-matmul'
    >>> reg.lookup("MatMul")
    'rule-for-matmul'
    """

    _all: dict[str, RuleRegistry] = {}

    def __init__(self, kind: str):
        self.kind = kind
        self._rules: dict[tuple, object] = {}
        self._by_op: dict[str, list[tuple]] = {}
        RuleRegistry._all[kind] = self

    def register(self, op_type: str, rule, key: tuple = ()):
        if not has_op(op_type):
            hint = _close_names(op_type)
            raise OpDefError(
                f"cannot register a {self.kind} rule for undeclared op {op_type!r}"
                + (f"; did you mean {hint}?" if hint else "")
            )
        full = (op_type, *key)
        if full in self._rules:
            raise OpDefError(f"duplicate {self.kind} rule for {full}")
        self._rules[full] = rule
        self._by_op.setdefault(op_type, []).append(key)
        return rule

    def __call__(self, op_type: str, *key):
        """Decorator form: `@registry("MatMul")`."""

        def deco(rule):
            self.register(op_type, rule, tuple(key))
            return rule

        return deco

    def lookup(self, op_type: str, key: tuple = (), default=None):
        return self._rules.get((op_type, *key), default)

    def keys_for(self, op_type: str) -> list[tuple]:
        return list(self._by_op.get(op_type, ()))

    def has(self, op_type: str) -> bool:
        return op_type in self._by_op

    def ops(self) -> list[str]:
        return sorted(self._by_op)


def rule_registries() -> dict[str, RuleRegistry]:
    return dict(RuleRegistry._all)
