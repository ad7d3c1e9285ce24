"""RunOptions.timeout_in_ms bounds a while loop that never ends (its condition is always true):
the step ends in DeadlineExceededError, on the structured path and on the general dataflow
executor alike (issue 22: an untrusted graph may loop forever by its own semantics)."""

from __future__ import annotations

import threading

import rill.exec.session as session_mod
from rill.exec import RunOptions, Session
from rill.exec.executor.structured import Unsupported
from rill.graph import Graph, constant, control_flow
from rill.graph.errors import DeadlineExceededError


def _run_endless_loop(timeout_ms: int):
    g = Graph()
    with g.as_default():
        r = control_flow.while_loop(lambda i: i >= 0, lambda i: i + 0, [constant(0)])
    out = {}

    def run():
        try:
            with Session(graph=g) as s:
                s.run(r, options=RunOptions(timeout_in_ms=timeout_ms))
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(120)  # generous: the deadline is what ends the loop, not this join
    assert not t.is_alive(), "the loop ran on past its deadline"
    return out.get("error")


def test_structured_loop_stops_at_the_deadline():
    err = _run_endless_loop(50)
    assert isinstance(err, DeadlineExceededError), err
    assert "timeout_in_ms" in str(err)


def test_dataflow_loop_stops_at_the_deadline(monkeypatch):
    def unsupported(*a, **k):
        raise Unsupported("forced: test the general executor")

    monkeypatch.setattr(session_mod, "StructuredPartition", unsupported)
    err = _run_endless_loop(50)
    assert isinstance(err, DeadlineExceededError), err
    assert "while loop" in str(err) and "iterations" in str(err)
