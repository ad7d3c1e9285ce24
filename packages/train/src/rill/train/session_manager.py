"""SessionManager (TensorFlow-1's tf.train.SessionManager): a chief prepares a session
(restores the latest checkpoint or initializes), other replicas wait until the model is ready.

It shares the session creators of rill.train.monitored_session, so on a distributed master the
waiting replicas wake as soon as the chief announces the model ready (no 30-second polling).

>>> import tempfile
>>> import rill.graph as rg
>>> from rill.train.training_util import get_or_create_global_step
>>> with rg.Graph().as_default():
...     step = get_or_create_global_step()
...     sess = SessionManager().prepare_session("", init_op=rg.global_variables_initializer())
...     int(sess.run(step))
0
"""

from __future__ import annotations

import contextlib
import logging
import time

from rill.graph.graph import get_default_graph
from rill.train import checkpoint_management as cm
from rill.train.monitored_session import (
    ChiefSessionCreator,
    Scaffold,
    WorkerSessionCreator,
    _new_session,
    _not_ready,
)

__all__ = ["SessionManager"]

_log = logging.getLogger("rill.train")


def _wait_for_checkpoint(checkpoint_dir, timeout: float) -> str | None:
    """The latest checkpoint of `checkpoint_dir`, waiting up to `timeout` s for one to appear."""
    deadline = time.monotonic() + timeout
    while True:
        path = cm.latest_checkpoint(checkpoint_dir)
        if path is not None or time.monotonic() >= deadline:
            return path
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


class SessionManager:
    """Prepares sessions for the chief and waits for them on the other replicas.

    Args:
        local_init_op: run in every new session once the model is ready for it.
        ready_op: a 1-D string tensor naming what is not initialized (empty when ready).
        graph: the graph (default: the default graph).
        recovery_wait_secs: the longest pause between two readiness checks when no announcement
            comes (TensorFlow polls at this interval; rill starts at 50 ms and doubles).
        local_init_run_options: accepted for TensorFlow compatibility.
        ready_for_local_init_op: what must be ready before local_init_op runs.
    """

    def __init__(
        self,
        local_init_op=None,
        ready_op=None,
        graph=None,
        recovery_wait_secs: float = 30,
        local_init_run_options=None,
        ready_for_local_init_op=None,
    ):
        self._graph = graph or get_default_graph()
        self._local_init_op = local_init_op
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._recovery_wait_secs = recovery_wait_secs

    @contextlib.contextmanager
    def _keep_open(self):
        """The creators finalize the graph (as a Scaffold does); a SessionManager, as
        TensorFlow's, leaves the caller's graph open."""
        was_final = self._graph.finalized
        try:
            yield
        finally:
            if not was_final:
                self._graph._finalized = False

    def _scaffold(self, init_op=None, init_feed_dict=None, init_fn=None, saver=None) -> Scaffold:
        return Scaffold(
            init_op=init_op,
            init_feed_dict=init_feed_dict,
            init_fn=(lambda scaffold, sess: init_fn(sess)) if init_fn else None,
            ready_op=self._ready_op,
            ready_for_local_init_op=self._ready_for_local_init_op,
            local_init_op=self._local_init_op,
            saver=saver,
        )

    def prepare_session(
        self,
        master: str,
        init_op=None,
        saver=None,
        checkpoint_dir=None,
        checkpoint_filename_with_path=None,
        wait_for_checkpoint: bool = False,
        max_wait_secs: float = 7200,
        config=None,
        init_feed_dict=None,
        init_fn=None,
    ):
        """The chief's session: restored from the latest checkpoint of `checkpoint_dir` (or
        `checkpoint_filename_with_path`) when there is one, else initialized with `init_op` /
        `init_fn`; then local_init_op; a model still not ready is a RuntimeError."""
        if wait_for_checkpoint and checkpoint_dir:
            _wait_for_checkpoint(checkpoint_dir, max_wait_secs)
        with self._graph.as_default(), self._keep_open():
            creator = ChiefSessionCreator(
                scaffold=self._scaffold(init_op, init_feed_dict, init_fn, saver),
                master=master,
                config=config,
                checkpoint_dir=checkpoint_dir,
                checkpoint_filename_with_path=checkpoint_filename_with_path,
            )
            return creator.create_session()

    def recover_session(
        self,
        master: str,
        saver=None,
        checkpoint_dir=None,
        checkpoint_filename_with_path=None,
        wait_for_checkpoint: bool = False,
        max_wait_secs: float = 7200,
        config=None,
    ):
        """(session, whether it was restored and is ready): restores the latest checkpoint
        if there is one; never initializes."""
        with self._graph.as_default(), self._keep_open():
            scaffold = self._scaffold(saver=saver).finalize()
            sess = _new_session(master, self._graph, config)
            path = checkpoint_filename_with_path or (
                cm.latest_checkpoint(checkpoint_dir) if checkpoint_dir else None
            )
            if path is None and wait_for_checkpoint and checkpoint_dir:
                path = _wait_for_checkpoint(checkpoint_dir, max_wait_secs)
            if path is None:
                return sess, False
            _log.info("Restoring parameters from %s", path)
            scaffold.saver.restore(sess, path)
            if scaffold.local_init_op is not None and not _not_ready(
                sess, scaffold, scaffold.ready_for_local_init_op
            ):
                sess.run(scaffold.local_init_op)
            return sess, not _not_ready(sess, scaffold)

    def wait_for_session(self, master: str, config=None, max_wait_secs: float = float("inf")):
        """A session once the chief has made the model ready; DeadlineExceededError after
        `max_wait_secs`."""
        with self._graph.as_default(), self._keep_open():
            creator = WorkerSessionCreator(
                scaffold=self._scaffold(),
                master=master,
                config=config,
                max_wait_secs=max_wait_secs,
                recovery_wait_secs=self._recovery_wait_secs,
            )
            return creator.create_session()
