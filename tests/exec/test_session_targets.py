"""Session targets: Session("<scheme>://...") goes to the factory registered for the scheme."""

from __future__ import annotations

import pytest

from rill.exec import Session, register_session_factory, session_factory
from rill.graph import errors


def test_a_registered_scheme_gets_the_session():
    made = {}

    def factory(target, graph=None, config=None):
        made["target"] = target
        return "a session"

    register_session_factory("test-scheme", factory)
    assert Session("test-scheme://here:1") == "a session"
    assert made["target"] == "test-scheme://here:1"


def test_an_unknown_scheme_names_what_is_installed():
    with pytest.raises(errors.InvalidArgumentError, match="nosuch") as ei:
        Session("nosuch://x:1")
    assert "grpc://" in str(ei.value)  # rill-distributed's entry point was discovered
    assert session_factory("grpc://localhost:1").__name__ == "GrpcSession"


def test_a_target_without_a_scheme_is_refused():
    with pytest.raises(errors.InvalidArgumentError, match="local"):
        Session("localhost:2222")
