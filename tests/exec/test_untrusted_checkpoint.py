"""Checkpoint readers fed lying or malformed indexes: DataLossError naming the tensor, and never
an allocation larger than the data files (checked in a child process under a memory cap)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from rill.exec.checkpoint_format import CheckpointReader, index_path, write_checkpoint
from rill.exec.proto import tensor_bundle_pb2
from rill.exec.tf_checkpoint import (
    TFCheckpointReader,
    _read_table,
    _write_table,
    write_tf_checkpoint,
)
from rill.graph.errors import DataLossError


def _rewrite_index(prefix, edit):
    path = index_path(prefix)
    with open(path) as f:
        index = json.load(f)
    edit(index["tensors"])
    with open(path, "w") as f:
        json.dump(index, f)


def _rill_checkpoint(tmp_path):
    prefix = str(tmp_path / "ckpt")
    write_checkpoint(prefix, {"s": np.array([b"ab", b"c"], dtype=object), "w": np.ones(3)})
    return prefix


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("file", "", "is not a name"),
        ("file", ".", "is not a name"),
        ("file", "..", "is not a name"),
        ("file", "a\x00b", "is not a name"),
        ("file", "../ckpt.data-00000-of-00001", "is not a name"),
        ("shape", [1 << 64], "out of range"),
        ("shape", [-2], "out of range"),
        ("shape", [1 << 40, 1 << 40], "more elements than int64"),
        ("shape", [1.5], "not an integer"),
        ("offset", -8, "not a non-negative integer"),
        ("length", -1, "not a non-negative integer"),
    ],
)
def test_rill_index_entry_errors_name_the_tensor(tmp_path, field, value, message):
    prefix = _rill_checkpoint(tmp_path)
    _rewrite_index(prefix, lambda t: t["w"].__setitem__(field, value))
    with pytest.raises(DataLossError, match=rf"tensor 'w'.*{message}"):
        CheckpointReader(prefix)


def test_rill_index_with_a_nul_in_a_name(tmp_path):
    prefix = _rill_checkpoint(tmp_path)
    _rewrite_index(prefix, lambda t: t.__setitem__("a\x00b", t.pop("w")))
    with pytest.raises(DataLossError, match="NUL"):
        CheckpointReader(prefix)


_CAPPED = """
import resource, sys
def vm():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
from rill.exec.checkpoint_format import CheckpointReader
from rill.exec.tf_checkpoint import TFCheckpointReader
from rill.graph.errors import DataLossError
cap = vm() + (512 << 20)
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
reader = {"rill": CheckpointReader, "tf": TFCheckpointReader}[sys.argv[1]](sys.argv[2])
try:
    reader.read("s")
except DataLossError as e:
    print("DataLossError:", e)
"""


def _capped_read(kind, prefix):
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(_CAPPED), kind, prefix],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_rill_string_tensor_declaring_2_31_elements_under_a_memory_cap(tmp_path):
    prefix = _rill_checkpoint(tmp_path)
    _rewrite_index(prefix, lambda t: t["s"].__setitem__("shape", [1 << 31]))
    out = _capped_read("rill", prefix)
    assert out.startswith("DataLossError:") and "'s'" in out and "2147483648 strings" in out


def test_tf_string_tensor_declaring_2_31_elements_under_a_memory_cap(tmp_path):
    prefix = str(tmp_path / "tf")
    write_tf_checkpoint(prefix, {"s": np.array([b"ab", b"c"], dtype=object)})
    entries = _read_table(prefix + ".index")
    out = []
    for k, v in entries:
        if k == b"s":
            e = tensor_bundle_pb2.BundleEntryProto()
            e.ParseFromString(v)
            e.shape.dim[0].size = 1 << 31
            v = e.SerializeToString()
        out.append((k, v))
    with open(prefix + ".index", "wb") as f:
        _write_table(f, out)
    result = _capped_read("tf", prefix)
    assert result.startswith("DataLossError:") and "'s'" in result, result
    with pytest.raises(DataLossError, match="'s'.*2147483648 strings"):
        TFCheckpointReader(prefix).read("s")


def test_tf_negative_dimension_and_unknown_dtype(tmp_path):
    prefix = str(tmp_path / "tf")
    write_tf_checkpoint(prefix, {"w": np.ones(3, np.float32)})
    entries = _read_table(prefix + ".index")
    for field, msg in (("shape", "out of range"), ("dtype", "no dtype")):
        out = []
        for k, v in entries:
            if k == b"w":
                e = tensor_bundle_pb2.BundleEntryProto()
                e.ParseFromString(v)
                if field == "shape":
                    e.shape.dim[0].size = -3
                else:
                    e.dtype = 999
                v = e.SerializeToString()
            out.append((k, v))
        with open(prefix + ".index", "wb") as f:
            _write_table(f, out)
        with pytest.raises(DataLossError, match=rf"'w'.*{msg}"):
            TFCheckpointReader(prefix).read("w")
