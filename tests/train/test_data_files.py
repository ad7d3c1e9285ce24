"""tf.data's file sources: TFRecordDataset over TensorFlow's own records parsed with
ParseSingleExample, TextLineDataset, list_files, file names fed at initialization or read from
a dataset, and errors that name the file."""

import pathlib

import numpy as np
import pytest

import rill.compat.v1 as tf
from rill.exec.proto import example_pb2
from rill.exec.tfrecord import TFRecordWriter, tf_record_iterator
from rill.graph.errors import DataLossError, InvalidArgumentError, NotFoundError
from rill.graph.ops import example_ops

TFRECORD = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tf_graphs" / (
    "examples.tfrecord"
)  # fmt: skip


def _drain(sess, nxt):
    out = []
    while True:
        try:
            v = sess.run(nxt)
        except tf.errors.OutOfRangeError:
            return out
        # A scalar string comes back as a 0-d object array (TensorFlow returns the bytes).
        out.append(v[()] if isinstance(v, np.ndarray) and v.dtype == object else v)


def _expected_examples():
    out = []
    for r in tf_record_iterator(TFRECORD):
        ex = example_pb2.Example()
        ex.ParseFromString(r)
        f = ex.features.feature
        out.append((list(f["x"].float_list.value), int(f["label"].int64_list.value[0])))
    return out


def _parse(record):
    feats = example_ops.parse_single_example(
        record, dense={"x": (tf.float32, [3], None), "label": (tf.int64, [], None)}
    )
    return feats["x"], tf.cast(feats["label"], tf.int32)


def test_tfrecord_pipeline_with_parse_single_example():
    want = _expected_examples()
    with tf.Graph().as_default():
        ds = tf.data.TFRecordDataset(str(TFRECORD)).map(_parse).batch(2)
        assert ds.output_shapes[0].as_list() == [None, 3]
        assert ds.output_types == (tf.float32, tf.int32)
        it = ds.make_one_shot_iterator()
        x, label = it.get_next()
        with tf.Session() as sess:
            got = _drain(sess, (x, label))
    assert [len(b[1]) for b in got] == [2, 2, 1]
    xs = np.concatenate([b[0] for b in got])
    np.testing.assert_allclose(xs, np.array([w[0] for w in want], np.float32))
    assert np.concatenate([b[1] for b in got]).tolist() == [w[1] for w in want]


def test_tfrecord_files_fed_at_initialization_and_interleaved(tmp_path):
    paths = []
    for k in range(3):
        p = tmp_path / f"part-{k}.tfrecord"
        with TFRecordWriter(p) as w:
            for i in range(k + 1):
                w.write(f"f{k}r{i}".encode())
        paths.append(str(p))
    with tf.Graph().as_default():
        names = tf.placeholder(tf.string, [None])
        it = tf.data.TFRecordDataset(names).make_initializable_iterator()
        par = tf.data.TFRecordDataset(paths, num_parallel_reads=2).make_one_shot_iterator()
        nxt, nxt_par = it.get_next(), par.get_next()
        with tf.Session() as sess:
            sess.run(it.initializer, {names: paths[::-1]})
            got = _drain(sess, nxt)
            sess.run(it.initializer, {names: paths[:1]})
            assert _drain(sess, nxt) == [b"f0r0"]
            interleaved = _drain(sess, nxt_par)
    assert got == [b"f2r0", b"f2r1", b"f2r2", b"f1r0", b"f1r1", b"f0r0"]
    # Two files open at a time, one record from each in turn; TensorFlow 2.21 gives this order.
    assert interleaved == [b"f0r0", b"f1r0", b"f1r1", b"f2r0", b"f2r1", b"f2r2"]


def test_missing_and_corrupt_files_are_errors_naming_the_file(tmp_path):
    bad = tmp_path / "bad.tfrecord"
    raw = bytearray(TFRECORD.read_bytes())
    raw[20] ^= 0x40
    bad.write_bytes(bytes(raw))
    with tf.Graph().as_default():
        missing = tf.data.TFRecordDataset(str(tmp_path / "nope.tfrecord"))
        corrupt = tf.data.TFRecordDataset(str(bad))
        n1 = missing.make_one_shot_iterator().get_next()
        n2 = corrupt.make_one_shot_iterator().get_next()
        with tf.Session() as sess:
            with pytest.raises(NotFoundError, match=r"TFRecordDataset.*nope\.tfrecord"):
                sess.run(n1)
            with pytest.raises(DataLossError, match=r"bad\.tfrecord: corrupted record"):
                sess.run(n2)
        with pytest.raises(ValueError, match="uncompressed"):
            tf.data.TFRecordDataset(str(TFRECORD), compression_type="GZIP")


def test_text_lines_list_files_and_interleave(tmp_path):
    (tmp_path / "a.csv").write_bytes(b"header\n1,2\n3,4\n")
    (tmp_path / "b.csv").write_bytes(b"header\r\n5,6\r\n7,8")
    (tmp_path / "other.txt").write_bytes(b"x\n")
    pattern = str(tmp_path / "*.csv")
    with tf.Graph().as_default():
        files = tf.data.Dataset.list_files(pattern, shuffle=False)
        lines = tf.data.TextLineDataset(files)
        rows = files.interleave(lambda f: tf.data.TextLineDataset(f).skip(1), cycle_length=2)
        shuffled = tf.data.Dataset.list_files(pattern, seed=3).repeat(6)
        n_files, n_lines, n_rows, n_shuf = (
            tf.data.make_one_shot_iterator(d).get_next()
            for d in (files, lines, rows, shuffled)
        )  # fmt: skip
        with tf.Session() as sess:
            got_files = _drain(sess, n_files)
            got_lines = _drain(sess, n_lines)
            got_rows = _drain(sess, n_rows)
            got_shuf = _drain(sess, n_shuf)
    assert [pathlib.Path(f.decode()).name for f in got_files] == ["a.csv", "b.csv"]
    assert got_lines == [b"header", b"1,2", b"3,4", b"header", b"5,6", b"7,8"]
    assert got_rows == [b"1,2", b"5,6", b"3,4", b"7,8"]
    assert sorted(got_shuf) == sorted(got_files * 6)
    assert len({tuple(got_shuf[i : i + 2]) for i in range(0, 12, 2)}) == 2  # both orders seen


def test_list_files_without_a_match_is_invalid_argument(tmp_path):
    with tf.Graph().as_default():
        nxt = tf.data.Dataset.list_files(str(tmp_path / "*.none")).make_one_shot_iterator()
        with tf.Session() as sess:
            with pytest.raises(InvalidArgumentError, match="No files matched pattern"):
                sess.run(nxt.get_next())


def test_fixed_length_records_skip_header_and_footer(tmp_path):
    p = tmp_path / "data.bin"
    p.write_bytes(b"HDR" + b"aabbcc" + b"FT")
    odd = tmp_path / "odd.bin"
    odd.write_bytes(b"HDR" + b"aabbc" + b"FT")
    with tf.Graph().as_default():
        ds = tf.data.FixedLengthRecordDataset(str(p), 2, header_bytes=3, footer_bytes=2)
        bad = tf.data.FixedLengthRecordDataset(str(odd), 2, header_bytes=3, footer_bytes=2)
        n, n_bad = (tf.data.make_one_shot_iterator(d).get_next() for d in (ds, bad))
        with tf.Session() as sess:
            assert _drain(sess, n) == [b"aa", b"bb", b"cc"]
            with pytest.raises(InvalidArgumentError, match="not an exact multiple"):
                sess.run(n_bad)


def test_csv_dataset_errors_name_the_field_and_record(tmp_path):
    missing, bad = tmp_path / "missing.csv", tmp_path / "bad.csv"
    missing.write_text("1,,3\n")
    bad.write_text("1,2\n1,x\n")
    with tf.Graph().as_default():
        exp = tf.data.experimental
        n1 = exp.CsvDataset(str(missing), [tf.int32] * 3).make_one_shot_iterator().get_next()
        n2 = exp.CsvDataset(str(bad), [tf.int32, tf.int64]).make_one_shot_iterator().get_next()
        with tf.Session() as sess:
            with pytest.raises(InvalidArgumentError, match="record 0: Field 1 is required"):
                sess.run(n1)
            assert [int(v) for v in sess.run(n2)] == [1, 2]
            with pytest.raises(
                InvalidArgumentError, match="record 1: Field 1 is not a valid int64"
            ):
                sess.run(n2)
        with pytest.raises(ValueError, match="select_cols"):
            exp.CsvDataset(str(bad), [tf.int32], select_cols=[1, 0])
