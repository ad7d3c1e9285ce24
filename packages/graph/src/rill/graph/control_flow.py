"""cond, case and while_loop, compiled to Switch/Merge/Enter/Exit/NextIteration/LoopCond
(the control-flow paper §4.2).

Every op built inside a branch or a loop body records its control-flow context. A context
rewrites the inputs of the ops created in it: a tensor from outside a branch enters through one
Switch (per tensor, reused), a tensor from outside a loop through one Enter (a loop constant,
entered once); ops without inputs get a control edge from the branch or loop pivot so that they
run in the branch's or loop's frame.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     i, s = while_loop(lambda i, s: i < 4, lambda i, s: (i + 1, s + i), (0, 0))
...     i.shape
TensorShape([])
"""

from __future__ import annotations

import contextlib
import itertools

from rill.graph import nest
from rill.graph.errors import GraphTypeError, GraphValueError
from rill.graph.graph import Operation, Tensor, convert_to_tensor, get_default_graph
from rill.graph.shapes import TensorShape, as_shape

__all__ = [
    "CondContext",
    "WhileContext",
    "cond",
    "case",
    "while_loop",
    "output_context",
]

_ids = itertools.count()


def output_context(op: Operation):
    """The context an op's outputs live in (an Exit's outputs live outside its loop)."""
    ctx = op._control_flow_context
    if op.type == "Exit" and ctx is not None:
        return ctx.outer
    return ctx


def _is_within(inner, outer) -> bool:
    """True when context `inner` is `outer` or nested inside it (None is the root)."""
    c = inner
    while c is not None:
        if c is outer:
            return True
        c = c.outer
    return outer is None


class ControlFlowContext:
    """Base of CondContext and WhileContext: nesting and the input-rewriting hook."""

    def __init__(self, graph, name: str):
        self.graph = graph
        self.name = name
        self.outer = graph._control_flow_context
        self._available: dict[Tensor, Tensor] = {}
        self._internal_creation = False

    # -- entering -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def entered(self):
        g = self.graph
        saved = g._control_flow_context
        g._control_flow_context = self
        try:
            yield self
        finally:
            g._control_flow_context = saved

    @contextlib.contextmanager
    def _in_outer(self):
        g = self.graph
        saved = g._control_flow_context
        g._control_flow_context = self.outer
        try:
            with g.control_dependencies(None):
                yield
        finally:
            g._control_flow_context = saved

    # -- what the graph calls -------------------------------------------------------------------

    def _is_external(self, t: Tensor) -> bool:
        return not _is_within(output_context(t.op), self)

    def make_available(self, t: Tensor) -> Tensor:
        """`t` (from an enclosing context) as a tensor usable inside this context."""
        if not self._is_external(t):
            return t
        got = self._available.get(t)
        if got is not None:
            return got
        src = t
        if self.outer is not None and self.outer._is_external(t):
            src = self.outer.make_available(t)
        got = self._bring_in(src)
        self._available[t] = got
        self._available[src] = got
        return got

    def _add_op(self, op: Operation) -> None:
        if self._internal_creation:
            return
        for i, t in enumerate(op._inputs):
            if self._is_external(t):
                op._inputs[i] = self.make_available(t)
        if not op._inputs and not op._control_inputs:
            pivot = self.control_pivot()
            if pivot is not None:
                op._control_inputs = [pivot]
        self._fix_control_inputs(op)

    def _after_add_op(self, op: Operation) -> None:
        pass

    def _fix_control_inputs(self, op: Operation) -> None:
        pass

    def control_pivot(self) -> Operation | None:
        raise NotImplementedError

    def _bring_in(self, t: Tensor) -> Tensor:
        raise NotImplementedError

    def get_while_context(self):
        c = self
        while c is not None and not isinstance(c, WhileContext):
            c = c.outer
        return c

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class CondContext(ControlFlowContext):
    """One branch of a cond: `branch` 1 is taken when `pred` is true, 0 when false."""

    def __init__(self, graph, name: str, pred: Tensor, pivot: Tensor, branch: int):
        super().__init__(graph, name)
        self.pred = pred
        self.pivot = pivot
        self.branch = branch

    def control_pivot(self) -> Operation:
        return self.pivot.op

    def _bring_in(self, t: Tensor) -> Tensor:
        from rill.graph.ops import control_flow_ops

        with self._in_outer():
            pred = self.pred
            if self.outer is not None and self.outer._is_external(pred):
                pred = self.outer.make_available(pred)
            f, tr = control_flow_ops.switch(t, pred, name="Switch")
        # The Switch was built (and its input captured) in the enclosing context, but it belongs
        # to this branch: its gradient and its output's context are the branch's.
        f.op._control_flow_context = self
        out = tr if self.branch else f
        self._available[out] = out
        return out


class WhileContext(ControlFlowContext):
    """The context of a while loop's condition and body. Its frame is named `name`."""

    def __init__(self, graph, name: str, parallel_iterations: int, back_prop: bool,
                 swap_memory: bool):  # fmt: skip
        super().__init__(graph, name)
        self.parallel_iterations = parallel_iterations
        self.back_prop = back_prop
        self.swap_memory = swap_memory
        self.pivot_for_pred: Operation | None = None
        self.pivot_for_body: Operation | None = None
        self.pivot: Tensor | None = None  # the LoopCond output
        self.grad_state = None  # set on the gradient loop of a forward loop (rill.autodiff)
        self.enters: list[Operation] = []
        self.loop_enters: list[Tensor] = []
        self.loop_exits: list[Tensor] = []
        self.merges: list[Tensor] = []

    def control_pivot(self) -> Operation | None:
        return self.pivot_for_body or self.pivot_for_pred

    def _bring_in(self, t: Tensor) -> Tensor:
        from rill.graph.ops import control_flow_ops

        self._internal_creation = True
        try:
            with self.entered(), self.graph.control_dependencies(None):
                e = control_flow_ops.enter(
                    t, self.name, is_constant=True,
                    parallel_iterations=self.parallel_iterations, name="Enter",
                )  # fmt: skip
        finally:
            self._internal_creation = False
        self.enters.append(e.op)
        return e

    def _add_op(self, op: Operation) -> None:
        super()._add_op(op)
        if self._internal_creation or op._control_inputs or not op._inputs:
            return
        # An op fed only by loop constants would otherwise run once per iteration as soon as the
        # iteration exists; tie it to the iteration's pivot, as its other ops are.
        if all(t.op.type == "Enter" and t.op.attrs.get("is_constant") for t in op._inputs):
            pivot = self.control_pivot()
            if pivot is not None:
                op._control_inputs = [pivot]

    def _fix_control_inputs(self, op: Operation) -> None:
        # A control edge from outside the loop would join two frames; such dependencies run
        # before the loop starts instead (on the loop's Enter ops).
        external = [c for c in op._control_inputs if not _is_within(output_context(c), self)]
        if not external:
            return
        op._control_inputs = [c for c in op._control_inputs if c not in external]
        for e in self.enters:
            for c in external:
                if c not in e._control_inputs:
                    e._control_inputs.append(c)
                    c._control_outputs.append(e)
        if not op._inputs and not op._control_inputs:
            pivot = self.control_pivot()
            if pivot is not None:
                op._control_inputs = [pivot]


# -- cond --------------------------------------------------------------------------------------


def _to_tensors(structure):
    def conv(x):
        if isinstance(x, Tensor) or x is None:
            return x
        if isinstance(x, Operation):
            return x
        return convert_to_tensor(x)

    return nest.map_structure(conv, structure)


def cond(pred, true_fn, false_fn, name: str = "cond", strict: bool = False):
    """true_fn() if pred else false_fn(), decided when the graph runs.

    Both functions must return the same structure of tensors with the same dtypes. Only the
    taken branch's ops run; the other branch's values are dead.

    >>> import rill.graph as rg
    >>> with rg.Graph().as_default():
    ...     x = rg.placeholder(rg.float32, [])
    ...     cond(x > 0, lambda: x * 2.0, lambda: -x).op.type
    'Merge'
    """
    from rill.graph.ops import array_ops, control_flow_ops

    if isinstance(pred, bool):
        return true_fn() if pred else false_fn()
    if not callable(true_fn) or not callable(false_fn):
        raise TypeError("cond(): true_fn and false_fn must be callables")
    g = get_default_graph()
    pred = convert_to_tensor(pred)
    if pred.dtype.name != "bool" or pred.shape.rank not in (None, 0):
        raise GraphTypeError(
            f"cond(): pred must be a scalar bool tensor, got {pred.dtype.name}{pred.shape}"
        )
    with g.name_scope(name) as scope:
        outer = g._control_flow_context
        if outer is not None and outer._is_external(pred):
            pred = outer.make_available(pred)
        p_false, p_true = control_flow_ops.switch(pred, pred, name="Switch")
        pivot_t = array_ops.identity(p_true, name="switch_t")
        pivot_f = array_ops.identity(p_false, name="switch_f")
        pred_id = array_ops.identity(pred, name="pred_id")
        results = []
        for branch, pivot, fn, label in ((1, pivot_t, true_fn, "true"),
                                        (0, pivot_f, false_fn, "false")):  # fmt: skip
            ctx = CondContext(g, f"{scope}{label}_branch", pred_id, pivot, branch)
            with ctx.entered():
                res = _to_tensors(fn())
                # Values computed outside the branch still pass through its Switch.
                res = nest.map_structure(
                    lambda v, c=ctx: c.make_available(v) if isinstance(v, Tensor) else v, res
                )
            results.append((res, ctx))
        (res_t, _), (res_f, _) = results
        try:
            nest.assert_same_structure(res_t, res_f)
        except ValueError as e:
            raise GraphValueError(
                f"cond {scope[:-1]!r}: true_fn and false_fn return different structures: {e}"
            ) from None
        flat_t, flat_f = nest.flatten(res_t), nest.flatten(res_f)
        merged = []
        for k, (a, b) in enumerate(zip(flat_t, flat_f)):
            if isinstance(a, Operation) or isinstance(b, Operation) or a is None or b is None:
                if not (isinstance(a, Operation) and isinstance(b, Operation)):
                    raise GraphTypeError(
                        f"cond {scope[:-1]!r}: output {k} is an operation in one branch and a "
                        "tensor in the other"
                    )
                with g.control_dependencies([a, b]):
                    merged.append(control_flow_ops.control_trigger(name="cond_ops"))
                continue
            if a.dtype is not b.dtype:
                raise GraphTypeError(
                    f"cond {scope[:-1]!r}: output {k} has dtype {a.dtype.name} in true_fn but "
                    f"{b.dtype.name} in false_fn"
                )
            m, _ = control_flow_ops.merge([b, a], name="Merge")
            merged.append(m)
        out = nest.pack_sequence_as(res_t, merged)
    if (
        not strict
        and isinstance(out, (list, tuple))
        and len(out) == 1
        and not nest.is_nested(out[0])
    ):
        return out[0]
    return out


def case(pred_fn_pairs, default=None, exclusive: bool = False, strict: bool = False,
         name: str = "case"):  # fmt: skip
    """The function of the first true predicate (as nested conds), else `default`.

    With exclusive=True the predicates are evaluated all the same (one cond each); rill does not
    check at run time that at most one is true.
    """
    pairs = list(pred_fn_pairs.items()) if isinstance(pred_fn_pairs, dict) else list(pred_fn_pairs)
    if default is None:
        if not pairs:
            raise ValueError("case() needs at least one (pred, fn) pair or a default")
        default = pairs[-1][1]
        pairs = pairs[:-1]
    if not pairs:
        return default()
    g = get_default_graph()
    with g.name_scope(name):

        def build(i):
            if i == len(pairs):
                return default()
            p, fn = pairs[i]
            return cond(p, fn, lambda: build(i + 1), name=f"case_{i}", strict=strict)

        return build(0)


def switch_case(branch_index, branch_fns, default=None, name: str = "switch_case"):
    """The function branch_fns[branch_index] (a list of functions, or (key, function) pairs or
    a dict with int keys), as conds on branch_index == key in key order; an index matching no
    key runs `default`, or the last branch where there is none (tf.switch_case).

    Raises:
        ValueError: no branches, a key that is not an int, or a key given twice.
        TypeError: a branch_index that is not an integer scalar.
    """
    from rill.graph.graph import convert_to_tensor
    from rill.graph.ops.logic_ops import equal

    if isinstance(branch_fns, dict):
        items = list(branch_fns.items())
    elif branch_fns and all(isinstance(b, (tuple, list)) for b in branch_fns):
        items = [tuple(b) for b in branch_fns]
    else:
        items = list(enumerate(branch_fns))
    if not items:
        raise ValueError("switch_case() needs at least one branch function")
    keys = [k for k, _ in items]
    if any(not isinstance(k, int) or isinstance(k, bool) for k in keys) or len(set(keys)) != len(
        keys
    ):
        raise ValueError(f"switch_case() branch keys must be distinct ints, got {keys}")
    for k, fn in items:
        if not callable(fn):
            raise TypeError(f"switch_case() branch {k} is not callable: {fn!r}")
    index = convert_to_tensor(branch_index, name="branch_index")
    if not index.dtype.is_integer or (index.shape.rank not in (None, 0)):
        raise TypeError(f"switch_case() branch_index must be an integer scalar, got {index}")
    items.sort(key=lambda kv: kv[0])
    if default is None:
        default = items[-1][1]
    g = get_default_graph()
    with g.name_scope(name):
        pairs = [(equal(index, k), fn) for k, fn in items]
        return case(pairs, default=default, name="case")


# -- while_loop --------------------------------------------------------------------------------


def while_loop(cond_fn, body, loop_vars, shape_invariants=None, parallel_iterations: int = 10,
               back_prop: bool = True, swap_memory: bool = False, maximum_iterations=None,
               name: str = "while", return_same_structure: bool = False):  # fmt: skip
    """Repeats `body` while `cond_fn` is true, as one loop in the graph (frames at run time).

    Args:
        cond_fn: loop vars -> scalar bool tensor (called as cond_fn(*loop_vars) for a list or
            tuple, cond_fn(loop_vars) for a single tensor or a dict).
        body: loop vars -> new loop vars of the same structure, dtypes and (unless
            shape_invariants allow otherwise) shapes.
        loop_vars: a tensor or a nested structure (tuple, list, dict, namedtuple) of tensors.
        shape_invariants: per loop variable, a shape the variable keeps across iterations.
        parallel_iterations: how many iterations may run at once.
        maximum_iterations: an upper bound on the number of iterations.

    Returns:
        The loop variables after the last iteration, in the structure of `loop_vars`.

    Raises:
        GraphValueError / GraphTypeError naming the loop: a body that changes a variable's
        structure, dtype or (without a shape invariant) shape.
    """
    if not callable(cond_fn) or not callable(body):
        raise TypeError("while_loop(): cond and body must be callables")
    if parallel_iterations < 1:
        raise ValueError("while_loop(): parallel_iterations must be a positive integer")
    spread = isinstance(loop_vars, (list, tuple))
    single = not nest.is_nested(loop_vars)

    def call(fn, flat):
        packed = nest.pack_sequence_as(loop_vars, flat) if not single else flat[0]
        return fn(*packed) if spread else fn(packed)

    def body_flat(flat):
        out = call(body, flat)
        if spread and isinstance(out, (list, tuple)) is False:
            out = [out]
        if single and isinstance(out, (list, tuple)) and len(out) == 1:
            out = out[0]
        out = _to_tensors(out)
        try:
            nest.assert_same_structure(loop_vars if not single else 0, out if not single else 0)
            if not single:
                nest.assert_same_structure(loop_vars, out)
            elif nest.is_nested(out):
                raise ValueError("the body returns a structure for a single loop variable")
        except ValueError as e:
            raise GraphValueError(
                f"while_loop {name!r}: the body returns a different structure than loop_vars: {e}"
            ) from None
        return nest.flatten(out) if not single else [out]

    flat_vars = nest.flatten(loop_vars) if not single else [loop_vars]
    if shape_invariants is None:
        invariants = [None] * len(flat_vars)
    else:
        invariants = _flatten_invariants(shape_invariants, loop_vars, single, name)
    cond_flat = lambda flat: call(cond_fn, flat)  # noqa: E731
    if maximum_iterations is not None:
        from rill.graph.ops import logic_ops

        user_cond, user_body = cond_flat, body_flat

        def cond_flat(flat):  # noqa: F811 - the user's condition and the iteration bound
            return logic_ops.logical_and(logic_ops.less(flat[0], flat[-1]), user_cond(flat[1:-1]))

        def body_flat(flat):  # noqa: F811
            return [flat[0] + 1, *user_body(flat[1:-1]), flat[-1]]

        flat_vars = [0, *flat_vars, maximum_iterations]
        invariants = [TensorShape([]), *invariants, None]
    exits = _build_loop(cond_flat, body_flat, flat_vars, invariants, parallel_iterations,
                        back_prop, swap_memory, name)  # fmt: skip
    if maximum_iterations is not None:
        exits = exits[1:-1]
    if single:
        return exits[0]
    return nest.pack_sequence_as(loop_vars, exits)


def _flatten_invariants(shape_invariants, loop_vars, single, name) -> list:
    if single:
        return [as_shape(shape_invariants)]
    if isinstance(loop_vars, dict):
        flat = [shape_invariants[k] for k in sorted(loop_vars)]
    else:
        flat = list(shape_invariants)
    if len(flat) != len(nest.flatten(loop_vars)):
        raise GraphValueError(
            f"while_loop {name!r}: {len(flat)} shape invariants for "
            f"{len(nest.flatten(loop_vars))} loop variables"
        )
    return [None if s is None else as_shape(s) for s in flat]


def _build_loop(cond_flat, body_flat, flat_vars, invariants, parallel_iterations, back_prop,
                swap_memory, name):  # fmt: skip
    from rill.graph.ops import array_ops, control_flow_ops

    g = get_default_graph()
    with g.name_scope(name) as scope:
        loop = scope[:-1]
        frame = f"{scope}while_context"
        flat = [convert_to_tensor(v) for v in flat_vars]
        inv = []
        for t, s in zip(flat, invariants):
            if s is None:
                s = t.shape
            elif not t.shape.is_compatible_with(s):
                raise GraphValueError(
                    f"while_loop {loop!r}: loop variable {t.name} has shape {t.shape}, "
                    f"incompatible with its shape invariant {s}"
                )
            inv.append(s)
        outer = g._control_flow_context
        if outer is not None:
            flat = [outer.make_available(t) for t in flat]
        ctx = WhileContext(g, frame, parallel_iterations, back_prop, swap_memory)
        with ctx.entered():
            ctx._internal_creation = True
            with g.control_dependencies(None):
                enters = [
                    control_flow_ops.enter(t, frame, is_constant=False,
                                           parallel_iterations=parallel_iterations, name="Enter")
                    for t in flat
                ]  # fmt: skip
                merges = [control_flow_ops.merge([e, e], name="Merge")[0] for e in enters]
            ctx._internal_creation = False
            for e, m, s in zip(enters, merges, inv):
                e._shape = s
                m._shape = s
            ctx.enters.extend(e.op for e in enters)
            ctx.loop_enters = enters
            ctx.merges = merges
            ctx.pivot_for_pred = merges[0].op
            c = convert_to_tensor(cond_flat(merges))
            if c.dtype.name != "bool" or c.shape.rank not in (None, 0):
                raise GraphTypeError(
                    f"while_loop {loop!r}: cond must return a scalar bool, got "
                    f"{c.dtype.name}{c.shape}"
                )
            pivot = control_flow_ops.loop_cond(ctx.make_available(c), name="LoopCond")
            ctx.pivot = pivot
            switches = [control_flow_ops.switch(m, pivot, name="Switch") for m in merges]
            exits = [control_flow_ops.exit(sw[0], name="Exit") for sw in switches]
            idents = [array_ops.identity(sw[1], name="Identity") for sw in switches]
            ctx.pivot_for_body = idents[0].op
            res = [ctx.make_available(r) for r in body_flat(idents)]
            for k, (t, r, s) in enumerate(zip(flat, res, inv)):
                if r.dtype is not t.dtype:
                    raise GraphTypeError(
                        f"while_loop {loop!r}: loop variable {k} enters as {t.dtype.name} but "
                        f"the body returns {r.dtype.name}"
                    )
                if not _fits(r.shape, s):
                    raise GraphValueError(
                        f"while_loop {loop!r}: loop variable {k} ({t.name}) enters the loop "
                        f"with shape {s}, but has shape {r.shape} after one iteration. To let "
                        "the shape vary across iterations, pass shape_invariants."
                    )
            nexts = [control_flow_ops.next_iteration(r, name="NextIteration") for r in res]
            for m, n in zip(merges, nexts):
                m.op._update_input(1, n)
        for e, s in zip(exits, inv):
            e._shape = s
        ctx.loop_exits = exits
        g.add_to_collection("while_context", ctx)
    return exits


def _fits(shape: TensorShape, invariant: TensorShape) -> bool:
    """Whether a body result of `shape` keeps the loop variable within `invariant`."""
    if invariant.rank is None:
        return True
    if shape.rank is None or shape.rank != invariant.rank:
        return False
    return all(i is None or (d is not None and d == i) for d, i in zip(shape.dims, invariant.dims))
