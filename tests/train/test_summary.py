"""tf.summary on rill: summary ops run in the graph, FileWriter writes event files, and
TensorBoard's own EventAccumulator reads back scalars, histograms, images, audio, text and the
graph."""

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator as ea

import rill.graph as rg
from rill.exec import Session
from rill.train import summary


def _accumulator(logdir):
    acc = ea.EventAccumulator(
        str(logdir), size_guidance={ea.IMAGES: 0, ea.HISTOGRAMS: 0, ea.AUDIO: 0, ea.TENSORS: 0}
    )
    acc.Reload()
    return acc


def test_tensorboard_reads_back_what_file_writer_wrote(tmp_path):
    g = rg.Graph()
    with g.as_default():
        step = rg.placeholder(rg.float32, [], name="step")
        with rg.name_scope("train"):
            loss = rg.square(step - 3.0, name="loss_value")
            summary.scalar("loss", loss)
            summary.histogram("weights", rg.random_normal([500], seed=1) + step)
        summary.image("digits", rg.random_uniform([2, 8, 8, 1], seed=2), max_outputs=2)
        summary.audio("tone", rg.random_uniform([1, 800], -1, 1), 8000)
        summary.text("note", rg.constant("hello **TensorBoard**"))
        merged = summary.merge_all()
    with Session(graph=g) as sess, summary.FileWriter(tmp_path, graph=g) as writer:
        for i in range(4):
            writer.add_summary(sess.run(merged, {step: float(i)}), global_step=i)
        # A hand-built Summary proto is accepted too.
        writer.add_summary(
            summary.Summary(value=[summary.Summary.Value(tag="manual", simple_value=7.0)]), 9
        )
    acc = _accumulator(tmp_path)
    tags = acc.Tags()
    loss = acc.Scalars("train/loss")
    assert [e.step for e in loss] == [0, 1, 2, 3]
    np.testing.assert_allclose([e.value for e in loss], [9.0, 4.0, 1.0, 0.0])
    assert acc.Scalars("manual")[0].value == 7.0
    hist = acc.Histograms("train/weights")
    assert len(hist) == 4 and hist[0].histogram_value.num == 500
    assert hist[3].histogram_value.sum == pytest.approx(
        hist[0].histogram_value.sum + 1500, rel=0.05
    )
    assert sorted(tags["images"]) == ["digits/image/0", "digits/image/1"]
    img = acc.Images("digits/image/0")[0]
    assert (img.width, img.height) == (8, 8) and img.encoded_image_string[:4] == b"\x89PNG"
    assert tags["audio"] == ["tone/audio/0"]  # TensorFlow numbers clips when max_outputs > 1
    assert acc.Audio("tone/audio/0")[0].sample_rate == 8000
    text = acc.Tensors("note")
    assert text[0].tensor_proto.string_val == [b"hello **TensorBoard**"]
    assert acc.SummaryMetadata("note").plugin_data.plugin_name == "text"
    graph_def = acc.Graph()
    names = {n.name for n in graph_def.node}
    assert "train/loss_value" in names and "train/loss" in names
    assert {n.op for n in graph_def.node} >= {"ScalarSummary", "MergeSummary", "Placeholder"}


def test_summary_names_tensorboard_rejects_are_clear_errors():
    with rg.Graph().as_default():
        x = rg.constant(1.0)
        with pytest.raises(
            ValueError,
            match=r"'loss \(train\)' has characters TensorBoard does not accept: ' ', '\(', '\)'",
        ):
            summary.scalar("loss (train)", x)
        with pytest.raises(ValueError, match="non-empty string"):
            summary.scalar("", x)
        with pytest.raises(ValueError, match="needs a scalar tensor"):
            summary.scalar("v", rg.constant([1.0, 2.0]))
        with pytest.raises(ValueError, match="needs a string tensor"):
            summary.text("t", x)
        assert summary.merge_all() is None


def test_add_summary_refuses_what_is_not_a_summary(tmp_path):
    with summary.FileWriter(tmp_path) as w, pytest.raises(TypeError, match="serialized Summary"):
        w.add_summary(3.0)


def test_monitored_training_session_writes_summaries_every_n_steps(tmp_path):
    from rill import train

    with rg.Graph().as_default():
        step = train.get_or_create_global_step()
        w = rg.Variable(0.0, name="w")
        train_op = rg.group(w.assign_add(1.0), step.assign_add(1))
        summary.scalar("w_value", w)
        with train.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path), save_summaries_steps=3, save_checkpoint_secs=None,
            log_step_count_steps=None,
        ) as sess:  # fmt: skip
            for _ in range(7):
                sess.run(train_op)
    summary.FileWriterCache.clear()
    acc = _accumulator(tmp_path)
    got = [(e.step, e.value) for e in acc.Scalars("w_value")]
    assert [s for s, _ in got] == [0, 3, 6]
    # The summary reads w in the same step as its update: before or after it.
    assert all(v in (s, s + 1) for s, v in got)
    with pytest.raises(ValueError, match="exactly one of save_steps and save_secs"):
        train.SummarySaverHook(output_dir=str(tmp_path))
