"""The GPU path in CI: the simulated GPU (rill.exec.simgpu) runs the GPU kernel registrations
with cupy's rules, so transfer and mixing bugs fail here without a GPU."""

import json

import numpy as np
import pytest
from op_samples import load_all
from op_samples._device_check import EXTRAS, compare

import rill.graph as rg
from rill.exec import ConfigProto, RunMetadata, RunOptions, Session
from rill.exec.kernel_registry import find_kernel, has_kernel, kernel_registry
from rill.exec.simgpu import SimArray, simcupy, simulated_gpus
from rill.exec.tracing import chrome_trace
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError, ResourceExhaustedError

SAMPLES = load_all()


@pytest.fixture
def sim():
    with simulated_gpus(1):
        yield


def _placed(sess):
    out = {}
    for plan in sess._plans.values():
        for n in plan.plan_graph.nodes:
            out.setdefault(n.device.device_type, set()).add(n.type)
    return out


# -- the stand-in behaves as cupy ---------------------------------------------------------------


def test_sim_array_refuses_implicit_conversion():
    a = simcupy.asarray(np.arange(4.0))
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        np.asarray(a)
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.float32(a)


def test_sim_refuses_mixing_host_and_device_arrays():
    a = simcupy.asarray(np.arange(4.0))
    h = np.arange(4.0)
    with pytest.raises(TypeError, match="Unsupported type <class 'numpy.ndarray'>"):
        simcupy.add(a, h)
    with pytest.raises(TypeError, match="Unsupported type"):
        a + h
    with pytest.raises(TypeError, match="Unsupported type"):
        h * a  # numpy defers to the device array, which refuses the host one
    with pytest.raises(TypeError, match="Unsupported type"):
        a[:2] = h[:2]


def test_sim_dispatch_and_explicit_copies():
    a = simcupy.asarray(np.arange(6.0).reshape(2, 3))
    s = np.sum(a, axis=0)  # numpy functions dispatch to the device module, as with cupy
    assert type(s) is SimArray
    r = a.sum()
    assert type(r) is SimArray and r.shape == ()  # reductions give 0-d device arrays
    np.testing.assert_array_equal(simcupy.asnumpy(s), [3.0, 5.0, 7.0])
    np.testing.assert_array_equal(a.get(), np.arange(6.0).reshape(2, 3))
    with pytest.raises(ValueError, match="Unsupported dtype"):
        simcupy.asarray(np.array(["a"], dtype=object))
    assert not hasattr(a.flags, "writeable")
    assert not hasattr(simcupy, "errstate")  # names cupy lacks are missing here too


# -- every op sample, forward and gradient, on the simulated GPU -------------------------------


def _cases():
    for op in sorted(SAMPLES):
        for s in SAMPLES[op]:
            for grad in (False, True):
                yield pytest.param(s, grad, id=f"{s.id}-{'grad' if grad else 'fwd'}")


@pytest.mark.no_roundtrip("sample graphs are checked by the gradient conformance suite")
@pytest.mark.parametrize("s,grad", list(_cases()))
def test_sample_on_simulated_gpu_matches_cpu(sim, s, grad):
    ok, msg, _ = compare(s, grad)
    assert ok, f"{s.id} ({'gradient' if grad else 'forward'}): {msg}"


_EXTRA_CASES = [(s, False) for s in EXTRAS] + [(s, True) for s in EXTRAS if s.name == "extra-grad"]


@pytest.mark.parametrize("s,grad", _EXTRA_CASES,
                         ids=[f"{s.op_type}-{'grad' if g else 'fwd'}" for s, g in _EXTRA_CASES])  # fmt: skip
def test_extra_case_on_simulated_gpu_matches_cpu(sim, s, grad):
    ok, msg, on_gpu = compare(s, grad)
    assert ok and not msg, f"{s.op_type}: {msg}"
    if s.op_type[0].isupper() and not grad:
        assert s.op_type in on_gpu


# GPU kernels that the samples and extras do not run, and the test here that does.
_RUN_ELSEWHERE = {
    "RandomStandardNormal": "test_random_ops_on_gpu_are_seeded_per_op",
    "RandomUniform": "test_random_ops_on_gpu_are_seeded_per_op",
    "RandomUniformInt": "test_random_ops_on_gpu_are_seeded_per_op",
    "TruncatedNormal": "test_random_ops_on_gpu_are_seeded_per_op",
    "VarHandleOp": "test_variable_ops_on_gpu_match_cpu",
    "ReadVariableOp": "test_variable_ops_on_gpu_match_cpu",
    "AssignVariableOp": "test_variable_ops_on_gpu_match_cpu",
    "AssignAddVariableOp": "test_variable_ops_on_gpu_match_cpu",
    "AssignSubVariableOp": "test_variable_ops_on_gpu_match_cpu",
    "VarIsInitializedOp": "test_variable_ops_on_gpu_match_cpu",
    "ResourceGather": "test_variable_ops_on_gpu_match_cpu",
    "ResourceScatterAdd": "test_variable_ops_on_gpu_match_cpu",
    "ResourceScatterSub": "test_variable_ops_on_gpu_match_cpu",
    "ResourceScatterUpdate": "test_variable_ops_on_gpu_match_cpu",
    "DestroyResourceOp": "test_variable_ops_on_gpu_match_cpu",
    "DisableCopyOnRead": "test_variable_ops_on_gpu_match_cpu",
    "NoOp": "test_variable_ops_on_gpu_match_cpu",
    "ControlTrigger": "executor-implemented (no value): registered so placement allows it",
    "StackCloseV2": "test_stacks_on_gpu_swap_memory",
    "TensorArrayGradWithShape": "test_tensor_array_grad_with_shape_on_gpu",
}


@pytest.mark.no_roundtrip("sample graphs are checked by the gradient conformance suite")
def test_every_gpu_kernel_is_run_by_some_test(sim):
    """A kernel registered for GPU but never run on it is a defect: the samples, the extras,
    the optimizer tests and the tests named in _RUN_ELSEWHERE run every one."""
    ran = set()
    for ss in SAMPLES.values():
        for s in ss:
            for grad in (False, True):
                ran |= compare(s, grad)[2]
    for s, grad in _EXTRA_CASES:
        ran |= compare(s, grad)[2]
    ran |= {f"Resource{k}Apply{n}" for k in ("", "Sparse") for n in _APPLIED}
    gpu_ops = {o for o in kernel_registry.ops() if has_kernel(o, "GPU")}
    missing = gpu_ops - ran - set(_RUN_ELSEWHERE)
    assert not missing, sorted(missing)


# -- transfers ------------------------------------------------------------------------------------


def test_feed_copied_once_per_step_and_fetches_are_numpy(sim):
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [2, 3])
        a, b, c = rg.exp(x), rg.tanh(x), x * 2.0
        y = a + b + c
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    with Session(graph=g) as sess:
        opts = RunOptions(trace_level=RunOptions.FULL_TRACE)
        md = RunMetadata()
        out = sess.run([y, a], {x: xv}, options=opts, run_metadata=md)
        assert all(type(v) is np.ndarray for v in out)
        np.testing.assert_allclose(out[0], np.exp(xv) + np.tanh(xv) + 2 * xv, rtol=1e-6)
        names = [ns.node_name for d in md.step_stats.dev_stats for ns in d.node_stats]
        assert sum("MEMCPYHtoD" in n for n in names) == 1  # one copy for three consumers
        assert sum("MEMCPYDtoH" in n for n in names) == 0  # fetches are copied by the session
        assert {"Exp", "Tanh", "Mul", "AddV2"} <= _placed(sess)["GPU"]
        assert "MEMCPYHtoD" in chrome_trace(md.step_stats)


def test_op_without_gpu_kernel_lands_on_cpu_with_copies(sim):
    assert not has_kernel("LRN", "GPU")
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [1, 2, 2, 3])
        z = rg.reduce_sum(rg.lrn(rg.exp(x)) * 2.0)
    xv = np.random.default_rng(0).random((1, 2, 2, 3), dtype=np.float32)
    with Session(graph=g, config=ConfigProto(device_count={"GPU": 0})) as sess:
        want = sess.run(z, {x: xv})
    with Session(graph=g) as sess:
        md = RunMetadata()
        got = sess.run(z, {x: xv}, options=RunOptions(trace_level=RunOptions.FULL_TRACE),
                       run_metadata=md)  # fmt: skip
        np.testing.assert_allclose(got, want, rtol=1e-6)
        placed = _placed(sess)
        assert "LRN" in placed["CPU"] and "Exp" in placed["GPU"]
        labels = [ns.node_name for d in md.step_stats.dev_stats for ns in d.node_stats]
        assert any("MEMCPYDtoH" in n for n in labels) and any("MEMCPYHtoD" in n for n in labels)


def test_host_memory_inputs_stay_on_host(sim):
    """Shapes computed on the GPU reach Reshape/Tile/Sum as host arrays (HostMemory)."""
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, None)
        shape = rg.shape(x)
        flat = rg.reshape(x, rg.expand_dims(rg.reduce_prod(shape), 0))
        t = rg.tile(flat, rg.stack([rg.size(x) // rg.size(x) + 1]))
        s = rg.reduce_sum(t, rg.range(0, rg.rank(t)))
    with Session(graph=g) as sess:
        xv = np.ones((2, 3), np.float32)
        assert sess.run(s, {x: xv}) == 12.0
        assert {"Reshape", "Tile", "Sum"} <= _placed(sess)["GPU"]


def test_strings_and_bfloat16_have_no_gpu_kernel():
    assert find_kernel("Identity", "GPU", {"T": dtypes.float32}) is not None
    assert find_kernel("Identity", "GPU", {"T": dtypes.string}) is None
    assert find_kernel("AddV2", "GPU", {"T": dtypes.bfloat16}) is None


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("soft", [False, True])
def test_nonexistent_gpu_device(sim, soft):
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [2])
        with g.device("/device:GPU:3"):
            y = x * 3.0
        z = x + 1.0
    cfg = ConfigProto(allow_soft_placement=soft)
    with Session(graph=g, config=cfg) as sess:
        if soft:
            np.testing.assert_allclose(sess.run(y, {x: [1.0, 2.0]}), [3.0, 6.0])
        else:
            with pytest.raises(InvalidArgumentError, match="GPU:3.*no device matches"):
                sess.run(y, {x: [1.0, 2.0]})
        np.testing.assert_allclose(sess.run(z, {x: [1.0, 2.0]}), [2.0, 3.0])  # still usable


def test_out_of_memory_names_op_and_bytes():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None])
        big = rg.tile(x, [1000], name="big_tile")
        small = x * 2.0
    with simulated_gpus(1, memory_limit=100_000):
        sess = Session(graph=g)
    with sess:
        with pytest.raises(ResourceExhaustedError, match=r"big_tile.*400,000 bytes"):
            sess.run(big, {x: np.ones(100, np.float32)})
        np.testing.assert_allclose(sess.run(small, {x: np.ones(100, np.float32)}), 2.0)


# -- state, random, training ------------------------------------------------------------------


def test_random_ops_on_gpu_are_seeded_per_op(sim):
    def draw():
        g = rg.Graph()
        with g.as_default():
            g.seed = 7
            r = rg.truncated_normal([1000])
            u = rg.random_uniform([3])
        with Session(graph=g) as sess:
            a, b = sess.run(r), sess.run(r)
            assert "TruncatedNormal" in _placed(sess)["GPU"]
            return a, b, sess.run(u)

    a1, b1, u1 = draw()
    a2, b2, u2 = draw()
    np.testing.assert_array_equal(a1, a2)  # the same sequence in every session
    np.testing.assert_array_equal(b1, b2)
    assert not np.array_equal(a1, b1)  # successive steps continue it
    assert np.abs(a1).max() <= 2.0 and a1.dtype == np.float32
    assert ((u1 >= 0) & (u1 < 1)).all()


def _train(optimizer, gpu: bool, sparse: bool, steps: int = 3):
    g = rg.Graph()
    with g.as_default():
        g.seed = 3
        init_v = np.random.default_rng(3).uniform(-1, 1, (6, 4)).astype(np.float32)
        emb = rg.Variable(init_v, name="emb")
        ids = rg.placeholder(rg.int32, [None])
        x = rg.gather(emb, ids) if sparse else rg.matmul(rg.ones([3, 6]), emb)
        loss = rg.reduce_sum(rg.square(x - 0.5))
        train = optimizer().minimize(loss)
        init = rg.global_variables_initializer()
    cfg = None if gpu else ConfigProto(device_count={"GPU": 0})
    with Session(graph=g, config=cfg) as sess:
        sess.run(init)
        for _ in range(steps):
            sess.run(train, {ids: [1, 3, 1]})
        placed = _placed(sess)
        return sess.run(emb.value()), placed


_OPTIMIZERS = {
    "sgd": lambda: __import__("rill.train").train.GradientDescentOptimizer(0.1),
    "momentum": lambda: __import__("rill.train").train.MomentumOptimizer(0.1, 0.9),
    "nesterov": lambda: __import__("rill.train").train.MomentumOptimizer(0.1, 0.9,
                                                                         use_nesterov=True),
    "adam": lambda: __import__("rill.train").train.AdamOptimizer(0.1),
    "adagrad": lambda: __import__("rill.train").train.AdagradOptimizer(0.1),
    "rmsprop": lambda: __import__("rill.train").train.RMSPropOptimizer(0.1, momentum=0.5),
    "centered_rmsprop": lambda: __import__("rill.train").train.RMSPropOptimizer(
        0.1, momentum=0.5, centered=True),
    "adadelta": lambda: __import__("rill.train").train.AdadeltaOptimizer(1.0),
    "ftrl": lambda: __import__("rill.train").train.FtrlOptimizer(0.1, l1_regularization_strength=0.01),
    "ftrl_v2": lambda: __import__("rill.train").train.FtrlOptimizer(
        0.1, l1_regularization_strength=0.01, l2_shrinkage_regularization_strength=0.1),
}  # fmt: skip
# The fused update ops the optimizer tests run (dense and sparse), by name.
_APPLIED = [
    "GradientDescent",
    "Momentum",
    "KerasMomentum",
    "Adagrad",
    "AdagradV2",
    "Adadelta",
    "RMSProp",
    "CenteredRMSProp",
    "Adam",
    "Ftrl",
    "FtrlV2",
]


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("name", sorted(_OPTIMIZERS))
def test_optimizer_updates_on_gpu_match_cpu(sim, name, sparse):
    want, _ = _train(_OPTIMIZERS[name], gpu=False, sparse=sparse)
    got, placed = _train(_OPTIMIZERS[name], gpu=True, sparse=sparse)
    applies = {t for t in placed.get("GPU", ()) if t.startswith("Resource")}
    assert applies, f"no update ran on the GPU: {placed}"
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


def test_mlp_trains_on_gpu_as_on_cpu(sim):
    from rill.train import GradientDescentOptimizer

    def run(gpu):
        g = rg.Graph()
        with g.as_default():
            g.seed = 1
            x = rg.placeholder(rg.float32, [None, 20])
            y = rg.placeholder(rg.int64, [None])
            w1 = rg.Variable(rg.truncated_normal([20, 32], stddev=0.3))
            w2 = rg.Variable(rg.truncated_normal([32, 3], stddev=0.3))
            logits = rg.matmul(rg.relu(rg.matmul(x, w1)), w2)
            loss = rg.reduce_mean(
                rg.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
            )
            acc = rg.reduce_mean(rg.cast(rg.equal(rg.argmax(logits, 1), y), rg.float32))
            train = GradientDescentOptimizer(0.5).minimize(loss)
            init = rg.global_variables_initializer()
        rng = np.random.default_rng(0)
        xv = rng.standard_normal((300, 20)).astype(np.float32)
        yv = (xv[:, 0] > 0).astype(np.int64) + (xv[:, 1] > 0)
        with Session(graph=g, config=None if gpu else ConfigProto(device_count={"GPU": 0})) as s:
            s.run(init)
            w0 = s.run(w1.value())
            for _ in range(60):
                s.run(train, {x: xv, y: yv})
            return w0, s.run(acc, {x: xv, y: yv}), _placed(s)

    w_cpu, acc_cpu, _ = run(False)
    w_gpu, acc_gpu, placed = run(True)
    assert {"MatMul", "SparseSoftmaxCrossEntropyWithLogits", "ResourceApplyGradientDescent",
            "TruncatedNormal"} <= placed["GPU"]  # fmt: skip
    assert acc_cpu > 0.85 and abs(acc_gpu - acc_cpu) < 0.05, (acc_cpu, acc_gpu)
    assert not np.array_equal(w_cpu, w_gpu)  # the GPU draws its own initial values


def test_cnn_step_runs_on_gpu_as_on_cpu(sim):
    """Conv, pooling and their gradients on the GPU give the CPU's loss and update."""
    from rill.train import MomentumOptimizer

    def run(gpu):
        g = rg.Graph()
        with g.as_default():
            x = rg.placeholder(rg.float32, [None, 8, 8, 1])
            y = rg.placeholder(rg.float32, [None, 3])
            rng = np.random.default_rng(0)
            w1 = rg.Variable(rng.uniform(-0.3, 0.3, (3, 3, 1, 4)).astype(np.float32))
            w2 = rg.Variable(rng.uniform(-0.3, 0.3, (4 * 4 * 4, 3)).astype(np.float32))
            h = rg.relu(rg.conv2d(x, w1, [1, 1, 1, 1], "SAME"))
            h = rg.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
            h = rg.avg_pool(h, [1, 3, 3, 1], [1, 1, 1, 1], "SAME")
            logits = rg.matmul(rg.reshape(h, [-1, 64]), w2)
            loss = rg.reduce_mean(rg.softmax_cross_entropy_with_logits(labels=y, logits=logits))
            train = MomentumOptimizer(0.1, 0.9).minimize(loss)
            init = rg.global_variables_initializer()
        rng = np.random.default_rng(1)
        xv = rng.random((5, 8, 8, 1), dtype=np.float32)
        yv = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 5)]
        with Session(graph=g, config=None if gpu else ConfigProto(device_count={"GPU": 0})) as s:
            s.run(init)
            losses = [s.run([loss, train], {x: xv, y: yv})[0] for _ in range(4)]
            return losses, s.run(w1.value()), _placed(s)

    l_cpu, w_cpu, _ = run(False)
    l_gpu, w_gpu, placed = run(True)
    assert {"Conv2D", "Conv2DBackpropFilter", "MaxPool", "MaxPoolGrad", "AvgPool",
            "AvgPoolGrad", "ResourceApplyMomentum"} <= placed["GPU"]  # fmt: skip
    np.testing.assert_allclose(l_gpu, l_cpu, rtol=1e-5)
    np.testing.assert_allclose(w_gpu, w_cpu, rtol=1e-4, atol=1e-6)
    json.dumps(l_gpu and [float(v) for v in l_gpu])


def test_raw_optimizer_ops_on_gpu_match_cpu(sim):
    """Keras momentum and AdagradV2 (no optimizer class uses them), dense and sparse."""

    def run(gpu):
        g = rg.Graph()
        with g.as_default():
            v0 = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
            var, acc = rg.Variable(v0), rg.Variable(np.full((4, 3), 0.1, np.float32))
            grad = rg.constant(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
            rows = rg.constant(np.array([2, 0, 2], np.int32))
            g3 = rg.constant(np.ones((3, 3), np.float32))
            lr, mom, eps = rg.constant(0.1), rg.constant(0.9), rg.constant(1e-3)
            ops = [
                rg.resource_apply_keras_momentum(var, acc, lr, grad, mom, use_nesterov=True),
                rg.resource_apply_adagrad_v2(var, acc, lr, eps, grad),
                rg.resource_sparse_apply_keras_momentum(var, acc, lr, g3, rows, mom),
                rg.resource_sparse_apply_adagrad_v2(var, acc, lr, eps, g3, rows),
            ]
            init = rg.global_variables_initializer()
        cfg = None if gpu else ConfigProto(device_count={"GPU": 0})
        with Session(graph=g, config=cfg) as s:
            s.run(init)
            for op in ops * 2:
                s.run(op)
            if gpu:
                assert {"ResourceApplyKerasMomentum", "ResourceSparseApplyAdagradV2"} <= _placed(s)[
                    "GPU"
                ]
            return s.run([var.value(), acc.value()])

    for a, b in zip(run(True), run(False)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_variable_ops_on_gpu_match_cpu(sim):
    def run(gpu):
        g = rg.Graph()
        with g.as_default():
            v = rg.Variable(np.arange(12, dtype=np.float32).reshape(4, 3), name="v")
            ok = rg.is_variable_initialized(v)
            # What TF 2.13+ SavedModels' restore functions run before restoring a variable.
            hint = g.create_op("DisableCopyOnRead", [v.handle])
            idx = rg.constant(np.array([1, 3, 1], np.int32))
            upd = rg.constant(np.ones((3, 3), np.float32))
            steps = [
                v.assign_add(np.full((4, 3), 2.0, np.float32)),
                v.assign_sub(np.full((4, 3), 0.5, np.float32)),
                rg.scatter_add(v, idx, upd),
                rg.scatter_sub(v, idx[:1], upd[:1] * 3.0),
                rg.scatter_update(v, idx[1:2], upd[:1] * 7.0),
                v.assign(v.sparse_read(rg.constant([3, 2, 1, 0])) * 2.0),
            ]
            init = rg.global_variables_initializer()
        cfg = None if gpu else ConfigProto(device_count={"GPU": 0})
        with Session(graph=g, config=cfg) as s:
            assert not s.run(ok)
            s.run(init)
            s.run(hint)
            assert s.run(ok)
            out = []
            for st in steps:
                s.run(st)
                out.append(s.run(v.value()))
            if gpu:
                assert {"VarHandleOp", "ResourceScatterAdd", "ResourceScatterUpdate",
                        "ResourceGather", "AssignAddVariableOp",
                        "DisableCopyOnRead"} <= _placed(s)["GPU"]  # fmt: skip
            return out

    for a, b in zip(run(True), run(False)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("swap", [False, True])
def test_stacks_on_gpu_swap_memory(swap):
    """Pushes with swap_memory move the saved values to host memory and pops bring them back;
    without it they stay on the device. Either way the values come back unchanged."""
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [4])
        h = rg.stack_v2(-1, rg.float32)
        p1 = rg.stack_push_v2(h, x * 2.0, swap_memory=swap)
        p2 = rg.stack_push_v2(h, x * 3.0, swap_memory=swap)
        g2 = rg.get_default_graph()
        with g2.control_dependencies([p2.op, p1.op]):
            a = rg.stack_pop_v2(h, rg.float32)
        with g2.control_dependencies([a.op]):
            b = rg.stack_pop_v2(h, rg.float32)
        with g2.control_dependencies([b.op]):
            close = rg.stack_close_v2(h)
    with simulated_gpus(1):
        sess = Session(graph=g)
    with sess:
        gpu = sess._devices[-1]
        xv = np.arange(4, dtype=np.float32)
        out = sess.run([a, b, close], {x: xv})
        np.testing.assert_array_equal(out[0], xv * 3.0)
        np.testing.assert_array_equal(out[1], xv * 2.0)
        assert {"StackPushV2", "StackPopV2", "StackCloseV2"} <= _placed(sess)["GPU"]
        assert gpu.swapped_bytes == (32 if swap else 0)


def test_dynamic_rnn_swap_memory_on_gpu_matches_cpu():
    """An LSTM's saved activations go to the host with swap_memory; gradients are unchanged."""
    import rill.train as rt
    from rill.autodiff import gradients

    def run(gpu, swap):
        g = rg.Graph()
        with g.as_default():
            g.seed = 0
            x = rg.placeholder(rg.float32, [6, 2, 3])
            cell = rt.BasicLSTMCell(4)
            out, _ = rt.dynamic_rnn(cell, x, dtype=rg.float32, time_major=True,
                                    swap_memory=swap)  # fmt: skip
            loss = rg.reduce_mean(rg.square(out))
            params = rg.trainable_variables()
            grads = gradients(loss, params)
            init = rg.global_variables_initializer()
            assign = [p.assign(np.full(p.shape.as_list(), 0.05, np.float32)) for p in params]
        cfg = None if gpu else ConfigProto(device_count={"GPU": 0})
        with simulated_gpus(1):
            s = Session(graph=g, config=cfg)
        with s:
            s.run(init)
            s.run(assign)
            xv = np.random.default_rng(0).standard_normal((6, 2, 3)).astype(np.float32)
            vals = s.run(grads, {x: xv})
            swapped = s._devices[-1].swapped_bytes if gpu else 0
            placed = _placed(s)
        return vals, swapped, placed

    want, _, _ = run(False, False)
    plain, no_swap, _ = run(True, False)
    swapped, moved, placed = run(True, True)
    assert {"StackPushV2", "TensorArrayReadV3", "MatMul"} <= placed["GPU"]
    assert no_swap == 0 and moved > 0
    for a, b, c in zip(want, plain, swapped):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-7)
        np.testing.assert_array_equal(c, b)


def test_tensor_array_grad_with_shape_on_gpu(sim):
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [3, 2])
        ta = rg.TensorArray(rg.float32, size=3).unstack(x)
        op = g.create_op("TensorArrayGradWithShape",
                         [ta.handle, ta.flow, rg.constant([2], rg.int32)],
                         {"source": "s"})  # fmt: skip
        gta = rg.TensorArray(rg.float32, handle=op.outputs[0], flow=op.outputs[1])
        r = gta.read(1)
    with Session(graph=g) as sess:
        got = sess.run(r, {x: np.ones((3, 2), np.float32)})
        assert "TensorArrayGradWithShape" in _placed(sess)["GPU"]
        np.testing.assert_array_equal(got, np.zeros((2, 2), np.float32))


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_tiled_max_pool_grad_ties_and_nan_match_cpu(sim, fmt):
    """The tiled fast path picks the CPU kernel's position: the first maximum, NaN only first."""
    x = np.array([[1, 1, 2, 2], [1, 0, 2, 2], [np.nan, 5, 3, np.nan], [5, 5, 3, 3]], np.float32)
    x = x.reshape(1, 4, 4, 1) if fmt == "NHWC" else x.reshape(1, 1, 4, 4)
    g = rg.Graph()
    with g.as_default():
        xp = rg.placeholder(rg.float32, x.shape)
        k = [1, 2, 2, 1] if fmt == "NHWC" else [1, 1, 2, 2]
        y = rg.max_pool(xp, k, k, "VALID", data_format=fmt)
        dx = rg.get_default_graph().create_op(
            "MaxPoolGrad", [xp, y, rg.ones_like(y) * rg.constant(np.float32(3.0))],
            {"ksize": k, "strides": k, "padding": "VALID", "data_format": fmt}).outputs[0]  # fmt: skip
    with Session(graph=g, config=ConfigProto(device_count={"GPU": 0})) as sess:
        want = sess.run([y, dx], {xp: x})
    with Session(graph=g) as sess:
        got = sess.run([y, dx], {xp: x})
        assert {"MaxPool", "MaxPoolGrad"} <= _placed(sess)["GPU"]
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
