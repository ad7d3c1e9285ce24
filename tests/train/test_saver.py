"""Saver and checkpoint_management: round trips, bookkeeping, mismatch messages, crash safety."""

import glob
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.exec import checkpoint_format as cf
from rill.graph.errors import DataLossError, InternalError, InvalidArgumentError, NotFoundError
from rill.train import checkpoint_management as cm
from rill.train.saver import Saver

VALUES = {
    "f16": np.array([1.5, -0.0, np.inf], np.float16),
    "bf16": np.array([[1.0, -2.5], [3.0e38, np.nan]], ml_dtypes.bfloat16),
    "f32": (np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5) / 7,
    "f64": np.array(np.pi),
    "i8": np.array([-128, 0, 127], np.int8),
    "i32": np.array([[2**31 - 1], [-(2**31)]], np.int32),
    "i64": np.array([2**63 - 1, -(2**63)], np.int64),
    "u8": np.array([0, 255], np.uint8),
    "bool": np.array([[True, False, True]]),
    "c64": np.array([1 + 2j, -3.5j], np.complex64),
    "c128": np.array([[1e300 - 1j]], np.complex128),
    "str": np.array([b"", "h\u00e9".encode(), b"\x00\xff"], dtype=object),
    "scope/empty": np.zeros((0, 4), np.float32),
}


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype == object:
        return a.tolist() == b.tolist()
    return np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def _zeros_like(v: np.ndarray) -> np.ndarray:
    if v.dtype == object:
        return np.full(v.shape, b"zz", dtype=object)
    return np.zeros_like(v)


def _make_vars(values, initial=None):
    out = {}
    for name, v in values.items():
        init = v if initial is None else initial(v)
        dtype = rg.bfloat16 if v.dtype == ml_dtypes.bfloat16 else None
        if v.dtype == object:
            dtype = rg.string
        out[name] = rg.Variable(init, name=name, dtype=dtype)
    return out


def _counter_graph():
    """A variable `w`, a step `global_step`, and a "train op" adding 1 to both."""
    g = rg.Graph()
    with g.as_default():
        w = rg.Variable(np.zeros(3, np.float32), name="w")
        step = rg.Variable(np.int64(0), name="global_step")
        train = rg.group(w.assign_add(np.ones(3, np.float32)), step.assign_add(np.int64(1)))
    return g, w, step, train


# -- round trips ---------------------------------------------------------------------------------


def test_round_trip_every_dtype_is_bit_exact(graph, tmp_path):
    # The values are fed (Variable.load), not constants: the graph round-trip check compares
    # constants with NaN == NaN only for numpy's own float kinds, not bfloat16.
    vs = _make_vars(VALUES, initial=_zeros_like)
    saver = Saver()
    with Session() as sess:
        sess.run(rg.global_variables_initializer())
        for v, value in zip(vs.values(), VALUES.values()):
            v.load(value, sess)
        path = saver.save(sess, str(tmp_path / "model"), global_step=3)
        assert path == str(tmp_path / "model-3")
        for v, value in zip(vs.values(), VALUES.values()):
            sess.run(v.assign(_zeros_like(value), read_value=False))
        saver.restore(sess, path)
        got = sess.run(vs)
    for name, value in VALUES.items():
        assert _same(got[name], value), name
    listed = dict((n, (d, s)) for n, d, s in cf.list_checkpoint(path))
    assert listed["bf16"] == ("bfloat16", (2, 2)) and listed["str"] == ("string", (3,))
    assert sorted(listed) == sorted(VALUES)


def test_saver_ops_are_named_and_placed_as_documented(graph):
    w = rg.Variable([1.0], name="w")
    saver = Saver()
    d = saver.saver_def
    assert (d.filename_tensor_name, d.save_tensor_name, d.restore_op_name) == (
        "save/filename:0", "save/control_dependency:0", "save/restore_all",
    )  # fmt: skip
    assert d.max_to_keep == 5 and d.version == 2
    save_op = graph.get_operation_by_name("save/SaveV2")
    assert save_op.device == "/device:CPU:0"
    assert graph.get_operation_by_name("save/RestoreV2").device == "/device:CPU:0"
    assign = graph.get_operation_by_name("save/AssignVariableOp")
    assert assign.colocation_groups() == ["w"] and assign.inputs[0] is w.handle
    assert Saver().saver_def.restore_op_name == "save_1/restore_all"


def test_partial_var_list_saves_and_restores_only_those(graph, tmp_path):
    w = rg.Variable([1.0, 2.0], name="w")
    b = rg.Variable([3.0], name="b")
    full, only_w = Saver(), Saver([w])
    with Session() as sess:
        sess.run(rg.global_variables_initializer())
        p_w = only_w.save(sess, str(tmp_path / "w_only"))
        p_full = full.save(sess, str(tmp_path / "full"))
        assert [n for n, _, _ in cf.list_checkpoint(p_w)] == ["w"]
        sess.run([w.assign([0.0, 0.0]), b.assign([0.0])])
        only_w.restore(sess, p_full)  # the checkpoint's "b" is not wanted: allowed
        np.testing.assert_array_equal(sess.run(w), [1.0, 2.0])
        np.testing.assert_array_equal(sess.run(b), [0.0])


def test_dict_var_list_saves_under_other_names(tmp_path):
    with rg.Graph().as_default():
        w = rg.Variable([[1.0, 2.0]], name="model/dense/kernel")
        saver = Saver({"encoder/w": w})
        with Session() as sess:
            sess.run(w.initializer)
            path = saver.save(sess, str(tmp_path / "ckpt"))
    assert cf.list_checkpoint(path) == [("encoder/w", "float32", (1, 2))]
    with rg.Graph().as_default():
        w2 = rg.Variable([[0.0, 0.0]], name="renamed")
        with Session() as sess:
            sess.run(w2.initializer)
            Saver({"encoder/w": w2}).restore(sess, path)
            np.testing.assert_array_equal(sess.run(w2), [[1.0, 2.0]])


def test_global_step_as_a_variable_and_padding(graph, tmp_path):
    step = rg.Variable(np.int64(42), name="global_step")
    with Session() as sess:
        sess.run(step.initializer)
        assert Saver().save(sess, str(tmp_path / "m"), global_step=step).endswith("m-42")
        padded = Saver(pad_step_number=True).save(sess, str(tmp_path / "p"), global_step=7)
        assert padded.endswith("p-00000007") and cf.checkpoint_exists(padded)


def test_construction_and_save_errors(graph, tmp_path):
    with pytest.raises(ValueError, match="No variables to save"):
        Saver()
    assert Saver(allow_empty=True).save(None, str(tmp_path / "x")) is None
    w = rg.Variable([1.0], name="w")
    v = rg.Variable([1.0], name="v")
    with pytest.raises(ValueError, match="same name: w"):
        Saver([w, v, w])
    with pytest.raises(TypeError, match="saves Variables"):
        Saver([w.value()])
    with pytest.raises(ValueError, match="best_mode"):
        Saver(best_mode="lowest")
    saver = Saver()
    with Session() as sess:
        sess.run(rg.global_variables_initializer())
        with pytest.raises(ValueError, match="Parent directory of .*nowhere/model doesn't exist"):
            saver.save(sess, str(tmp_path / "nowhere" / "model"))
        # As TensorFlow's, save writes the meta graph next to the checkpoint unless told not to.
        assert os.path.isfile(saver.save(sess, str(tmp_path / "m")) + ".meta")
        assert not os.path.exists(
            saver.save(sess, str(tmp_path / "n"), write_meta_graph=False) + ".meta"
        )
        with pytest.raises(ValueError, match="path components"):
            saver.save(sess, str(tmp_path / "m"), latest_filename="a/b")
        with pytest.raises(ValueError, match="None"):
            saver.restore(sess, None)
        with pytest.raises(ValueError, match="not a valid checkpoint.*latest_checkpoint"):
            saver.restore(sess, str(tmp_path))
    deferred = Saver(defer_build=True)
    with pytest.raises(RuntimeError, match="build"):
        deferred.save(None, str(tmp_path / "m"))


# -- the state file and bookkeeping -------------------------------------------------------------


def _files(d) -> set[str]:
    return {os.path.basename(p) for p in glob.glob(os.path.join(d, "*"))}


def test_max_to_keep_deletes_old_checkpoint_files(tmp_path):
    g, w, step, train = _counter_graph()
    with g.as_default():
        saver = Saver(max_to_keep=2)
    prefix = str(tmp_path / "model")
    with Session(graph=g) as sess:
        sess.run(rg.group(w.initializer, step.initializer))
        for s in range(1, 6):
            sess.run(train)
            saver.save(sess, prefix, global_step=s)
    assert saver.last_checkpoints == [f"{prefix}-4", f"{prefix}-5"]
    data = "data-00000-of-00001"
    assert _files(tmp_path) == {
        "checkpoint", "model-4.index", f"model-4.{data}", "model-5.index", f"model-5.{data}",
        "model-4.meta", "model-5.meta",  # the meta graphs go with their checkpoints
    }  # fmt: skip
    text = (tmp_path / "checkpoint").read_text()
    assert text.splitlines()[:3] == [
        'model_checkpoint_path: "model-5"',
        'all_model_checkpoint_paths: "model-4"',
        'all_model_checkpoint_paths: "model-5"',
    ]
    state = cm.get_checkpoint_state(str(tmp_path))
    assert state.all_model_checkpoint_paths == [f"{prefix}-4", f"{prefix}-5"]
    assert len(state.all_model_checkpoint_timestamps) == 2
    assert cm.latest_checkpoint(str(tmp_path)) == f"{prefix}-5"


def test_max_to_keep_none_keeps_everything(tmp_path):
    g, w, step, _ = _counter_graph()
    with g.as_default():
        saver = Saver(max_to_keep=None)
    with Session(graph=g) as sess:
        sess.run(rg.group(w.initializer, step.initializer))
        for s in range(3):
            saver.save(sess, str(tmp_path / "m"), global_step=s)
    assert {f for f in _files(tmp_path) if f.endswith(".index")} == {
        "m-0.index", "m-1.index", "m-2.index",
    }  # fmt: skip
    assert cm.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths == [
        str(tmp_path / "m-2")
    ]


def test_keep_best_keeps_the_best_and_the_latest(tmp_path):
    g, w, step, _ = _counter_graph()
    with g.as_default():
        saver = Saver(max_to_keep=2, keep_best=2, best_mode="min")
    prefix = str(tmp_path / "model")
    metrics = {1: 5.0, 2: 1.0, 3: 4.0, 4: 3.0, 5: 2.0, 6: 6.0, 7: 7.0}
    with Session(graph=g) as sess:
        sess.run(rg.group(w.initializer, step.initializer))
        for s, m in metrics.items():
            saver.save(sess, prefix, global_step=s, metric=m)
    kept = sorted(f for f in _files(tmp_path) if f.endswith(".index"))
    assert kept == ["model-2.index", "model-5.index", "model-6.index", "model-7.index"]
    assert saver.best_checkpoints == [(f"{prefix}-2", 1.0), (f"{prefix}-5", 2.0)]
    assert saver.last_checkpoints == [f"{prefix}-6", f"{prefix}-7"]
    state = cm.get_checkpoint_state(str(tmp_path))
    assert state.best_mode == "min"
    assert state.best_model_checkpoint_paths == [f"{prefix}-2", f"{prefix}-5"]
    assert {os.path.basename(m.path): m.metric for m in state.checkpoint_metrics} == {
        "model-6": 6.0, "model-7": 7.0, "model-2": 1.0, "model-5": 2.0,
    }  # fmt: skip
    assert state.metric_of(f"{prefix}-5") == 2.0
    assert cm.best_checkpoint(str(tmp_path)) == f"{prefix}-2"
    assert cm.latest_checkpoint(str(tmp_path)) == f"{prefix}-7"
    text = (tmp_path / "checkpoint").read_text()
    assert 'checkpoint_metrics { path: "model-2" metric: 1.0 timestamp: ' in text

    # A new Saver that takes over the state goes on ranking (and deleting) the same files.
    with g.as_default():
        again = Saver(max_to_keep=2, keep_best=2, best_mode="min", name="again")
    assert again.recover_checkpoint_state(str(tmp_path))
    with Session(graph=g) as sess:
        sess.run(rg.group(w.initializer, step.initializer))
        again.save(sess, prefix, global_step=8, metric=0.5)
    kept = sorted(f for f in _files(tmp_path) if f.endswith(".index"))
    assert kept == ["model-2.index", "model-7.index", "model-8.index"]
    assert [p for p, _ in again.best_checkpoints] == [f"{prefix}-8", f"{prefix}-2"]


def test_keep_best_max_mode_and_nan_never_best(tmp_path):
    g, w, step, _ = _counter_graph()
    with g.as_default():
        saver = Saver(max_to_keep=1, keep_best=1, best_mode="max")
    prefix = str(tmp_path / "acc")
    with Session(graph=g) as sess:
        sess.run(rg.group(w.initializer, step.initializer))
        for s, m in enumerate([0.5, 0.9, float("nan"), 0.7]):
            saver.save(sess, prefix, global_step=s, metric=m)
        # a metric given as a tensor is run
        saver.save(sess, prefix, global_step=9, metric=rg.constant(0.95))
    assert saver.best_checkpoints == [(f"{prefix}-9", pytest.approx(0.95))]
    assert sorted(f for f in _files(tmp_path) if f.endswith(".index")) == ["acc-9.index"]


def test_relative_paths_let_a_directory_move(tmp_path):
    g, w, step, train = _counter_graph()
    src = tmp_path / "run1"
    src.mkdir()
    with g.as_default():
        saver = Saver()
    with Session(graph=g) as sess:
        sess.run(rg.group(w.initializer, step.initializer))
        for s in range(1, 4):
            sess.run(train)
            saver.save(sess, str(src / "model"), global_step=s)
    assert str(tmp_path) not in (src / "checkpoint").read_text()
    dst = tmp_path / "moved" / "elsewhere"
    shutil.move(str(src), str(dst))
    latest = cm.latest_checkpoint(str(dst))
    assert latest == str(dst / "model-3")
    with Session(graph=g) as sess:
        saver.restore(sess, latest)
        np.testing.assert_array_equal(sess.run(w), [3.0, 3.0, 3.0])
        assert sess.run(step) == 3


def test_absolute_paths_when_asked(graph, tmp_path):
    w = rg.Variable([1.0], name="w")
    saver = Saver(save_relative_paths=False)
    with Session() as sess:
        sess.run(w.initializer)
        saver.save(sess, str(tmp_path / "m"), global_step=1)
    assert f'model_checkpoint_path: "{tmp_path}/m-1"' in (tmp_path / "checkpoint").read_text()


def test_state_file_text_format(tmp_path, caplog):
    odd = 'we"ird\\dir é/x'
    (tmp_path / "checkpoint").write_text(
        "# written by TensorFlow\n"
        'model_checkpoint_path: "model.ckpt-20"\n'
        "all_model_checkpoint_paths: 'model.ckpt-10'\n"
        'all_model_checkpoint_paths: "model.ckpt-20"\n'
        "all_model_checkpoint_timestamps: 1.5e9 all_model_checkpoint_timestamps: 1500000100\n"
        "last_preserved_timestamp: 1499999999.5\n"
    )
    state = cm.get_checkpoint_state(str(tmp_path))
    assert state.model_checkpoint_path == str(tmp_path / "model.ckpt-20")
    assert state.all_model_checkpoint_paths == [
        str(tmp_path / "model.ckpt-10"), str(tmp_path / "model.ckpt-20"),
    ]  # fmt: skip
    assert state.all_model_checkpoint_timestamps == [1.5e9, 1500000100.0]
    assert state.last_preserved_timestamp == 1499999999.5
    assert cm.latest_checkpoint(str(tmp_path)) is None  # no such checkpoint on disk

    # Paths with quotes, backslashes and non-ASCII round-trip through the escapes.
    cm.update_checkpoint_state(
        str(tmp_path), str(tmp_path / odd / "m-2"), [str(tmp_path / odd / "m-1")],
        latest_filename="state",
    )  # fmt: skip
    text = (tmp_path / "state").read_text()
    assert text.isascii() and '\\"' in text and "\\303\\251" in text
    state = cm.get_checkpoint_state(str(tmp_path), "state")
    assert state.all_model_checkpoint_paths == [
        str(tmp_path / odd / "m-1"), str(tmp_path / odd / "m-2"),
    ]  # fmt: skip

    # Numbers in every notation Python's repr and TensorFlow write.
    state = cm.CheckpointState(
        "m",
        ["m"],
        [1712345600.25],
        best_mode="min",
        best_model_checkpoint_paths=["m"],
        checkpoint_metrics=[cm.CheckpointMetric("m", 1e-05, 1e20)],
    )
    cm._write_state(str(tmp_path), state, "numbers")
    text = (tmp_path / "numbers").read_text()
    assert "metric: 1e-05 timestamp: 1e+20" in text
    (tmp_path / "numbers").write_text(text + "last_preserved_timestamp: -2.5E+3\n")
    got = cm.get_checkpoint_state(str(tmp_path), "numbers")
    assert got.checkpoint_metrics[0].metric == 1e-05 and got.checkpoint_metrics[0].timestamp == 1e20
    assert got.last_preserved_timestamp == -2500.0 and got.best_mode == "min"
    for value in (float("inf"), float("-inf")):
        state.checkpoint_metrics[0].metric = value
        cm._write_state(str(tmp_path), state, "numbers")
        assert (
            cm.get_checkpoint_state(str(tmp_path), "numbers").metric_of(str(tmp_path / "m"))
            == value
        )

    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "a"\nunknown_field: 3\n')
    with caplog.at_level(logging.WARNING):
        assert cm.get_checkpoint_state(str(tmp_path)) is None
    assert "unknown_field" in caplog.text
    assert cm.get_checkpoint_state(str(tmp_path / "missing")) is None


def test_list_and_load_variables(graph, tmp_path):
    w = rg.Variable(np.arange(4.0).reshape(2, 2), name="dense/w")
    with Session() as sess:
        sess.run(w.initializer)
        Saver().save(sess, str(tmp_path / "m"), global_step=1)
    assert cm.list_variables(str(tmp_path)) == [("dense/w", [2, 2])]
    np.testing.assert_array_equal(cm.load_variable(str(tmp_path), "dense/w:0"), [[0, 1], [2, 3]])
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFoundError, match="no checkpoint"):
        cm.list_variables(str(tmp_path / "empty"))


# -- mismatches -------------------------------------------------------------------------------


def _save_reference(path):
    with rg.Graph().as_default():
        rg.Variable(np.ones((2, 3), np.float32), name="w")
        rg.Variable(np.ones(3, np.float32), name="b")
        rg.Variable(np.int64(5), name="extra")
        with Session() as sess:
            sess.run(rg.global_variables_initializer())
            return Saver().save(sess, path)


def test_mismatch_message_lists_every_difference(tmp_path):
    path = _save_reference(str(tmp_path / "ref"))
    with rg.Graph().as_default():
        w = rg.Variable(np.zeros((3, 3), np.float32), name="w")
        rg.Variable(np.zeros(3, np.int32), name="b")
        rg.Variable(np.zeros(2, np.float64), name="c")
        saver = Saver()
        with Session() as sess:
            sess.run(rg.global_variables_initializer())
            with pytest.raises(NotFoundError) as e:
                saver.restore(sess, path)
            np.testing.assert_array_equal(sess.run(w), np.zeros((3, 3)))  # nothing assigned
    msg = str(e.value)
    assert f"Restoring from checkpoint {path} failed" in msg
    assert "variables missing from the checkpoint (1):\n    'c' (float64[2], variable c)" in msg
    assert "tensors in the checkpoint that no variable takes (1):\n    'extra' (int64[])" in msg
    assert "variables whose dtype or shape differs (2):" in msg
    assert "'b': the variable is int32[3], the checkpoint has float32[3]" in msg
    assert "'w': the variable is float32[3,3], the checkpoint has float32[2,3]" in msg


def test_shape_mismatch_alone_is_invalid_argument(tmp_path):
    path = _save_reference(str(tmp_path / "ref"))
    with rg.Graph().as_default():
        rg.Variable(np.zeros((2, 4), np.float32), name="w")
        saver = Saver()
        with Session() as sess, pytest.raises(InvalidArgumentError) as e:
            saver.restore(sess, path)
    msg = str(e.value)
    assert "'w': the variable is float32[2,4], the checkpoint has float32[2,3]" in msg
    assert "missing" not in msg and "'b' (float32[3])" in msg and "'extra' (int64[])" in msg


def test_unknown_shape_variable_takes_any_shape(tmp_path):
    path = _save_reference(str(tmp_path / "ref"))
    with rg.Graph().as_default():
        w = rg.Variable(np.zeros(1, np.float32), name="w", validate_shape=False)
        with Session() as sess:
            Saver([w]).restore(sess, path)
            assert sess.run(w).shape == (2, 3)


def test_corrupt_checkpoint_restores_nothing(graph, tmp_path):
    w = rg.Variable(np.arange(3.0), name="w")
    v = rg.Variable(np.arange(3.0), name="v")
    saver = Saver()
    with Session() as sess:
        sess.run(rg.global_variables_initializer())
        path = saver.save(sess, str(tmp_path / "m"))
        data = Path(cf.data_path(path))
        raw = bytearray(data.read_bytes())
        raw[-1] ^= 0xFF  # the last tensor, "w"
        data.write_bytes(bytes(raw))
        sess.run([w.assign([9.0, 9.0, 9.0]), v.assign([9.0, 9.0, 9.0])])
        with pytest.raises(DataLossError, match="checksum mismatch"):
            saver.restore(sess, path)
        np.testing.assert_array_equal(sess.run(v), [9.0, 9.0, 9.0])


# -- crash safety ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stage", ["data_written", "index_written", "data_renamed", "state_written"]
)
def test_a_failed_save_leaves_the_previous_checkpoint(tmp_path, stage):
    g, w, step, train = _counter_graph()
    with g.as_default():
        saver = Saver(max_to_keep=1)
    prefix = str(tmp_path / "model")
    fired = []

    def crash(s, paths):
        if s == stage:
            fired.append(s)
            raise RuntimeError(f"crash at {s}")

    with Session(graph=g) as sess:
        sess.run(rg.group(w.initializer, step.initializer))
        sess.run(train)
        first = saver.save(sess, prefix, global_step=1)
        state_before = (tmp_path / "checkpoint").read_text()
        sess.run(train)
        # Inside the SaveV2 kernel the exception reaches the caller as an InternalError.
        with cm.fault_hook(crash), pytest.raises((RuntimeError, InternalError), match="crash"):
            saver.save(sess, prefix, global_step=2)
        assert fired == [stage]
        assert (tmp_path / "checkpoint").read_text() == state_before
        assert cm.latest_checkpoint(str(tmp_path)) == first
        assert saver.last_checkpoints == [first]
        assert not [f for f in _files(tmp_path) if ".tmp-" in f]
        sess.run(w.assign([0.0, 0.0, 0.0]))
        saver.restore(sess, cm.latest_checkpoint(str(tmp_path)))
        np.testing.assert_array_equal(sess.run(w), [1.0, 1.0, 1.0])
        # The next save works and still deletes the first checkpoint (max_to_keep=1).
        third = saver.save(sess, prefix, global_step=3)
    assert cm.latest_checkpoint(str(tmp_path)) == third
    assert not cf.checkpoint_exists(first)


def test_a_crash_after_the_state_file_keeps_both(tmp_path):
    g, w, step, _ = _counter_graph()
    with g.as_default():
        saver = Saver(max_to_keep=1)

    def crash(s, paths):
        if s == "state_renamed":
            raise RuntimeError("crash")

    with Session(graph=g) as sess:
        sess.run(rg.group(w.initializer, step.initializer))
        first = saver.save(sess, str(tmp_path / "m"), global_step=1)
        with cm.fault_hook(crash), pytest.raises(RuntimeError):
            second = saver.save(sess, str(tmp_path / "m"), global_step=2)
    second = str(tmp_path / "m-2")
    assert cm.latest_checkpoint(str(tmp_path)) == second
    assert cf.checkpoint_exists(first)  # not deleted yet: an extra file, never a lost one


_CHILD_SAVE = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    import rill.graph as rg
    from rill.exec import Session
    from rill.train import checkpoint_management as cm
    from rill.train.saver import Saver

    directory, stage, how = sys.argv[1:4]
    w = rg.Variable(np.zeros(3, np.float32), name="w")
    step = rg.Variable(np.int64(0), name="global_step")
    saver = Saver(max_to_keep=1)

    def die(s, paths):
        if s == stage:
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(3)

    with Session() as sess:
        sess.run(rg.global_variables_initializer())
        sess.run([w.assign([1.0, 2.0, 3.0]), step.assign(np.int64(1))])
        saver.save(sess, os.path.join(directory, "model"), global_step=1)
        sess.run([w.assign([7.0, 7.0, 7.0]), step.assign(np.int64(2))])
        with cm.fault_hook(die):
            saver.save(sess, os.path.join(directory, "model"), global_step=2)
    print("not killed")
    """
)


@pytest.mark.parametrize(
    "stage,how",
    [("index_written", "exit"), ("data_renamed", "kill"), ("state_written", "kill"),
     ("state_renamed", "exit")],
)  # fmt: skip
def test_a_killed_process_leaves_the_previous_checkpoint(tmp_path, stage, how):
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD_SAVE, str(tmp_path), stage, how],
        capture_output=True,
        timeout=120,
    )
    expected_rc = -signal.SIGKILL if how == "kill" else 3
    assert proc.returncode == expected_rc, proc.stderr.decode()[-2000:]
    latest = cm.latest_checkpoint(str(tmp_path))
    expected_step = 2 if stage == "state_renamed" else 1
    assert latest == str(tmp_path / f"model-{expected_step}")
    with rg.Graph().as_default():
        w = rg.Variable(np.zeros(3, np.float32), name="w")
        step = rg.Variable(np.int64(0), name="global_step")
        saver = Saver()
        with Session() as sess:
            saver.restore(sess, latest)
            expected_w = [7.0, 7.0, 7.0] if expected_step == 2 else [1.0, 2.0, 3.0]
            np.testing.assert_array_equal(sess.run(w), expected_w)
            assert sess.run(step) == expected_step
    # model-1 is intact in every case (a killed save never gets to delete it).
    assert set(cf.read_checkpoint(str(tmp_path / "model-1"))) == {"w", "global_step"}


_CHILD_BITS = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import rill.graph as rg
    from rill.exec import Session
    from rill.train.saver import Saver

    rng = np.random.default_rng(1234)
    f32 = rng.standard_normal((4, 5)).astype(np.float32)
    f32.reshape(-1)[:4] = np.array([-0.0, np.inf, 1e-45, np.nan], np.float32)
    f32.view(np.uint32).reshape(-1)[4] = 0x7FC12345  # a NaN with a payload
    values = {
        "layer/w": f32,
        "f64": rng.standard_normal(7),
        "i64": rng.integers(-(2**63), 2**63 - 1, size=(3,), dtype=np.int64),
        "f16": rng.standard_normal(6).astype(np.float16),
        "c64": (rng.standard_normal(2) + 1j * rng.standard_normal(2)).astype(np.complex64),
        "b": rng.random(5) > 0.5,
    }
    vs = {n: rg.Variable(v, name=n) for n, v in values.items()}
    with Session() as sess:
        sess.run(rg.global_variables_initializer())
        Saver().save(sess, sys.argv[1], global_step=11)
        got = sess.run(vs)
    print(json.dumps({n: [str(v.dtype), list(v.shape), v.tobytes().hex()] for n, v in got.items()}))
    """
)


def test_restore_in_a_fresh_process_is_bit_identical(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD_BITS, str(tmp_path / "model")],
        capture_output=True,
        timeout=120,
        check=True,
    )
    expected = json.loads(proc.stdout)
    with rg.Graph().as_default():
        vs = {
            n: rg.Variable(np.zeros(shape, np.dtype(dt)), name=n)
            for n, (dt, shape, _) in expected.items()
        }
        with Session() as sess:
            sess.run(rg.global_variables_initializer())
            Saver().restore(sess, cm.latest_checkpoint(str(tmp_path)))
            got = sess.run(vs)
    for n, (dt, shape, hexbytes) in expected.items():
        assert str(got[n].dtype) == dt and list(got[n].shape) == shape
        assert got[n].tobytes().hex() == hexbytes, n


# A reader written from the README's "Checkpoint format" section alone: json, zlib and numpy.
_NUMPY_ONLY_READER = textwrap.dedent(
    """
    import json, os, sys, zlib
    import numpy as np

    prefix = sys.argv[1]
    with open(prefix + ".index", "rb") as f:
        index = json.loads(f.read().decode("utf-8"))
    assert index["format"] == "rill.checkpoint" and index["version"] == 1
    codes = {"float32": "<f4", "float64": "<f8", "int64": "<i8", "int32": "<i4", "bool": "|b1"}
    out = {}
    for name, e in index["tensors"].items():
        with open(os.path.join(os.path.dirname(prefix), e["file"]), "rb") as f:
            data = f.read()
        assert data[:8] == b"RILLDATA" and data[16:32] == bytes.fromhex(index["id"])
        buf = data[e["offset"] : e["offset"] + e["length"]]
        assert zlib.crc32(buf) == e["crc32"]
        if e["dtype"] == "string":
            items, pos = [], 0
            while pos < len(buf):
                n = int.from_bytes(buf[pos : pos + 8], "little")
                items.append(buf[pos + 8 : pos + 8 + n].hex())
                pos += 8 + n
            out[name] = [e["dtype"], e["shape"], items]
        else:
            a = np.frombuffer(buf, codes[e["dtype"]]).reshape(e["shape"])
            out[name] = [e["dtype"], e["shape"], a.tolist()]
    assert not [m for m in sys.modules if m == "rill" or m.startswith("rill.")]
    print(json.dumps(out))
    """
)


def test_a_checkpoint_reads_with_numpy_and_json_alone(graph, tmp_path):
    values = {
        "dense/kernel": np.arange(6, dtype=np.float32).reshape(2, 3) / 4,
        "global_step": np.array(123456789012, np.int64),
        "flags": np.array([True, False]),
        "vocab": np.array([b"a", b"", "\u00e9".encode()], dtype=object),
    }
    _make_vars(values)
    with Session() as sess:
        sess.run(rg.global_variables_initializer())
        path = Saver().save(sess, str(tmp_path / "model"), global_step=1)
    proc = subprocess.run(
        [sys.executable, "-I", "-c", _NUMPY_ONLY_READER, path],
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    got = json.loads(proc.stdout)
    assert got["dense/kernel"] == ["float32", [2, 3], values["dense/kernel"].tolist()]
    assert got["global_step"] == ["int64", [], 123456789012]
    assert got["flags"] == ["bool", [2], [True, False]]
    assert got["vocab"] == ["string", [3], [b.hex() for b in values["vocab"]]]


def test_variables_on_several_devices(tmp_path):
    from rill.exec import ConfigProto

    g = rg.Graph()
    with g.as_default():
        with g.device("/device:CPU:1"):
            w = rg.Variable(np.arange(3.0), name="w")
        v = rg.Variable(np.ones(2), name="v")
        saver = Saver()
    with Session(graph=g, config=ConfigProto(device_count={"CPU": 2})) as sess:
        sess.run(rg.group(w.initializer, v.initializer))
        path = saver.save(sess, str(tmp_path / "m"), global_step=1)
        sess.run([w.assign([0.0, 0.0, 0.0]), v.assign([0.0, 0.0])])
        saver.restore(sess, path)
        got_w, got_v = sess.run([w, v])
    np.testing.assert_array_equal(got_w, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(got_v, [1.0, 1.0])


def test_keep_checkpoint_every_n_hours(graph, tmp_path, monkeypatch):
    import time

    clock = [0.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    w = rg.Variable([1.0], name="w")
    saver = Saver(max_to_keep=1, keep_checkpoint_every_n_hours=1)  # built at t=0: next mark 3600
    with Session() as sess:
        sess.run(w.initializer)
        for step, t in enumerate([1000, 2000, 4000, 5000, 6000, 8000, 9000], start=1):
            clock[0] = float(t)
            saver.save(sess, str(tmp_path / "m"), global_step=step)
    # Kept past max_to_keep: the first checkpoint after each hour mark (t=4000 > 3600,
    # t=8000 > 7200), and the latest.
    kept = sorted(f for f in _files(tmp_path) if f.endswith(".index"))
    assert kept == ["m-3.index", "m-6.index", "m-7.index"]
    state = cm.get_checkpoint_state(str(tmp_path))
    assert state.all_model_checkpoint_paths == [str(tmp_path / "m-7")]
    assert state.last_preserved_timestamp == 8000.0
