"""Op-by-op parity of an ONNX import: every node's outputs in rill against onnxruntime's.

The model runs twice on the same inputs: in onnxruntime with every value of its main graph
exposed as an output, and as the imported rill graph in a Session fetching the same values.
Each node output is compared at a stated tolerance,

    |rill − ort| <= atol + rtol · |ort|      (elementwise; shapes and dtypes must match)

and the table lists the worst first: the largest ratio of error to tolerance.

An output that fails chained is checked once more alone: its node runs by itself in rill on
onnxruntime's values of its inputs. Where it then passes, the difference came in with its
inputs, each of which has its own row: the row passes, noted "inherited" with the error alone
(a Softmax of logits in the 1e9s, say, turns their last-bit differences into different
probabilities, however exact the Softmax).

    rows = parity_report("model.onnx", {"x": x})
    print(format_parity(rows))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from rill.graph.onnx.importer import import_onnx, load_model

__all__ = ["DEFAULT_ATOL", "DEFAULT_RTOL", "ParityRow", "format_parity", "parity_report"]

DEFAULT_RTOL = 1e-4
DEFAULT_ATOL = 1e-5


@dataclass(frozen=True)
class ParityRow:
    """One node output: the errors of rill's value against onnxruntime's."""

    node: str
    op_type: str
    output: str
    max_abs_err: float
    max_rel_err: float
    ratio: float  # max |rill − ort| / (atol + rtol·|ort|); <= 1 passes
    ok: bool
    note: str = ""


def _expose_all(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """A copy of `model` whose outputs are all its main-graph node outputs with known types."""
    inferred = onnx.shape_inference.infer_shapes(model)
    typed = {vi.name: vi for vi in [*inferred.graph.value_info, *inferred.graph.output]}
    m = onnx.ModelProto()
    m.CopyFrom(model)
    present = {o.name for o in m.graph.output}
    names = []
    for node in m.graph.node:
        for o in node.output:
            if not o:
                continue
            names.append(o)
            if o in present:
                continue
            vi = typed.get(o)
            if vi is None or not vi.type.tensor_type.elem_type:
                continue
            m.graph.output.append(helper.make_tensor_value_info(o, vi.type.tensor_type.elem_type,
                                                                None))  # fmt: skip
            present.add(o)
    return m, [n for n in names if n in present]


def _ort_session(ort, model: onnx.ModelProto):
    """An onnxruntime session; a model at an IR version newer than onnxruntime reads is
    retried at the lowest IR version its opsets allow (the graph itself is unchanged)."""
    opts = ort.SessionOptions()
    opts.log_severity_level = 3  # errors only: its graph optimizer's notes are not the report's
    cpu = ["CPUExecutionProvider"]
    try:
        return ort.InferenceSession(model.SerializeToString(), opts, providers=cpu)
    except Exception as e:
        if "IR version" not in str(e):
            raise
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.ir_version = helper.find_min_ir_version_for(list(m.opset_import))
    return ort.InferenceSession(m.SerializeToString(), opts, providers=cpu)


def _feeds(model: onnx.ModelProto, inputs, seed: int) -> dict[str, np.ndarray]:
    """Inputs by name: the given ones, random ones (seeded) for the rest."""
    inits = {t.name for t in model.graph.initializer}
    fed = [vi for vi in model.graph.input if vi.name not in inits]
    if inputs is None:
        inputs = {}
    elif not isinstance(inputs, dict):
        inputs = dict(zip([vi.name for vi in fed], inputs))
    rng = np.random.default_rng(seed)
    out = {}
    for vi in fed:
        if vi.name in inputs:
            out[vi.name] = np.asarray(inputs[vi.name])
            continue
        t = vi.type.tensor_type
        dt = helper.tensor_dtype_to_np_dtype(t.elem_type)
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in t.shape.dim]
        if np.issubdtype(dt, np.floating):
            out[vi.name] = rng.standard_normal(shape).astype(dt)
        elif dt == np.bool_:
            out[vi.name] = rng.random(shape) < 0.5
        else:
            out[vi.name] = rng.integers(0, 4, shape).astype(dt)
    return out


def _compare(a: np.ndarray, b: np.ndarray, rtol: float, atol: float):
    """(max abs err, max rel err, ratio, note) of rill's `a` against onnxruntime's `b`."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return np.inf, np.inf, np.inf, f"shape {a.shape} != {b.shape}"
    if a.dtype != b.dtype:
        return np.inf, np.inf, np.inf, f"dtype {a.dtype} != {b.dtype}"
    if a.size == 0:
        return 0.0, 0.0, 0.0, ""
    if a.dtype == object or a.dtype == np.bool_:
        bad = a != b
        e = 1.0 if bad.any() else 0.0
        return e, e, np.inf if e else 0.0, ""
    x, y = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        same = (x == y) | (np.isnan(x) & np.isnan(y))
        diff = np.where(same, 0.0, np.abs(x - y))
        diff = np.where(np.isnan(diff), np.inf, diff)  # NaN on one side only, inf vs -inf
        tol = atol + rtol * np.abs(np.where(np.isfinite(y), y, 0.0))
        rel = diff / np.maximum(np.abs(y), np.finfo(np.float64).tiny)
        ratio = np.where(diff == 0, 0.0, diff / tol)  # equal values pass even at zero tolerance
    return float(diff.max()), float(rel.max()), float(ratio.max()), ""


def parity_report(model, inputs=None, rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL,
                  seed: int = 0) -> list[ParityRow]:  # fmt: skip
    """Compares every main-graph node output of rill's import with onnxruntime, worst first.

    Args:
        model: an onnx.ModelProto, its bytes, or a path.
        inputs: arrays for the graph inputs without initializers (a dict by name, or a list in
            graph-input order); the ones not given are random (seeded by `seed`).
        rtol, atol: the tolerance, |rill − ort| <= atol + rtol·|ort| elementwise.

    Returns:
        One ParityRow per node output onnxruntime could expose, the worst first.
    """
    try:
        import onnxruntime as ort  # the reference runtime, needed by this report only
    except ImportError:
        raise ImportError("the parity report runs the model in onnxruntime: pip install "
                          "onnxruntime") from None  # fmt: skip
    from rill.exec import Session  # runs the imported graph; rill.graph does not need it

    m = load_model(model)
    feeds = _feeds(m, inputs, seed)
    exposed, names = _expose_all(m)
    sess = _ort_session(ort, exposed)
    ort_names = [o.name for o in sess.get_outputs()]
    ort_vals = dict(zip(ort_names, sess.run(None, feeds)))
    values: dict = {}
    graph, placeholders, _ = import_onnx(m, value_map=values)
    fetch = [n for n in names if n in values and n in ort_vals]
    with Session(graph=graph) as s:
        got = s.run([values[n] for n in fetch], {placeholders[k]: v for k, v in feeds.items()})
    rill_vals = dict(zip(fetch, got))
    producer = {o: nd for nd in m.graph.node for o in nd.output if o}
    rows = []
    for name in names:
        nd = producer[name]
        label = nd.name or f"{nd.op_type}({name})"
        if name not in rill_vals:
            rows.append(ParityRow(label, nd.op_type, name, np.inf, np.inf, np.inf, False,
                                  "not computed by one side"))  # fmt: skip
            continue
        ab, rel, ratio, note = _compare(rill_vals[name], ort_vals[name], rtol, atol)
        ok = ratio <= 1.0
        if not ok and not note:
            alone = _alone(m, nd, name, ort_vals, feeds)
            if alone is not None:
                a_ab, a_rel, a_ratio, a_note = _compare(alone, ort_vals[name], rtol, atol)
                if a_ratio <= 1.0 and not a_note:
                    ok, note = True, f"inherited: alone {a_ab:.1e} abs, {a_rel:.1e} rel"
        rows.append(ParityRow(label, nd.op_type, name, ab, rel, ratio, ok, note))
    rows.sort(key=lambda r: (r.ok, -r.ratio))
    return rows


def _alone(model: onnx.ModelProto, node, output: str, ort_vals: dict, feeds: dict):
    """rill's value of `output` with `node` run alone on onnxruntime's values of its inputs
    (None where that cannot be set up: a subgraph, an input onnxruntime did not expose, or an
    import or run that fails)."""
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
           for a in node.attribute):  # fmt: skip
        return None  # its subgraphs may read the outer scope
    inits = {t.name: t for t in model.graph.initializer}
    g_inputs, g_inits, values = [], [], {}
    for i in dict.fromkeys(x for x in node.input if x):
        if i in inits:
            g_inits.append(inits[i])
            continue
        v = ort_vals.get(i, feeds.get(i))
        if v is None:
            return None
        v = np.asarray(v)
        g_inputs.append(helper.make_tensor_value_info(
            i, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)))  # fmt: skip
        values[i] = v
    want = np.asarray(ort_vals[output])
    outs = [helper.make_tensor_value_info(output, helper.np_dtype_to_tensor_dtype(want.dtype),
                                          None)]  # fmt: skip
    one = helper.make_model(helper.make_graph([node], "alone", g_inputs, outs, g_inits),
                            opset_imports=list(model.opset_import))  # fmt: skip
    one.ir_version = model.ir_version
    try:
        from rill.exec import Session

        graph, placeholders, results = import_onnx(one)
        with Session(graph=graph) as s:
            return s.run(results[output], {placeholders[k]: v for k, v in values.items()})
    except Exception:  # noqa: BLE001 - no isolated value: the chained row stands
        return None


def format_parity(rows: list[ParityRow], rtol: float = DEFAULT_RTOL,
                  atol: float = DEFAULT_ATOL) -> str:  # fmt: skip
    """The report as a text table, worst first, with the tolerance stated on top.

    >>> print(format_parity([ParityRow("conv1", "Conv", "y", 2e-6, 1e-6, 0.2, True)]))
    tolerance: |rill - onnxruntime| <= 1e-05 + 0.0001 * |onnxruntime|, elementwise
    node   op type  output  max abs err  max rel err  result
    conv1  Conv     y           2.0e-06      1.0e-06  pass
    1 of 1 node outputs pass
    """
    header = ("node", "op type", "output", "max abs err", "max rel err", "result")
    body = []
    for r in rows:
        result = ("pass" if r.ok else "FAIL") + (f" ({r.note})" if r.note else "")
        body.append((r.node, r.op_type, r.output, f"{r.max_abs_err:.1e}", f"{r.max_rel_err:.1e}",
                     result))  # fmt: skip
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(header)]  # fmt: skip
    right = {3, 4}

    def line(cells):
        out = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in
               enumerate(zip(cells, widths))]  # fmt: skip
        return "  ".join(out).rstrip()

    lines = [f"tolerance: |rill - onnxruntime| <= {atol:g} + {rtol:g} * |onnxruntime|, "
             "elementwise", line(header)]  # fmt: skip
    lines += [line(b) for b in body]
    passed = sum(r.ok for r in rows)
    lines.append(f"{passed} of {len(rows)} node outputs pass")
    return "\n".join(lines)
