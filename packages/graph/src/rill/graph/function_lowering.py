"""Lowers a GraphDef's function calls and functional control flow to control flow v1.

TensorFlow 2 graphs (and TF1 graphs with control flow v2) keep bodies in the GraphDef's
FunctionDefLibrary and call them from PartitionedCall / StatefulPartitionedCall nodes (or nodes
whose op is a function's name), While / StatelessWhile, If / StatelessIf and Case /
StatelessCase. `lower_functions` returns an equivalent GraphDef without them:

- a call is inlined: the body's nodes are copied under "<call>/", reading the call's inputs;
- If becomes a Switch per input on the predicate, both branches inlined reading the Switch's
  true / false outputs, and a Merge per output; Case the same with one predicate per branch
  (an index out of range takes the last branch, as TensorFlow's Case does);
- While becomes the control-flow paper's loop: Enter, Merge with NextIteration, the inlined cond
  feeding LoopCond, Switch, the inlined body feeding NextIteration, and Exit.

A body node without inputs (a Const) gets a control input from the branch or loop pivot, so it
lives in the branch's or the loop's frame as TensorFlow's own lowering arranges. Each lowered node
leaves an IdentityN (or a NoOp when it has no outputs) under its own name, so the rest of the
graph refers to "<call>:k" unchanged. Function-style references inside bodies ("node:out_arg:i")
are resolved through the op definitions.

Errors are GraphValueError: a call of a function the library does not have, and recursion
between functions, which a lowering would never finish.
"""

from __future__ import annotations

from rill.graph.errors import GraphValueError, RillError
from rill.graph.proto import attr_value_pb2, graph_pb2, node_def_pb2

__all__ = ["lower_functions", "FUNCTIONAL_OPS"]

FUNCTIONAL_OPS = frozenset(
    {
        "PartitionedCall",
        "StatefulPartitionedCall",
        "While",
        "StatelessWhile",
        "If",
        "StatelessIf",
        "Case",
        "StatelessCase",
    }
)


def _type_attr(types) -> attr_value_pb2.AttrValue:
    a = attr_value_pb2.AttrValue()
    a.list.type.extend(types)
    return a


class _Lowerer:
    def __init__(self, library, out: graph_pb2.GraphDef):
        self.lib = {f.signature.name: f for f in library.function}
        self.out = out
        self.names: set[str] = set()

    # -- emitting -----------------------------------------------------------------------------

    def node(self, name: str, op: str, inputs, attrs: dict | None = None, device: str = ""):
        nd = node_def_pb2.NodeDef(name=name, op=op, device=device)
        nd.input.extend(inputs)
        for k, v in (attrs or {}).items():
            nd.attr[k].CopyFrom(v)
        self.out.node.append(nd)
        self.names.add(name)
        return name

    @staticmethod
    def _t(dtype_enum: int) -> attr_value_pb2.AttrValue:
        return attr_value_pb2.AttrValue(type=dtype_enum)

    def stand_in(self, name: str, refs: list[str], types: list[int], ctrl: list[str], device=""):
        """The node the rest of the graph refers to for a lowered call: IdentityN of its
        outputs (and its control dependencies), or a NoOp when it has none."""
        if refs:
            self.node(name, "IdentityN", refs + ctrl, {"T": _type_attr(types)}, device)
        else:
            self.node(name, "NoOp", ctrl, device=device)

    # -- output numbering ---------------------------------------------------------------------

    def _output_offsets(self, nd) -> dict[str, int]:
        """{output arg name: first flat output index} for a body node."""
        if nd.op in self.lib:
            return {a.name: i for i, a in enumerate(self.lib[nd.op].signature.output_arg)}
        if nd.op in FUNCTIONAL_OPS:
            return {"output": 0}
        from rill.graph.op_def import get_op_def, has_op

        if not has_op(nd.op):
            raise GraphValueError(f"function body node {nd.name!r} uses unknown op {nd.op!r}")
        offsets, k = {}, 0
        for a in get_op_def(nd.op).outputs:
            offsets[a.name] = k
            if a.number_attr:
                k += int(nd.attr[a.number_attr].i)
            elif a.type_list_attr:
                k += len(nd.attr[a.type_list_attr].list.type)
            else:
                k += 1
        return offsets

    # -- inlining -----------------------------------------------------------------------------

    def inline(self, fname: str, args: list[str], prefix: str, pivot: list[str], stack, where):
        """Copies function `fname` under `prefix`; returns (output refs, control-ret names)."""
        fdef = self.lib.get(fname)
        if fdef is None:
            have = sorted(self.lib)
            raise GraphValueError(
                f"{where} calls function {fname!r}, which the GraphDef's library does not have "
                f"(it has {len(have)}: {', '.join(have[:10])})"
            )
        if fname in stack:
            cycle = " -> ".join([*stack[stack.index(fname) :], fname])
            raise GraphValueError(f"{where}: functions call each other recursively: {cycle}")
        stack = [*stack, fname]
        sig = fdef.signature
        if len(args) != len(sig.input_arg):
            raise GraphValueError(
                f"{where} passes {len(args)} inputs to function {fname!r}, which takes "
                f"{len(sig.input_arg)}"
            )
        env = {a.name: ref for a, ref in zip(sig.input_arg, args)}
        body = {nd.name: nd for nd in fdef.node_def}
        offsets = {name: self._output_offsets(nd) for name, nd in body.items()}

        def ref(r: str) -> str:
            if r.startswith("^"):
                src = r[1:]
                if src not in body:
                    raise GraphValueError(f"function {fname!r}: control input {r!r} is unknown")
                return "^" + prefix + src
            parts = r.split(":")
            if len(parts) == 1:
                if r not in env:
                    raise GraphValueError(f"function {fname!r}: input {r!r} is no argument")
                return env[r]
            node, arg = parts[0], parts[1]
            if len(parts) > 3 or (len(parts) == 3 and not parts[2].isdigit()):
                raise GraphValueError(f"function {fname!r}: malformed reference {r!r}")
            idx = int(parts[2]) if len(parts) > 2 else 0
            if node not in body:
                raise GraphValueError(f"function {fname!r}: reference {r!r} names no node")
            base = offsets[node].get(arg)
            if base is None:
                raise GraphValueError(f"function {fname!r}: node {node!r} has no output {arg!r}")
            k = base + idx
            return prefix + node if k == 0 else f"{prefix}{node}:{k}"

        for nd in fdef.node_def:
            for a in nd.attr.values():
                if a.placeholder:
                    raise GraphValueError(
                        f"function {fname!r} node {nd.name!r} has an unresolved attr placeholder "
                        f"${a.placeholder}; rill imports instantiated (concrete) functions"
                    )
            inputs = [ref(r) for r in nd.input]
            if not inputs:
                inputs = list(pivot)
            self.lower_node(nd, prefix + nd.name, inputs, pivot, stack)
        outs = []
        for a in sig.output_arg:
            r = fdef.ret.get(a.name)
            if r is None:
                raise GraphValueError(f"function {fname!r} does not return its output {a.name!r}")
            outs.append(ref(r))
        ctrl = ["^" + prefix + n for n in fdef.control_ret.values()]
        return outs, ctrl

    def lower_node(self, nd, name: str, inputs: list[str], pivot: list[str], stack) -> None:
        """Emits node `nd` under `name` with its (already translated) inputs, lowering it when
        it is a call or functional control flow."""
        where = f"node {name!r}"
        op = nd.op
        data = [r for r in inputs if not r.startswith("^")]
        if op in ("If", "StatelessIf", "Case", "StatelessCase") and not data:
            raise GraphValueError(f"{where} ({op}) has no inputs; its first input is the "
                                  + ("predicate" if "If" in op else "branch index"))  # fmt: skip
        ctrl = [r for r in inputs if r.startswith("^")]
        dev = nd.device
        if op in self.lib or op in ("PartitionedCall", "StatefulPartitionedCall"):
            fname = op if op in self.lib else nd.attr["f"].func.name
            if ctrl:  # the body starts after the call's control inputs
                data = [self.node(f"{name}/input_{i}", "Identity", [r, *ctrl], device=dev)
                        for i, r in enumerate(data)]  # fmt: skip
            outs, cret = self.inline(fname, data, f"{name}/", ctrl or pivot, stack, where)
            types = [a.type for a in self.lib[fname].signature.output_arg]
            if op not in self.lib:
                types = list(nd.attr["Tout"].list.type)
            self.stand_in(name, outs, types, cret, dev)
        elif op in ("If", "StatelessIf"):
            self._lower_if(nd, name, data, ctrl, stack)
        elif op in ("Case", "StatelessCase"):
            self._lower_case(nd, name, data, ctrl, stack)
        elif op in ("While", "StatelessWhile"):
            self._lower_while(nd, name, data, ctrl, stack)
        else:
            copy = node_def_pb2.NodeDef()
            copy.CopyFrom(nd)
            copy.name = name
            del copy.input[:]
            copy.input.extend(inputs)
            self.out.node.append(copy)
            self.names.add(name)

    # -- control flow -------------------------------------------------------------------------

    def _pred(self, name: str, cond: str, tcond: int, ctrl, dev) -> str:
        from rill.graph import dtypes

        if tcond == dtypes.bool_.enum:
            return self.node(f"{name}/pred", "Identity", [cond, *ctrl], {"T": self._t(tcond)}, dev)
        attrs = {"SrcT": self._t(tcond), "DstT": self._t(dtypes.bool_.enum)}
        return self.node(f"{name}/pred", "Cast", [cond, *ctrl], attrs, dev)

    def _branches(self, name, preds: list[str], fnames, data, types_in, types_out, stack, dev):
        """Inlines If's then branch under preds[0] and its else branch under preds[1] (one true
        at a time); returns the Merge refs."""
        from rill.graph import dtypes

        b = self._t(dtypes.bool_.enum)
        outs_per_branch = []
        for i, (pred, fname) in enumerate(zip(preds, fnames)):
            tag = "then" if i == 0 else "else"
            sw = self.node(f"{name}/{tag}/pivot_switch", "Switch", [pred, pred], {"T": b}, dev)
            pivot = self.node(f"{name}/{tag}/pivot", "Identity", [f"{sw}:1"], {"T": b}, dev)
            args = []
            for k, (r, t) in enumerate(zip(data, types_in)):
                s = self.node(
                    f"{name}/{tag}/switch_{k}", "Switch", [r, pred], {"T": self._t(t)}, dev
                )
                args.append(f"{s}:1")
            outs, cret = self.inline(fname, args, f"{name}/{tag}/", ["^" + pivot], stack,
                                     f"node {name!r}")  # fmt: skip
            self._check_outs(name, fname, outs, types_out)
            if cret:  # the branch's side effects happen before its outputs count as ready
                outs = [self.node(f"{name}/{tag}/out_{k}", "Identity", [o, *cret],
                                  {"T": self._t(t)}, dev) for k, (o, t) in enumerate(zip(outs, types_out))]  # fmt: skip
            outs_per_branch.append(outs)
        refs = []
        for k, t in enumerate(types_out):
            ins = [outs[k] for outs in outs_per_branch]
            m = self.node(f"{name}/merge_{k}", "Merge", ins,
                          {"T": self._t(t), "N": attr_value_pb2.AttrValue(i=len(ins))}, dev)  # fmt: skip
            refs.append(m)
        return refs

    def _lower_if(self, nd, name, data, ctrl, stack):
        dev = nd.device
        cond, args = data[0], data[1:]
        pred = self._pred(name, cond, nd.attr["Tcond"].type, ctrl, dev)
        not_pred = self.node(f"{name}/not_pred", "LogicalNot", [pred], device=dev)
        tin, tout = list(nd.attr["Tin"].list.type), list(nd.attr["Tout"].list.type)
        fnames = [nd.attr["then_branch"].func.name, nd.attr["else_branch"].func.name]
        refs = self._branches(name, [pred, not_pred], fnames, args, tin, tout, stack, dev)
        self.stand_in(name, refs, tout, [], dev)

    def _lower_case(self, nd, name, data, ctrl, stack):
        """Case (switch_case) as a chain of two-way conds: branch 0 or the rest, branch 1 or
        the rest, ..., the last branch also for an index out of range (as the kernel does);
        each level's index and arguments come through the previous level's else side, so the
        conds nest as tf.cond's do (and export as nested Ifs)."""
        from rill.graph import dtypes

        dev = nd.device
        index, args = data[0], data[1:]
        fnames = [f.name for f in nd.attr["branches"].list.func]
        if not fnames:
            raise GraphValueError(f"node {name!r} ({nd.op}) has no branches")
        i32 = self._t(dtypes.int32.enum)
        idx = self.node(f"{name}/index", "Identity", [index, *ctrl], {"T": i32}, dev)
        tin, tout = list(nd.attr["Tin"].list.type), list(nd.attr["Tout"].list.type)
        if len(fnames) == 1:  # no choice: the one branch, after the index
            outs, cret = self.inline(fnames[0], list(args), f"{name}/branch0/", ["^" + idx],
                                     stack, f"node {name!r}")  # fmt: skip
            self._check_outs(name, fnames[0], outs, tout)
            refs = [self.node(f"{name}/out_{k}", "Identity", [o, *cret], {"T": self._t(t)}, dev)
                    for k, (o, t) in enumerate(zip(outs, tout))]  # fmt: skip
            self.stand_in(name, refs, tout, [], dev)
            return
        refs = self._case_level(name, name, idx, 0, fnames, list(args), tin, tout, stack, dev)
        self.stand_in(name, refs, tout, [], dev)

    def _case_level(self, name, scope, idx, i, fnames, data, types_in, types_out, stack, dev):
        """Branch i if idx == i, else the levels after it (the last branch at the end);
        returns the Merge refs. `scope` names this level's plumbing."""
        from rill.graph import dtypes

        b, i32 = self._t(dtypes.bool_.enum), self._t(dtypes.int32.enum)
        c = self._const_i32(f"{scope}/index_{i}", i, idx, dev)
        pred = self.node(f"{scope}/is_{i}", "Equal", [idx, c], {"T": i32}, dev)
        sides = []
        for side, port in (("then", 1), ("else", 0)):
            tag = f"{scope}/{side}"
            sw = self.node(f"{tag}/pivot_switch", "Switch", [pred, pred], {"T": b}, dev)
            pivot = self.node(f"{tag}/pivot", "Identity", [f"{sw}:{port}"], {"T": b}, dev)
            args = [
                f"{self.node(f'{tag}/switch_{k}', 'Switch', [r, pred], {'T': self._t(t)}, dev)}"
                f":{port}"
                for k, (r, t) in enumerate(zip(data, types_in))
            ]
            last = i + 2 == len(fnames)
            if side == "then" or last:
                fname = fnames[i] if side == "then" else fnames[-1]
                j = i if side == "then" else len(fnames) - 1
                outs, cret = self.inline(fname, args, f"{name}/branch{j}/", ["^" + pivot],
                                         stack, f"node {name!r}")  # fmt: skip
                self._check_outs(name, fname, outs, types_out)
                if cret:  # the branch's side effects happen before its outputs count as ready
                    outs = [self.node(f"{name}/branch{j}/out_{k}", "Identity", [o, *cret],
                                      {"T": self._t(t)}, dev)
                            for k, (o, t) in enumerate(zip(outs, types_out))]  # fmt: skip
            else:
                # The next level's index: through this level's else side (an Identity, which
                # the next level's constants can depend on).
                inner = self.node(f"{tag}/index_switch", "Switch", [idx, pred], {"T": i32}, dev)
                inner = self.node(f"{tag}/index", "Identity", [f"{inner}:0"], {"T": i32}, dev)
                outs = self._case_level(name, f"{tag}/case", inner, i + 1, fnames, args,
                                        types_in, types_out, stack, dev)  # fmt: skip
            sides.append(outs)
        merged_name = f"{name}/merge" if scope == name else f"{scope}/merge"
        return [
            self.node(f"{merged_name}_{k}", "Merge", [sides[0][k], sides[1][k]],
                      {"T": self._t(t), "N": attr_value_pb2.AttrValue(i=2)}, dev)
            for k, t in enumerate(types_out)
        ]  # fmt: skip

    def _check_outs(self, name, fname, outs, types_out) -> None:
        if len(outs) != len(types_out):
            raise GraphValueError(
                f"node {name!r}: branch function {fname!r} returns {len(outs)} values; the "
                f"node declares {len(types_out)} (its attr Tout)"
            )

    def _const_i32(self, name: str, value: int, anchor: str, dev) -> str:
        import numpy as np

        from rill.graph import dtypes
        from rill.graph.graph_def import make_tensor_proto

        attrs = {
            "dtype": self._t(dtypes.int32.enum),
            "value": attr_value_pb2.AttrValue(tensor=make_tensor_proto(np.int32(value))),
        }
        return self.node(name, "Const", ["^" + anchor], attrs, dev)

    def _lower_while(self, nd, name, data, ctrl, stack):
        from rill.graph import dtypes

        dev = nd.device
        types = list(nd.attr["T"].list.type)
        if not types:
            raise GraphValueError(f"node {name!r}: a While with no loop variables is not supported")
        if len(data) != len(types):
            raise GraphValueError(
                f"node {name!r} ({nd.op}) has {len(data)} data inputs for {len(types)} loop "
                "variables (its attr T)"
            )
        frame = name
        par = attr_value_pb2.AttrValue(i=nd.attr["parallel_iterations"].i or 10)
        merges, nexts = [], []
        # The loop variables' shapes (while_v2's shape invariants): the Merges take them, so
        # that the body's shapes are known (a Merge made before its back edge knows only the
        # shape entering the loop, and that only where it stays the same).
        invariants = list(nd.attr["output_shapes"].list.shape) if "output_shapes" in nd.attr \
            else []  # fmt: skip
        for k, (r, t) in enumerate(zip(data, types)):
            e = self.node(f"{name}/enter_{k}", "Enter", [r, *ctrl], {
                "T": self._t(t), "frame_name": attr_value_pb2.AttrValue(s=frame.encode()),
                "is_constant": attr_value_pb2.AttrValue(b=False), "parallel_iterations": par,
            }, dev)  # fmt: skip
            nxt = f"{name}/next_{k}"
            attrs = {"T": self._t(t), "N": attr_value_pb2.AttrValue(i=2)}
            if len(invariants) == len(types):
                shapes = attr_value_pb2.AttrValue()
                shapes.list.shape.add().CopyFrom(invariants[k])
                shapes.list.shape.add()  # value_index: a scalar
                attrs["_output_shapes"] = shapes
            m = self.node(f"{name}/merge_{k}", "Merge", [e, nxt], attrs, dev)
            merges.append(m)
            nexts.append(nxt)
        where = f"node {name!r}"
        conds, _ = self.inline(nd.attr["cond"].func.name, merges, f"{name}/cond/",
                               ["^" + merges[0]], stack, where)  # fmt: skip
        if len(conds) != 1:
            raise GraphValueError(f"{where}: its cond function returns {len(conds)} values, not 1")
        c = conds[0]
        b = dtypes.bool_.enum
        loop_cond = self.node(f"{name}/loop_cond", "LoopCond", [c], device=dev)
        body_args, exits = [], []
        for k, (m, t) in enumerate(zip(merges, types)):
            s = self.node(f"{name}/switch_{k}", "Switch", [m, loop_cond], {"T": self._t(t)}, dev)
            exits.append(self.node(f"{name}/exit_{k}", "Exit", [s], {"T": self._t(t)}, dev))
            body_args.append(
                self.node(f"{name}/body_in_{k}", "Identity", [f"{s}:1"], {"T": self._t(t)}, dev)
            )
        outs, cret = self.inline(nd.attr["body"].func.name, body_args, f"{name}/body/",
                                 ["^" + body_args[0]], stack, where)  # fmt: skip
        if len(outs) != len(types):
            raise GraphValueError(
                f"{where}: the body returns {len(outs)} values for {len(types)} loop variables"
            )
        for k, (o, t) in enumerate(zip(outs, types)):
            self.node(nexts[k], "NextIteration", [o, *cret], {"T": self._t(t)}, dev)
        del b
        self.stand_in(name, exits, types, [], dev)


def lower_functions(graph_def) -> graph_pb2.GraphDef:
    """`graph_def` with every call and functional control-flow node lowered (see the module).

    A GraphDef without functional nodes comes back unchanged (the same message).
    """
    lib = {f.signature.name for f in graph_def.library.function}
    if not any(n.op in FUNCTIONAL_OPS or n.op in lib for n in graph_def.node):
        return graph_def
    out = graph_pb2.GraphDef()
    out.versions.CopyFrom(graph_def.versions)
    lowerer = _Lowerer(graph_def.library, out)
    for nd in graph_def.node:
        try:
            lowerer.lower_node(nd, nd.name, list(nd.input), [], [])
        except RillError:
            raise
        except (IndexError, KeyError, ValueError, TypeError) as e:
            # A shape of call the checks above did not foresee: still name the node.
            raise GraphValueError(f"node {nd.name!r} ({nd.op}) cannot be lowered: {e}") from None
    return out
