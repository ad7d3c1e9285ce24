"""TensorFlow-1 reference variables in rill.exec: refs alias the variable, reads see the value
at the time the reader runs, updates return the ref, bad input is refused without changing
the variable."""

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.graph.errors import FailedPreconditionError, InvalidArgumentError, OutOfRangeError
from rill.graph.ops import ref_variable_ops as R


def _var(value, name="v"):
    value = np.asarray(value)
    if value.dtype == np.float64 and name != "w" and name != "m":
        value = value.astype(np.float32)
    w = R.variable_v2(value.shape, rg.as_dtype(value.dtype), name=name)
    return w, R.assign(w, rg.constant(value), name=f"{name}/Assign")


def test_read_before_init_is_failed_precondition_and_is_initialized_tracks_it():
    with rg.Graph().as_default() as g:
        w, init = _var([1.0, 2.0])
        inited = R.is_variable_initialized(w)
        read = rg.identity(w)
    with Session(graph=g) as s:
        assert not s.run(inited)
        with pytest.raises(FailedPreconditionError, match="'v' is not initialized"):
            s.run(read)
        s.run(init)
        assert s.run(inited)
        np.testing.assert_array_equal(s.run(w), [1.0, 2.0])


def test_assign_returns_the_ref_and_reads_are_snapshots():
    with rg.Graph().as_default() as g:
        w, init = _var([1.0, 2.0])
        before = rg.identity(w, name="before")
        with g.control_dependencies([before]):
            up = R.assign_add(w, rg.constant([10.0, 10.0]))
        after = rg.identity(up, name="after")
        sub = R.assign_sub(w, rg.constant([1.0, 1.0]))
    with Session(graph=g) as s:
        s.run(init)
        b, a = s.run([before, after])
        np.testing.assert_array_equal(b, [1.0, 2.0])  # read before the update ran
        np.testing.assert_array_equal(a, [11.0, 12.0])  # the ref reads the updated value
        np.testing.assert_array_equal(s.run(sub), [10.0, 11.0])


def test_control_dependency_orders_a_read_after_an_update():
    with rg.Graph().as_default() as g:
        w, init = _var([0.0])
        up = R.assign_add(w, rg.constant([1.0]))
        with g.control_dependencies([up.op]):
            r = rg.identity(w)
    with Session(graph=g) as s:
        s.run(init)
        assert [s.run(r)[0] for _ in range(3)] == [1.0, 2.0, 3.0]


def test_scatter_family_matches_numpy_with_duplicates():
    start = np.arange(12, dtype=np.float32).reshape(4, 3) + 1
    idx = np.array([2, 0, 2])
    upd = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [0.5, 0.5, 0.5]], np.float32)
    cases = {
        "ScatterAdd": lambda x: np.add.at(x, idx, upd),
        "ScatterSub": lambda x: np.subtract.at(x, idx, upd),
        "ScatterMul": lambda x: np.multiply.at(x, idx, upd),
        "ScatterDiv": lambda x: np.divide.at(x, idx, upd),
        "ScatterMin": lambda x: np.minimum.at(x, idx, upd),
        "ScatterMax": lambda x: np.maximum.at(x, idx, upd),
    }
    for op_type, ref in cases.items():
        with rg.Graph().as_default() as g:
            w, init = _var(start)
            out = R.scatter_op(op_type, w, idx.astype(np.int32), upd)
        with Session(graph=g) as s:
            s.run(init)
            want = start.copy()
            ref(want)
            np.testing.assert_allclose(s.run(out), want, err_msg=op_type)


def test_scatter_updates_in_place_but_never_a_value_read_before():
    """A scatter writes the rows it touches into the variable's own array (no copy of the
    table per step) unless something else still holds that array: a value fetched (or read)
    before the update keeps what it read."""
    with rg.Graph().as_default() as g:
        w, init = _var(np.zeros((5, 2), np.float32))
        sub = R.scatter_op(
            "ScatterSub", w, np.array([1, 3, 1], np.int32), np.ones((3, 2), np.float32)
        )
        read = rg.identity(w)
    with Session(graph=g) as s:
        s.run(init)
        before = s.run(read)
        s.run(sub.op)
        np.testing.assert_array_equal(before, np.zeros((5, 2)))  # not written into
        want = np.zeros((5, 2), np.float32)
        want[1], want[3] = -2, -1
        np.testing.assert_array_equal(s.run(read), want)
        del before
        for k in range(2, 4):
            s.run(sub.op)
            want[1], want[3] = -2 * k, -k
            np.testing.assert_array_equal(s.run(read), want)


def test_scatter_nd_and_bad_indices_leave_the_variable_unchanged():
    with rg.Graph().as_default() as g:
        w, init = _var(np.zeros((2, 3), np.float32))
        nd = R.scatter_op("ScatterNdAdd", w, [[0, 1], [0, 1], [1, 2]], [1.0, 2.0, 3.0])
        bad = R.scatter_op("ScatterAdd", w, [5], [[1.0, 1.0, 1.0]])
    with Session(graph=g) as s:
        s.run(init)
        np.testing.assert_array_equal(s.run(nd), [[0, 3, 0], [0, 0, 3]])
        with pytest.raises(InvalidArgumentError, match=r"indices\[0\] = 5 is not in \[0, 2\)"):
            s.run(bad)
        np.testing.assert_array_equal(s.run(w), [[0, 3, 0], [0, 0, 3]])


def test_count_up_to_stops_with_out_of_range():
    with rg.Graph().as_default() as g:
        c, init = _var(np.int32(0), name="c")
        n = R.count_up_to(c, 2)
    with Session(graph=g) as s:
        s.run(init)
        assert [int(s.run(n)), int(s.run(n))] == [0, 1]
        with pytest.raises(OutOfRangeError, match="Reached limit of 2"):
            s.run(n)
        assert int(s.run(c)) == 2


def test_assign_validate_shape():
    with rg.Graph().as_default() as g:
        w, init = _var([1.0, 2.0])
        p = rg.placeholder(rg.float32, [None])
        strict = R.assign(w, p, validate_shape=True)
        loose = R.assign(w, p, validate_shape=False)
    with Session(graph=g) as s:
        s.run(init)
        with pytest.raises(InvalidArgumentError, match="shapes of both tensors to match"):
            s.run(strict, {p: np.ones(3, np.float32)})
        np.testing.assert_array_equal(s.run(w), [1.0, 2.0])
        np.testing.assert_array_equal(s.run(loose, {p: np.ones(3, np.float32)}), [1, 1, 1])


def test_apply_ops_update_ref_variables_like_their_resource_twins():
    from rill.graph.ops import training_ops

    g_val = np.array([0.5, -1.0])
    with rg.Graph().as_default() as g:
        w, wi = _var([1.0, 2.0], "w")
        m, mi = _var([0.0, 0.0], "m")
        out = g.create_op(
            "ApplyMomentum", [w, m, rg.constant(0.1, rg.float64), rg.constant(g_val),
                              rg.constant(0.9, rg.float64)], name="mom").outputs[0]  # fmt: skip
        rv = rg.Variable([1.0, 2.0], name="rv", dtype=rg.float64)
        rm = rg.Variable([0.0, 0.0], name="rm", dtype=rg.float64)
        res = training_ops.resource_apply_momentum(rv, rm, 0.1, rg.constant(g_val), 0.9)
        init = rg.global_variables_initializer()
    with Session(graph=g) as s:
        s.run([wi, mi, init])
        for _ in range(3):
            a = s.run(out)
            s.run(res)
        np.testing.assert_allclose(a, s.run(rv.read_value()))
        np.testing.assert_allclose(s.run(m), s.run(rm.read_value()))


def test_ref_ops_shape_functions():
    with rg.Graph().as_default():
        w = R.variable_v2([4, 3], rg.float32)
        assert R.assign(w, np.zeros((4, 3), np.float32)).shape == rg.TensorShape([4, 3])
        with pytest.raises(ValueError, match="validate_shape"):
            R.assign(w, np.zeros((2, 3), np.float32))
        assert R.assign(w, np.zeros((2, 3), np.float32), validate_shape=False).shape[0] == 2
        with pytest.raises(ValueError, match="indices.shape"):
            R.scatter_op("ScatterAdd", w, [0, 1], np.zeros((2, 4), np.float32))
        with pytest.raises(ValueError, match="scalar variable"):
            R.count_up_to(R.variable_v2([2], rg.int32), 3)


def test_ref_identity_gradient_reaches_the_variable():
    import rill.autodiff

    with rg.Graph().as_default() as g:
        w, init = _var(np.array([1.0, -2.0], np.float32))
        y = rg.reduce_sum(rg.identity(R.ref_identity(w)) ** 2)
        (dw,) = rill.autodiff.gradients(y, [w])
    with Session(graph=g) as s:
        s.run(init)
        np.testing.assert_allclose(s.run(dw), [2.0, -4.0])


_APPLY_OPS = [
    "ApplyGradientDescent", "ApplyMomentum", "ApplyAdagrad", "ApplyAdagradV2", "ApplyAdadelta",
    "ApplyRMSProp", "ApplyCenteredRMSProp", "ApplyAdam", "ApplyFtrl", "ApplyFtrlV2",
    "SparseApplyAdagrad", "SparseApplyAdagradV2", "SparseApplyMomentum", "SparseApplyAdadelta",
    "SparseApplyRMSProp", "SparseApplyCenteredRMSProp", "SparseApplyFtrl", "SparseApplyFtrlV2",
]  # fmt: skip
_HYPER = {"lr_power": -0.5, "beta1_power": 0.9, "beta2_power": 0.99, "rho": 0.9,
          "momentum": 0.8, "epsilon": 1e-3, "l1": 0.01, "l2": 0.02, "l2_shrinkage": 0.03,
          "beta1": 0.9, "beta2": 0.999}  # fmt: skip


@pytest.mark.parametrize("op_type", _APPLY_OPS)
def test_every_apply_op_updates_ref_variables_as_its_resource_twin(op_type):
    """Each non-resource Apply*/SparseApply* op, on ref variables, leaves the same values as its
    ResourceApply* twin on resource variables, and returns the updated var."""
    from rill.graph.op_def import get_op_def

    rng = np.random.default_rng(len(op_type))
    od = get_op_def(op_type)
    sparse = op_type.startswith("Sparse")
    inputs_ref, inputs_res, refs, res_vars, inits = [], [], [], [], []
    with rg.Graph().as_default() as g:
        for k, arg in enumerate(od.inputs):
            if arg.is_ref:
                start = rng.uniform(0.1, 1.0, (3, 2))
                w = R.variable_v2([3, 2], rg.float64, name=f"ref{k}")
                init = R.assign(w, rg.constant(start))
                res = rg.Variable(start, name=f"res{k}", dtype=rg.float64)
                inputs_ref.append(w)
                inputs_res.append(res.handle)
                refs.append(w)
                res_vars.append(res)
                inits.append(init)
            elif arg.name == "indices":
                idx = rg.constant([2, 0], rg.int32)
                inputs_ref.append(idx)
                inputs_res.append(idx)
            elif arg.name in ("grad", "delta"):
                grad = rg.constant(rng.normal(size=(2, 2) if sparse else (3, 2)))
                inputs_ref.append(grad)
                inputs_res.append(grad)
            else:
                v = rg.constant(_HYPER.get(arg.name, 0.1), rg.float64)
                inputs_ref.append(v)
                inputs_res.append(v)
        out = g.create_op(op_type, inputs_ref).outputs[0]
        twin = g.create_op("Resource" + op_type, inputs_res)
        init_all = rg.global_variables_initializer()
    with Session(graph=g) as s:
        s.run([init_all, *inits])
        for _ in range(2):
            got = s.run(out)
            s.run(twin)
        np.testing.assert_allclose(got, s.run(res_vars[0].read_value()), rtol=1e-12)
        for r, v in zip(refs, res_vars):
            np.testing.assert_allclose(s.run(r), s.run(v.read_value()), rtol=1e-12)


def test_old_variable_op_and_temporary_variables():
    with rg.Graph().as_default() as g:
        old = g.create_op("Variable", [], {"shape": rg.TensorShape([2]), "dtype": rg.float32},
                          name="old").outputs[0]  # fmt: skip
        init = R.assign(old, rg.constant([1.0, 2.0]))
        tmp = g.create_op("TemporaryVariable", [],
                          {"shape": rg.TensorShape([2]), "dtype": rg.float32,
                           "var_name": "acc"}).outputs[0]  # fmt: skip
        filled = R.assign(tmp, rg.constant([3.0, 4.0]))
        added = R.assign_add(filled, rg.constant([1.0, 1.0]))
        final = g.create_op("DestroyTemporaryVariable", [added], {"var_name": "acc"}).outputs[0]
    with Session(graph=g) as s:
        s.run(init)
        np.testing.assert_array_equal(s.run(old), [1.0, 2.0])
        np.testing.assert_array_equal(s.run(final), [4.0, 5.0])
        np.testing.assert_array_equal(s.run(final), [4.0, 5.0])  # a fresh variable per step


def test_ref_switch_and_ref_merge_forward_the_variable():
    with rg.Graph().as_default() as g:
        w, init = _var([1.0, 2.0])
        p = rg.placeholder(rg.bool_, [])
        sw = g.create_op("RefSwitch", [w, p]).outputs
        bumped = R.assign_add(sw[1], rg.constant([10.0, 10.0]))  # only when p
        merged = g.create_op("RefMerge", [[sw[0], bumped]]).outputs[0]
        value = rg.identity(merged)
    with Session(graph=g) as s:
        s.run(init)
        np.testing.assert_array_equal(s.run(value, {p: False}), [1.0, 2.0])
        np.testing.assert_array_equal(s.run(value, {p: True}), [11.0, 12.0])
        np.testing.assert_array_equal(s.run(w), [11.0, 12.0])
