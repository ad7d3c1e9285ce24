"""The ONNX import registry: one rule per (domain, ONNX op type), building rill ops.

A rule is a function `rule(n, *inputs, **attrs)`: `n` is the node being imported (an
`OnnxNode`: its name, opset, output count, static values of inputs, subgraph import), `inputs`
are the converted input tensors in the node's order (None for an omitted optional input) and
`attrs` the node's attributes as Python values, by their ONNX names. It returns one tensor or a
list with one entry per node output (None for an optional output it does not produce).

    @register_onnx_import("Gemm")
    def gemm(n, a, b, c=None, *, alpha=1.0, beta=1.0, transA=0, transB=0): ...

Registration checks, at import time, that ONNX declares the op and that every keyword-only
parameter is one of its attributes (in some version of the op); a node that carries an attribute
its rule does not take is refused with a message naming the attribute.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import onnx.defs

__all__ = ["ImportRule", "get_import_rule", "import_rules", "register_onnx_import"]

_RULES: dict[tuple[str, str], ImportRule] = {}


@dataclass(frozen=True)
class ImportRule:
    op_type: str
    domain: str
    fn: Callable
    attrs: frozenset[str]
    any_attrs: bool


def _schema_attrs(op_type: str, domain: str) -> set[str]:
    names: set[str] = set()
    for s in onnx.defs.get_all_schemas_with_history():
        if s.name == op_type and s.domain == domain:
            names.update(s.attributes)
    return names


def register_onnx_import(op_type: str, domain: str = "", schemaless: bool = False) -> Callable:
    """Decorator registering the import rule for `op_type` in `domain` ("" is ai.onnx).

    `schemaless`: the op has no onnx schema, and cannot be given one because another domain's
    op has its name (onnx.reference requires op names unique across domains; onnxruntime's
    com.microsoft::Gelu); its attributes are the rule's keyword-only parameters.

    >>> import rill.graph.onnx.importer  # registers every rule
    >>> rule = get_import_rule("Gemm")
    >>> rule.op_type, sorted(rule.attrs)
    ('Gemm', ['alpha', 'beta', 'transA', 'transB'])
    """

    def deco(fn: Callable) -> Callable:
        key = (domain, op_type)
        if key in _RULES:
            raise ValueError(f"an ONNX import rule for {domain or 'ai.onnx'}::{op_type} exists")
        params = inspect.signature(fn).parameters.values()
        attrs = frozenset(p.name for p in params if p.kind is p.KEYWORD_ONLY)
        if schemaless:
            if onnx.defs.has(op_type, domain):
                raise ValueError(f"{domain}::{op_type} has an onnx schema: register it normally")
            _RULES[key] = ImportRule(op_type, domain, fn, attrs, False)
            return fn
        if not onnx.defs.has(op_type, domain):
            raise ValueError(f"ONNX declares no op {domain or 'ai.onnx'}::{op_type}")
        unknown = attrs - _schema_attrs(op_type, domain)
        if unknown:
            raise ValueError(
                f"import rule {fn.__qualname__} for {op_type} takes {sorted(unknown)}, which are "
                f"not attributes of ONNX's {op_type}"
            )
        any_attrs = any(p.kind is p.VAR_KEYWORD for p in params)
        _RULES[key] = ImportRule(op_type, domain, fn, attrs, any_attrs)
        return fn

    return deco


def get_import_rule(op_type: str, domain: str = "") -> ImportRule | None:
    """The rule for an op, or None when rill cannot import it."""
    return _RULES.get(("" if domain == "ai.onnx" else domain, op_type))


def import_rules() -> dict[tuple[str, str], ImportRule]:
    """Every registered rule, keyed by (domain, op type)."""
    return dict(_RULES)
