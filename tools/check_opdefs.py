"""Compares every op rill declares with TensorFlow's definition of it.

    python -m tools.check_opdefs            # every declared op
    python -m tools.check_opdefs MatMul     # some ops
    python -m tools.check_opdefs --all      # also show allowlisted differences

TensorFlow's definitions come from the fact file tools/fixtures/tf_opdefs.json, written from
TensorFlow's op registry by tools/fixtures/make_tf_fixtures.py (TensorFlow is not needed here).
Checked per op: that TensorFlow has it, input and output arguments (names, order, types, number
and type-list attrs, refs), attrs (missing, extra, type, default, allowed values, minimum) and
the is_stateful / is_commutative / is_aggregate / allows_uninitialized_input flags. Attr order is
not checked: a NodeDef holds attrs in a map.

Element types that rill has no DType for (quantized, float8, int4, ...) are dropped from
TensorFlow's allowed-type sets before comparing: rill cannot name them, so it cannot match them.
Ops whose names start with "_" are internal; those TensorFlow does not have are rill's own and are
not checked. Every other difference fails (exit status 1) unless ALLOWED_DIFFERENCES lists it
with a reason.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parent.parent
FACTS = ROOT / "tools" / "fixtures" / "tf_opdefs.json"

# Deliberate differences: (op, where) -> reason. `where` is the Difference.where string the tool
# prints in brackets, e.g. ("MatMul", "attr T: allowed"). An entry must say why rill differs.
ALLOWED_DIFFERENCES: dict[tuple[str, str], str] = {
    ("ImageSummary", "attr bad_color: default"): (
        "rill's attr grammar has no tensor defaults; the image_summary builder always sets "
        "TensorFlow's default (opaque red) and the kernel uses it when the attr is absent"
    ),
    ("_FusedDepthwiseConv2dNative", "attr padding: allowed"): (
        "the remapper fuses the EXPLICIT-padded depthwise convolutions ONNX models import as "
        "(asymmetric pads), which TensorFlow's fused op cannot express; planner-only, never "
        "serialized into a user's graph"
    ),
    ("_FusedDepthwiseConv2dNative", "attr explicit_paddings: extra"): (
        "carries the pads of EXPLICIT padding (see the padding entry), as DepthwiseConv2dNative's "
        "own explicit_paddings attr does"
    ),
}


@dataclass(frozen=True)
class Difference:
    op: str
    where: str  # a stable key: "op", "inputs", "input a", "attr T: default", "is_stateful", ...
    message: str

    @property
    def allowed_reason(self) -> str | None:
        return ALLOWED_DIFFERENCES.get((self.op, self.where))


def load_facts(path: pathlib.Path = FACTS) -> dict:
    return json.loads(path.read_text())


# -- rill's declarations in the fact file's form ------------------------------------------------


def _dtype_name(t) -> str:
    return t.name


def _rill_value(value, typ: str):
    """A rill attr value in the fact file's JSON form."""
    from rill.graph.shapes import TensorShape

    if typ.startswith("list("):
        return [_rill_value(v, typ[5:-1]) for v in value]
    if typ == "type":
        return _dtype_name(value)
    if typ == "shape":
        assert isinstance(value, TensorShape)
        return {
            "dims": None if value.dims is None else [-1 if d is None else d for d in value.dims]
        }
    if typ == "float":
        return float(value)
    if typ == "tensor":
        import numpy as np

        arr = np.asarray(value)
        return {"dtype": str(arr.dtype), "shape": list(arr.shape), "values": arr.tolist()}
    if typ == "func":
        return {"func": value.name}
    if isinstance(value, bytes):
        return {"bytes_hex": value.hex()}
    return value


def _rill_arg(a) -> dict:
    out = {"name": a.name}
    if a.type_attr:
        out["type_attr"] = a.type_attr
    elif a.type_list_attr:
        out["type_list_attr"] = a.type_list_attr
    else:
        out["type"] = _dtype_name(a.type)
    if a.number_attr:
        out["number_attr"] = a.number_attr
    if a.is_ref:
        out["is_ref"] = True
    return out


def rill_op_json(op_def) -> dict:
    """A rill OpDef in the same JSON form as the fact file's entries."""
    attrs = []
    for a in op_def.attrs:
        e = {"name": a.name, "type": a.type}
        if a.has_default:
            e["default"] = _rill_value(a.default, a.type)
        if a.allowed is not None:
            inner = a.type[5:-1] if a.type.startswith("list(") else a.type
            e["allowed"] = [_rill_value(v, inner) for v in a.allowed]
        if a.minimum is not None:
            e["minimum"] = a.minimum
        attrs.append(e)
    return {
        "inputs": [_rill_arg(a) for a in op_def.inputs],
        "outputs": [_rill_arg(a) for a in op_def.outputs],
        "attrs": attrs,
        "is_stateful": op_def.is_stateful,
        "is_commutative": op_def.is_commutative,
        "is_aggregate": op_def.is_aggregate,
        "allows_uninitialized_input": op_def.allows_uninitialized_input,
    }


# -- comparing ------------------------------------------------------------------------------------


def _arg_text(a: dict) -> str:
    t = a.get("type") or a.get("type_attr") or a.get("type_list_attr")
    if a.get("number_attr"):
        t = f"{a['number_attr']} * {t}"
    if a.get("is_ref"):
        t = f"Ref({t})"
    return f"{a['name']}: {t}"


def _compare_args(op: str, kind: str, rill: list[dict], tf: list[dict]) -> list[Difference]:
    out = []
    rn, tn = [a["name"] for a in rill], [a["name"] for a in tf]
    if rn != tn:
        out.append(
            Difference(
                op,
                f"{kind}s",
                f"{kind} arguments differ: rill ({', '.join(map(_arg_text, rill))}) vs "
                f"TensorFlow ({', '.join(map(_arg_text, tf))})",
            )
        )
        return out
    for r, t in zip(rill, tf):
        if r != t:
            out.append(
                Difference(
                    op,
                    f"{kind} {r['name']}",
                    f"{kind} {r['name']!r}: rill declares {_arg_text(r)!r}, TensorFlow "
                    f"{_arg_text(t)!r}",
                )
            )
    return out


def _same_value(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and float(a) == float(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    return a == b


def _compare_attr(op: str, r: dict, t: dict, known_types: set[str]) -> list[Difference]:
    out = []
    name = r["name"]
    if r["type"] != t["type"]:
        out.append(
            Difference(
                op,
                f"attr {name}: type",
                f"attr {name!r}: rill type {r['type']}, TensorFlow {t['type']}",
            )  # fmt: skip
        )
        return out
    if ("default" in r) != ("default" in t):
        has, lacks = ("rill", "TensorFlow") if "default" in r else ("TensorFlow", "rill")
        val = r.get("default", t.get("default"))
        out.append(
            Difference(
                op,
                f"attr {name}: default",
                f"attr {name!r}: {has} has default {json.dumps(val)}, {lacks} has none",
            )
        )
    elif "default" in r and not _same_value(r["default"], t["default"]):
        out.append(
            Difference(
                op,
                f"attr {name}: default",
                f"attr {name!r}: default {json.dumps(r['default'])} in rill, "
                f"{json.dumps(t['default'])} in TensorFlow",
            )
        )
    is_type = t["type"] in ("type", "list(type)")
    tf_allowed = t.get("allowed")
    if tf_allowed is not None and is_type:
        tf_allowed = [x for x in tf_allowed if x in known_types]
    rill_allowed = r.get("allowed")
    if is_type and rill_allowed is not None and set(rill_allowed) >= known_types:
        rill_allowed = None  # every type rill has: the same as an unrestricted "type"
    if is_type and tf_allowed is not None and set(tf_allowed) >= known_types:
        tf_allowed = None
    if (rill_allowed is None) != (tf_allowed is None):
        if rill_allowed is None:
            msg = f"attr {name!r}: rill allows any value, TensorFlow only {_set_text(tf_allowed)}"
        else:
            msg = f"attr {name!r}: rill allows only {_set_text(rill_allowed)}, TensorFlow any"
        out.append(Difference(op, f"attr {name}: allowed", msg))
    elif rill_allowed is not None:
        rs, ts = set(map(_hashable, rill_allowed)), set(map(_hashable, tf_allowed))
        if rs != ts:
            parts = []
            if ts - rs:
                parts.append(f"rill lacks {_set_text(ts - rs)}")
            if rs - ts:
                parts.append(f"rill adds {_set_text(rs - ts)}")
            out.append(
                Difference(op, f"attr {name}: allowed", f"attr {name!r}: {'; '.join(parts)}")
            )
    if r.get("minimum") != t.get("minimum"):
        out.append(
            Difference(
                op,
                f"attr {name}: minimum",
                f"attr {name!r}: minimum {r.get('minimum')} in rill, {t.get('minimum')} in "
                "TensorFlow (None: no minimum)",
            )
        )
    return out


def _hashable(v):
    return json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v


def _set_text(values) -> str:
    return "{" + ", ".join(sorted(str(v) for v in values)) + "}"


def compare_op(op: str, rill: dict, tf: dict, known_types: set[str]) -> list[Difference]:
    """The differences between rill's declaration and TensorFlow's, both in fact-file form."""
    out = _compare_args(op, "input", rill["inputs"], tf["inputs"])
    out += _compare_args(op, "output", rill["outputs"], tf["outputs"])
    r_attrs = {a["name"]: a for a in rill["attrs"]}
    t_attrs = {a["name"]: a for a in tf["attrs"]}
    for name in t_attrs:
        if name not in r_attrs:
            spec = t_attrs[name]
            dflt = f" = {json.dumps(spec['default'])}" if "default" in spec else ""
            out.append(
                Difference(
                    op,
                    f"attr {name}: missing",
                    f"attr {name!r} ({spec['type']}{dflt}) is in TensorFlow but not in rill",
                )
            )
    for name in r_attrs:
        if name not in t_attrs:
            out.append(
                Difference(
                    op, f"attr {name}: extra", f"attr {name!r} is in rill but not in TensorFlow"
                )
            )
        else:
            out += _compare_attr(op, r_attrs[name], t_attrs[name], known_types)
    for flag in ("is_stateful", "is_commutative", "is_aggregate", "allows_uninitialized_input"):
        if bool(rill[flag]) != bool(tf[flag]):
            out.append(
                Difference(op, flag, f"{flag} is {rill[flag]} in rill, {tf[flag]} in TensorFlow")
            )
    return out


def check(ops: list | None = None, facts: dict | None = None) -> list[Difference]:
    """Every difference between rill's declared ops (or `ops`: names or OpDefs) and TensorFlow's
    definitions."""
    import rill.graph  # noqa: F401 - declares every op
    from rill.graph import dtypes
    from rill.graph.op_def import all_op_defs, get_op_def

    facts = facts or load_facts()
    tf_ops, tf_names = facts["ops"], set(facts["all_op_names"])
    known_types = {t.name for t in dtypes.ALL_TYPES}
    defs = [get_op_def(o) if isinstance(o, str) else o for o in ops] if ops else all_op_defs()
    out: list[Difference] = []
    for d in defs:
        if d.name not in tf_names:
            if not d.name.startswith("_"):
                out.append(Difference(d.name, "op", "TensorFlow has no op of this name"))
            continue
        if d.name not in tf_ops:
            out.append(
                Difference(
                    d.name,
                    "op",
                    "TensorFlow has this op but the fact file does not record it; regenerate "
                    "it with /opt/tfenv/bin/python tools/fixtures/make_tf_fixtures.py opdefs",
                )
            )
            continue
        out += compare_op(d.name, rill_op_json(d), tf_ops[d.name], known_types)
    return out


def stale_allowlist_entries(diffs: list[Difference]) -> list[tuple[str, str]]:
    """Allowlist entries for declared ops that no longer match any difference."""
    from rill.graph.op_def import has_op

    found = {(d.op, d.where) for d in diffs}
    return [k for k in ALLOWED_DIFFERENCES if has_op(k[0]) and k not in found]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ops", nargs="*", help="only these ops (default: every declared op)")
    parser.add_argument("--all", action="store_true", help="also show allowlisted differences")
    args = parser.parse_args(argv)
    from rill.graph.op_def import all_op_defs

    facts = load_facts()
    try:
        diffs = check(args.ops or None, facts)
    except KeyError as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return 2
    n_ops = len(args.ops) if args.ops else len(all_op_defs())
    failing = [d for d in diffs if d.allowed_reason is None]
    shown = diffs if args.all else failing
    current = None
    for d in shown:
        if d.op != current:
            current = d.op
            print(d.op)
        note = f"  (allowed: {d.allowed_reason})" if d.allowed_reason else ""
        print(f"  [{d.where}] {d.message}{note}")
    stale = [] if args.ops else stale_allowlist_entries(diffs)
    for op, where in stale:
        print(f"stale allowlist entry ({op!r}, {where!r}): the difference is gone; remove it")
    bad_ops = len({d.op for d in failing})
    print(
        f"checked {n_ops} ops against TensorFlow {facts['tensorflow_version']}: "
        f"{len(failing)} differences in {bad_ops} ops, "
        f"{len(diffs) - len(failing)} allowlisted"
    )
    return 1 if failing or stale else 0


if __name__ == "__main__":
    sys.exit(main())
