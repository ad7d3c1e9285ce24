"""Structural checks of a loaded model, run once before any operator is prepared: what the
flatbuffer's indices say must also make sense as a dataflow graph (issue 22)."""

from __future__ import annotations

from rill.mobile.errors import ModelFormatError
from rill.mobile.schema import ModelDef

__all__ = ["check_structure"]


def check_structure(model: ModelDef) -> None:
    """Per subgraph: every output is written by an operator, or is an input or a constant; no
    input is a constant; no input is also written by an operator (variables excepted).
    Raises ModelFormatError naming the subgraph and the tensor."""
    for s, sg in enumerate(model.subgraphs):
        where = f"subgraph {s} ({sg.name or 'unnamed'})"
        written: dict[int, int] = {}
        for op in sg.operators:
            for t in op.outputs:
                if t >= 0:
                    written.setdefault(t, op.index)
        inputs = set(sg.inputs)
        for i in sg.inputs:
            t = sg.tensors[i]
            if t.data is not None:
                raise ModelFormatError(
                    f"{where}: input tensor #{i} '{t.name}' is a constant of the model; an input "
                    "is a tensor the caller sets"
                )
            if i in written and not t.is_variable:
                raise ModelFormatError(
                    f"{where}: input tensor #{i} '{t.name}' is also written by operator "
                    f"#{written[i]}"
                )
        for i in sg.outputs:
            t = sg.tensors[i]
            if i not in written and i not in inputs and t.data is None and not t.is_variable:
                raise ModelFormatError(
                    f"{where}: output tensor #{i} '{t.name}' is written by no operator (and is "
                    "neither an input nor a constant)"
                )
