"""The op coverage table: for every declared op, which rules the other packages attach to it.

    python -m tools.op_coverage              # plain text table      (make coverage)
    python -m tools.op_coverage --markdown   # a Markdown table
    python -m tools.op_coverage MatMul Conv2D

Columns: shape fn (in the declaration), CPU kernel, GPU kernel (rill.exec), gradient
(rill.autodiff), ONNX (rill.graph.onnx), TFLite (rill.mobile). Each column reads the rule registry
of its kind from rill.graph.op_def.rule_registries(); the packages that own them are imported here
when they can be, so their registrations load. Cells:

    yes   the op has the rule
    no    the registry exists but has no rule for the op
    n/a   nothing to have: a shape fn for an op without outputs, a gradient for an op that is
          explicitly not differentiable (registered as None)
    –     the registry does not exist (its package is not there yet)
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass

# Packages whose import registers rules; a missing one leaves its columns at "–".
RULE_PACKAGES = (
    "rill.exec",
    "rill.autodiff",
    "rill.graph.onnx",
    "rill.graph.onnx.exporter",  # the package loads its halves lazily; this registers export
    "rill.mobile",
    "rill.mobile.convert",
)

YES, NO, NA, ABSENT = "yes", "no", "n/a", "–"


@dataclass(frozen=True)
class Column:
    title: str
    registry: str | None  # the RuleRegistry kind; None: read from the OpDef itself
    cell: Callable  # (op_def, registry or None) -> cell text


def _shape_cell(op_def, _reg) -> str:
    if not op_def.outputs:
        return NA
    return YES if op_def.shape_fn is not None else NO


def _device_cell(device: str) -> Callable:
    def cell(op_def, reg) -> str:
        return YES if (device,) in reg.keys_for(op_def.name) else NO

    return cell


_MISSING = object()


def _gradient_cell(op_def, reg) -> str:
    if not reg.has(op_def.name):
        return NO
    keys = reg.keys_for(op_def.name)
    rules = [reg.lookup(op_def.name, k, _MISSING) for k in keys]
    # not_differentiable(...) registers None: a deliberate "no gradient", not a gap.
    return NA if all(r is None for r in rules) else YES


def _has_cell(op_def, reg) -> str:
    return YES if reg.has(op_def.name) else NO


COLUMNS = (
    Column("shape fn", None, _shape_cell),
    Column("CPU kernel", "kernel", _device_cell("CPU")),
    Column("GPU kernel", "kernel", _device_cell("GPU")),
    Column("gradient", "gradient", _gradient_cell),
    Column("ONNX", "onnx_export", _has_cell),
    Column("TFLite", "tflite", _has_cell),
)


def load_rule_packages() -> dict[str, str]:
    """Imports each rule package it can; returns {package: why not} for the ones it cannot."""
    import rill.graph  # noqa: F401 - declares every op

    failed = {}
    for name in RULE_PACKAGES:
        try:
            importlib.import_module(name)
        except ImportError as e:
            failed[name] = str(e)
    return failed


def coverage_rows(ops: list[str] | None = None) -> list[tuple[str, ...]]:
    """One row per declared op (or per name in `ops`): (op, cell per column)."""
    from rill.graph.op_def import all_op_defs, get_op_def, rule_registries

    registries = rule_registries()
    defs = [get_op_def(o) for o in ops] if ops else all_op_defs()
    rows = []
    for d in defs:
        cells = []
        for col in COLUMNS:
            if col.registry is None:
                cells.append(col.cell(d, None))
            elif col.registry not in registries:
                cells.append(ABSENT)
            else:
                cells.append(col.cell(d, registries[col.registry]))
        rows.append((d.name, *cells))
    return rows


def summary(rows: list[tuple[str, ...]]) -> str:
    parts = []
    for i, col in enumerate(COLUMNS, start=1):
        cells = [r[i] for r in rows]
        if all(c == ABSENT for c in cells):
            parts.append(f"{col.title} {ABSENT}")
            continue
        have = sum(c == YES for c in cells)
        applicable = sum(c != NA for c in cells)
        parts.append(f"{col.title} {have}/{applicable}")
    return f"{len(rows)} ops: " + ", ".join(parts)


def format_table(rows: list[tuple[str, ...]], markdown: bool = False) -> str:
    header = ("op", *(c.title for c in COLUMNS))
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*r) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ops", nargs="*", help="only these ops (default: every declared op)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    failed = load_rule_packages()
    try:
        rows = coverage_rows(args.ops or None)
    except KeyError as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return 2
    print(format_table(rows, markdown=args.markdown))
    print()
    print(summary(rows))
    for name, why in failed.items():
        print(f"not loaded: {name} ({why})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
