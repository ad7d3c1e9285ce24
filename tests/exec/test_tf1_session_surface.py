"""What TF1 programs rely on at the Session's surface: the Python types of fetched values, and a
ConfigProto carrying TensorFlow's GPU, thread-pool and JIT options."""

import numpy as np

import rill.graph as rg
from rill.exec import ConfigProto, GPUOptions, OptimizerOptions, Session

# tf.compat.v1.ConfigProto(gpu_options=GPUOptions(per_process_gpu_memory_fraction=0.5,
# allow_growth=True, visible_device_list="0"), allow_soft_placement=True,
# intra_op_parallelism_threads=2, use_per_session_threads=True) with
# graph_options.optimizer_options.global_jit_level = ON_1 and one session_inter_op_thread_pool of
# 3 threads, as serialized by TensorFlow 2.21.
TF_CONFIG_BYTES = b"\x10\x022\x0e\t\x00\x00\x00\x00\x00\x00\xe0? \x01*\x0108\x01H\x01R\x04\x1a\x02(\x01b\x02\x08\x03"


def test_scalars_come_back_as_numpy_scalars_and_bytes_as_in_tensorflow():
    with rg.Graph().as_default():
        fetches = [
            rg.constant("abc"),
            rg.constant(1.5),
            rg.constant(3),
            rg.constant(True),
            rg.constant([1.0]),
            rg.constant(2, rg.int64),
        ]
        with Session() as sess:
            got = sess.run(fetches)
            one = sess.run(fetches[1])
            as_dict = sess.run({"step": fetches[2]})
            call = sess.make_callable(fetches[0])()
    assert got[0] == b"abc" and type(got[0]) is bytes
    assert type(got[1]) is np.float32 and got[1] == 1.5
    assert type(got[2]) is np.int32 and got[2] == 3
    assert type(got[3]) is np.bool_ and got[3]
    assert type(got[4]) is np.ndarray and got[4].shape == (1,)
    assert type(got[5]) is np.int64
    assert type(one) is np.float32
    assert {as_dict["step"]: "hashable, as a dict key"}  # a 0-d array is not hashable
    assert call == b"abc"


def test_config_proto_reads_tensorflows_gpu_thread_and_jit_options():
    c = ConfigProto.FromString(TF_CONFIG_BYTES)
    assert c.gpu_options.per_process_gpu_memory_fraction == 0.5
    assert c.gpu_options.allow_growth and c.gpu_options.visible_device_list == "0"
    assert c.allow_soft_placement and c.intra_op_parallelism_threads == 2
    assert c.use_per_session_threads
    assert [p.num_threads for p in c.session_inter_op_thread_pool] == [3]
    assert c.graph_options.optimizer_options.global_jit_level == OptimizerOptions.ON_1
    assert c.SerializeToString() == TF_CONFIG_BYTES


def test_a_session_runs_with_the_usual_tf1_gpu_config():
    config = ConfigProto(gpu_options=GPUOptions(per_process_gpu_memory_fraction=0.4))
    config.gpu_options.allow_growth = True
    config.graph_options.optimizer_options.global_jit_level = OptimizerOptions.ON_1
    with rg.Graph().as_default():
        x = rg.placeholder(rg.float32, [2])
        with Session(config=config) as sess:
            np.testing.assert_array_equal(sess.run(x * 2, {x: [1.0, 2.0]}), [2.0, 4.0])
