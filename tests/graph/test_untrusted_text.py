"""The text form read from an untrusted source: GraphValueError naming the line, never a plain
numpy/Python error, a deep recursion, or an allocation the line's size does not justify."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from rill.graph.errors import GraphValueError
from rill.graph.text import parse_graph


@pytest.mark.parametrize(
    "line, message",
    [
        ("%x: f32[1.5] = Placeholder(shape=[1.5])", "bad dimension '1.5'"),
        ("%x: f32[-7] = Placeholder(shape=[-7])", "bad dimension '-7'"),
        ("%c: u8[] = Const(value=300)", "bad uint8"),
        ("%c: i32[2] = Const(value=fill(99999999999999999999))", "bad int32"),
        ('%c: f32[3] = Const(value=b64"AAAAA")', "bad float32"),
        ('%c: f32[1] = Const(value=["a"])', "bad float32"),
        ("%c: f32[2] = Const(value=" + "[" * 20000 + ")", "nest"),
        ("%c: f32[2] = Const(value=tensor<f32[1]>" + "[" * 300 + ")", "nests deeper"),
        ("%c: i32[] = Const(value=0, foo=" + "[" * 20000 + ")", "nest too deeply"),
    ],
)
def test_malformed_lines_raise_graph_value_error_naming_the_line(line, message):
    with pytest.raises(GraphValueError, match=rf"line 1: .*{message}"):
        parse_graph(line)


def test_a_short_line_declaring_a_huge_constant_is_refused_before_allocating():
    line = "%c: f64[1073741824] = Const(value=fill(1))"  # 8 GiB from 43 bytes
    code = f"""
        import resource
        from rill.graph.errors import GraphValueError
        from rill.graph.text import parse_graph
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
        try:
            parse_graph({line!r})
        except GraphValueError as e:
            print("GraphValueError:", e)
    """
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert "line 1" in r.stdout and "over the limit" in r.stdout, r.stdout


def test_the_limit_is_configurable(monkeypatch):
    import rill.graph.text as text

    g = parse_graph("%c: f32[1000] = Const(value=fill(1))")
    assert g.get_operation_by_name("c").outputs[0].shape.dims == (1000,)
    monkeypatch.setattr(text, "MAX_TENSOR_BYTES", 100)
    with pytest.raises(GraphValueError, match="4000 bytes.*over the limit of 100"):
        parse_graph("%c: f32[1000] = Const(value=fill(1))")


@pytest.mark.parametrize(
    "value", ['["loc:@\\xff"]', "[1, 2]", '"loc:@x"', "[[1]]", "f32", 'b"\\xff"']
)
def test_a_private_attr_of_the_wrong_kind_is_refused_naming_the_line(value):
    # `_class` is read by the placer: a value that is not a list of strings reached it as bytes,
    # ints or a DType (AttributeError / TypeError there).
    text = f"%x: f32[2] = Placeholder(shape=[2])\n%y: f32[2] = Identity(%x, _class={value})"
    with pytest.raises(GraphValueError, match=r"line 2: node 'y' attr '_class' must be a list"):
        parse_graph(text)


def test_a_colocation_list_still_round_trips():
    text = '%x: f32[2] = Placeholder(shape=[2])\n%y: f32[2] = Identity(%x, _class=["loc:@x"])'
    g = parse_graph(text)
    assert g.get_operation_by_name("y").attrs["_class"] == ("loc:@x",)


@pytest.mark.parametrize(
    "line, message",
    [
        ('%c: string[0] = Const(value=["a"])', r"has shape \[1\], expected \[0\]"),
        ('%c: string[1] = Const(value=["a", "b"])', r"has shape \[2\], expected \[1\]"),
        ('%c: string[2] = Const(value=[["a"], "b"])', "ragged"),
        ('%c: string[2] = Const(value=fill(["x"]))', "fill"),
    ],
)
def test_a_string_tensor_value_must_have_its_declared_shape(line, message):
    # A string value with more elements than its shape was an IndexError (found by tools/fuzz).
    with pytest.raises(GraphValueError, match=message):
        parse_graph(line)


@pytest.mark.parametrize("num", ['["loc:@x"]', "-1", "f32"])
def test_an_output_count_that_is_not_a_count_names_the_line(num):
    # Unpack's num read as an output count was a TypeError in the importer (found by tools/fuzz).
    text = f"%x: f32[2] = Placeholder(shape=[2])\n%u: (f32[], f32[]) = Unpack(%x, num={num})"
    with pytest.raises(GraphValueError, match=r"line 2: node 'u' \(Unpack\) has num=.*not a count"):
        parse_graph(text)
