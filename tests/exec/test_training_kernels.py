"""Kernels of the fused optimizer ops, run through a Session and checked against numpy
transcriptions of TensorFlow's documented update formulas (written here, independently of the
kernels; the sparse references walk the indices one at a time, as TensorFlow's kernels do)."""

import threading

import ml_dtypes
import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.exec.kernel_registry import find_kernel
from rill.exec.kernels import training_kernels
from rill.graph.errors import FailedPreconditionError, InvalidArgumentError
from rill.graph.ops import state_ops

RNG = np.random.default_rng(7)


# -- numpy references, one update of whole arrays (or of one row) -------------------------------


def ref_gd(s, h, g, a):
    return {"var": s["var"] - h["alpha"] * g}


def ref_momentum(s, h, g, a):
    acc = s["accum"] * h["momentum"] + g
    if a.get("use_nesterov"):
        var = s["var"] - (g * h["lr"] + acc * h["momentum"] * h["lr"])
    else:
        var = s["var"] - acc * h["lr"]
    return {"var": var, "accum": acc}


def ref_keras_momentum(s, h, g, a):
    acc = s["accum"] * h["momentum"] - g * h["lr"]
    if a.get("use_nesterov"):
        var = s["var"] + acc * h["momentum"] - g * h["lr"]
    else:
        var = s["var"] + acc
    return {"var": var, "accum": acc}


def ref_adagrad(s, h, g, a):
    acc = s["accum"] + g * g if a.get("update_slots", True) else s["accum"]
    return {"var": s["var"] - h["lr"] * g / np.sqrt(acc), "accum": acc}


def ref_adagrad_v2(s, h, g, a):
    acc = s["accum"] + g * g if a.get("update_slots", True) else s["accum"]
    return {"var": s["var"] - h["lr"] * g / (np.sqrt(acc) + h["epsilon"]), "accum": acc}


def ref_adadelta(s, h, g, a):
    rho, eps = h["rho"], h["epsilon"]
    acc = rho * s["accum"] + (1 - rho) * g * g
    update = np.sqrt(s["accum_update"] + eps) / np.sqrt(acc + eps) * g
    acc_upd = rho * s["accum_update"] + (1 - rho) * update * update
    return {"var": s["var"] - h["lr"] * update, "accum": acc, "accum_update": acc_upd}


def ref_rms_prop(s, h, g, a):
    ms = h["rho"] * s["ms"] + (1 - h["rho"]) * g * g
    mom = h["momentum"] * s["mom"] + h["lr"] * g / np.sqrt(ms + h["epsilon"])
    return {"var": s["var"] - mom, "ms": ms, "mom": mom}


def ref_centered_rms_prop(s, h, g, a):
    ms = h["rho"] * s["ms"] + (1 - h["rho"]) * g * g
    mg = h["rho"] * s["mg"] + (1 - h["rho"]) * g
    mom = h["momentum"] * s["mom"] + h["lr"] * g / np.sqrt(ms - mg * mg + h["epsilon"])
    return {"var": s["var"] - mom, "mg": mg, "ms": ms, "mom": mom}


def ref_adam(s, h, g, a):
    b1, b2 = h["beta1"], h["beta2"]
    lr_t = h["lr"] * np.sqrt(1 - h["beta2_power"]) / (1 - h["beta1_power"])
    m = b1 * s["m"] + (1 - b1) * g
    v = b2 * s["v"] + (1 - b2) * g * g
    if a.get("use_nesterov"):
        var = s["var"] - lr_t * ((1 - b1) * g + b1 * m) / (np.sqrt(v) + h["epsilon"])
    else:
        var = s["var"] - lr_t * m / (np.sqrt(v) + h["epsilon"])
    return {"var": var, "m": m, "v": v}


def ref_ftrl(s, h, g, a):
    lr, l1, l2, p = h["lr"], h["l1"], h["l2"], h["lr_power"]
    var, acc = s["var"], s["accum"]
    g_lin = g + 2 * h["l2_shrinkage"] * var if "l2_shrinkage" in h else g
    new_acc = acc + g * g
    sigma = new_acc ** (-p) - acc ** (-p)
    if a.get("multiply_linear_by_lr"):
        linear = s["linear"] + g_lin * lr - sigma * var
        quadratic = new_acc ** (-p) + 2 * l2 * lr
        l1_eff = l1 * lr
    else:
        linear = s["linear"] + g_lin - sigma / lr * var
        quadratic = new_acc ** (-p) / lr + 2 * l2
        l1_eff = l1
    new_var = np.where(np.abs(linear) > l1_eff, (np.sign(linear) * l1_eff - linear) / quadratic, 0)
    return {"var": new_var.astype(var.dtype), "accum": new_acc, "linear": linear}


H = {
    "alpha": 0.1, "lr": 0.1, "momentum": 0.9, "epsilon": 1e-3, "rho": 0.9,
    "beta1_power": 0.9**2, "beta2_power": 0.999**2, "beta1": 0.9, "beta2": 0.999,
    "l1": 0.05, "l2": 0.1, "l2_shrinkage": 0.2, "lr_power": -0.5,
}  # fmt: skip

# op family -> (reference, slot names)
FAMILIES = {
    "GradientDescent": (ref_gd, []),
    "Momentum": (ref_momentum, ["accum"]),
    "KerasMomentum": (ref_keras_momentum, ["accum"]),
    "Adagrad": (ref_adagrad, ["accum"]),
    "AdagradV2": (ref_adagrad_v2, ["accum"]),
    "Adadelta": (ref_adadelta, ["accum", "accum_update"]),
    "RMSProp": (ref_rms_prop, ["ms", "mom"]),
    "CenteredRMSProp": (ref_centered_rms_prop, ["mg", "ms", "mom"]),
    "Adam": (ref_adam, ["m", "v"]),
    "Ftrl": (ref_ftrl, ["accum", "linear"]),
    "FtrlV2": (ref_ftrl, ["accum", "linear"]),
}

DENSE_CASES = [
    ("GradientDescent", {}),
    ("Momentum", {}),
    ("Momentum", {"use_nesterov": True}),
    ("KerasMomentum", {}),
    ("KerasMomentum", {"use_nesterov": True}),
    ("Adagrad", {}),
    ("Adagrad", {"update_slots": False}),
    ("AdagradV2", {}),
    ("Adadelta", {}),
    ("RMSProp", {}),
    ("CenteredRMSProp", {}),
    ("Adam", {}),
    ("Adam", {"use_nesterov": True}),
    ("Ftrl", {}),
    ("Ftrl", {"multiply_linear_by_lr": True}),
    ("Ftrl", {"lr_power": -0.3}),
    ("FtrlV2", {}),
    ("FtrlV2", {"multiply_linear_by_lr": True, "lr_power": 0.0}),
]
SPARSE_FAMILIES = [
    "Momentum", "KerasMomentum", "Adagrad", "AdagradV2", "Adadelta", "RMSProp",
    "CenteredRMSProp", "Ftrl", "FtrlV2",
]  # fmt: skip


def initial_state(names, shape, dtype):
    s = {"var": RNG.standard_normal(shape)}
    for n in names:
        if n == "mg":
            s[n] = RNG.uniform(-0.1, 0.1, shape)
        elif n == "linear":
            s[n] = RNG.standard_normal(shape)
        else:  # accumulators and second moments are positive
            s[n] = RNG.uniform(0.1, 1.0, shape)
    return {k: v.astype(dtype) for k, v in s.items()}


def split_attrs(family, attrs):
    """(op attrs, hyperparameter overrides) — lr_power is an input, not an attr."""
    attrs = dict(attrs)
    hyper = {"lr_power": attrs.pop("lr_power")} if "lr_power" in attrs else {}
    if family == "FtrlV2":
        hyper.setdefault("l2_shrinkage", H["l2_shrinkage"])
    return attrs, hyper


def hyper_for(op_type, overrides=None):
    names = [a.name for a in rg.get_op_def(op_type).inputs if a.type_attr == "T"]
    h = {n: H[n] for n in names if n not in ("grad", "delta")}
    h.update(overrides or {})
    return h


class Runner:
    """A graph with the op's variables, fed gradient/indices, and constant hyperparameters."""

    def __init__(self, op_type, states, hyper, grad_shape, dtype, attrs=None, n_idx=None,
                 idx_dtype=np.int32, var_shape_known=True):  # fmt: skip
        self.graph = g = rg.Graph()
        t = rg.as_dtype(dtype)
        with g.as_default():
            self.vars = {
                k: rg.Variable(v, name=k, validate_shape=var_shape_known) for k, v in states.items()
            }
            ins = []
            for arg in rg.get_op_def(op_type).inputs:
                if arg.type is rg.resource:
                    ins.append(self.vars[arg.name].handle)
                elif arg.name in ("grad", "delta"):
                    self.grad = rg.placeholder(t, grad_shape, name="grad")
                    ins.append(self.grad)
                elif arg.name == "indices":
                    self.indices = rg.placeholder(rg.as_dtype(idx_dtype), [n_idx], name="indices")
                    ins.append(self.indices)
                else:
                    ins.append(rg.constant(np.asarray(hyper[arg.name], dtype), name=arg.name))
            self.op = g.create_op(op_type, ins, attrs or {})
            init = rg.global_variables_initializer()
        self.sess = Session(graph=g)
        self.sess.run(init)

    def step(self, grad, indices=None):
        feed = {self.grad: grad}
        if indices is not None:
            feed[self.indices] = indices
        self.sess.run(self.op, feed)

    def values(self):
        return self.sess.run({k: v for k, v in self.vars.items()})


def assert_states(got, want, rtol, atol, dtype=None):
    """got (the variables' values, of `dtype` or else of want's dtypes) close to want."""
    assert set(got) == set(want)
    for k in want:
        assert got[k].dtype == (np.dtype(dtype) if dtype else want[k].dtype), k
        np.testing.assert_allclose(
            got[k].astype(np.complex128 if got[k].dtype.kind == "c" else np.float64),
            want[k],
            rtol=rtol,
            atol=atol,
            err_msg=k,
        )


# -- dense --------------------------------------------------------------------------------------


@pytest.mark.parametrize("family,attrs", DENSE_CASES)
def test_dense_updates_over_several_steps_float64(family, attrs):
    ref, slots = FAMILIES[family]
    op_type = f"ResourceApply{family}"
    attrs, overrides = split_attrs(family, attrs)
    h = hyper_for(op_type, overrides)
    states = initial_state(slots, (4, 3), np.float64)
    r = Runner(op_type, states, h, [4, 3], np.float64, attrs)
    want = dict(states)
    for _ in range(3):
        g = RNG.standard_normal((4, 3))
        r.step(g)
        want = {**want, **ref(want, h, g, attrs)}
    assert_states(r.values(), want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("family,attrs", DENSE_CASES)
def test_dense_updates_float32(family, attrs):
    ref, slots = FAMILIES[family]
    op_type = f"ResourceApply{family}"
    attrs, overrides = split_attrs(family, attrs)
    h = hyper_for(op_type, overrides)
    states = initial_state(slots, (2, 5), np.float32)
    g = RNG.standard_normal((2, 5)).astype(np.float32)
    r = Runner(op_type, states, h, [2, 5], np.float32, attrs)
    r.step(g)
    # The reference in float64 from the same float32 inputs: the kernel's float32 arithmetic
    # differs from it by a few float32 roundings.
    h32 = {k: float(np.float32(v)) for k, v in h.items()}
    s64 = {k: v.astype(np.float64) for k, v in states.items()}
    want = {**s64, **ref(s64, h32, g.astype(np.float64), attrs)}
    assert_states(r.values(), want, rtol=2e-6, atol=2e-6, dtype=np.float32)


@pytest.mark.parametrize(
    "dtype,tol", [(np.float16, 4e-3), (ml_dtypes.bfloat16, 3e-2), (np.complex64, 2e-6)]
)
@pytest.mark.parametrize("family", ["GradientDescent", "Momentum", "Adagrad", "RMSProp", "Adam"])
def test_dense_updates_in_other_dtypes(family, dtype, tol):
    ref, slots = FAMILIES[family]
    op_type = f"ResourceApply{family}"
    states = initial_state(slots, (3,), np.float32)
    g = RNG.standard_normal(3).astype(np.float32)
    if np.dtype(dtype).kind == "c":
        states["var"] = states["var"] + 0.5j
        g = g - 0.25j
    states = {k: v.astype(dtype) for k, v in states.items()}
    h = hyper_for(op_type, {"beta2": 0.99, "beta2_power": 0.99**2})  # 0.999 is 1 in bfloat16
    r = Runner(op_type, states, h, [3], dtype)
    r.step(g.astype(dtype))
    wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    hs = {k: float(np.real(np.asarray(v, dtype).astype(wide))) for k, v in h.items()}
    s = {k: v.astype(wide) for k, v in states.items()}
    want = {
        k: v.astype(dtype) for k, v in {**s, **ref(s, hs, g.astype(dtype).astype(wide), {})}.items()
    }
    got = r.values()
    for k in want:
        assert got[k].dtype == np.dtype(dtype)
        np.testing.assert_allclose(
            got[k].astype(wide), want[k].astype(wide), rtol=tol, atol=tol, err_msg=k
        )


def test_ftrl_has_no_complex_kernel_and_sparse_ftrl_only_float32_64():
    assert find_kernel("ResourceApplyFtrl", "CPU", {"T": rg.complex64}) is None
    assert find_kernel("ResourceApplyFtrl", "CPU", {"T": rg.float16}) is not None
    assert find_kernel("ResourceSparseApplyFtrl", "CPU", {"T": rg.float16}) is None
    assert find_kernel("ResourceSparseApplyFtrlV2", "CPU", {"T": rg.float64}) is not None
    assert find_kernel("ResourceApplyAdam", "CPU", {"T": rg.complex128}) is not None
    assert find_kernel("ResourceApplyGradientDescent", "CPU", {"T": rg.int32}) is None


def test_empty_variables_update_to_empty():
    r = Runner("ResourceApplyAdagrad", initial_state(["accum"], (0, 3), np.float32),
               hyper_for("ResourceApplyAdagrad"), [0, 3], np.float32)  # fmt: skip
    r.step(np.zeros((0, 3), np.float32))
    assert {k: v.shape for k, v in r.values().items()} == {"var": (0, 3), "accum": (0, 3)}


def test_a_read_before_the_update_keeps_its_value():
    g = rg.Graph()
    with g.as_default():
        w = rg.Variable(np.array([1.0, 2.0]), name="w")
        before = w.value()
        with g.control_dependencies([before]):
            op = rg.resource_apply_gradient_descent(w, 0.5, np.array([1.0, 1.0]))
        with g.control_dependencies([op]):
            after = w.value()
        init = rg.global_variables_initializer()
    with Session(graph=g) as s:
        s.run(init)
        b, a = s.run([before, after])
    np.testing.assert_array_equal(b, [1.0, 2.0])
    np.testing.assert_array_equal(a, [0.5, 1.5])


# -- sparse -------------------------------------------------------------------------------------


def sparse_ref(ref, s, h, g, idx, attrs):
    """Row by row, in the order of the indices: a repeated index sees its earlier update."""
    s = {k: v.copy() for k, v in s.items()}
    for i, row in enumerate(idx):
        rows = {k: v[row] for k, v in s.items()}
        for k, v in ref(rows, h, g[i], attrs).items():
            s[k][row] = v
    return s


@pytest.mark.parametrize("family", SPARSE_FAMILIES)
@pytest.mark.parametrize(
    "shape,idx",
    [((6, 3), [4, 0, 2]), ((6, 3), [2, 0, 2, 5, 2]), ((6,), [1, 1, 3, 1, 0]), ((6, 2, 2), [5, 3])],
)
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
def test_sparse_updates_match_row_by_row_reference(family, shape, idx, idx_dtype):
    ref, slots = FAMILIES[family]
    op_type = f"ResourceSparseApply{family}"
    _, overrides = split_attrs(family, {})
    h = hyper_for(op_type, overrides)
    states = initial_state(slots, shape, np.float64)
    idx = np.array(idx, idx_dtype)
    r = Runner(op_type, states, h, [None, *shape[1:]], np.float64, n_idx=None, idx_dtype=idx_dtype)
    want = states
    for _ in range(2):
        g = RNG.standard_normal((len(idx), *shape[1:]))
        r.step(g, idx)
        want = sparse_ref(ref, want, h, g, idx, {})
    assert_states(r.values(), want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    "family,attrs",
    [("Momentum", {"use_nesterov": True}), ("KerasMomentum", {"use_nesterov": True}),
     ("Adagrad", {"update_slots": False}), ("AdagradV2", {"update_slots": False}),
     ("Ftrl", {"multiply_linear_by_lr": True}), ("FtrlV2", {"multiply_linear_by_lr": True})],
)  # fmt: skip
def test_sparse_updates_with_attrs(family, attrs):
    ref, slots = FAMILIES[family]
    op_type = f"ResourceSparseApply{family}"
    attrs, overrides = split_attrs(family, attrs)
    h = hyper_for(op_type, overrides)
    states = initial_state(slots, (5, 2), np.float32)
    idx = np.array([3, 1, 3], np.int64)
    g = RNG.standard_normal((3, 2)).astype(np.float32)
    r = Runner(op_type, states, h, [3, 2], np.float32, attrs, n_idx=3, idx_dtype=np.int64)
    r.step(g, idx)
    h32 = {k: float(np.float32(v)) for k, v in h.items()}
    s64 = {k: v.astype(np.float64) for k, v in states.items()}
    want = sparse_ref(ref, s64, h32, g.astype(np.float64), idx, attrs)
    assert_states(r.values(), want, rtol=2e-6, atol=2e-6, dtype=np.float32)


def test_sparse_with_no_indices_changes_nothing():
    states = initial_state(["accum"], (4, 2), np.float32)
    r = Runner("ResourceSparseApplyAdagrad", states, hyper_for("ResourceSparseApplyAdagrad"),
               [None, 2], np.float32)  # fmt: skip
    r.step(np.zeros((0, 2), np.float32), np.zeros(0, np.int32))
    assert_states(r.values(), states, rtol=0, atol=0)


def test_sparse_untouched_rows_keep_their_exact_values():
    states = initial_state(["ms", "mom"], (5, 2), np.float32)
    r = Runner("ResourceSparseApplyRMSProp", states, hyper_for("ResourceSparseApplyRMSProp"),
               [None, 2], np.float32)  # fmt: skip
    r.step(np.ones((2, 2), np.float32), np.array([1, 3], np.int32))
    got = r.values()
    for k in states:
        np.testing.assert_array_equal(got[k][[0, 2, 4]], states[k][[0, 2, 4]])
        assert not np.array_equal(got[k][[1, 3]], states[k][[1, 3]])


# -- errors leave the variables unchanged --------------------------------------------------------


@pytest.mark.parametrize("family", SPARSE_FAMILIES)
@pytest.mark.parametrize("bad", [6, -1])
def test_out_of_range_index_is_an_error_and_changes_nothing(family, bad):
    ref, slots = FAMILIES[family]
    op_type = f"ResourceSparseApply{family}"
    _, overrides = split_attrs(family, {})
    states = initial_state(slots, (6, 2), np.float32)
    r = Runner(op_type, states, hyper_for(op_type, overrides), [None, 2], np.float32)
    with pytest.raises(
        InvalidArgumentError, match=rf"Index {bad} at offset 2 in indices is out of range"
    ) as e:
        r.step(np.ones((3, 2), np.float32), np.array([0, 1, bad], np.int32))
    assert op_type in str(e.value) and "var" in str(e.value)
    assert_states(r.values(), states, rtol=0, atol=0)


def _adagrad_runner(var_shape=(3, 2), acc_shape=(3, 2), grad_shape=None, known=True, **kw):
    states = {"var": np.ones(var_shape, np.float32), "accum": np.ones(acc_shape, np.float32)}
    r = Runner("ResourceApplyAdagrad", states, {"lr": kw.get("lr", 0.1)}, grad_shape, np.float32,
               var_shape_known=known)  # fmt: skip
    return r, states


def test_dense_shape_mismatches_are_errors():
    r, states = _adagrad_runner(grad_shape=None, known=False)
    with pytest.raises(InvalidArgumentError, match=r"var and grad do not have the same shape: "
                       r"\[3,2\] vs \[2,3\]"):  # fmt: skip
        r.step(np.ones((2, 3), np.float32))
    assert_states(r.values(), states, rtol=0, atol=0)
    r, states = _adagrad_runner(acc_shape=(2, 3), grad_shape=None, known=False)
    with pytest.raises(InvalidArgumentError, match=r"var and accum do not have the same shape"):
        r.step(np.ones((3, 2), np.float32))
    assert_states(r.values(), states, rtol=0, atol=0)


def test_non_scalar_hyperparameter_is_an_error():
    g = rg.Graph()
    with g.as_default():
        w = rg.Variable(np.ones(3, np.float32), name="w")
        lr = rg.placeholder(rg.float32, None, name="lr")
        op = rg.resource_apply_gradient_descent(w, lr, np.ones(3, np.float32))
        init = rg.global_variables_initializer()
    with Session(graph=g) as s:
        s.run(init)
        with pytest.raises(InvalidArgumentError, match=r"alpha is not a scalar: \[1\]"):
            s.run(op, {lr: np.array([0.1], np.float32)})
        np.testing.assert_array_equal(s.run(w), np.ones(3, np.float32))


def test_sparse_shape_errors():
    states = initial_state(["accum"], (4, 2), np.float32)
    op_type = "ResourceSparseApplyAdagrad"
    r = Runner(op_type, states, hyper_for(op_type), None, np.float32)
    with pytest.raises(InvalidArgumentError, match="grad must be the same size as indices"):
        r.step(np.ones((3, 2), np.float32), np.array([0, 1], np.int32))
    with pytest.raises(InvalidArgumentError, match="must match in every dimension after the first"):
        r.step(np.ones((2, 3), np.float32), np.array([0, 1], np.int32))
    assert_states(r.values(), states, rtol=0, atol=0)
    scalar = Runner(op_type, {"var": np.float32(1), "accum": np.float32(1)}, hyper_for(op_type),
                    None, np.float32, var_shape_known=False)  # fmt: skip
    with pytest.raises(InvalidArgumentError, match="var must be at least 1 dimensional"):
        scalar.step(np.ones(1, np.float32), np.array([0], np.int32))


def test_indices_must_be_a_vector_at_run_time():
    g = rg.Graph()
    with g.as_default():
        w = rg.Variable(np.ones((3, 2)), name="w")
        acc = rg.Variable(np.ones((3, 2)), name="acc")
        idx = rg.placeholder(rg.int32, None, name="idx")
        op = rg.resource_sparse_apply_adagrad(w, acc, 0.1, rg.placeholder(rg.float64, None), idx)
        init = rg.global_variables_initializer()
    with Session(graph=g) as s:
        s.run(init)
        with pytest.raises(InvalidArgumentError, match=r"indices must be one-dimensional"):
            s.run(op, {idx: np.array([[0]], np.int32), op.inputs[3]: np.ones((1, 1, 2))})


def test_uninitialized_variable_is_a_failed_precondition():
    g = rg.Graph()
    with g.as_default():
        w = rg.Variable(np.ones(3, np.float32), name="w")
        op = rg.resource_apply_gradient_descent(w, 0.1, np.ones(3, np.float32))
    with Session(graph=g) as s, pytest.raises(FailedPreconditionError, match="not initialized"):
        s.run(op)


def test_variable_of_another_dtype_is_an_error():
    g = rg.Graph()
    with g.as_default():
        h64 = state_ops.var_handle_op(rg.float64, [3], shared_name="x", name="x64")
        init = state_ops.assign_variable_op(h64, np.ones(3))
        h32 = state_ops.var_handle_op(rg.float32, [3], shared_name="x", name="x32")
        op = rg.resource_apply_gradient_descent(h32, np.float32(0.1), np.ones(3, np.float32))
    with Session(graph=g) as s:
        s.run(init)
        with pytest.raises(InvalidArgumentError, match="dtype float64, but the op has T=float32"):
            s.run(op)


@pytest.mark.parametrize(
    "hyper,attrs,message",
    [({"lr": 0.0}, {}, "lr is not a positive scalar"),
     ({"l1": -1.0}, {}, "l1 regularization strength is not a non-negative scalar"),
     ({"l2": -1.0}, {}, "l2 regularization strength is not a non-negative scalar"),
     ({"lr_power": 0.5}, {}, "lr_power is not a non-positive scalar"),
     ({"l2_shrinkage": -1.0}, {}, "l2 shrinkage regularization strength")],
)  # fmt: skip
def test_ftrl_hyperparameters_are_checked(hyper, attrs, message):
    op_type = "ResourceApplyFtrlV2"
    states = initial_state(["accum", "linear"], (3,), np.float32)
    r = Runner(op_type, states, hyper_for(op_type, hyper), [3], np.float32, attrs)
    with pytest.raises(InvalidArgumentError, match=message):
        r.step(np.ones(3, np.float32))
    assert_states(r.values(), states, rtol=0, atol=0)


def test_ftrl_lr_zero_is_allowed_when_linear_is_multiplied_by_lr():
    op_type = "ResourceApplyFtrl"
    states = initial_state(["accum", "linear"], (3,), np.float64)
    h = hyper_for(op_type, {"lr": 0.0})
    r = Runner(op_type, states, h, [3], np.float64, {"multiply_linear_by_lr": True})
    g = np.ones(3)
    r.step(g)
    want = {**states, **ref_ftrl(states, h, g, {"multiply_linear_by_lr": True})}
    assert_states(r.values(), want, rtol=1e-12, atol=1e-14)


# -- concurrency --------------------------------------------------------------------------------


def test_concurrent_updates_are_never_lost():
    g = rg.Graph()
    with g.as_default():
        w = rg.Variable(np.zeros(1000), name="w")
        acc = rg.Variable(np.ones(1000), name="acc")
        sgd = rg.resource_apply_gradient_descent(w, 1.0, -np.ones(1000))
        mom = rg.resource_apply_momentum(w, acc, 1.0, np.zeros(1000), 1.0)  # w -= acc (= 1)
        init = rg.global_variables_initializer()
    with Session(graph=g) as s:
        s.run(init)

        def work(op):
            for _ in range(100):
                s.run(op)

        threads = [threading.Thread(target=work, args=(op,)) for op in (sgd, mom, sgd, mom)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        np.testing.assert_array_equal(s.run(w), np.zeros(1000))  # +200 - 200
        np.testing.assert_array_equal(s.run(acc), np.ones(1000))


# -- in-place updates ---------------------------------------------------------------------------


def _installed(runner):
    """name -> the Var objects of the runner's session (CPU device)."""
    mgr = runner.sess._devices[0].resources
    return {name: mgr.lookup(c, name) for c, name in mgr.names()}


def _address(var):
    return var.read().__array_interface__["data"][0]


@pytest.mark.parametrize("family,attrs", DENSE_CASES)
def test_large_dense_updates_in_place_equal_copy_on_write(family, attrs, monkeypatch):
    """Variables larger than one chunk, updated in place (nothing holds them) and copy-on-write
    (a read of every state is held across the update): the same bits, close to the reference.
    Both share their chunks over two intra-op threads."""
    from rill.exec import threads
    from rill.exec.kernels import intra_op

    ref, slots = FAMILIES[family]
    op_type = f"ResourceApply{family}"
    attrs, overrides = split_attrs(family, attrs)
    h = hyper_for(op_type, overrides)
    monkeypatch.setattr(training_kernels, "_CHUNK", 16)  # small chunks, small graphs
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(threads, "_BUDGET", 2)
    monkeypatch.setattr(threads, "cores_free", lambda: 2)
    monkeypatch.setattr(threads, "cores_idle", lambda: 2)
    pieces = []
    real = training_kernels.parallel_for

    def watch(n, fn, *args, **kwargs):
        pieces.append(n)
        return real(n, fn, *args, **kwargs)

    monkeypatch.setattr(training_kernels, "parallel_for", watch)
    shape = (3, 50)  # several chunks and a ragged last one
    states = initial_state(slots, shape, np.float32)
    plain = Runner(op_type, states, h, list(shape), np.float32, attrs)
    held = Runner(op_type, states, h, list(shape), np.float32, attrs)
    before = {k: _address(v) for k, v in _installed(plain).items()}
    g = RNG.standard_normal(shape).astype(np.float32)
    readers = {k: v.read() for k, v in _installed(held).items()}
    kept = {k: v.copy() for k, v in readers.items()}
    plain.step(g)
    held.step(g)
    assert len(pieces) == 2 and all(n > 1 for n in pieces)  # both updates split in chunks
    got, copied = plain.values(), held.values()
    for k in got:
        np.testing.assert_array_equal(got[k], copied[k], err_msg=k)
        np.testing.assert_array_equal(readers[k], kept[k], err_msg=k)  # held values unchanged
    # Every state that changes was written into its own memory, not a new array.
    changed = {k for k in got if not np.array_equal(got[k], states[k])}
    assert changed and all(_address(_installed(plain)[k]) == before[k] for k in changed)
    h32 = {k: float(np.float32(v)) for k, v in h.items()}
    s64 = {k: v.astype(np.float64) for k, v in states.items()}
    want = {**s64, **ref(s64, h32, g.astype(np.float64), attrs)}
    assert_states(got, want, rtol=2e-5, atol=2e-5, dtype=np.float32)


def test_training_loop_updates_in_place_and_earlier_fetches_keep_their_values():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 300])
        w = rg.Variable(np.full((300, 400), 0.01, np.float32), name="w")
        loss = rg.reduce_sum(rg.square(rg.matmul(x, w)))
        from rill.train import MomentumOptimizer

        train = MomentumOptimizer(0.001, 0.9).minimize(loss)
        init = rg.global_variables_initializer()
    with Session(graph=g) as s:
        s.run(init)
        feed = {x: RNG.standard_normal((8, 300)).astype(np.float32)}
        s.run(train, feed)
        var = s._devices[0].resources.lookup("", "w")
        address = _address(var)
        fetched = s.run(w)
        snapshot = fetched.copy()
        for _ in range(3):
            s.run(train, feed)
        assert _address(var) == address  # the loop updated w (and its slot) in place
        np.testing.assert_array_equal(fetched, snapshot)  # a fetched value is the caller's copy
        assert not np.array_equal(s.run(w), snapshot)
