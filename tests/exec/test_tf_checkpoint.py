"""TensorFlow's checkpoint format (rill.exec.tf_checkpoint): a checkpoint TensorFlow wrote reads
back exactly, rill's writer reads back exactly (and TensorFlow 2.21 read it when checked by hand),
and corruption is reported naming the file and the tensor."""

import os
import pathlib
import shutil

import ml_dtypes
import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.exec import tf_checkpoint as tc
from rill.exec.checkpoint_format import write_checkpoint
from rill.graph.errors import DataLossError, InvalidArgumentError, NotFoundError
from rill.train import checkpoint_management as cm
from rill.train.saver import Saver

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tf_graphs"
TF_CKPT = FIXTURES / "ref_train_ckpt"  # written by TensorFlow 2.21 (make_tf_graph_fixtures.py)


def test_crc32c_known_values():
    assert tc.crc32c(b"") == 0
    assert tc.crc32c(b"123456789") == 0xE3069283
    big = np.arange(100_000, dtype=np.uint8).tobytes()  # the compiled path
    assert tc.crc32c(big) == tc._crc_py(big, 0xFFFFFFFF) ^ 0xFFFFFFFF


def test_reads_a_checkpoint_tensorflow_wrote():
    assert tc.is_tf_checkpoint(TF_CKPT)
    r = tc.open_checkpoint(TF_CKPT)
    assert isinstance(r, tc.TFCheckpointReader)
    names = r.names()
    assert {"W", "b", "global_step", "W/Adam", "W/Adam_1", "b/Momentum"} <= set(names)
    assert r.shape("W") == (4, 3) and r.dtype("W") is rg.float32
    assert int(r.read("global_step")) == 3  # TensorFlow saved after 3 training steps
    assert r.read("beta1_power").dtype == np.float32
    np.testing.assert_allclose(r.read("beta1_power"), 0.9**4, rtol=1e-6)
    assert cm.list_variables(str(TF_CKPT))[names.index("W")] == ("W", [4, 3])
    np.testing.assert_array_equal(cm.load_variable(str(TF_CKPT), "W:0"), r.read("W"))


def test_round_trip_every_dtype(tmp_path):
    values = {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
        "f64/scalar": np.float64(-2.5),
        "f16": np.array([1.5, -0.25], np.float16),
        "bf16": np.array([1.0, 3.0], ml_dtypes.bfloat16),
        "i8": np.array([-1, 2], np.int8),
        "u16": np.array([7], np.uint16),
        "i64": np.array([[1 << 40]], np.int64),
        "bool": np.array([True, False]),
        "c64": np.array([1 + 2j], np.complex64),
        "empty": np.zeros((0, 3), np.float32),
        "str": np.array([b"", b"hello", b"\x00\xff" * 300], dtype=object),
    }
    prefix = tmp_path / "ck"
    tc.write_tf_checkpoint(prefix, values)
    r = tc.open_checkpoint(prefix)
    assert r.names() == sorted(values)
    for k, v in values.items():
        got = r.read(k)
        assert got.shape == np.shape(v) and got.dtype == np.asarray(v).dtype, k
        np.testing.assert_array_equal(got, v, err_msg=k)
    assert sorted(os.listdir(tmp_path)) == ["ck.data-00000-of-00001", "ck.index"]


def test_many_tensors_span_several_index_blocks(tmp_path):
    values = {f"layer_{i:05d}/" + "k" * 120: np.full(2, i, np.int32) for i in range(2500)}
    tc.write_tf_checkpoint(tmp_path / "ck", values)
    r = tc.open_checkpoint(tmp_path / "ck")
    assert len(r.names()) == 2500
    assert int(r.read("layer_01234/" + "k" * 120)[1]) == 1234


def test_open_checkpoint_still_reads_rill_format(tmp_path):
    write_checkpoint(tmp_path / "r", {"w": np.ones(2, np.float32)})
    assert not tc.is_tf_checkpoint(tmp_path / "r")
    np.testing.assert_array_equal(tc.open_checkpoint(tmp_path / "r").read("w"), [1, 1])


def _copy(tmp_path):
    for f in FIXTURES.glob("ref_train_ckpt.*"):
        shutil.copy(f, tmp_path / f.name)
    return tmp_path / "ref_train_ckpt"


def test_corrupt_tensor_bytes_name_the_file_and_tensor(tmp_path):
    prefix = _copy(tmp_path)
    r = tc.open_checkpoint(prefix)
    e = r.tensors["W"]
    data = pathlib.Path(f"{prefix}.data-00000-of-00001")
    raw = bytearray(data.read_bytes())
    raw[e.offset + 5] ^= 0x40
    data.write_bytes(bytes(raw))
    with pytest.raises(DataLossError, match=r"tensor 'W' in data file .*ref_train_ckpt\.data-00000"
                       r"-of-00001: checksum mismatch"):  # fmt: skip
        tc.open_checkpoint(prefix).read("W")
    np.testing.assert_array_equal(tc.open_checkpoint(prefix).read("b").shape, [3])


def test_corrupt_index_block_is_data_loss_naming_the_index(tmp_path):
    prefix = _copy(tmp_path)
    index = pathlib.Path(f"{prefix}.index")
    raw = bytearray(index.read_bytes())
    raw[10] ^= 0x01
    index.write_bytes(bytes(raw))
    with pytest.raises(DataLossError, match=r"ref_train_ckpt\.index: checksum mismatch"):
        tc.open_checkpoint(prefix)


def test_sizes_past_the_end_of_the_file_are_refused_before_reading(tmp_path):
    prefix = _copy(tmp_path)
    data = pathlib.Path(f"{prefix}.data-00000-of-00001")
    data.write_bytes(data.read_bytes()[:20])
    r = tc.open_checkpoint(prefix)
    with pytest.raises(DataLossError, match="but the file has 20 bytes"):
        r.read("W")
    # an entry claiming a huge size is refused by the file-size check, not by allocating it
    r.tensors["b"].size = 1 << 40
    with pytest.raises(DataLossError, match="but the file has 20 bytes"):
        r.read("b")


def test_missing_files_and_names():
    with pytest.raises(NotFoundError, match="does not exist"):
        tc.TFCheckpointReader("/nonexistent/ck")
    r = tc.open_checkpoint(TF_CKPT)
    with pytest.raises(NotFoundError, match="'nope' is not in the checkpoint"):
        r.read("nope")
    with pytest.raises(InvalidArgumentError, match="has dtype float32, expected int32"):
        r.read("W", rg.int32)


def test_saver_writes_tensorflow_format_on_request_and_restores_it(tmp_path):
    with rg.Graph().as_default() as g:
        w = rg.Variable(np.arange(4, dtype=np.float32), name="w")
        step = rg.Variable(np.int64(7), name="step")
        saver = Saver()
        bump = w.assign_add(np.ones(4, np.float32))
        init = rg.global_variables_initializer()
    with Session(graph=g) as s:
        s.run(init)
        path = saver.save(s, str(tmp_path / "m"), checkpoint_format="tensorflow")
        assert tc.is_tf_checkpoint(path)
        s.run(bump)
        saver.restore(s, path)
        np.testing.assert_array_equal(s.run(w), [0, 1, 2, 3])
        assert int(s.run(step)) == 7
        with pytest.raises(ValueError, match="checkpoint_format"):
            saver.save(s, str(tmp_path / "x"), checkpoint_format="tf")
