"""ONNX export of TF1 embedding lookups on partitioned variables (`tf.fixed_size_partitioner`,
partition_strategy "mod" and "div"): their DynamicPartition / DynamicStitch run in onnxruntime
and give rill's rows, repeated and out-of-order ids included."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import rill.compat.v1 as tf
from rill.graph.onnx import export_onnx


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_partitioned_embedding_lookup_exports(strategy):
    g = tf.Graph()
    with g.as_default():
        ids = tf.placeholder(tf.int64, [None], name="ids")
        emb = tf.get_variable("emb", [23, 4], partitioner=tf.fixed_size_partitioner(3))
        rows = tf.nn.embedding_lookup(emb, ids, partition_strategy=strategy)
        pooled = tf.reduce_mean(rows, 0)
        init = tf.global_variables_initializer()
    feeds = np.array([5, 0, 22, 5, 13, 1, 7, 7], np.int64)
    with tf.Session(graph=g) as s:
        s.run(init)
        want = s.run([rows, pooled], {ids: feeds})
        m = export_onnx(g, [ids], [rows, pooled], session=s)
    ops = {n.op_type for n in m.graph.node}
    assert {"Compress", "ScatterND"} <= ops
    so = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    got = so.run(None, {"ids": feeds})
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    # one id: some partitions empty
    np.testing.assert_array_equal(so.run(None, {"ids": feeds[:1]})[0], want[0][:1])
