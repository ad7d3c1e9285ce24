"""TFRecord files and tf.Example parsing: rill reads the records TensorFlow wrote
(tests/fixtures/tf_graphs/examples.tfrecord), its writer round-trips, a bad CRC or a truncated
file is DataLossError naming the file and offset, and ParseSingleExample gives what
TensorFlow's parse_single_example gave on the same record."""

import json
import pathlib
import shutil

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.exec.proto import example_pb2
from rill.exec.tfrecord import TFRecordWriter, tf_record_iterator
from rill.graph.errors import DataLossError, InvalidArgumentError, NotFoundError
from rill.graph.ops import example_ops

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tf_graphs"
TFRECORD = FIXTURES / "examples.tfrecord"


def test_reads_tensorflows_records_and_round_trips(tmp_path):
    records = list(tf_record_iterator(TFRECORD))
    assert len(records) == 5
    ex = example_pb2.Example()
    ex.ParseFromString(records[2])
    assert list(ex.features.feature["label"].int64_list.value) == [11]
    out = tmp_path / "copy.tfrecord"
    with TFRecordWriter(out) as w:
        for r in records:
            w.write(r)
    assert out.read_bytes() == TFRECORD.read_bytes()  # byte for byte what TensorFlow wrote


def test_bad_crc_and_truncation_are_data_loss_naming_file_and_offset(tmp_path):
    raw = bytearray(TFRECORD.read_bytes())
    first_len = int.from_bytes(raw[:8], "little")
    bad = tmp_path / "bad.tfrecord"
    raw2 = bytearray(raw)
    raw2[12 + first_len + 4 + 12 + 3] ^= 0x20  # a byte of the second record's data
    bad.write_bytes(bytes(raw2))
    it = tf_record_iterator(bad)
    assert next(it)  # the first record is intact
    with pytest.raises(DataLossError, match=rf"bad\.tfrecord: corrupted record at offset "
                       rf"{16 + first_len}: the data's checksum"):  # fmt: skip
        next(it)
    cut = tmp_path / "cut.tfrecord"
    cut.write_bytes(bytes(raw[: len(raw) - 7]))
    with pytest.raises(DataLossError, match="cut.tfrecord: truncated record"):
        list(tf_record_iterator(cut))
    with pytest.raises(NotFoundError):
        list(tf_record_iterator(tmp_path / "missing.tfrecord"))


def test_parse_single_example_matches_tensorflow():
    m = json.loads((FIXTURES / "examples.json").read_text())
    want = np.load(FIXTURES / "examples.npz")
    fetch = m["steps"][0]["fetches"]
    record = list(tf_record_iterator(TFRECORD))[3]
    with rg.Graph().as_default() as g:
        s = rg.placeholder(rg.string, [])
        out = example_ops.parse_single_example(
            s,
            dense={"x": (rg.float32, [3], None), "label": (rg.int64, [], None),
                   "name": (rg.string, [], None), "opt": (rg.float32, [1], [-1.0])},
            sparse={"tags": rg.int64},
        )  # fmt: skip
    with Session(graph=g) as sess:
        got = sess.run(out, {s: np.array(record, dtype=object)})
    for k in ("x", "label", "opt"):
        np.testing.assert_array_equal(got[k], want[fetch[f"out/s_{k}:0"]])
    assert got["name"] == want[fetch["out/s_name:0"]][()]
    np.testing.assert_array_equal(got["tags"][1], want[fetch["out/s_tags_values:0"]])
    np.testing.assert_array_equal(got["tags"][0], want[fetch["out/s_tags_indices:0"]])


def test_wrong_feature_type_and_missing_required_feature_are_clear_errors():
    record = list(tf_record_iterator(TFRECORD))[0]
    with rg.Graph().as_default() as g:
        s = rg.placeholder(rg.string, [])
        wrong = example_ops.parse_single_example(s, dense={"label": (rg.float32, [], None)})
        missing = example_ops.parse_single_example(s, dense={"opt": (rg.float32, [1], None)})
    with Session(graph=g) as sess:
        feed = {s: np.array(record, dtype=object)}
        with pytest.raises(InvalidArgumentError, match="Data types don't match.*int64"):
            sess.run(wrong, feed)
        with pytest.raises(InvalidArgumentError, match="Feature: opt .* is required"):
            sess.run(missing, feed)


def test_iterating_an_empty_file(tmp_path):
    p = tmp_path / "empty.tfrecord"
    shutil.copy(TFRECORD, p)
    p.write_bytes(b"")
    assert list(tf_record_iterator(p)) == []
