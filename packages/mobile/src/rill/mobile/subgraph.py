"""The execution state of one subgraph: kernels, shapes, the arena plan and its views.

A subgraph whose shapes are all known in prepare (constants, input shapes, values derived from
shapes such as SHAPE's) is planned once and runs its bound kernels in order. One whose output
shapes depend on run-time values (a DynamicShape from some kernel's prepare: WHERE, UNIQUE, a
computed reshape) runs *eagerly*: every invoke prepares each operator with every input's current
value and gives its outputs fresh arrays, as TFLite does for dynamic tensors.
"""

from __future__ import annotations

import numpy as np

from rill.mobile import program, program_int8
from rill.mobile.errors import InvokeError, ModelFormatError, PrepareError, UnsupportedOperatorError
from rill.mobile.kernels.base import DynamicShape, Kernel, TensorSpec, lookup
from rill.mobile.planner import ArenaPlan, Buffer, plan_arena
from rill.mobile.schema import SubGraphDef
from rill.mobile.threads import gemm_work

_DOCUMENTED = (PrepareError, InvokeError, ModelFormatError, UnsupportedOperatorError)

__all__ = ["Subgraph"]

_PREPARE_ERRORS = (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError, OverflowError,
                   MemoryError)  # fmt: skip


class Subgraph:
    """The execution state of one subgraph: shapes, kernels, the arena plan and views."""

    def __init__(self, sg: SubGraphDef, preserve_all: bool, interp=None, index: int = 0):
        self.sg = sg
        self.index = index
        self.tensors = sg.tensors
        self.preserve_all = preserve_all
        self.kernels: list[Kernel] = [lookup(op)(op) for op in sg.operators]
        for kernel in self.kernels:
            kernel.interp = interp
        self.dynamic = False
        self.shapes: list[tuple[int, ...] | None] = [t.shape for t in sg.tensors]
        self.input_shapes = {i: self.tensors[i].shape for i in sg.inputs}
        self.producer = {}
        for k, op in enumerate(sg.operators):
            for t in op.outputs:
                if self.tensors[t].is_constant:
                    raise PrepareError(f"operator #{k} {op.name} writes tensor #{t} "
                                       f"'{self.tensors[t].name}', which is a constant")  # fmt: skip
                self.producer[t] = k
        self.arrays: list[np.ndarray | None] = [None] * len(sg.tensors)
        self.folded: dict[int, np.ndarray] = {}
        self.folded_ops: set[int] = set()
        self.allocated = False
        self.invoked = False
        self.plan: ArenaPlan | None = None
        self.arena: np.ndarray | None = None
        self.clobbered: set[int] = set()
        self.aliased: dict[int, int] = {}
        self.run: list = []
        self.program: program.Program | None = None  # the whole-subgraph program, if compiled
        self.gemm_work: int | None = None  # the largest BLAS product (rill.mobile.threads)

    # -- allocate_tensors ------------------------------------------------------------------------

    def _value(self, i: int) -> np.ndarray | None:
        """The contents of a tensor known before any run: a constant, or folded in prepare."""
        t = self.tensors[i]
        return t.data if t.is_constant else self.folded.get(i)

    def _prepare(self) -> list[list[tuple[tuple[int, ...], np.dtype]]]:
        shapes: list[tuple[int, ...] | None] = [t.shape if t.is_constant else None
                                               for t in self.tensors]  # fmt: skip
        for i, s in self.input_shapes.items():
            shapes[i] = tuple(s)
        for t in self.tensors:  # tensors no operator writes (variables) keep their file shape
            if shapes[t.index] is None and t.index not in self.producer:
                shapes[t.index] = t.shape
        self.folded: dict[int, np.ndarray] = {}
        self.folded_ops: set[int] = set()
        scratch = []
        for k, (kernel, op) in enumerate(zip(self.kernels, self.sg.operators)):
            ins = []
            for i in op.inputs:
                spec = None if i < 0 else TensorSpec.of(self.tensors[i], shapes[i])
                if spec is not None and spec.data is None:
                    spec.data = self.folded.get(i)
                ins.append(spec)
            out_shapes = self._prepare_op(kernel, op, ins, eager=False)
            for i, s in zip(op.outputs, out_shapes):
                shapes[i] = tuple(int(d) for d in s)
            if kernel.known is not None:
                for i, a in zip(op.outputs, kernel.known):
                    a = np.array(a, dtype=self.tensors[i].dtype).reshape(shapes[i])
                    a.flags.writeable = False
                    self.folded[i] = a
                self.folded_ops.add(k)
                scratch.append([])
            elif self._foldable(kernel, op, ins):
                self._fold(k, kernel, op, ins, shapes)
                scratch.append([])
            else:
                scratch.append(kernel.scratch_specs)
        self.shapes = shapes
        return scratch

    def _prepare_op(self, kernel, op, ins, eager: bool):
        outs = [TensorSpec.of(self.tensors[i], None) for i in op.outputs]
        kernel.begin_prepare()
        kernel.eager = eager
        try:
            out_shapes = kernel.prepare(ins, outs)
        except (PrepareError, DynamicShape):
            raise
        except _PREPARE_ERRORS as e:
            raise kernel.fail(f"cannot prepare it: {type(e).__name__}: {e}") from None
        if len(out_shapes) != len(op.outputs):
            raise kernel.fail(f"produces {len(out_shapes)} outputs but the model lists "
                              f"{len(op.outputs)}")  # fmt: skip
        if kernel.known is not None and len(kernel.known) != len(op.outputs):
            raise kernel.fail("knows the wrong number of outputs")
        return out_shapes

    def _foldable(self, kernel, op, ins) -> bool:
        """An operator whose inputs are all known before any run (DEQUANTIZE of constant
        weights, arithmetic on constants) runs once, here; its outputs become constants."""
        present = [s for s in ins if s is not None]
        return (kernel.foldable and bool(present) and bool(op.outputs)
                and all(s.data is not None for s in present)
                and not any(self.tensors[i].is_variable for i in op.outputs))  # fmt: skip

    def _fold(self, k, kernel, op, ins, shapes) -> None:
        outs = [np.zeros(shapes[i], self.tensors[i].dtype) for i in op.outputs]
        scr = [np.zeros(shape, dtype) for shape, dtype in kernel.scratch_specs]
        try:
            with np.errstate(all="ignore"):
                kernel.bind([None if s is None else s.data for s in ins], outs, scr)()
        except (ValueError, IndexError, FloatingPointError) as e:
            raise kernel.fail(f"fails on its constant inputs: {e}") from None
        for i, a in zip(op.outputs, outs):
            a.flags.writeable = False
            self.folded[i] = a
        self.folded_ops.add(k)

    def allocate(self) -> None:
        try:
            scratch = self._prepare()
        except DynamicShape:
            self._allocate_eager()
            return
        self.dynamic = False
        n_ops = len(self.kernels)
        end = n_ops  # a step after the last operator: outputs live until then
        alias = self._aliases()
        first, last = {}, {}
        for i in self.sg.inputs:
            first[i] = 0
            last[i] = 0
        for k, op in enumerate(self.sg.operators):
            if k in self.folded_ops:
                continue
            for i in op.inputs:
                if i >= 0 and self._value(i) is None:
                    i = alias.get(i, i)
                    first.setdefault(i, 0)
                    last[i] = max(last.get(i, 0), k)
            for i in op.outputs:
                if i in alias:
                    continue
                first[i] = k
                last[i] = max(last.get(i, k), k)
        # Inputs stay intact for the whole run, as in TFLite, so invoke can run again on them;
        # outputs live past the last operator.
        for i in (*self.sg.inputs, *self.sg.outputs):
            if i in first:
                last[i] = end
        for t in self.tensors:
            if t.index in first and (self.preserve_all or t.is_variable):
                last[t.index] = end
            if t.is_variable:
                first[t.index] = 0
        buffers = []
        for i in sorted(first):
            t = self.tensors[i]
            if t.dtype is None:
                raise PrepareError(f"tensor #{i} '{t.name}' has type {t.type_name}, which the "
                                   "interpreter cannot hold")  # fmt: skip
            nbytes = int(np.prod(self.shapes[i], dtype=np.int64)) * t.dtype.itemsize
            buffers.append(Buffer(("t", i), nbytes, first[i], last[i]))
        for k, specs in enumerate(scratch):
            for j, (shape, dtype) in enumerate(specs):
                nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                buffers.append(Buffer(("s", k, j), nbytes, k, k))
        plan = plan_arena(buffers)
        self.plan, self.buffers = plan, buffers
        self.program = program.build(self, plan, alias)
        try:
            whole = np.zeros(program.arena_bytes(plan, self.program), np.uint8)
            self.arena = whole[: plan.arena_size]
        except MemoryError:
            big = max(buffers, key=lambda b: b.size)
            raise PrepareError(f"cannot allocate the tensor arena of {plan.arena_size} bytes "
                               f"(the largest buffer, {big.key}, takes {big.size} bytes)") from None  # fmt: skip

        def view(key, shape, dtype):
            nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            off = plan.offsets[key]
            return self.arena[off : off + nbytes].view(dtype).reshape(shape)

        arrays: list[np.ndarray | None] = [None] * len(self.tensors)
        for t in self.tensors:
            if self._value(t.index) is not None:
                arrays[t.index] = self._value(t.index)
            elif t.index in first:
                arrays[t.index] = view(("t", t.index), self.shapes[t.index], t.dtype)
        for o, root in alias.items():
            arrays[o] = arrays[root].reshape(self.shapes[o])
        self.arrays = arrays
        self.clobbered = self._clobbered(buffers, plan)
        self.clobbered |= {o for o, root in alias.items() if root in self.clobbered}
        self.aliased = alias
        run, run_kernels = [], []
        for k, (kernel, op) in enumerate(zip(self.kernels, self.sg.operators)):
            if k in self.folded_ops or (op.outputs and op.outputs[0] in alias):
                continue
            ins = [None if i < 0 else arrays[i] for i in op.inputs]
            outs = [arrays[i] for i in op.outputs]
            scr = [view(("s", k, j), shape, dtype) for j, (shape, dtype) in enumerate(scratch[k])]
            run.append(kernel.bind(ins, outs, scr))
            run_kernels.append(kernel)
        if self.program is not None:
            self.program.attach(whole.view(np.float32))
        else:  # runs of int8 convolutions and additions as one compiled call each
            run, run_kernels = program_int8.fuse(self, run, run_kernels)
        self.run = run
        self.run_kernels = run_kernels
        self.gemm_work = gemm_work(self)
        self.allocated = True
        self.invoked = False

    def _aliases(self) -> dict[int, int]:
        """{output: the tensor whose bytes it shares} for the operators that only reinterpret
        their input's bytes (RESHAPE, SQUEEZE, EXPAND_DIMS; `Kernel.aliases_input`), as TFLite
        runs them in place: such an operator costs nothing at invoke. Only between
        intermediates of this subgraph (never an input, an output or a variable, and not with
        experimental_preserve_all_tensors, where every tensor keeps its own bytes)."""
        if self.preserve_all:
            return {}
        keep = set(self.sg.inputs) | set(self.sg.outputs)
        alias: dict[int, int] = {}
        for k, (kernel, op) in enumerate(zip(self.kernels, self.sg.operators)):
            if k in self.folded_ops or not kernel.aliases_input or len(op.outputs) != 1:
                continue
            i, o = op.inputs[0], op.outputs[0]
            ti, to = self.tensors[i], self.tensors[o]
            if (i < 0 or self._value(i) is not None or i in keep or o in keep
                    or ti.is_variable or to.is_variable or ti.dtype != to.dtype
                    or self.producer.get(i) in self.folded_ops):  # fmt: skip
                continue
            alias[o] = alias.get(i, i)
        return alias

    @staticmethod
    def _clobbered(buffers: list[Buffer], plan: ArenaPlan) -> set[int]:
        """Tensors whose bytes a later buffer reuses: unreadable once invoke has run."""
        out = set()
        for a in buffers:
            if a.key[0] != "t" or not a.size:
                continue
            oa = plan.offsets[a.key]
            for b in buffers:
                if b.first > a.last and b.size:
                    ob = plan.offsets[b.key]
                    if oa < ob + b.size and ob < oa + a.size:
                        out.add(a.key[1])
                        break
        return out

    def invoke(self) -> None:
        if self.program is not None:  # one compiled call; it raises nothing and warns of nothing
            self.program()
            self.invoked = True
            return
        # Floating-point warnings are off for the whole run (LiteRT gives inf/NaN silently):
        # one errstate per invoke instead of one per kernel.
        with np.errstate(all="ignore"):
            self._invoke()

    def _invoke(self) -> None:
        if self.dynamic:
            try:
                self._invoke_eager()
            except _DOCUMENTED:
                raise
            except Exception as e:  # noqa: BLE001 - a kernel's failure on the data
                raise InvokeError(f"invoke failed: {type(e).__name__}: {e}") from e
        else:
            k = 0
            try:
                for k, f in enumerate(self.run):  # noqa: B007 - k names the failing one
                    f()
            except _DOCUMENTED:
                raise
            except Exception as e:  # noqa: BLE001 - a kernel's failure on the data
                op = self.run_kernels[k].op
                raise InvokeError(
                    f"operator #{op.index} {op.name} (version {op.version}) failed: "
                    f"{type(e).__name__}: {e}"
                ) from e
        self.invoked = True

    # -- eager mode (dynamic shapes) -------------------------------------------------------------

    def _allocate_eager(self) -> None:
        """Only the inputs (and variables) get arrays now; invoke makes the rest."""
        self.dynamic = True
        self.folded, self.folded_ops = {}, set()
        self.shapes = [t.shape for t in self.tensors]
        arrays: list[np.ndarray | None] = [t.data for t in self.tensors]
        for i, shape in self.input_shapes.items():
            t = self.tensors[i]
            if t.dtype is None:
                raise PrepareError(f"input #{i} '{t.name}' has type {t.type_name}, which the "
                                   "interpreter cannot hold")  # fmt: skip
            arrays[i] = np.zeros(shape, t.dtype)
            self.shapes[i] = tuple(shape)
        for t in self.tensors:
            if t.is_variable and arrays[t.index] is None:
                arrays[t.index] = np.zeros(t.shape, t.dtype)
        self.arrays = arrays
        self.plan, self.buffers, self.arena = ArenaPlan({}, 0, 0), [], None
        self.clobbered = set()
        self.aliased = {}
        self.run = []
        self.program = None
        self.gemm_work = None  # shapes are known only at invoke
        self.allocated = True
        self.invoked = False

    def _invoke_eager(self) -> None:
        arrays = self.arrays
        for kernel, op in zip(self.kernels, self.sg.operators):
            ins = []
            for i in op.inputs:
                if i < 0:
                    ins.append(None)
                    continue
                a = arrays[i]
                if a is None:
                    raise kernel.fail(f"reads tensor #{i} '{self.tensors[i].name}' before any "
                                      "operator wrote it")  # fmt: skip
                spec = TensorSpec.of(self.tensors[i], a.shape)
                spec.data = a
                ins.append(spec)
            try:
                out_shapes = self._prepare_op(kernel, op, ins, eager=True)
            except DynamicShape as e:
                raise kernel.fail(f"cannot know its output shape even from its inputs' values "
                                  f"({e})") from None  # fmt: skip
            if kernel.known is not None:
                outs = [np.array(a, dtype=self.tensors[i].dtype).reshape(tuple(s))
                        for i, a, s in zip(op.outputs, kernel.known, out_shapes)]  # fmt: skip
            else:
                outs = [np.zeros(tuple(int(d) for d in s), self.tensors[i].dtype)
                        for i, s in zip(op.outputs, out_shapes)]  # fmt: skip
                scr = [np.zeros(shape, dtype) for shape, dtype in kernel.scratch_specs]
                kernel.bind([None if s is None else s.data for s in ins], outs, scr)()
            for i, a in zip(op.outputs, outs):
                arrays[i] = a
                self.shapes[i] = a.shape

    @property
    def persistent_bytes(self) -> int:
        """Kernel-owned buffers and the outputs of operators folded into constants."""
        return (sum(k.persistent_bytes for k in self.kernels)
                + sum(a.nbytes for a in self.folded.values()))  # fmt: skip
