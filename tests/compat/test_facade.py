"""rill.compat.v1 as a TF1 program uses it: names, dtype strings, TF1 argument orders and
deprecated aliases, tf.app / tf.flags (absl-py), tf.gfile, tf.logging, and bad input."""

import logging
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import rill.compat.v1 as tf
import rill.graph as rg
from rill.autodiff import IndexedSlicesValue
from rill.train.layers.core import nn_dropout


@pytest.fixture(autouse=True)
def fresh_graph():
    with tf.Graph().as_default() as g:
        yield g


def test_dtype_strings_as_tensorflow_accepts_them():
    assert tf.placeholder("float", [None]).dtype is tf.float32
    assert tf.placeholder("double").dtype is tf.float64
    assert tf.placeholder("half").dtype is tf.float16
    assert tf.placeholder("int32").dtype is tf.int32
    assert tf.placeholder(float).dtype is tf.float32
    assert tf.as_dtype("float32_ref") is tf.float32
    assert tf.bool is rg.bool_ and tf.dtypes.bool is rg.bool_
    with pytest.raises(TypeError, match="unknown dtype name 'int'"):
        tf.placeholder("int")  # TensorFlow accepts no "int" string either


def test_facade_only_reexports_the_owning_functions():
    assert tf.Session is __import__("rill.exec", fromlist=["Session"]).Session
    assert tf.nn.relu is rg.relu and tf.nn.xw_plus_b is rg.nn.xw_plus_b
    assert tf.train.AdamOptimizer.__module__ == "rill.train.adam"
    assert tf.layers.conv2d_transpose.__module__ == "rill.train.layers.conv_more"
    assert tf.summary.FileWriter.__module__ == "rill.train.summary"
    assert tf.metrics.auc.__module__ == "rill.train.metrics"
    assert tf.train.Supervisor.__module__ == "rill.train.supervisor"
    assert tf.nn.raw_rnn.__module__ == "rill.train.rnn_raw"
    assert tf.nn.rnn_cell.LSTMStateTuple is tf.nn.rnn_cell.LSTMStateTuple
    assert tf.initialize_all_variables is tf.global_variables_initializer
    assert tf.__version__ == "1.15.0" and not tf.executing_eagerly()


def test_deprecated_aliases_and_tf1_orders_run():
    x = tf.constant([[1.0, 5.0, 2.0], [7.0, 0.0, 1.0]])
    p = tf.placeholder(tf.bool, [])
    out = tf.cond(p, fn1=lambda: tf.constant(1), fn2=lambda: tf.constant(2))
    v = tf.Variable(3.0)
    with tf.Session() as s:
        s.run(tf.initialize_all_variables())
        np.testing.assert_array_equal(s.run(tf.arg_max(x, 1)), [1, 0])
        np.testing.assert_array_equal(s.run(tf.arg_min(x, 1)), [0, 1])
        np.testing.assert_array_equal(s.run(tf.to_int32(x)), x.eval(session=s).astype(np.int32))
        assert s.run(out, {p: False}) == 2
        assert float(s.run(tf.reduce_sum(x, reduction_indices=[0], keep_dims=True))[0, 0]) == 8.0
        assert s.run(tf.report_uninitialized_variables()).size == 0
        assert [t.name for t in tf.all_variables()] == [v.name]
        s.run(tf.tables_initializer())


def test_dropout_takes_keep_prob_first_and_rate_only_as_keyword():
    x = tf.ones([1000])
    tf.set_random_seed(3)
    kept = tf.nn.dropout(x, 0.75, seed=1)
    same = nn_dropout(x, rate=0.25, seed=1)
    by_rate = tf.nn.dropout(x, rate=0.25, seed=1)
    keep_t = tf.placeholder(tf.float32, [])
    fed = tf.nn.dropout(x, keep_t, seed=2)
    with tf.Session() as s:
        a, b, c = s.run([kept, same, by_rate])
        assert set(np.unique(a)) <= {0.0, np.float32(1 / 0.75)}
        assert 650 < np.count_nonzero(a) < 850
        np.testing.assert_array_equal(
            a != 0, b != 0
        )  # same seed, same mask: keep_prob 0.75 = rate 0.25
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(s.run(fed, {keep_t: 1.0}), np.ones(1000))
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(
            ValueError, match=r"keep_prob must be a scalar tensor or a float in the range \(0, 1\]"
        ):
            tf.nn.dropout(x, bad)
    with pytest.raises(ValueError, match="exactly one of keep_prob and rate"):
        tf.nn.dropout(x, 0.5, rate=0.5)
    with pytest.raises(ValueError, match="exactly one of keep_prob and rate"):
        tf.nn.dropout(x)


def test_assert_print_check_numerics_and_assert_family():
    x = tf.placeholder(tf.float32, [None])
    checked = tf.verify_tensor_all_finite(x, "x broke")
    with tf.control_dependencies([tf.assert_positive(x), tf.debugging.assert_less(x, 100.0)]):
        y = tf.Print(tf.identity(checked), [x], "x=")
    with tf.Session() as s:
        np.testing.assert_array_equal(s.run(y, {x: [1.0]}), [1.0])
        with pytest.raises(tf.errors.InvalidArgumentError, match="x broke : Tensor had NaN"):
            s.run(y, {x: [np.nan]})
        with pytest.raises(tf.errors.InvalidArgumentError, match="x > y did not hold"):
            s.run(y, {x: [-1.0]})


def test_nested_feed_keys_and_indexed_slices_fetch():
    cell = tf.nn.rnn_cell.BasicLSTMCell(3)
    state = cell.zero_state(2, tf.float32)
    inp = tf.placeholder(tf.float32, [2, 4])
    out, new_state = cell(inp, state)
    emb = tf.Variable(tf.ones([5, 3]))
    (grad,) = tf.gradients(tf.reduce_sum(tf.gather(emb, [1, 3])), [emb])
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        feed_state = tf.nn.rnn_cell.LSTMStateTuple(np.ones((2, 3)), np.zeros((2, 3)))
        o1 = s.run(out, {inp: np.ones((2, 4)), state: feed_state})
        o0 = s.run(out, {inp: np.ones((2, 4))})
        assert not np.allclose(o0, o1)  # the fed state was used
        g = s.run(grad)
        assert isinstance(g, IndexedSlicesValue) and sorted(g.indices.tolist()) == [1, 3]


def _run_program(src: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(src), *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


_FLAGS_PROGRAM = """
    import rill.compat.v1 as tf
    flags = tf.app.flags
    flags.DEFINE_integer("steps", 10, "training steps")
    flags.DEFINE_float("learning_rate", 0.1, "step size")
    flags.DEFINE_string("name", "run", "a name")
    flags.DEFINE_boolean("fast", False, "go fast")
    FLAGS = flags.FLAGS

    def main(argv):
        print(FLAGS.steps, FLAGS.learning_rate, FLAGS.name, FLAGS.fast, argv[1:])

    if __name__ == "__main__":
        tf.app.run()
"""


def test_app_run_parses_flags_and_passes_the_rest_to_main():
    res = _run_program(_FLAGS_PROGRAM, "--steps=3", "--learning_rate", "0.5", "--fast", "extra")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "3 0.5 run True ['extra']"


def test_a_flag_of_the_wrong_type_is_a_clear_error():
    res = _run_program(_FLAGS_PROGRAM, "--steps=ten")
    assert res.returncode != 0
    assert "flag --steps=ten" in res.stderr and "invalid literal for int()" in res.stderr
    fv = tf.flags.FlagValues()
    tf.flags.DEFINE_float("lr", 0.1, "step size", flag_values=fv)
    with pytest.raises(tf.flags.IllegalFlagValueError, match="flag --lr=fast"):
        fv(["prog", "--lr=fast"])


def test_gfile(tmp_path):
    d = tmp_path / "a" / "b"
    tf.gfile.MakeDirs(d)
    assert tf.gfile.IsDirectory(d) and tf.gfile.Exists(d)
    with tf.gfile.GFile(d / "x.txt", "w") as f:
        f.write("hello\nworld\n")
    with tf.gfile.GFile(str(d / "x.txt")) as f:
        assert f.readlines() == ["hello\n", "world\n"]
    assert tf.gfile.Stat(d / "x.txt").length == 12
    tf.gfile.Copy(d / "x.txt", d / "y.txt")
    with pytest.raises(tf.errors.AlreadyExistsError):
        tf.gfile.Copy(d / "x.txt", d / "y.txt")
    tf.gfile.Rename(d / "y.txt", d / "z.txt")
    assert tf.gfile.ListDirectory(d) == ["x.txt", "z.txt"]
    assert [p.rsplit("/", 1)[1] for p in tf.gfile.Glob(str(d / "*.txt"))] == ["x.txt", "z.txt"]
    tf.gfile.Remove(d / "z.txt")
    with pytest.raises(tf.errors.NotFoundError):
        tf.gfile.Remove(d / "z.txt")
    with pytest.raises(tf.errors.NotFoundError):
        tf.gfile.GFile(d / "missing.txt")
    tf.gfile.DeleteRecursively(tmp_path / "a")
    assert not tf.gfile.Exists(tmp_path / "a")


def test_logging_levels_and_every_n():
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    logger = logging.getLogger("tensorflow")
    handler = Keep()
    logger.addHandler(handler)
    try:
        tf.logging.set_verbosity(tf.logging.INFO)
        assert tf.logging.get_verbosity() == logging.INFO
        tf.logging.info("step %d", 5)
        tf.logging.debug("hidden")
        for i in range(5):
            tf.logging.log_every_n(tf.logging.INFO, "every %d", 2, i)
        tf.logging.log_first_n(tf.logging.WARN, "first", 1)
        assert records == ["step 5", "every 0", "every 2", "every 4", "first"]
    finally:
        logger.removeHandler(handler)
        tf.logging.set_verbosity(tf.logging.WARN)


def test_summary_name_with_rejected_characters_is_a_clear_error():
    with pytest.raises(ValueError, match="has characters TensorBoard does not accept: ' '"):
        tf.summary.scalar("my loss", tf.constant(1.0))


def test_write_graph(tmp_path):
    tf.constant(1.0, name="c")
    path = tf.io.write_graph(tf.get_default_graph(), str(tmp_path), "g.pb", as_text=False)
    with open(path, "rb") as f:
        gd = tf.GraphDef.FromString(f.read())
    assert [n.name for n in gd.node] == ["c"]


def test_while_loop_has_tf1s_argument_order_and_unpacks_one_variable():
    with tf.Graph().as_default():
        i = tf.while_loop(lambda i: i < 10, lambda i: i + 1, [tf.constant(0)])
        same = tf.while_loop(
            lambda i: i < 10, lambda i: i + 1, [tf.constant(0)], return_same_structure=True
        )
        a, b = tf.while_loop(
            lambda i, j: i < 3, lambda i, j: (i + 1, j * 2), (tf.constant(0), tf.constant(1))
        )
        # TF1's positional order: ..., swap_memory, name, maximum_iterations.
        capped = tf.while_loop(
            lambda i: i < 100, lambda i: i + 1, [tf.constant(0)], None, 10, True, False, "cap", 5
        )
        assert (
            isinstance(i, tf.Tensor) and isinstance(same, list) and capped.op.name.startswith("cap")
        )
        with tf.Session() as sess:
            assert sess.run([i, a, b, capped]) == [10, 3, 8, 5]
            assert sess.run(same) == [10]
