"""TensorFlow checkpoints with partitioned variables (slice entries) and snappy-compressed index
blocks: the ckpt_sliced / ckpt_snappy fixtures TensorFlow wrote (their graphs' restore ops are
replayed in test_tf_graph_fixtures.py), read here through list_variables / load_variable, plus
snappy's own edge cases and corrupt input."""

import json
import pathlib
import shutil

import numpy as np
import pytest

from rill.exec import snappy
from rill.exec import tf_checkpoint as tc
from rill.exec import tf_checkpoint_slices as ts
from rill.graph.errors import DataLossError
from rill.train import checkpoint_management as cm

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tf_graphs"


@pytest.mark.parametrize("name", ["ckpt_sliced", "ckpt_snappy"])
def test_list_and_load_variables_like_tensorflow(name):
    m = json.loads((FIXTURES / f"{name}.json").read_text())
    arrays = np.load(FIXTURES / f"{name}.npz")
    prefix = str(FIXTURES / name)
    assert [[n, list(s)] for n, s in cm.list_variables(prefix)] == m["tf_list_variables"]
    fetches = m["steps"][0]["fetches"]
    for var in ("p", "q", "w"):
        np.testing.assert_array_equal(
            cm.load_variable(prefix, var), arrays[fetches[f"out/{var}:0"]]
        )
    r = cm.load_variable(prefix, "r")
    assert r.tolist() == [[b"a", b""], [b"\0x", b"long" * 9], [b"\xff", b"z"]]


def test_slice_keys_follow_tensorflows_ordered_code():
    """Every slice entry of the TensorFlow-written index is found under the key rill computes
    (a wrong encoding would leave the partitions unread); spot values of the encoding."""
    r = tc.TFCheckpointReader(str(FIXTURES / "ckpt_sliced"))
    assert len(r._slices) == 3 + 2 + 2
    assert ts._signed_increasing(-1) == b"\x7f" and ts._signed_increasing(5) == b"\x85"
    assert ts._signed_increasing(64) == b"\xc0\x40" and ts._signed_increasing(-65) == b"\x3f\xbf"
    assert ts._num_increasing(0) == b"\x00" and ts._num_increasing(258) == b"\x02\x01\x02"
    key = ts.encode_tensor_name_slice("p", [4, -1 + 1], [3, -1])
    assert key == b"\x00p\x00\x01\x01\x02\x84\x83\x80\x7f"


def test_a_missing_slice_is_reported(tmp_path):
    for f in FIXTURES.glob("ckpt_sliced.*"):
        shutil.copy(f, tmp_path / f.name)
    r = tc.TFCheckpointReader(str(tmp_path / "ckpt_sliced"))
    r._slices.pop(next(k for k in r._slices if k.startswith(b"\x00p\x00")))
    with pytest.raises(DataLossError, match=r"tensor 'p'.*slice .* is missing"):
        r.read("p")


def test_a_corrupt_snappy_block_names_the_index_file(tmp_path):
    for f in FIXTURES.glob("ckpt_snappy.*"):
        shutil.copy(f, tmp_path / f.name)
    index = tmp_path / "ckpt_snappy.index"
    data = bytearray(index.read_bytes())
    data[3] ^= 0x40
    index.write_bytes(bytes(data))
    with pytest.raises(DataLossError, match="ckpt_snappy.index: checksum mismatch"):
        tc.TFCheckpointReader(str(tmp_path / "ckpt_snappy"))


def test_snappy_literals_and_every_copy_form():
    # literal "abcd", 1-byte-offset copy (len 6, offset 4: overlapping), 2-byte-offset copy
    # (len 3, offset 10), 4-byte-offset copy (len 2, offset 1), literal with a 1-byte length
    long = bytes(range(70))
    block = bytes([15, 0x0C]) + b"abcd" + bytes([0x09, 4, 0x0A, 10, 0, 0x07, 1, 0, 0, 0])
    assert snappy.decompress(block) == b"abcdabcdab" + b"abc" + b"cc"
    block2 = bytes([75, 60 << 2, 69]) + long + bytes([0x01 | (1 << 2), 70])
    assert snappy.decompress(block2) == long + long[:5]


@pytest.mark.parametrize(
    "block, what",
    [
        (bytes([5, 0x10]) + b"ab", "runs past the block"),
        (bytes([4, 0x04]) + b"ab" + bytes([0x01, 9]), "out of range"),
        (bytes([9, 0x04]) + b"ab", "decompressed to 2 bytes, header says 9"),
        (bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x7F]), "claims"),
    ],
)
def test_corrupt_snappy_is_refused(block, what):
    with pytest.raises(DataLossError, match=what):
        snappy.decompress(block, limit=1 << 20)


def test_the_imported_graphs_own_saver_round_trips_partitioned_variables(tmp_path):
    """The TF1 graph's SaveV2 passes each partition as a slice of the full variable: rill joins
    them into whole tensors (its own format), and the graph's RestoreV2 reads the slices back."""
    import rill.graph as rg
    from rill.exec import Session
    from rill.graph.proto import graph_pb2

    m = json.loads((FIXTURES / "ckpt_sliced.json").read_text())
    arrays = np.load(FIXTURES / "ckpt_sliced.npz")
    gd = graph_pb2.GraphDef()
    gd.ParseFromString((FIXTURES / "ckpt_sliced.pb").read_bytes())
    g = rg.Graph()
    with g.as_default():
        rg.import_graph_def(gd, name="")
    r = m["restore"]
    fname = g.get_tensor_by_name(r["filename_tensor"])
    restore, save = g.get_operation_by_name(r["op"]), g.get_operation_by_name("save/SaveV2")
    fetches = [g.get_tensor_by_name(f"out/{v}:0") for v in ("p", "q", "r", "w")]
    want = m["steps"][0]["fetches"]
    with Session(graph=g) as sess:
        sess.run(restore, {fname: str(FIXTURES / "ckpt_sliced")})
        sess.run(save, {fname: str(tmp_path / "rill_ckpt")})
    with Session(graph=g) as sess:  # a fresh session: everything comes from rill's checkpoint
        sess.run(restore, {fname: str(tmp_path / "rill_ckpt")})
        got = sess.run(fetches)
    for v, value in zip(("p", "q", "w"), (got[0], got[1], got[3])):
        np.testing.assert_array_equal(value, arrays[want[f"out/{v}:0"]])
    assert got[2].tolist() == [[b"a", b""], [b"\0x", b"long" * 9], [b"\xff", b"z"]]
    assert sorted(n for n, _ in cm.list_variables(str(tmp_path / "rill_ckpt"))) == [
        "p", "q", "r", "w"]  # fmt: skip
