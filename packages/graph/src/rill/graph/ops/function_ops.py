"""Function calls and functional control flow (TensorFlow 2's graphs): PartitionedCall,
StatefulPartitionedCall, While, StatelessWhile, If, StatelessIf, Case, StatelessCase.

Their bodies are functions of the GraphDef's FunctionDefLibrary. rill runs them by lowering at
import (rill.graph.function_lowering): calls are inlined, If and Case become Switch/Merge,
While becomes an Enter/Merge/Switch/NextIteration/Exit loop, so the executor, placement and
the control-flow gradients see the primitives of the control-flow paper.
"""

from __future__ import annotations

from rill.graph.op_def import defop
from rill.graph.shapes import unknown_shape

_CALL = ["Tin: list(type) >= 0", "Tout: list(type) >= 0", "f: func", "config: string = ''",
         "config_proto: string = ''", "executor_type: string = ''"]  # fmt: skip
_WHILE = ["T: list(type) >= 0", "cond: func", "body: func", "output_shapes: list(shape) = []",
          "parallel_iterations: int = 10"]  # fmt: skip
_IF = ["Tcond: type", "Tin: list(type) >= 0", "Tout: list(type) >= 0", "then_branch: func",
       "else_branch: func", "output_shapes: list(shape) = []"]  # fmt: skip
_CASE = ["Tin: list(type) >= 0", "Tout: list(type) >= 0", "branches: list(func) >= 1",
         "output_shapes: list(shape) = []"]  # fmt: skip


def _recorded_shapes(op):
    shapes = op.attrs.get("output_shapes") or ()
    n = len(op.outputs)
    if len(shapes) == n:
        return list(shapes)
    return [unknown_shape()] * n


for _name, _stateful in (("PartitionedCall", False), ("StatefulPartitionedCall", True)):
    defop(_name, inputs=["args: Tin"], outputs=["output: Tout"], attrs=_CALL,
          shape=_recorded_shapes, stateful=_stateful,
          doc="Calls the function f on args (inlined when a GraphDef is imported).")  # fmt: skip
for _name, _stateful in (("While", True), ("StatelessWhile", False)):
    defop(_name, inputs=["input: T"], outputs=["output: T"], attrs=_WHILE,
          shape=_recorded_shapes, stateful=_stateful,
          doc="Runs body on the loop variables while cond holds (a v1 loop after import).")  # fmt: skip
for _name, _stateful in (("If", True), ("StatelessIf", False)):
    defop(_name, inputs=["cond: Tcond", "input: Tin"], outputs=["output: Tout"], attrs=_IF,
          shape=_recorded_shapes, stateful=_stateful,
          doc="then_branch(input) if cond else else_branch(input) (Switch/Merge after import).")  # fmt: skip
for _name, _stateful in (("Case", True), ("StatelessCase", False)):
    defop(_name, inputs=["branch_index: int32", "input: Tin"], outputs=["output: Tout"],
          attrs=_CASE, shape=_recorded_shapes, stateful=_stateful,
          doc="branches[branch_index](input), the last branch for an index out of range.")  # fmt: skip
