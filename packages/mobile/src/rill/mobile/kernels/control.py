"""Control flow and resource variables: WHILE, IF, CALL_ONCE, VAR_HANDLE, READ_VARIABLE,
ASSIGN_VARIABLE.

WHILE and IF run other subgraphs of the model, each with its own execution state and arena
(`Interpreter.new_subgraph`, planned like the main one). When a body keeps its inputs' shapes
(and both IF branches agree), the operator's output shapes are fixed in prepare; otherwise it
raises DynamicShape and, in the eagerly run subgraph, computes its outputs in prepare.

Resource variables live in the interpreter, keyed by VAR_HANDLE's (container, shared_name);
their tensors hold an int32 resource id, as in TFLite. CALL_ONCE runs its init subgraph on the
first invoke only.
"""

from __future__ import annotations

import numpy as np

from rill.mobile.errors import InvokeError
from rill.mobile.kernels.base import DynamicShape, Kernel, register

__all__ = ["While", "If", "CallOnce", "VarHandle", "ReadVariable", "AssignVariable"]


class _Calls(Kernel):
    """A kernel that runs subgraphs of the model."""

    foldable = False

    def child(self, option: str):
        index = self.options.get(option, -1)
        n = len(self.interp.model.subgraphs)
        if not isinstance(index, int) or not 0 < index < n:
            raise self.fail(f"its {option} {index} is out of range: the model has subgraphs "
                            f"0..{n - 1} (0 is the main one)")  # fmt: skip
        return self.interp.new_subgraph(index)

    def expect_arity(self, sg, n_in: int, n_out: int | None, what: str) -> None:
        if len(sg.sg.inputs) != n_in or (n_out is not None and len(sg.sg.outputs) != n_out):
            raise self.fail(f"its {what} subgraph {sg.index} takes {len(sg.sg.inputs)} inputs "
                            f"and gives {len(sg.sg.outputs)} outputs; the operator passes "
                            f"{n_in}" + ("" if n_out is None else f" and expects {n_out}"))  # fmt: skip

    def run_child(self, sg, values: list[np.ndarray]) -> list[np.ndarray]:
        """Runs subgraph `sg` on `values` (resizing and re-planning it when shapes change);
        returns copies of its outputs."""
        for i, v in zip(sg.sg.inputs, values):
            if sg.input_shapes[i] != v.shape:
                sg.input_shapes[i] = tuple(v.shape)
                sg.allocated = False
        if not sg.allocated:
            sg.allocate()
        for i, v in zip(sg.sg.inputs, values):
            t = sg.tensors[i]
            if t.dtype is not None and v.dtype != t.dtype:
                raise ValueError(f"operator #{self.op.index} {self.op.name}: subgraph "
                                 f"{sg.index} input #{i} is {t.type_name}, got {v.dtype}")  # fmt: skip
            if sg.arrays[i] is not None:
                np.copyto(sg.arrays[i], v)
        sg.invoke()
        return [np.array(sg.arrays[i] if sg.arrays[i] is not None else sg._value(i))
                for i in sg.sg.outputs]  # fmt: skip


@register("WHILE", max_version=1)
class While(_Calls):
    def prepare(self, inputs, outputs):
        self.cond = self.child("cond_subgraph_index")
        self.body = self.child("body_subgraph_index")
        n = len(inputs)
        self.expect_arity(self.cond, n, 1, "cond")
        self.expect_arity(self.body, n, n, "body")
        if len(outputs) != n:
            raise self.fail(f"has {n} inputs but {len(outputs)} outputs")
        if self.eager:
            self.known = self.loop([s.data for s in inputs])
            return [v.shape for v in self.known]
        shapes = [tuple(s.shape) for s in inputs]
        for i, s in zip(self.body.sg.inputs, shapes):
            self.body.input_shapes[i] = s
        for i, s in zip(self.cond.sg.inputs, shapes):
            self.cond.input_shapes[i] = s
        self.body.allocate()
        self.cond.allocate()
        if (
            self.body.dynamic
            or [tuple(self.body.shapes[i]) for i in self.body.sg.outputs] != shapes
        ):
            raise DynamicShape(f"operator #{self.op.index} WHILE: the body changes shapes")
        return shapes

    def loop(self, values):
        values = [np.array(v) for v in values]
        n = 0
        while True:
            if self.interp.cancelled:
                raise InvokeError(f"operator #{self.op.index} WHILE was cancelled "
                                  f"(Interpreter.cancel) after {n} iterations")  # fmt: skip
            n += 1
            (c,) = self.run_child(self.cond, values)
            if not bool(np.asarray(c).reshape(-1)[0]):
                return values
            values = self.run_child(self.body, values)

    def bind(self, inputs, outputs, scratch):
        def run():
            for out, v in zip(outputs, self.loop(inputs)):
                np.copyto(out, v)

        return run


@register("IF", max_version=1)
class If(_Calls):
    def prepare(self, inputs, outputs):
        self.then = self.child("then_subgraph_index")
        self.other = self.child("else_subgraph_index")
        cond, args = inputs[0], inputs[1:]
        for sg, what in ((self.then, "then"), (self.other, "else")):
            self.expect_arity(sg, len(args), len(outputs), what)
        if self.eager:
            self.known = self.branch(cond.data, [s.data for s in args])
            return [v.shape for v in self.known]
        shapes = None
        for sg in (self.then, self.other):
            for i, s in zip(sg.sg.inputs, args):
                sg.input_shapes[i] = tuple(s.shape)
            sg.allocate()
            got = None if sg.dynamic else [tuple(sg.shapes[i]) for i in sg.sg.outputs]
            if got is None or (shapes is not None and got != shapes):
                raise DynamicShape(f"operator #{self.op.index} IF: the branches' shapes differ")
            shapes = got
        return shapes

    def branch(self, cond, args):
        sg = self.then if bool(np.asarray(cond).reshape(-1)[0]) else self.other
        return self.run_child(sg, list(args))

    def bind(self, inputs, outputs, scratch):
        def run():
            for out, v in zip(outputs, self.branch(inputs[0], inputs[1:])):
                np.copyto(out, v)

        return run


@register("CALL_ONCE", max_version=1)
class CallOnce(_Calls):
    def prepare(self, inputs, outputs):
        self.init = self.child("init_subgraph_index")
        self.expect_arity(self.init, 0, 0, "init")
        if self.eager:
            self.run_once()
        return []

    def run_once(self):
        if self.init.index not in self.interp.called_once:
            self.interp.called_once.add(self.init.index)
            self.run_child(self.init, [])

    def bind(self, inputs, outputs, scratch):
        return self.run_once


@register("VAR_HANDLE", max_version=1)
class VarHandle(Kernel):
    foldable = False

    def prepare(self, inputs, outputs):
        key = (str(self.options.get("container", "") or ""),
               str(self.options.get("shared_name", "") or ""))  # fmt: skip
        ids = self.interp.resource_ids
        ids.setdefault(key, len(ids))
        self.known = [np.array(ids[key], np.int32).reshape(outputs[0].shape or ())]
        return [tuple(np.shape(self.known[0]))]


def _resource_id(kernel, spec) -> int:
    data = kernel.need_value(spec, "resource")
    return int(np.asarray(data).reshape(-1)[0])


@register("ASSIGN_VARIABLE", max_version=1)
class AssignVariable(Kernel):
    foldable = False

    def prepare(self, inputs, outputs):
        self.rid = _resource_id(self, inputs[0])
        if self.eager:
            self.interp.resources[self.rid] = np.array(inputs[1].data)
        return []

    def bind(self, inputs, outputs, scratch):
        value, resources, rid = inputs[1], self.interp.resources, self.rid

        def run():
            resources[rid] = np.array(value)

        return run


@register("READ_VARIABLE", max_version=1)
class ReadVariable(Kernel):
    foldable = False

    def prepare(self, inputs, outputs):
        self.rid = _resource_id(self, inputs[0])
        out = outputs[0]
        value = self.interp.resources.get(self.rid)
        if self.eager:
            if value is None:
                raise self.fail(f"reads variable {self.rid} before any ASSIGN_VARIABLE")
            self.known = [np.array(value)]
            return [value.shape]
        if value is not None:
            return [value.shape]
        if out.signature is None or any(d < 0 for d in out.signature):
            raise DynamicShape(f"operator #{self.op.index} READ_VARIABLE: unknown shape")
        return [out.signature]

    def bind(self, inputs, outputs, scratch):
        out, resources, rid, op = outputs[0], self.interp.resources, self.rid, self.op

        def run():
            value = resources.get(rid)
            if value is None:
                raise ValueError(f"operator #{op.index} READ_VARIABLE: variable {rid} is read "
                                 "before any ASSIGN_VARIABLE")  # fmt: skip
            if value.shape != out.shape:
                raise ValueError(f"operator #{op.index} READ_VARIABLE: variable {rid} has shape "
                                 f"{list(value.shape)}, the tensor {list(out.shape)}")  # fmt: skip
            np.copyto(out, value)

        return run
