"""The fuzz targets: per format, its seeds, its mutator, what loading and running an input
means, and which exceptions count as rill's documented (clean) errors."""

from __future__ import annotations

import json
import os
import pathlib
import random
import struct
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tools.fuzz.mutate import mutate_bytes, mutate_text

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"

# Ops whose run may block by design (queues, barriers, readers) or touch the file system.
_NOT_RUN = ("Queue", "Barrier", "Stage", "Reader", "Iterator", "Accumulator", "Save", "Restore",
            "WriteFile", "ReadFile", "MatchingFiles", "Print", "Summary", "Dataset", "Py")  # fmt: skip
_MAX_FEED = 1 << 16
_STEP_TIMEOUT_MS = 5000  # a step's deadline (graphs) or an invoke's cancel (TFLite)


@dataclass
class Target:
    name: str
    seeds: Callable[[], list[bytes]]
    mutate: Callable[[bytes, random.Random], bytes]
    run: Callable[[bytes], None]
    clean: Callable[[], tuple[type[BaseException], ...]]


def _rill_errors():
    from rill.graph.errors import RillError

    return (RillError,)


# -- running a rill graph ---------------------------------------------------------------------


def _zeros(dtype, shape):
    if dtype.name in ("resource", "variant"):
        return None  # no value a caller could make up: the graph is not run
    dims = [1 if d is None else d for d in (shape.dims or ())] if shape.rank is not None else [1]
    if int(np.prod(dims, dtype=np.int64)) > _MAX_FEED:
        return None
    if dtype.name == "string":
        return np.full(dims, b"", dtype=object)
    return np.zeros(dims, dtype=dtype.np)


def run_graph(g, max_fetches: int = 8) -> None:
    """Runs the sinks of `g` (ops nothing consumes), placeholders fed with zeros."""
    from rill.exec import Session

    ops = list(g.get_operations())
    consumed = {t.op for op in ops for t in op.inputs} | {
        c for op in ops for c in op.control_inputs
    }
    feeds, fetches = {}, []
    for op in ops:
        if any(k in op.type for k in _NOT_RUN):
            return
        if op.type == "Placeholder":
            v = _zeros(op.outputs[0].dtype, op.outputs[0].shape)
            if v is None:
                return
            feeds[op.outputs[0]] = v
    for op in ops:
        if op not in consumed and op.outputs and len(fetches) < max_fetches:
            fetches.extend(t for t in op.outputs if t.dtype.name not in ("resource", "variant"))
    if not fetches:
        return
    from rill.exec import RunOptions

    # A loop the graph says never ends is the graph's semantics, not a defect: the step's deadline
    # ends it (DeadlineExceededError), as it would for any caller. Work in one kernel is not
    # bounded by it (only checked between loop iterations): that still shows as a hang.
    with Session(graph=g) as s:
        s.run(fetches[:max_fetches], feeds, options=RunOptions(timeout_in_ms=_STEP_TIMEOUT_MS))


# -- GraphDef ---------------------------------------------------------------------------------


def _graphdef_seeds() -> list[bytes]:
    paths = sorted((FIXTURES / "tf_graphs").glob("*.pb")) + sorted((FIXTURES / "tf").glob("*.pb"))
    return [p.read_bytes() for p in paths if p.stat().st_size < 100_000]


_INTS = [0, 1, -1, 2, 3, 5, 1 << 31, (1 << 63) - 1, -(1 << 63), 10**9]


_INT32S = [0, 1, -1, 2, 3, 5, (1 << 31) - 1, -(1 << 31), 10**9]
_FLOATS = [0.0, -1.0, 1e30, -1e30, float("nan"), float("inf"), 1e-45]
_STRINGS = [b"", b"\xff\xfe", b"VALID", b"SAME", b"NCHW", b"NHWC", b"bogus", b"x" * 300]


def _mutate_attr(av, rng: random.Random) -> None:
    """One edit of an AttrValue: its value within its kind, or another kind, or nothing."""
    which = av.WhichOneof("value")
    r = rng.random()
    if r < 0.1:
        av.Clear()
    elif r < 0.2:  # a value of another kind
        av.Clear()
        kind = rng.randrange(5)
        if kind == 0:
            av.i = rng.choice(_INTS)
        elif kind == 1:
            av.f = rng.choice(_FLOATS)
        elif kind == 2:
            av.s = rng.choice(_STRINGS)
        elif kind == 3:
            av.list.i.extend(rng.choice(_INTS) for _ in range(rng.randrange(6)))
        else:
            av.type = rng.choice([0, 1, 3, 7, 9, 20, 21, 99, 101])
    elif which == "i":
        av.i = rng.choice(_INTS)
    elif which == "f":
        av.f = rng.choice(_FLOATS)
    elif which == "s":
        av.s = rng.choice(_STRINGS)
    elif which == "b":
        av.b = not av.b
    elif which == "type":
        av.type = rng.choice([0, 1, 3, 7, 9, 20, 21, 99, 101])
    elif which == "list":
        lst = av.list
        if lst.i and rng.random() < 0.5:
            if rng.random() < 0.5:
                del lst.i[rng.randrange(len(lst.i)) :]
            else:
                lst.i[rng.randrange(len(lst.i))] = rng.choice(_INTS)
        elif lst.type:
            if rng.random() < 0.5:
                del lst.type[rng.randrange(len(lst.type)) :]
            else:
                lst.type[rng.randrange(len(lst.type))] = rng.choice([0, 1, 3, 7, 9, 20, 99])
        elif lst.s:
            lst.s[rng.randrange(len(lst.s))] = rng.choice(_STRINGS)
        elif lst.shape:
            sh = lst.shape[rng.randrange(len(lst.shape))]
            if sh.dim:
                sh.dim[rng.randrange(len(sh.dim))].size = rng.choice(_INTS)
            else:
                sh.unknown_rank = not sh.unknown_rank
        else:
            lst.i.extend(rng.choice(_INTS) for _ in range(rng.randrange(1, 6)))
    elif which == "shape":
        sh = av.shape
        if sh.dim and rng.random() < 0.7:
            sh.dim[rng.randrange(len(sh.dim))].size = rng.choice(_INTS)
        elif rng.random() < 0.5:
            sh.dim.add(size=rng.choice(_INTS))
        else:
            sh.unknown_rank = not sh.unknown_rank
    elif which == "tensor":
        t = av.tensor
        k = rng.randrange(5)
        if k == 0 and t.tensor_shape.dim:
            t.tensor_shape.dim[rng.randrange(len(t.tensor_shape.dim))].size = rng.choice(_INTS)
        elif k == 1:
            t.tensor_shape.dim.add(size=rng.choice(_INTS))
        elif k == 2:
            t.dtype = rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 14, 17, 18, 19, 20, 21, 23, 99])
        elif k == 3 and t.tensor_content:
            cut = rng.randrange(len(t.tensor_content) + 1)
            t.tensor_content = t.tensor_content[:cut]
        elif t.int_val:
            t.int_val[rng.randrange(len(t.int_val))] = rng.choice(_INT32S)
        else:
            t.int_val.append(rng.choice([0, 1, -1, 1 << 30]))
    elif which == "func":
        av.func.name = rng.choice(["", "nope", av.func.name + "_"])


def _mutate_node(nd, names: list[str], ops: list[str], rng: random.Random) -> None:
    k = rng.randrange(6)
    if k <= 1 and nd.attr:
        _mutate_attr(nd.attr[rng.choice(sorted(nd.attr))], rng)
    elif k == 2:
        nd.device = rng.choice(["/job:a:b", "/device:CPU:x", "/replica:-1", "@@", "/task:99999",
                                "/device:GPU:0", "/job:localhost/device:CPU:1"])  # fmt: skip
    elif k == 3 and nd.input:
        i = rng.randrange(len(nd.input))
        r = rng.random()
        if r < 0.3:
            del nd.input[i]
        elif r < 0.45:
            nd.input.append(nd.input[i])
        else:
            nd.input[i] = rng.choice(
                [nd.name, "", "^", "nope:0", f"{rng.choice(names)}:{rng.choice(_INTS)}",
                 rng.choice(names), "^" + rng.choice(names)]
            )  # fmt: skip
    elif k == 4 and nd.attr:
        del nd.attr[rng.choice(sorted(nd.attr))]
    else:
        nd.op = rng.choice(ops)


def _graphdef_mutate(data: bytes, rng: random.Random) -> bytes:
    """Half the time field-level edits of one to three nodes (an attr's value or kind, the
    device, an input, a dropped attr, the op; nodes of the function library too), else
    byte-level edits."""
    if rng.random() < 0.5:
        return mutate_bytes(data, rng)
    from rill.graph.proto import graph_pb2

    gd = graph_pb2.GraphDef()
    try:
        gd.ParseFromString(data)
    except Exception:  # noqa: BLE001 - not a GraphDef: byte edits only
        return mutate_bytes(data, rng)
    nodes = list(gd.node) + [nd for f in gd.library.function for nd in f.node_def]
    if not nodes:
        return mutate_bytes(data, rng)
    names = [nd.name for nd in nodes]
    ops = sorted({nd.op for nd in nodes})
    for _ in range(rng.choice([1, 1, 2, 3])):
        _mutate_node(rng.choice(nodes), names, ops, rng)
    return gd.SerializeToString()


def _graphdef_run(data: bytes) -> None:
    from rill.graph import Graph
    from rill.graph.graph_def import import_graph_def

    g = Graph()
    with g.as_default():
        import_graph_def(data, name="")
    run_graph(g)


# -- text form --------------------------------------------------------------------------------


def _text_seeds() -> list[bytes]:
    from rill.graph import Graph
    from rill.graph.graph_def import import_graph_def

    out = []
    for data in _graphdef_seeds():
        g = Graph()
        try:
            with g.as_default():
                import_graph_def(data, name="")
            out.append(g.to_text().encode())
        except Exception:  # noqa: BLE001 - a seed rill cannot round-trip is skipped
            continue
    out.append(b"%x: f32[2,2] = Const(value=[[1, 2], [3, 4]])\n"
               b"%p: f32[1,2,2,1] = Reshape(%x, %s)\n%s: i32[4] = Const(value=[1, 2, 2, 1])\n"
               b"%a: f32[1,1,1,1] = AvgPool(%p, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], "
               b"padding=\"VALID\")")  # fmt: skip
    return out


def _text_mutate(data: bytes, rng: random.Random) -> bytes:
    return mutate_text(data.decode("utf-8", "replace"), rng).encode("utf-8", "replace")


def _text_run(data: bytes) -> None:
    from rill.graph.text import parse_graph

    run_graph(parse_graph(data.decode("utf-8", "replace")))


# -- ONNX -------------------------------------------------------------------------------------


def _onnx_small_models() -> list[bytes]:
    from onnx import TensorProto as T
    from onnx import helper as h

    def model(nodes, inputs, outputs, inits=()):
        g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
        return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()

    x = h.make_tensor_value_info("x", T.FLOAT, [1, 3, 4, 4])
    y = h.make_tensor_value_info("y", T.FLOAT, None)
    w = h.make_tensor("w", T.FLOAT, [2, 3, 3, 3], np.ones(54, np.float32).tolist())
    s = h.make_tensor("s", T.INT64, [2], [1, 48])
    idx = h.make_tensor("i", T.INT64, [2], [0, 2])
    return [
        model([h.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], [x], [y], [w]),
        model([h.make_node("LRN", ["x"], ["y"], size=3)], [x], [y]),
        model([h.make_node("Reshape", ["x", "s"], ["y"])], [x], [y], [s]),
        model([h.make_node("Gather", ["x", "i"], ["y"], axis=1)], [x], [y], [idx]),
        model([h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2])], [x], [y]),
        model(
            [h.make_node("Constant", [], ["c"], value=w), h.make_node("Add", ["c", "c"], ["y"])],
            [],
            [y],
        ),  # fmt: skip
        model([h.make_node("ReduceSum", ["x", "i"], ["y"], keepdims=0)], [x], [y], [idx]),
        model([h.make_node("Concat", ["x", "x"], ["y"], axis=1)], [x], [y]),
    ]


def _onnx_seeds() -> list[bytes]:
    paths = sorted((FIXTURES / "onnx").glob("*.onnx"))
    out = [p.read_bytes() for p in paths if p.stat().st_size < 60_000]
    return out + _onnx_small_models()


def _onnx_run(data: bytes) -> None:
    from rill.exec import Session
    from rill.graph.onnx.importer import import_onnx

    g, inputs, outputs = import_onnx(data)
    feeds = {}
    for p in inputs.values():
        if p.op.type == "PlaceholderWithDefault":
            continue
        v = _zeros(p.dtype, p.shape)
        if v is None or p.dtype.name == "variant":
            return
        feeds[p] = v
    fetches = [t for t in outputs.values() if t.dtype.name != "variant"]
    if fetches:
        with Session(graph=g) as s:
            s.run(fetches, feeds)


# -- TFLite -----------------------------------------------------------------------------------


def _tflite_seeds() -> list[bytes]:
    d = FIXTURES / "tflite"
    paths = sorted(d.glob("*.tflite")) + sorted((d / "models").glob("*.tflite"))
    return [p.read_bytes() for p in paths if p.stat().st_size < 300_000]


def _tflite_run(data: bytes) -> None:
    from rill.mobile.interpreter import Interpreter

    it = Interpreter(model_content=data)
    # A WHILE the model says never ends is the model's semantics, not a defect: cancel() ends
    # it (InvokeError), as a caller with a deadline would. Work inside one operator is not
    # bounded by it: that still shows as a hang.
    timer = threading.Timer(_STEP_TIMEOUT_MS / 1000, it.cancel)
    timer.start()
    try:
        it.allocate_tensors()
        for d in it.get_input_details():
            shape = [int(s) if s >= 0 else 1 for s in d["shape"]]  # as advertised
            if int(np.prod(shape, dtype=np.int64)) > _MAX_FEED:
                return
            it.set_tensor(d["index"], np.zeros(shape, dtype=d["dtype"]))
        it.invoke()
        for d in it.get_output_details():
            it.get_tensor(d["index"])
    finally:
        timer.cancel()


def _tflite_errors():
    from rill.mobile import errors

    names = ("ModelFormatError", "UnsupportedOperatorError", "PrepareError", "InvokeError")
    return tuple(getattr(errors, n) for n in names if hasattr(errors, n))


# -- checkpoints ------------------------------------------------------------------------------
# A case is kind (4 bytes: b"rill" or b"tf  "), the index's length (4 bytes), the index, the data.


def _pack(kind: bytes, index: bytes, data: bytes) -> bytes:
    return kind + struct.pack("<I", len(index)) + index + data


def _files(prefix: str) -> tuple[bytes, bytes]:
    p = pathlib.Path(prefix)
    return p.with_suffix(".index").read_bytes(), p.with_suffix(".data-00000-of-00001").read_bytes()


def _checkpoint_seeds() -> list[bytes]:
    from rill.exec.checkpoint_format import write_checkpoint
    from rill.exec.tf_checkpoint import write_tf_checkpoint

    tensors = {
        "w": np.arange(6, dtype=np.float32).reshape(2, 3),
        "s": np.array([b"ab", b"", b"cde"], dtype=object),
        "b": np.array(True),
        "i": np.arange(4, dtype=np.int64),
    }
    out = []
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "r")
        write_checkpoint(p, tensors)
        out.append(_pack(b"rill", *_files(p)))
        p = os.path.join(d, "t")
        write_tf_checkpoint(p, tensors)
        out.append(_pack(b"tf  ", *_files(p)))
    ref = FIXTURES / "tf_graphs" / "ref_train_ckpt"
    out.append(
        _pack(
            b"tf  ",
            ref.with_suffix(".index").read_bytes(),
            (FIXTURES / "tf_graphs" / "ref_train_ckpt.data-00000-of-00001").read_bytes(),
        )
    )
    return out


_JSON_VALUES = [0, -1, 1, 7, 1 << 31, 1 << 63, 1 << 64, -(1 << 63), 2.5, "", ".", "..", "a\x00b",
                "../r.data-00000-of-00001", None, [], [1 << 31], [-1], [1 << 40, 1 << 40],
                {}, "string", "float32", "bfloat16", True]  # fmt: skip


def _mutate_json_index(index: bytes, rng: random.Random) -> bytes:
    """A field of one tensor entry (dtype, shape, file, offset, length, crc32) or its name set
    to an extreme or ill-typed value."""
    try:
        doc = json.loads(index)
        entries = doc["tensors"]
        name = rng.choice(sorted(entries))
    except (ValueError, KeyError, TypeError, IndexError):
        return mutate_bytes(index, rng)
    if rng.random() < 0.15:
        entries[rng.choice(["", "a\x00b", "x" * 1000])] = entries.pop(name)
    else:
        e = entries[name]
        e[rng.choice(sorted(e))] = rng.choice(_JSON_VALUES)
    return json.dumps(doc).encode()


def _checkpoint_mutate(case: bytes, rng: random.Random) -> bytes:
    kind, n = case[:4], struct.unpack("<I", case[4:8])[0]
    index, data = case[8 : 8 + n], case[8 + n :]
    if kind == b"rill" and rng.random() < 0.5:
        index = _mutate_json_index(index, rng)
    elif rng.random() < 0.7:
        index = mutate_bytes(index, rng)
    else:
        data = mutate_bytes(data, rng)
    return _pack(kind, index, data)


def _checkpoint_run(case: bytes) -> None:
    from rill.exec.checkpoint_format import CheckpointReader
    from rill.exec.tf_checkpoint import TFCheckpointReader

    kind, n = case[:4], struct.unpack("<I", case[4:8])[0]
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "r")  # the rill seed's index names r.data-00000-of-00001
        with open(p + ".index", "wb") as f:
            f.write(case[8 : 8 + n])
        with open(p + ".data-00000-of-00001", "wb") as f:
            f.write(case[8 + n :])
        reader = (CheckpointReader if kind == b"rill" else TFCheckpointReader)(p)
        for name in reader.names():
            reader.dtype(name), reader.shape(name)
            reader.read(name)


TARGETS = {
    "graphdef": Target("graphdef", _graphdef_seeds, _graphdef_mutate, _graphdef_run, _rill_errors),
    "text": Target("text", _text_seeds, _text_mutate, _text_run, _rill_errors),
    "onnx": Target("onnx", _onnx_seeds, mutate_bytes, _onnx_run, _rill_errors),
    "tflite": Target("tflite", _tflite_seeds, mutate_bytes, _tflite_run, _tflite_errors),
    "checkpoint": Target(
        "checkpoint", _checkpoint_seeds, _checkpoint_mutate, _checkpoint_run, _rill_errors
    ),  # fmt: skip
}
