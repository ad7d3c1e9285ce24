"""`rill-onnx`: ONNX models to rill graphs and back, a support check and a parity report.

    rill-onnx check model.onnx
    rill-onnx import model.onnx -o graph.pb [--text graph.txt]
    rill-onnx export graph.pb -o model.onnx --inputs x:0 --outputs y:0 [--opset 17]
    rill-onnx parity model.onnx [--input x.npy | --input x=x.npy ...] [--rtol R] [--atol A]

`check` lists the ops rill cannot import, with their opsets, before anything else runs (exit
status 1 when there is any); `import` runs the same check first. `parity` imports the model and
compares every node's outputs with onnxruntime's (exit status 1 when any differs beyond the
tolerance). Errors in the input (a truncated file, an unknown op, a missing initializer) print
one message and exit with status 2.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

from rill.graph.errors import OpError
from rill.graph.onnx.import_util import OnnxImportError
from rill.graph.onnx.importer import MIN_OPSET, _ai_onnx_opset, load_model, unsupported_ops

__all__ = ["main"]


def _print_unsupported(model, out) -> int:
    missing = unsupported_ops(model)
    if not missing:
        return 0
    print(f"{len(missing)} op type(s) rill cannot import:", file=out)
    for domain, op_type, opset in missing:
        print(f"  {domain or 'ai.onnx'}::{op_type} (opset {opset})", file=out)
    return 1


def _check(args) -> int:
    m = load_model(args.model)
    v = _ai_onnx_opset(m)
    ops = {(n.domain or "ai.onnx", n.op_type) for n in m.graph.node}
    note = "" if v >= MIN_OPSET else f"; read through onnx's version converter to {MIN_OPSET}"
    print(f"{args.model}: ai.onnx opset {v}{note}; {len(m.graph.node)} nodes, "
          f"{len(ops)} op types")  # fmt: skip
    status = _print_unsupported(m, sys.stdout)
    if not status:
        print("every op is supported")
    return status


def _import(args) -> int:
    from rill.graph.onnx.importer import import_onnx

    m = load_model(args.model)
    if _print_unsupported(m, sys.stderr):
        return 1
    graph, inputs, outputs = import_onnx(m)
    out = pathlib.Path(args.output)
    out.write_bytes(graph.as_graph_def().SerializeToString())
    if args.text:
        pathlib.Path(args.text).write_text(graph.to_text())
    print(f"wrote {out} ({len(graph.get_operations())} ops)")
    for name, t in inputs.items():
        print(f"  input  {name} -> {t.name} {t.dtype.name}{t.shape}")
    for name, t in outputs.items():
        print(f"  output {name} -> {t.name} {t.dtype.name}{t.shape}")
    return 0


def _load_graph(path: str):
    import rill.graph as rg

    data = pathlib.Path(path).read_bytes()
    if path.endswith((".pb", ".graphdef")):
        g = rg.Graph()
        with g.as_default():
            rg.import_graph_def(data, name="")
        return g
    return rg.parse_graph(data.decode())


def _names(values) -> list[str]:
    return [n.strip() for v in values or () for n in v.split(",") if n.strip()]


def _export(args) -> int:
    import onnx

    from rill.graph.onnx.exporter import export_onnx

    graph = _load_graph(args.graph)
    model = export_onnx(graph, _names(args.inputs), _names(args.outputs), opset=args.opset)
    onnx.save(model, args.output)
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    print(f"wrote {args.output} ({len(model.graph.node)} nodes, opset {opset})")
    return 0


def _parity(args) -> int:
    from rill.graph.onnx.parity import format_parity, parity_report

    m = load_model(args.model)
    if _print_unsupported(m, sys.stderr):
        return 1
    inputs: dict | list = {}
    positional = []
    for spec in args.input or ():
        name, sep, path = spec.partition("=")
        if sep:
            inputs[name] = np.load(path)
        else:
            positional.append(np.load(spec))
    if positional:
        inits = {t.name for t in m.graph.initializer}
        fed = [vi.name for vi in m.graph.input if vi.name not in inits and vi.name not in inputs]
        inputs.update(zip(fed, positional))
    rows = parity_report(m, inputs, rtol=args.rtol, atol=args.atol, seed=args.seed)
    print(format_parity(rows, rtol=args.rtol, atol=args.atol))
    return 0 if all(r.ok for r in rows) else 1


def build_parser() -> argparse.ArgumentParser:
    from rill.graph.onnx.parity import DEFAULT_ATOL, DEFAULT_RTOL

    ap = argparse.ArgumentParser(prog="rill-onnx", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help="list the ops of a model that rill cannot import")
    p.add_argument("model")
    p.set_defaults(func=_check)
    p = sub.add_parser("import", help="an ONNX model to a rill GraphDef")
    p.add_argument("model")
    p.add_argument("-o", "--output", required=True, help="the GraphDef (.pb) to write")
    p.add_argument("--text", help="also write the graph's text form here")
    p.set_defaults(func=_import)
    p = sub.add_parser("export", help="a rill GraphDef (or text graph) to an ONNX model")
    p.add_argument("graph")
    p.add_argument("-o", "--output", required=True, help="the .onnx file to write")
    p.add_argument("--inputs", action="append", required=True, help="x:0,y:0")
    p.add_argument("--outputs", action="append", required=True, help="logits:0")
    p.add_argument(
        "--opset",
        type=int,
        help="ai.onnx opset (default: the newest the installed onnxruntime loads, else 21)",
    )
    p.set_defaults(func=_export)
    p = sub.add_parser("parity", help="compare every node's outputs with onnxruntime")
    p.add_argument("model")
    p.add_argument("--input", action="append",
                   help="NAME=file.npy, or file.npy for the next unnamed input; missing inputs "
                   "are random")  # fmt: skip
    p.add_argument("--rtol", type=float, default=DEFAULT_RTOL)
    p.add_argument("--atol", type=float, default=DEFAULT_ATOL)
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.set_defaults(func=_parity)
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (OnnxImportError, OSError, ValueError, KeyError, OpError) as e:
        print(f"rill-onnx {args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
