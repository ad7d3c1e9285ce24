"""Runs an op sample (tests/op_samples) forward and gradient on a session with a GPU (real or
simulated) and on a CPU-only session, and compares them with per-dtype tolerances.

Used by tests/exec/test_gpu_sim.py (the simulated GPU, default suite) and tests/gpu (a real GPU,
marker `gpu`). Not a sample module: it registers no samples.
"""

from __future__ import annotations

import numpy as np

import rill.autodiff  # noqa: F401 - registers the gradients
import rill.graph as rg
from rill.autodiff import gradients
from rill.exec import Session

# (rtol, atol) per dtype for GPU against CPU: different summation orders and transcendental
# implementations; integers and booleans are exact.
TOLERANCES = {
    np.dtype(np.float16): (2e-2, 2e-2),
    np.dtype(np.float32): (1e-4, 1e-5),
    np.dtype(np.float64): (1e-7, 1e-9),
    np.dtype(np.complex64): (1e-4, 1e-5),
    np.dtype(np.complex128): (1e-7, 1e-9),
}


def build(s, with_grads: bool):
    g = rg.Graph()
    with g.as_default():
        phs = [rg.placeholder(rg.as_dtype(x.dtype), x.shape, name=f"in{i}")
               for i, x in enumerate(s.inputs)]  # fmt: skip
        out = s.build(*phs)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        fetches = list(outs)
        if with_grads:
            fl = [o for o in outs if o.dtype.is_floating]
            rng = np.random.default_rng(0)
            terms = []
            for o in fl:
                w = rng.uniform(0.5, 1.5, size=[d or 1 for d in o.shape.as_list()])
                terms.append(rg.reduce_sum(o * w.astype(o.dtype.np)))
            which = s.grad_inputs
            if which is None:
                which = [i for i, x in enumerate(s.inputs) if x.dtype.kind == "f"]
            fetches = []
            if terms and which:
                y = terms[0] if len(terms) == 1 else rg.add_n(terms)
                grads = gradients(y, [phs[i] for i in which])
                fetches = [gr for gr in grads if gr is not None]
                fetches = [rg.convert_to_tensor(gr) if not isinstance(gr, rg.Tensor) else gr
                           for gr in fetches]  # fmt: skip
    return g, phs, fetches


def run(s, with_grads: bool, gpu: bool):
    """(fetched values, op types placed on the GPU) of sample `s`."""
    g, phs, fetches = build(s, with_grads)
    if not fetches:
        return [], set()
    feed = dict(zip(phs, s.inputs))
    cfg = None
    if not gpu:
        from rill.exec import ConfigProto

        cfg = ConfigProto(device_count={"GPU": 0})
    with Session(graph=g, config=cfg) as sess:
        vals = sess.run(fetches, feed)
        on_gpu = set()
        for plan in sess._plans.values():
            for n in plan.plan_graph.nodes:
                if n.device is not None and n.device.device_type == "GPU":
                    on_gpu.add(n.type)
    return vals, on_gpu


def compare(s, with_grads: bool) -> tuple[bool, str, set]:
    """(matches, message, op types that ran on the GPU)."""
    try:
        want, _ = run(s, with_grads, gpu=False)
    except Exception as e:  # noqa: BLE001 - a sample the CPU cannot run is not compared
        return True, f"skipped: CPU raised {type(e).__name__}", set()
    try:
        got, on_gpu = run(s, with_grads, gpu=True)
    except Exception as e:  # noqa: BLE001 - reported as the failure
        return False, f"GPU raised {type(e).__name__}: {str(e)[:400]}", set()
    for k, (a, b) in enumerate(zip(want, got)):
        if type(b) is not np.ndarray and not isinstance(b, (np.generic, bytes, int, float)):
            if isinstance(a, np.ndarray):
                return False, f"output {k}: fetched a {type(b).__name__}, not numpy", on_gpu
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return False, f"output {k}: {b.dtype}{b.shape} vs CPU {a.dtype}{a.shape}", on_gpu
        if a.dtype in TOLERANCES:
            rtol, atol = TOLERANCES[a.dtype]
            ok = np.allclose(b, a, rtol=rtol, atol=atol, equal_nan=True)
        elif a.dtype.kind == "O":
            ok = bool((a == b).all())
        else:
            ok = np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
        if not ok:
            return False, f"output {k} differs: max abs diff {_diff(a, b)}", on_gpu
    return True, "", on_gpu


def _diff(a, b):
    try:
        return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
    except Exception:  # noqa: BLE001
        return "?"


def _extras():
    """Forward-only cases for GPU kernels the op samples do not reach (ops without gradients,
    control flow): compared GPU against CPU like the samples."""
    from op_samples import Sample, rand

    x = rand(3, 4)
    ints = np.array([[3, 0, 2], [1, 2, 0]], np.int32)
    flags = np.array([True, False, True, True])
    cases = [
        ("Ceil", [x], lambda a: rg.ceil(a * 3.0)),
        ("Floor", [x], lambda a: rg.floor(a * 3.0)),
        ("Round", [x], lambda a: rg.round(a * 3.0)),
        ("Cos", [x], lambda a: rg.cos(a)),
        ("LogicalAnd", [flags], lambda a: rg.logical_and(a, rg.logical_not(a))),
        ("LogicalOr", [flags], lambda a: rg.logical_or(a, rg.logical_not(a))),
        ("NotEqual", [x], lambda a: rg.not_equal(a, a * 2.0)),
        ("OneHot", [ints], lambda a: rg.one_hot(a, 4)),
        ("OnesLike", [x], lambda a: rg.get_default_graph().create_op("OnesLike", [a]).outputs[0] + a),
        ("All", [flags], lambda a: rg.reduce_all(a)),
        ("Any", [flags], lambda a: rg.reduce_any(rg.logical_not(a))),
        ("ArgMax", [x], lambda a: rg.argmax(a, 1)),
        ("ArgMin", [x], lambda a: rg.argmin(a, 0)),
        ("Where", [x], lambda a: rg.where(a > 0)),
        ("InvertPermutation", [np.array([2, 0, 1], np.int32)],
         lambda a: rg.invert_permutation(a)),
        ("Rank", [x], lambda a: rg.rank(rg.placeholder_with_default(a, None)) + 0),
        ("ShapeN", [x], lambda a: rg.shape_n([a, rg.transpose(a)])),
        ("StopGradient", [x], lambda a: rg.stop_gradient(a) * 2.0),
    ]  # fmt: skip
    # Programs whose gradients run the loop and TensorArray kernels (stacks for the saved
    # forward values, gradient TensorArrays): checked forward and gradient.
    programs = [
        ("while_loop", [x], lambda a: rg.while_loop(
            lambda i, v: i < 5, lambda i, v: (i + 1, rg.tanh(v) * 1.5), [rg.constant(0), a])[1]),
        ("cond", [x], lambda a: rg.cond(rg.reduce_sum(a) > 0, lambda: a * 2.0, lambda: a - 1.0)),
        ("map_fn", [x], lambda a: rg.map_fn(lambda r: rg.tanh(r) * 2.0, a)),
        ("scan", [x], lambda a: rg.scan(lambda acc, r: acc * 0.5 + rg.tanh(r), a)),
        ("TensorArrayConcatV3", [x],
         lambda a: rg.reshape(rg.TensorArray(a.dtype, size=2, infer_shape=False)
                              .split(a, [1, 2]).concat(), [3, 4]) * 2.0),
        ("TensorArraySizeV3", [x], lambda a: a * rg.cast(
            rg.TensorArray(a.dtype, size=0, dynamic_size=True).unstack(a).size(), a.dtype)),
    ]  # fmt: skip
    cases.append(("TensorArrayCloseV3", [x], _closed_stack))
    out = [Sample(op, inputs, build, name="extra") for op, inputs, build in cases]
    return out + [Sample(op, inputs, build, name="extra-grad") for op, inputs, build in programs]


def _closed_stack(a):
    ta = rg.TensorArray(a.dtype, size=3).unstack(a)
    v = ta.stack()
    g = rg.get_default_graph()
    with g.control_dependencies([v]):
        closed = ta.close()
    with g.control_dependencies([closed]):
        return rg.identity(v) * 3.0


EXTRAS = _extras()
