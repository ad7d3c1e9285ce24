"""Issue 18's later op families checked beyond the fixture replays: RandomGamma's gradient,
the stateless integer samplers' errors."""

import json
import pathlib

import numpy as np
import pytest

import rill.graph as rg
from rill.autodiff import gradients
from rill.exec import Session
from rill.graph.errors import InvalidArgumentError
from rill.graph.ops import stateless_random_ops as sr

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tf_graphs"


def test_random_gamma_gradient_is_tensorflows_weighted_sum_of_random_gamma_grad():
    """On the samples TensorFlow drew (gamma_grad fixture), rill's RandomGammaGrad summed over
    the sample dimension with the loss weights gives TensorFlow's d loss / d alpha."""
    m = json.loads((FIXTURES / "gamma_grad.json").read_text())
    arrays = np.load(FIXTURES / "gamma_grad.npz")
    step = next(s for s in m["steps"] if s["name"] == "tf_dalpha")
    drawn, w, want = (arrays[step[k]] for k in ("drawn", "weights", "dalpha"))
    alpha = np.array([0.3, 1.0, 2.5, 9.0])
    with rg.Graph().as_default() as g:
        partial = g.create_op("RandomGammaGrad", [rg.constant(alpha), rg.constant(drawn)])
        dalpha = rg.reduce_sum(partial.outputs[0] * rg.constant(w), 0)
    with Session(graph=g) as s:
        np.testing.assert_allclose(s.run(dalpha), want, rtol=1e-6)


def test_random_gamma_gradient_averages_to_the_derivative_of_the_mean():
    """E[d sample / d alpha] = d E[sample] / d alpha = 1 for Gamma(alpha, 1): rill's gradient
    of RandomGamma (through RandomGammaGrad) averaged over many samples of rill's own stream."""
    g = rg.Graph()
    with g.as_default():
        alpha = rg.constant([0.4, 1.5, 6.0], rg.float64)
        x = g.create_op("RandomGamma", [rg.constant([4000, 2]), alpha],
                        {"seed": 5, "seed2": 6}).outputs[0]  # fmt: skip
        (dalpha,) = gradients(rg.reduce_sum(x), [alpha])
    with Session(graph=g) as s:
        d = s.run(dalpha)
    assert d.shape == (3,)
    np.testing.assert_allclose(d / 8000, [1.0, 1.0, 1.0], rtol=0.05)


def test_stateless_uniform_int_refuses_an_empty_range():
    with rg.Graph().as_default() as g:
        bad = sr.stateless_random_uniform_int([3], rg.constant([1, 2], rg.int64), 5, 5)
        ok = sr.stateless_random_uniform_int([1000], rg.constant([1, 2], rg.int64), -3, 4,
                                             dtype=rg.int64)  # fmt: skip
    with Session(graph=g) as s:
        with pytest.raises(InvalidArgumentError, match="minval < maxval"):
            s.run(bad)
        v = s.run(ok)
    assert v.dtype == np.int64 and v.min() == -3 and v.max() == 3


def test_summary_writer_ops_refuse_writes_before_create_and_after_close(tmp_path):
    from tensorboardX.proto import event_pb2

    from rill.exec.tfrecord import tf_record_iterator
    from rill.graph.errors import FailedPreconditionError
    from rill.graph.ops import summary_writer_ops as sw

    with rg.Graph().as_default() as g:
        w = sw.summary_writer(shared_name="logs")
        init = sw.create_summary_file_writer(w, str(tmp_path), filename_suffix=".rill")
        step = rg.placeholder(rg.int64, [])
        write = sw.write_scalar_summary(w, step, "loss", rg.constant(0.5))
        raw = sw.write_raw_proto_summary(w, step, rg.constant(b"\x0a\x03\x0a\x01x"))
        close = sw.close_summary_writer(w)
    with Session(graph=g) as s:
        with pytest.raises(FailedPreconditionError, match="CreateSummaryFileWriter"):
            s.run(write, {step: 1})
        s.run(init)
        s.run(init)  # an open writer is kept: one file
        s.run([write], {step: -2})
        s.run(raw, {step: 3})
        s.run(close)
        with pytest.raises(FailedPreconditionError, match="not open"):
            s.run(write, {step: 4})
    (path,) = tmp_path.glob("events.out.tfevents.*.rill")
    events = [event_pb2.Event.FromString(r) for r in tf_record_iterator(path)]
    assert events[0].file_version == "brain.Event:2"
    assert [(e.step, e.summary.value[0].tag) for e in events[1:]] == [(-2, "loss"), (3, "x")]
    assert events[1].summary.value[0].simple_value == 0.5 and events[1].wall_time > 0


def _reader_graph(make_reader, files):
    from rill.graph.ops import reader_ops as ro
    from rill.graph.ops.data_flow_ops import FIFOQueue

    g = rg.Graph()
    with g.as_default():
        q = FIFOQueue(4, [rg.string], shapes=[[]])
        fill = q.enqueue_many([rg.constant([str(f).encode() for f in files])])
        close = q.close()
        r = make_reader()
        key, value = ro.reader_read(r, q.queue_ref)
        produced = ro.reader_num_records_produced(r)
        reset = ro.reader_reset(r)
    return g, (fill, close), (key, value), produced, reset


def test_tfrecord_reader_reports_a_bad_crc_with_file_and_offset(tmp_path):
    from rill.exec.tfrecord import TFRecordWriter
    from rill.graph.errors import DataLossError
    from rill.graph.ops import reader_ops as ro

    path = tmp_path / "data.tfrecord"
    with TFRecordWriter(path) as w:
        w.write(b"good")
        w.write(b"will be corrupted")
    raw = bytearray(path.read_bytes())
    raw[-6] ^= 0xFF  # a byte of the second record's data
    path.write_bytes(bytes(raw))
    g, (fill, close), kv, produced, _ = _reader_graph(ro.tf_record_reader, [path])
    with Session(graph=g) as s:
        s.run([fill, close])
        key, value = s.run(kv)
        assert (key, value) == (f"{path}:0".encode(), b"good")
        with pytest.raises(DataLossError, match=r"data.tfrecord: corrupted record at offset 20"):
            s.run(kv)
        assert s.run(produced) == 1


def test_reader_on_a_closed_empty_queue_is_out_of_range_and_reset_restarts(tmp_path):
    from rill.graph.errors import OutOfRangeError
    from rill.graph.ops import reader_ops as ro

    path = tmp_path / "a.txt"
    path.write_bytes(b"x\ny\n")
    g, (fill, close), kv, produced, reset = _reader_graph(ro.text_line_reader, [path])
    with Session(graph=g) as s:
        s.run([fill, close])
        assert [s.run(kv)[1] for _ in range(2)] == [b"x", b"y"]
        with pytest.raises(OutOfRangeError, match="closed"):
            s.run(kv)
        assert s.run(produced) == 2
        s.run(reset)
        assert s.run(produced) == 0
