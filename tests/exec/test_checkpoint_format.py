"""The checkpoint format (write/read, corruption, crash safety) and the SaveV2/RestoreV2 kernels."""

import json
import os
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import rill.exec  # noqa: F401 - registers the kernels
import rill.graph as rg
from rill.exec import checkpoint_format as cf
from rill.exec.testing import run_kernel
from rill.graph.errors import (
    DataLossError,
    InvalidArgumentError,
    NotFoundError,
    UnimplementedError,
)

SAMPLES = {
    "f16": np.array([1.5, -0.0, np.inf], np.float16),
    "bf16": np.array([[1.0, -2.5], [3.0e38, np.nan]], ml_dtypes.bfloat16),
    "f32": np.arange(6, dtype=np.float32).reshape(2, 3) / 7,
    "f64": np.array(np.pi),
    "i8": np.array([-128, 0, 127], np.int8),
    "i16": np.array([-32768, 5], np.int16),
    "i32": np.array([[2**31 - 1], [-(2**31)]], np.int32),
    "i64": np.array([2**63 - 1, -(2**63)], np.int64),
    "u8": np.array([0, 255], np.uint8),
    "u16": np.array([65535], np.uint16),
    "u32": np.array([2**32 - 1], np.uint32),
    "u64": np.array([2**64 - 1, 0], np.uint64),
    "bool": np.array([[True, False, True]]),
    "c64": np.array([1 + 2j, -3.5j], np.complex64),
    "c128": np.array([[1e300 - 1j]], np.complex128),
    "str": np.array([[b"", b"hello"], ["h\u00e9".encode(), b"\x00\xff"]], dtype=object),
    "empty_f32": np.zeros((0, 4), np.float32),
    "empty_str": np.empty((2, 0), dtype=object),
    "scalar_str": np.array(b"only", dtype=object),
    "f8e4m3fn": np.array([0.5, -448.0, np.nan], ml_dtypes.float8_e4m3fn),
    "f8e5m2": np.array([[-np.inf, 2.0**-16]], ml_dtypes.float8_e5m2),
    "f4e2m1fn": np.array([-6.0, 0.5], ml_dtypes.float4_e2m1fn),
    "f8e8m0fnu": np.array([2.0**-127, 4.0], ml_dtypes.float8_e8m0fnu),
    "i4": np.array([-8, -1, 7], ml_dtypes.int4),
    "u2": np.array([[3], [0]], ml_dtypes.uint2),
    "nested/name:with.odd chars": np.array([7], np.int32),
}
SAMPLE_DTYPES = {"bf16": rg.bfloat16, "str": rg.string, "empty_str": rg.string,
                 "scalar_str": rg.string}  # fmt: skip


def _assert_same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype == object:
        assert a.tolist() == b.tolist()
    else:
        assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()  # bit-exact


def _write(prefix, tensors=SAMPLES):
    cf.write_checkpoint(prefix, tensors, SAMPLE_DTYPES)


def test_round_trip_every_dtype(tmp_path):
    prefix = tmp_path / "sub" / "model.ckpt"  # the directory is created
    _write(prefix)
    got = cf.read_checkpoint(prefix)
    assert set(got) == set(SAMPLES)
    for k, v in SAMPLES.items():
        _assert_same(got[k], v)
    listing = cf.list_checkpoint(prefix)
    assert [n for n, _, _ in listing] == sorted(SAMPLES)
    assert ("bf16", "bfloat16", (2, 2)) in listing and ("str", "string", (2, 2)) in listing
    assert ("f64", "float64", ()) in listing
    assert sorted(os.listdir(tmp_path / "sub")) == [
        "model.ckpt.data-00000-of-00001",
        "model.ckpt.index",
    ]
    assert cf.checkpoint_exists(prefix) and not cf.checkpoint_exists(tmp_path / "nope")


def test_files_follow_the_documented_layout(tmp_path):
    """An independent reader written from the README: JSON index, header, raw LE bytes."""
    prefix = str(tmp_path / "m")
    _write(prefix)
    index = json.loads((tmp_path / "m.index").read_text("utf-8"))
    assert index["format"] == "rill.checkpoint" and index["version"] == 1
    data = (tmp_path / "m.data-00000-of-00001").read_bytes()
    assert data[:8] == b"RILLDATA" and struct.unpack("<II", data[8:16]) == (1, 0)
    assert data[16:32].hex() == index["id"]
    assert index["data_files"] == {"m.data-00000-of-00001": {"size": len(data)}}
    codes = {"float16": "<f2", "float32": "<f4", "float64": "<f8", "int8": "i1", "int16": "<i2",
             "int32": "<i4", "int64": "<i8", "uint8": "u1", "uint16": "<u2", "uint32": "<u4",
             "uint64": "<u8", "bool": "?", "complex64": "<c8", "complex128": "<c16"}  # fmt: skip
    for name, e in index["tensors"].items():
        raw = data[e["offset"] : e["offset"] + e["length"]]
        assert zlib.crc32(raw) == e["crc32"] and e["file"] == "m.data-00000-of-00001"
        if e["dtype"] == "string":
            vals, pos = [], 0
            while pos < len(raw):
                (n,) = struct.unpack_from("<Q", raw, pos)
                vals.append(raw[pos + 8 : pos + 8 + n])
                pos += 8 + n
            got = np.array(vals, dtype=object).reshape(e["shape"]) if vals else None
            if got is not None:
                assert got.tolist() == SAMPLES[name].tolist()
            continue
        if e["dtype"] == "bfloat16":
            got = np.frombuffer(raw, "<u2").view(ml_dtypes.bfloat16)
        elif rg.as_dtype(e["dtype"]).is_narrow:  # one byte per element, as ml_dtypes holds them
            got = np.frombuffer(raw, "u1").view(getattr(ml_dtypes, e["dtype"]))
        else:
            got = np.frombuffer(raw, codes[e["dtype"]])
        _assert_same(got.reshape(e["shape"]).astype(SAMPLES[name].dtype), SAMPLES[name])


def test_rejects_bad_input(tmp_path):
    with pytest.raises(InvalidArgumentError, match="'a' appears twice"):
        cf.write_checkpoint(tmp_path / "x", [("a", np.zeros(1)), ("a", np.zeros(1))])
    h = np.empty((), dtype=object)
    with pytest.raises(InvalidArgumentError, match="resource cannot be saved"):
        cf.write_checkpoint(tmp_path / "x", {"h": h}, {"h": rg.resource})
    with pytest.raises(InvalidArgumentError, match="hold bytes"):
        cf.write_checkpoint(tmp_path / "x", {"s": np.array([1], dtype=object)}, {"s": rg.string})
    assert not os.listdir(tmp_path)  # failed writes leave no files behind


def test_missing_checkpoint_and_names(tmp_path):
    with pytest.raises(NotFoundError, match="no checkpoint at prefix"):
        cf.read_checkpoint(tmp_path / "none")
    cf.write_checkpoint(tmp_path / "m", {"w": np.zeros(2), "b": np.ones(1)})
    r = cf.CheckpointReader(tmp_path / "m")
    with pytest.raises(NotFoundError, match=r"'x' is not in the checkpoint.*2 tensors: 'b', 'w'"):
        r.read("x")
    with pytest.raises(InvalidArgumentError, match="'w'.*has dtype float64, expected int32"):
        r.read("w", rg.int32)


def _entry(prefix, name):
    index = json.loads(Path(cf.index_path(prefix)).read_text())
    return index, index["tensors"][name]


def test_corrupt_bytes_are_detected(tmp_path):
    prefix = str(tmp_path / "m")
    _write(prefix)
    _, e = _entry(prefix, "f32")
    path = cf.data_path(prefix)
    data = bytearray(Path(path).read_bytes())
    data[e["offset"] + 3] ^= 0x01  # one flipped bit
    Path(path).write_bytes(bytes(data))
    with pytest.raises(DataLossError, match=r"tensor 'f32' in data file .*m\.data-00000.*checksum"):
        cf.read_checkpoint(prefix)
    # Other tensors are still readable.
    _assert_same(cf.read_checkpoint(prefix, ["i64"])["i64"], SAMPLES["i64"])


def test_corrupt_strings_are_detected(tmp_path):
    prefix = str(tmp_path / "m")
    _write(prefix)
    index, e = _entry(prefix, "str")
    e["length"] -= 1  # the index now disagrees with the encoding (and the CRC)
    Path(cf.index_path(prefix)).write_text(json.dumps(index))
    with pytest.raises(DataLossError, match="'str'"):
        cf.read_checkpoint(prefix, ["str"])


def test_truncated_data_is_detected(tmp_path):
    prefix = str(tmp_path / "m")
    _write(prefix)
    _, last = _entry(prefix, "nested/name:with.odd chars")
    path = cf.data_path(prefix)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - 2)
    with pytest.raises(DataLossError, match=r"'nested/name:with.odd chars'.*truncated"):
        cf.read_checkpoint(prefix)
    with open(path, "r+b") as f:
        f.truncate(10)
    with pytest.raises(DataLossError, match="truncated or not a rill data file"):
        cf.read_checkpoint(prefix)


def test_index_problems_are_detected(tmp_path):
    prefix = str(tmp_path / "m")
    cf.write_checkpoint(prefix, {"w": np.zeros(3, np.float32)})
    index, e = _entry(prefix, "w")
    good = json.dumps(index)
    Path(cf.index_path(prefix)).write_text(good[:-5])
    with pytest.raises(DataLossError, match=r"m\.index is corrupt"):
        cf.read_checkpoint(prefix)
    Path(cf.index_path(prefix)).write_text(json.dumps({**index, "version": 2}))
    with pytest.raises(DataLossError, match="format version 2"):
        cf.read_checkpoint(prefix)
    Path(cf.index_path(prefix)).write_text(json.dumps({"format": "other"}))
    with pytest.raises(DataLossError, match="not a rill.checkpoint index"):
        cf.read_checkpoint(prefix)
    e["shape"] = [4]  # claims more elements than the bytes hold
    Path(cf.index_path(prefix)).write_text(json.dumps(index))
    with pytest.raises(DataLossError, match="12 bytes recorded for a float32"):
        cf.read_checkpoint(prefix)
    e["shape"], e["file"] = [3], "../elsewhere"
    Path(cf.index_path(prefix)).write_text(json.dumps(index))
    with pytest.raises(DataLossError, match="is not a name"):
        cf.read_checkpoint(prefix)
    e["file"] = "m.data-00000-of-00001"
    Path(cf.index_path(prefix)).write_text(json.dumps(index))
    os.remove(cf.data_path(prefix))
    with pytest.raises(DataLossError, match="does not exist"):
        cf.read_checkpoint(prefix)


def _stage_raiser(stage):
    def hook(s, paths):
        if s == stage:
            raise RuntimeError(f"crash at {s}")

    return hook


@pytest.mark.parametrize("stage", ["data_written", "index_written", "data_renamed"])
def test_failed_save_to_a_new_prefix_leaves_earlier_checkpoints(tmp_path, stage):
    cf.write_checkpoint(tmp_path / "ckpt-1", {"w": np.ones(3)})
    with cf.fault_hook(_stage_raiser(stage)), pytest.raises(RuntimeError, match="crash"):
        cf.write_checkpoint(tmp_path / "ckpt-2", {"w": np.zeros(3)})
    np.testing.assert_array_equal(cf.read_checkpoint(tmp_path / "ckpt-1")["w"], 1)
    assert not cf.checkpoint_exists(tmp_path / "ckpt-2")  # never an index without its data
    assert not [f for f in os.listdir(tmp_path) if ".tmp-" in f]


@pytest.mark.parametrize("stage", ["data_written", "index_written"])
def test_failed_overwrite_before_renaming_keeps_the_old_checkpoint(tmp_path, stage):
    prefix = tmp_path / "model"
    cf.write_checkpoint(prefix, {"w": np.ones(3)})
    with cf.fault_hook(_stage_raiser(stage)), pytest.raises(RuntimeError):
        cf.write_checkpoint(prefix, {"w": np.zeros(3), "extra": np.zeros(1)})
    got = cf.read_checkpoint(prefix)
    assert list(got) == ["w"] and (got["w"] == 1).all()


def test_crash_between_renames_of_an_overwrite_is_reported_not_misread(tmp_path):
    prefix = tmp_path / "model"
    cf.write_checkpoint(prefix, {"w": np.ones(3)})
    with cf.fault_hook(_stage_raiser("data_renamed")), pytest.raises(RuntimeError):
        cf.write_checkpoint(prefix, {"w": np.zeros(3)})
    with pytest.raises(DataLossError, match="belongs to a different checkpoint"):
        cf.read_checkpoint(prefix)


def test_a_real_crash_before_renaming_leaves_the_previous_checkpoint(tmp_path):
    """The writer process dies (os._exit) after fsyncing its temporary files."""
    prefix = tmp_path / "model"
    cf.write_checkpoint(prefix, {"w": np.arange(4.0)})
    script = textwrap.dedent(
        f"""
        import os, numpy as np
        from rill.exec import checkpoint_format as cf
        def hook(stage, paths):
            if stage == "index_written":
                os._exit(3)
        with cf.fault_hook(hook):
            cf.write_checkpoint({str(prefix)!r}, {{"w": np.zeros(4), "v": np.ones(2)}})
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == 3, proc.stderr.decode()
    leftovers = [f for f in os.listdir(tmp_path) if ".tmp-" in f]
    assert len(leftovers) == 2  # a real crash leaves its temporary files ...
    got = cf.read_checkpoint(prefix)  # ... which are never read
    assert list(got) == ["w"]
    np.testing.assert_array_equal(got["w"], np.arange(4.0))


# -- SaveV2 / RestoreV2 kernels -----------------------------------------------------------------


def _save_op(names, specs, dtypes_):
    tensors = [rg.placeholder(t, None, name=f"t{i}") for i, t in enumerate(dtypes_)]
    return rg.save_v2(
        rg.placeholder(rg.string, [], name="prefix"),
        rg.placeholder(rg.string, [len(names)], name="names"),
        rg.placeholder(rg.string, [len(names)], name="specs"),
        tensors,
    )


def _s(*xs):
    return np.array([x.encode() for x in xs], dtype=object)


def test_save_and_restore_kernels(graph, tmp_path):
    prefix = np.array(str(tmp_path / "model.ckpt").encode(), dtype=object)
    names = list(SAMPLES)
    dts = [SAMPLE_DTYPES.get(n) or rg.as_dtype(SAMPLES[n].dtype) for n in names]
    save = _save_op(names, [""] * len(names), dts)
    run_kernel(save, prefix, _s(*names), _s(*[""] * len(names)), *SAMPLES.values())
    restore = rg.restore_v2(prefix, names[::-1], [""] * len(names), dts[::-1])
    got = run_kernel(restore[0].op, prefix, _s(*names[::-1]), _s(*[""] * len(names)))
    for n, v in zip(names[::-1], got):
        _assert_same(v, SAMPLES[n])
    single = rg.restore_v2(prefix, ["i8"], [""], [rg.int8])
    (only,) = run_kernel(single[0].op, prefix, _s("i8"), _s(""))
    _assert_same(only, SAMPLES["i8"])


def test_restore_kernel_errors(graph, tmp_path):
    prefix = np.array(str(tmp_path / "m").encode(), dtype=object)
    save = _save_op(["w"], [""], [rg.float32])
    run_kernel(save, prefix, _s("w"), _s(""), np.zeros(3, np.float32))
    restore = rg.restore_v2(prefix, ["w"], [""], [rg.int32])
    with pytest.raises(InvalidArgumentError, match="has dtype float32, expected int32"):
        run_kernel(restore[0].op, prefix, _s("w"), _s(""))
    restore = rg.restore_v2(prefix, ["v"], [""], [rg.float32])
    with pytest.raises(NotFoundError, match="'v' is not in the checkpoint.*'w'"):
        run_kernel(restore[0].op, prefix, _s("v"), _s(""))
    missing = np.array(str(tmp_path / "nothing").encode(), dtype=object)
    with pytest.raises(NotFoundError, match="no checkpoint"):
        run_kernel(restore[0].op, missing, _s("v"), _s(""))


def test_slices(graph, tmp_path):
    prefix = np.array(str(tmp_path / "m").encode(), dtype=object)
    save = _save_op(["w"], [""], [rg.float32])
    w = np.arange(20, dtype=np.float32).reshape(4, 5)
    run_kernel(save, prefix, _s("w"), _s("4 5 -:-"), w)  # a spec naming the whole tensor
    with pytest.raises(UnimplementedError, match="part of a larger tensor"):
        run_kernel(save, prefix, _s("w"), _s("8 5 0,4:-"), w)
    with pytest.raises(InvalidArgumentError, match="malformed"):
        run_kernel(save, prefix, _s("w"), _s("4 5 x"), w)
    restore = rg.restore_v2(prefix, ["w"], ["4 5 0,2:-"], [rg.float32])
    assert restore[0].shape == rg.TensorShape([2, 5])
    # RestoreV2 reads a slice (a shard of a partitioned variable) out of the whole tensor.
    (part,) = run_kernel(restore[0].op, prefix, _s("w"), _s("4 5 0,2:-"))
    np.testing.assert_array_equal(part, w[0:2])
    (part,) = run_kernel(restore[0].op, prefix, _s("w"), _s("4 5 1,3:2,3"))
    np.testing.assert_array_equal(part, w[1:4, 2:5])
    with pytest.raises(InvalidArgumentError, match=r"'w': the slice '6 5 0,2:-' is of a tensor "
                       r"of shape \[6,5\], but the checkpoint holds shape \[4,5\]"):  # fmt: skip
        run_kernel(restore[0].op, prefix, _s("w"), _s("6 5 0,2:-"))
    whole = rg.restore_v2(prefix, ["w"], ["4 5 -:-"], [rg.float32])
    (got,) = run_kernel(whole[0].op, prefix, _s("w"), _s("4 5 -:-"))
    assert got.shape == (4, 5)


def test_save_kernel_checks_its_inputs(graph, tmp_path):
    prefix = np.array(str(tmp_path / "m").encode(), dtype=object)
    save = rg.save_v2(
        rg.placeholder(rg.string, None, name="p"),
        rg.placeholder(rg.string, None, name="n"),
        rg.placeholder(rg.string, None, name="s"),
        [rg.placeholder(rg.float32, None, name="t")],
    )
    with pytest.raises(InvalidArgumentError, match="tensor_names must be a vector of 1"):
        run_kernel(save, prefix, _s("a", "b"), _s(""), np.zeros(1, np.float32))
    with pytest.raises(InvalidArgumentError, match="prefix must be a scalar"):
        run_kernel(save, _s("a", "b"), _s("a"), _s(""), np.zeros(1, np.float32))


def test_session_save_and_restore_variables(graph, tmp_path):
    from rill.exec import Session

    v = rg.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="dense/w")
    b = rg.Variable(np.array(b"tag", dtype=object), name="tag")
    prefix = str(tmp_path / "model.ckpt-1")
    save = rg.save_v2(prefix, ["dense/w", "tag"], ["", ""], [v, b])
    w_value, tag_value = rg.restore_v2(
        prefix, ["dense/w", "tag"], ["", ""], [rg.float32, rg.string]
    )
    restore = rg.group(v.assign(w_value, read_value=False), b.assign(tag_value, read_value=False))
    with Session(graph=graph) as sess:
        sess.run(rg.global_variables_initializer())
        sess.run(save)
        sess.run(v.assign(np.zeros((2, 3), np.float32)))
        sess.run(restore)
        np.testing.assert_array_equal(sess.run(v), np.arange(6).reshape(2, 3))
        assert sess.run(b) == b"tag"
    assert cf.list_checkpoint(prefix) == [("dense/w", "float32", (2, 3)), ("tag", "string", ())]
