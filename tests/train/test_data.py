"""tf.data in graph mode (rill.train.data through rill.compat.v1): element structures and
static shapes, iterators (one-shot, initializable with new feeds, reinitializable), end of data
as OutOfRangeError, map functions traced into graphs (captures, random ops), shuffle's seeded
determinism, cache, and clear errors naming the dataset and the element."""

import numpy as np
import pytest

import rill.compat.v1 as tf
from rill.graph.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    OutOfRangeError,
    UnimplementedError,
)


def _drain(sess, nxt, limit=10_000):
    out = []
    for _ in range(limit):
        try:
            out.append(sess.run(nxt))
        except tf.errors.OutOfRangeError:
            return out
    raise AssertionError("the iterator did not end")


def _all(ds):
    nxt = tf.data.make_one_shot_iterator(ds).get_next()
    with tf.Session() as sess:
        return _drain(sess, nxt)


def _ints(values):
    return [int(v) for v in values]


# -- structure --------------------------------------------------------------------------------


def test_nested_structure_types_shapes_and_classes():
    with tf.Graph().as_default():
        images = np.zeros((5, 4, 4, 1), np.float32)
        ds = tf.data.Dataset.from_tensor_slices(({"img": images, "id": np.arange(5)}, [1] * 5))
        assert ds.output_types == ({"id": tf.int64, "img": tf.float32}, tf.int32)
        assert ds.output_shapes[0]["img"].as_list() == [4, 4, 1]
        assert ds.output_classes == ({"id": tf.Tensor, "img": tf.Tensor}, tf.Tensor)
        batched = ds.batch(2)
        assert batched.output_shapes[0]["img"].as_list() == [None, 4, 4, 1]
        assert ds.batch(2, drop_remainder=True).output_shapes[1].as_list() == [2]
        assert tf.data.get_output_types(batched) == batched.output_types
        it = tf.data.make_one_shot_iterator(batched)
        (feat, label) = it.get_next()
        assert feat["img"].shape.as_list() == [None, 4, 4, 1] and label.dtype == tf.int32
        assert tf.data.get_output_shapes(it)[1].as_list() == [None]
        with tf.Session() as sess:
            got = _drain(sess, (feat, label))
    assert [len(b[1]) for b in got] == [2, 2, 1]
    assert got[2][0]["id"].tolist() == [4]


def test_from_tensor_slices_rejects_mismatched_rows_and_scalars():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="same size in their first dimension"):
            tf.data.Dataset.from_tensor_slices((np.zeros(3), np.zeros(4)))
        with pytest.raises(ValueError, match="is a scalar"):
            tf.data.Dataset.from_tensor_slices(np.float32(1.0))


# -- iterators --------------------------------------------------------------------------------


def test_initializable_iterator_restarts_with_new_feeds():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 2])
        scale = tf.placeholder(tf.float32, [])
        ds = tf.data.Dataset.from_tensor_slices(x).map(lambda r: r * scale).batch(2)
        it = ds.make_initializable_iterator()
        nxt = it.get_next()
        with tf.Session() as sess:
            sess.run(it.initializer, {x: np.ones((3, 2)), scale: 2.0})
            first = sess.run(nxt)
            sess.run(it.initializer, {x: np.arange(8.0).reshape(4, 2), scale: 10.0})
            again = _drain(sess, nxt)
            with pytest.raises(OutOfRangeError):
                sess.run(nxt)  # stays at the end
    assert first.tolist() == [[2.0, 2.0], [2.0, 2.0]]
    assert [b.tolist() for b in again] == [[[0, 10], [20, 30]], [[40, 50], [60, 70]]]


def test_get_next_before_initialization_is_failed_precondition():
    with tf.Graph().as_default():
        it = tf.data.Dataset.range(3).make_initializable_iterator()
        nxt = it.get_next()
        with tf.Session() as sess:
            with pytest.raises(FailedPreconditionError, match="has not been initialized"):
                sess.run(nxt)


def test_reinitializable_iterator_switches_datasets():
    with tf.Graph().as_default():
        train = tf.data.Dataset.range(10).map(lambda v: (v, tf.cast(v, tf.float32)))
        val = tf.data.Dataset.range(100, 103).map(lambda v: (v, tf.cast(v, tf.float32) / 2))
        it = tf.data.Iterator.from_structure(train.output_types, train.output_shapes)
        nxt = it.get_next()
        train_init, val_init = it.make_initializer(train), it.make_initializer(val)
        with pytest.raises(TypeError, match="output structure"):
            it.make_initializer(tf.data.Dataset.range(3))
        with pytest.raises(TypeError, match="output types"):
            it.make_initializer(tf.data.Dataset.range(3).map(lambda v: (v, v)))
        with pytest.raises(ValueError, match="does not have an initializer"):
            _ = it.initializer
        with tf.Session() as sess:
            sess.run(train_init)
            a = [sess.run(nxt)[0] for _ in range(3)]
            sess.run(val_init)
            b = _drain(sess, nxt)
            sess.run(train_init)
            c = sess.run(nxt)[0]
    assert _ints(a) == [0, 1, 2]
    assert [(int(i), float(f)) for i, f in b] == [(100, 50.0), (101, 50.5), (102, 51.0)]
    assert int(c) == 0


def test_one_shot_iterator_refuses_a_placeholder():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None])
        with pytest.raises(ValueError, match="not a constant.*make_initializable_iterator"):
            tf.data.Dataset.from_tensor_slices(x).make_one_shot_iterator()


def test_each_session_has_its_own_iterator_state():
    with tf.Graph().as_default():
        nxt = tf.data.Dataset.range(5).make_one_shot_iterator().get_next()
        with tf.Session() as s1, tf.Session() as s2:
            assert _ints([s1.run(nxt), s1.run(nxt), s2.run(nxt)]) == [0, 1, 0]


def test_a_graph_without_its_pipeline_cannot_run_the_dataset():
    with tf.Graph().as_default() as g:
        it = tf.data.Dataset.range(3).make_initializable_iterator()
        gd = g.as_graph_def()
    with tf.Graph().as_default():
        tf.import_graph_def(gd, name="")
        with tf.Session() as sess:
            with pytest.raises(UnimplementedError, match="not held by this graph"):
                sess.run(it.initializer.name)


# -- map and functions ------------------------------------------------------------------------


def test_map_traces_once_and_captures_outer_tensors():
    calls = []
    with tf.Graph().as_default():
        offset = tf.constant([100.0, 200.0])
        ids = tf.placeholder(tf.int64, [None])

        def fn(i):
            calls.append(i)
            return {"v": offset + tf.cast(i, tf.float32), "even": tf.equal(i % 2, 0)}

        it = tf.data.Dataset.from_tensor_slices(ids).map(fn, num_parallel_calls=4)
        it = it.filter(lambda d: d["even"]).make_initializable_iterator()
        nxt = it.get_next()
        with tf.Session() as sess:
            sess.run(it.initializer, {ids: [1, 2, 3, 4]})
            got = _drain(sess, nxt)
    assert len(calls) == 1
    assert [d["v"].tolist() for d in got] == [[102.0, 202.0], [104.0, 204.0]]


def test_map_random_ops_follow_the_graph_seed():
    def run():
        with tf.Graph().as_default():
            tf.set_random_seed(7)
            ds = tf.data.Dataset.range(4).map(lambda i: tf.random_uniform([2]) + 0 * tf.cast(
                i, tf.float32))  # fmt: skip
            it = ds.make_initializable_iterator()
            nxt = it.get_next()
            with tf.Session() as sess:
                sess.run(it.initializer)
                a = np.stack(_drain(sess, nxt))
                sess.run(it.initializer)
                b = np.stack(_drain(sess, nxt))
        return a, b

    a, b = run()
    assert len({tuple(r) for r in a}) == 4  # a new draw per element
    np.testing.assert_array_equal(a, b)  # re-initializing starts the sequence again
    np.testing.assert_array_equal(a, run()[0])  # and so does another program


def test_an_error_in_map_names_the_dataset_and_the_element():
    with tf.Graph().as_default():
        ds = tf.data.Dataset.from_tensor_slices(np.array([1.0, -1.0, 2.0], np.float32))
        ds = ds.map(lambda v: tf.debugging.check_numerics(tf.sqrt(v), "root"))
        nxt = tf.data.make_one_shot_iterator(ds).get_next()
        with tf.Session() as sess:
            assert float(sess.run(nxt)) == 1.0
            with pytest.raises(InvalidArgumentError, match=r"MapDataset.*element 1.*root"):
                sess.run(nxt)
            with pytest.raises(OutOfRangeError):
                sess.run(nxt)  # an error ends the iteration (rill; TensorFlow goes on)


def test_a_function_using_an_outer_variable_is_refused_with_the_way_out():
    with tf.Graph().as_default():
        v = tf.Variable(2.0)
        with pytest.raises(ValueError, match="cannot reach the outer graph's variables"):
            tf.data.Dataset.range(3).map(lambda i: tf.cast(i, tf.float32) * v)
        value = tf.identity(v)  # read outside: captured when the iterator starts
        it = tf.data.Dataset.range(3).map(lambda i: tf.cast(i, tf.float32) * value)
        it = it.make_initializable_iterator()
        nxt = it.get_next()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(it.initializer)
            assert [float(sess.run(nxt)) for _ in range(3)] == [0.0, 2.0, 4.0]


def test_filter_predicate_must_be_a_scalar_bool():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="scalar bool"):
            tf.data.Dataset.range(3).filter(lambda v: v * 2)


def test_flat_map_with_inner_map_and_outer_capture():
    with tf.Graph().as_default():
        k = tf.placeholder(tf.int64, [])
        ds = tf.data.Dataset.range(1, 4).flat_map(
            lambda n: tf.data.Dataset.range(n).map(lambda j: j * k + n)
        )
        it = ds.make_initializable_iterator()
        nxt = it.get_next()
        with tf.Session() as sess:
            sess.run(it.initializer, {k: 10})
            got = _ints(_drain(sess, nxt))
    assert got == [1, 2, 12, 3, 13, 23]


def test_from_generator_checks_types_and_shapes():
    def good():
        yield {"a": 1, "b": [1.0, 2.0]}
        yield {"a": 2, "b": [3.0, 4.0]}

    def bad():
        yield {"a": 1, "b": [1.0, 2.0, 3.0]}

    with tf.Graph().as_default():
        spec = ({"a": tf.int32, "b": tf.float32}, {"a": [], "b": [2]})
        got = _all(tf.data.Dataset.from_generator(good, *spec).repeat(2))
        assert [int(d["a"]) for d in got] == [1, 2, 1, 2]
        nxt = tf.data.Dataset.from_generator(bad, *spec).make_one_shot_iterator().get_next()
        with tf.Session() as sess:
            with pytest.raises(InvalidArgumentError, match=r"GeneratorDataset.*element 0.*shape"):
                sess.run(nxt)


def test_batch_of_unequal_shapes_is_a_clear_error():
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(1, 4).map(lambda n: tf.fill([n], n)).batch(2)
        nxt = tf.data.make_one_shot_iterator(ds).get_next()
        with tf.Session() as sess:
            with pytest.raises(InvalidArgumentError, match="Cannot batch tensors with different"):
                sess.run(nxt)


# -- shuffle, repeat, cache ---------------------------------------------------------------------


def _shuffled(seed, n=20, buffer=8, epochs=2, graph_seed=None, reshuffle=None):
    with tf.Graph().as_default():
        if graph_seed is not None:
            tf.set_random_seed(graph_seed)
        ds = tf.data.Dataset.range(n).shuffle(buffer, seed=seed,
                                              reshuffle_each_iteration=reshuffle)  # fmt: skip
        it = ds.repeat(epochs).make_initializable_iterator()
        nxt = it.get_next()
        with tf.Session() as sess:
            sess.run(it.initializer)
            return _ints(_drain(sess, nxt))


def test_seeded_shuffle_is_reproducible_and_a_permutation_each_epoch():
    a = _shuffled(seed=42)
    assert a == _shuffled(seed=42)
    assert a == _shuffled(seed=42, graph_seed=None)
    first, second = a[:20], a[20:]
    assert sorted(first) == sorted(second) == list(range(20))
    assert first != list(range(20)) and first != second  # reshuffled each iteration
    assert _shuffled(seed=43) != a
    assert _shuffled(seed=None, graph_seed=5) == _shuffled(seed=None, graph_seed=5)
    fixed = _shuffled(seed=42, reshuffle=False)
    assert fixed[:20] == fixed[20:] and sorted(fixed[:20]) == list(range(20))


def test_shuffle_buffer_bounds_how_far_an_element_moves():
    # With a buffer of 4, element i is drawn after at most i + 3 others have been.
    out = _shuffled(seed=1, n=50, buffer=4, epochs=1)
    assert sorted(out) == list(range(50))
    assert all(pos >= v - 3 for v, pos in ((v, out.index(v)) for v in out))


def test_repeat_take_skip_and_an_empty_repeat_ends():
    with tf.Graph().as_default():
        assert _ints(_all(tf.data.Dataset.range(3).repeat().skip(2).take(5))) == [2, 0, 1, 2, 0]
        assert _all(tf.data.Dataset.range(0).repeat()) == []
        assert _ints(_all(tf.data.Dataset.range(3).take(-1))) == [0, 1, 2]


def test_cache_replays_the_first_pass():
    with tf.Graph().as_default():
        tf.set_random_seed(3)
        ds = tf.data.Dataset.range(3).map(lambda i: tf.random_uniform([]))
        cached = _all(ds.cache().repeat(2))
        fresh = _all(ds.repeat(2))
    assert cached[:3] == cached[3:]
    assert fresh[:3] != fresh[3:]
    with tf.Graph().as_default(), pytest.raises(ValueError, match="in memory only"):
        tf.data.Dataset.range(3).cache("/tmp/cache_file")


def test_prefetch_apply_and_autotune():
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(4).apply(lambda d: d.map(lambda v: v + 1))
        ds = ds.prefetch(tf.data.experimental.AUTOTUNE)
        assert _ints(_all(ds)) == [1, 2, 3, 4]
        assert tf.data.experimental.AUTOTUNE == -1


# -- training loops -----------------------------------------------------------------------------


def _linear_model(ds):
    it = ds.make_initializable_iterator()
    x, y = it.get_next()
    w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    step = tf.train.get_or_create_global_step()
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    return it, loss, train, step


def _regression_data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3)).astype(np.float32)
    y = x @ np.array([[1.0], [-2.0], [0.5]], np.float32)
    return x, y


def test_while_true_training_loop_ends_on_out_of_range():
    x, y = _regression_data()
    with tf.Graph().as_default():
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(40, seed=1).batch(8).repeat(5)
        it, loss, train, step = _linear_model(ds)
        with tf.Session() as sess:
            sess.run([tf.global_variables_initializer(), it.initializer])
            losses = []
            while True:
                try:
                    losses.append(sess.run([train, loss])[1])
                except tf.errors.OutOfRangeError:
                    break
            assert sess.run(step) == 25  # 5 epochs of 5 batches
    assert losses[-1] < 0.1 * losses[0]


def test_monitored_training_session_stops_at_the_end_of_the_data(tmp_path):
    x, y = _regression_data()
    with tf.Graph().as_default():
        ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(10).repeat(2)
        it, loss, train, step = _linear_model(ds)
        scaffold = tf.train.Scaffold(local_init_op=it.initializer)
        steps = 0
        with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), scaffold=scaffold,
                                               save_checkpoint_secs=None) as sess:  # fmt: skip
            while not sess.should_stop():
                sess.run(train)
                steps += 1
    assert steps == 8  # 2 epochs of 4 batches, then OutOfRangeError ends the session cleanly


def test_experimental_helpers():
    exp = tf.data.experimental
    assert (exp.INFINITE_CARDINALITY, exp.UNKNOWN_CARDINALITY) == (-1, -2)
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(6).batch(4)
        assert _ints(_all(ds.apply(exp.unbatch()))) == list(range(6))
        pairs = _all(tf.data.Dataset.range(3).apply(exp.enumerate_dataset(5)))
        assert [(int(i), int(v)) for i, v in pairs] == [(5, 0), (6, 1), (7, 2)]
        a = _all(tf.data.Dataset.range(5).apply(exp.shuffle_and_repeat(5, count=2, seed=4)))
        assert sorted(_ints(a[:5])) == sorted(_ints(a[5:])) == list(range(5))
        inter = tf.data.Dataset.range(2).apply(
            exp.parallel_interleave(lambda v: tf.data.Dataset.range(v * 10, v * 10 + 3), 2)
        )
        assert _ints(_all(inter)) == [0, 10, 1, 11, 2, 12]
        assert exp.get_structure(ds).shape.as_list() == [None]
        stop = exp.choose_from_datasets(
            [tf.data.Dataset.range(1), tf.data.Dataset.range(10, 12)],
            tf.data.Dataset.from_tensor_slices(np.array([0, 1, 0, 1], np.int64)),
            stop_on_empty_dataset=True,
        )
        assert _ints(_all(stop)) == [0, 10]
        with pytest.raises(TypeError, match="int64 scalars"):
            exp.choose_from_datasets(
                [ds], tf.data.Dataset.range(3).map(lambda v: tf.cast(v, tf.int32))
            )


def test_supervisor_loop_on_a_one_shot_iterator_ends_at_the_end_of_the_data(tmp_path):
    x, y = _regression_data()
    with tf.Graph().as_default():
        ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(20).repeat(3)
        x_t, y_t = tf.data.make_one_shot_iterator(ds).get_next()
        w = tf.Variable(tf.zeros([3, 1]))
        loss = tf.reduce_mean(tf.square(tf.matmul(x_t, w) - y_t))
        step = tf.train.get_or_create_global_step()
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        sv = tf.train.Supervisor(logdir=str(tmp_path), save_model_secs=0, save_summaries_secs=0)
        with sv.managed_session() as sess:
            while not sv.should_stop():
                sess.run(train)
            assert sess.run(step) == 6  # 3 epochs of 2 batches


def test_sample_from_datasets_by_weight_and_seed():
    def picks(seed):
        with tf.Graph().as_default():
            a = tf.data.Dataset.range(0, 300)
            b = tf.data.Dataset.range(1000, 1100)
            ds = tf.data.experimental.sample_from_datasets([a, b], [0.75, 0.25], seed=seed)
            return _ints(_all(ds))

    got = picks(5)
    assert sorted(got) == list(range(300)) + list(range(1000, 1100))  # each element once
    first = got[:200]
    assert 100 < sum(v < 1000 for v in first) < 190  # about 3 of 4 from the first dataset
    assert [v for v in got if v < 1000] == list(range(300))  # each in its own order
    assert picks(5) == got and picks(6) != got


def test_feedable_iterator_switches_by_string_handle():
    with tf.Graph().as_default():
        train = tf.data.Dataset.range(100).repeat()
        val = tf.data.Dataset.range(1000, 1003)
        handle = tf.placeholder(tf.string, shape=[])
        it = tf.data.Iterator.from_string_handle(handle, train.output_types, train.output_shapes)
        nxt = it.get_next()
        train_it = train.make_one_shot_iterator()
        val_it = val.make_initializable_iterator()
        with tf.Session() as sess:
            train_h, val_h = sess.run([train_it.string_handle(), val_it.string_handle()])
            sess.run(val_it.initializer)
            got = [int(sess.run(nxt, {handle: h})) for h in (train_h, train_h, val_h, train_h)]
            assert got == [0, 1, 1000, 2]
            with pytest.raises(InvalidArgumentError, match="made by an iterator's string_handle"):
                sess.run(nxt, {handle: b"not a handle"})
            floats = tf.data.Iterator.from_string_handle(handle, tf.float32, []).get_next()
            with pytest.raises(InvalidArgumentError, match="yields components of types"):
                sess.run(floats, {handle: train_h})


def test_map_with_image_ops_and_a_seeded_random_op():
    images = np.arange(2 * 3 * 4 * 1, dtype=np.float32).reshape(2, 3, 4, 1)
    with tf.Graph().as_default():
        tf.set_random_seed(11)

        def augment(img, label):
            img = tf.image.flip_left_right(img)
            img = tf.image.per_image_standardization(img)
            noise = tf.random_normal([], stddev=1e-6)
            return img + noise, label

        ds = tf.data.Dataset.from_tensor_slices((images, np.array([3, 4])))
        x, y = tf.data.make_one_shot_iterator(ds.map(augment).batch(2)).get_next()
        assert x.shape.as_list() == [None, 3, 4, 1]
        with tf.Session() as sess:
            got, labels = sess.run([x, y])
    flipped = images[:, :, ::-1, :]
    mean = flipped.mean(axis=(1, 2, 3), keepdims=True)
    std = np.maximum(flipped.std(axis=(1, 2, 3), keepdims=True), 1 / np.sqrt(12))
    np.testing.assert_allclose(got, (flipped - mean) / std, atol=1e-4)
    assert labels.tolist() == [3, 4]


def test_pipeline_under_a_gpu_device_scope_runs_its_iterator_on_the_cpu():
    from rill.exec.simgpu import simulated_gpus

    x = np.arange(60, dtype=np.float32).reshape(20, 3) / 60
    with simulated_gpus(1), tf.Graph().as_default():
        with tf.device("/gpu:0"):
            ds = tf.data.Dataset.from_tensor_slices(x).map(lambda a: a * 2.0).batch(5)
            it = ds.make_initializable_iterator()
            total = tf.reduce_sum(tf.matmul(it.get_next(), tf.ones([3, 1])))
        with tf.Session(config=tf.ConfigProto(allow_soft_placement=True)) as sess:
            sess.run(it.initializer)
            sums = _drain(sess, total)
            placed = {}
            for plan in sess._plans.values():
                for node in plan.plan_graph.nodes:
                    placed.setdefault(node.type, set()).add(node.device.device_type)
    np.testing.assert_allclose(sums, (x * 2).reshape(4, 5, 3).sum(axis=(1, 2)), rtol=1e-5)
    assert placed["IteratorGetNext"] == placed["MakeIterator"] == {"CPU"}
    assert placed["MatMul"] == {"GPU"}


def test_scalar_arguments_may_be_tensors_fed_at_initialization():
    with tf.Graph().as_default():
        n = tf.placeholder(tf.int64, [])
        size = tf.placeholder(tf.int64, [])
        gen = tf.data.Dataset.from_generator(
            lambda k: ((i, float(i) / 2) for i in range(int(k))), (tf.int64, tf.float32),
            args=(n,),
        )  # fmt: skip
        ds = tf.data.Dataset.zip((tf.data.Dataset.range(n), gen)).batch(size)
        ds = ds.take(size).shuffle(size, seed=1)
        assert ds.output_shapes[0].as_list() == [None]
        it = ds.make_initializable_iterator()
        nxt = it.get_next()
        with tf.Session() as sess:
            sess.run(it.initializer, {n: 7, size: 3})
            got = _drain(sess, nxt)
            sess.run(it.initializer, {n: 4, size: 2})
            again = _drain(sess, nxt)
    assert sorted(len(b[0]) for b in got) == [1, 3, 3]
    assert sorted(int(v) for b in got for v in b[0]) == list(range(7))
    assert all((b[1][1] == b[0] / 2).all() for b in got)
    assert sorted(len(b[0]) for b in again) == [2, 2]


def test_threads_sharing_an_iterator_each_get_distinct_elements():
    import threading

    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(400).map(lambda v: v * 3)
        nxt = tf.data.make_one_shot_iterator(ds).get_next()
        got, errors = [[] for _ in range(4)], []
        with tf.Session() as sess:

            def pull(out):
                try:
                    out.extend(_ints(_drain(sess, nxt)))
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(e)

            threads = [threading.Thread(target=pull, args=(g,)) for g in got]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=300)
            assert not any(t.is_alive() for t in threads)
    assert not errors
    assert sorted(v for g in got for v in g) == [3 * i for i in range(400)]
    assert all(g == sorted(g) for g in got)  # each thread sees the order of the data
