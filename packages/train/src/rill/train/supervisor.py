"""`Supervisor` (TensorFlow-1's `tf.train.Supervisor`), single-process semantics: prepares a
session (restoring the latest checkpoint in `logdir` or initializing), starts the queue
runners and the standard services (periodic checkpoints and summaries, all stopped through one
Coordinator), and stops them cleanly.

>>> import tempfile
>>> import rill.graph as rg
>>> from rill import train
>>> with rg.Graph().as_default():
...     step = train.get_or_create_global_step()
...     inc = step.assign_add(1)
...     sv = Supervisor(logdir=tempfile.mkdtemp(), save_model_secs=0, save_summaries_secs=0)
...     with sv.managed_session() as sess:
...         while not sv.should_stop() and sess.run(inc) < 3:
...             pass
...     sv.should_stop()
True
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading

from rill.graph.graph import get_default_graph
from rill.graph.ops.array_ops import group
from rill.graph.ops.state_ops import global_variables_initializer, local_variables_initializer
from rill.train.coordinator import Coordinator
from rill.train.monitored_session import (
    ChiefSessionCreator,
    Scaffold,
    WorkerSessionCreator,
    _report_uninitialized_variables,
)
from rill.train.queue_runner import start_queue_runners
from rill.train.saver import Saver
from rill.train.summary import FileWriter, merge_all
from rill.train.variable_scope import GraphKeys

__all__ = ["Supervisor"]

_log = logging.getLogger("rill.train")


class _Looper(threading.Thread):
    """Calls `target` every `interval` seconds until the Coordinator asks to stop."""

    def __init__(self, coord: Coordinator, interval: float, target, args=(), kwargs=None,
                 name: str = "SupervisorLoop"):  # fmt: skip
        super().__init__(daemon=True, name=name)
        self._coord, self._interval = coord, interval
        self._target, self._args, self._kwargs = target, args, kwargs or {}
        coord.register_thread(self)

    def run(self) -> None:
        with self._coord.stop_on_exception():
            while not self._coord.should_stop():
                self._target(*self._args, **self._kwargs)
                if self._coord.wait_for_stop(self._interval):
                    break


class Supervisor:
    """Session preparation, queue runners and background services for a training program.

    Args: as TensorFlow's; each op argument left at USE_DEFAULT is built (init_op: initialize
    all global variables; local_init_op: local variables; ready_op: report uninitialized
    variables; summary_op: merge_all(); saver: a Saver of all variables; global_step: the
    graph's global step), and None switches it off. The graph is finalized.
    """

    USE_DEFAULT = 0

    def __init__(self, graph=None, ready_op=USE_DEFAULT, ready_for_local_init_op=USE_DEFAULT,
                 is_chief: bool = True, init_op=USE_DEFAULT, init_feed_dict=None,
                 local_init_op=USE_DEFAULT, logdir=None, summary_op=USE_DEFAULT,
                 saver=USE_DEFAULT, global_step=USE_DEFAULT, save_summaries_secs: float = 120,
                 save_model_secs: float = 600, recovery_wait_secs: float = 30,
                 stop_grace_secs: float = 120, checkpoint_basename: str = "model.ckpt",
                 session_manager=None, summary_writer=USE_DEFAULT, init_fn=None,
                 local_init_run_options=None):  # fmt: skip
        if session_manager is not None:
            raise NotImplementedError("Supervisor(session_manager=...) is not supported by rill")
        self._graph = graph if graph is not None else get_default_graph()
        d = Supervisor.USE_DEFAULT
        with self._graph.as_default():
            if init_op is d:
                init_op = group(global_variables_initializer(), name="init")
            if local_init_op is d:
                local_init_op = group(local_variables_initializer(), name="init_1")
            if ready_op is d:
                ready_op = _report_uninitialized_variables(
                    self._graph.get_collection(GraphKeys.GLOBAL_VARIABLES)
                    + self._graph.get_collection(GraphKeys.LOCAL_VARIABLES)
                )
            if summary_op is d:
                summary_op = merge_all()
            if saver is d:
                saver = self._graph.get_collection(GraphKeys.SAVERS)
                saver = saver[0] if saver else Saver(allow_empty=True)
            if global_step is d:
                steps = self._graph.get_collection(GraphKeys.GLOBAL_STEP)
                global_step = steps[0] if steps else None
            self._scaffold = Scaffold(
                init_op=init_op, init_feed_dict=init_feed_dict, ready_op=ready_op,
                local_init_op=local_init_op, saver=saver,
                init_fn=(lambda _scaffold, sess: init_fn(sess)) if init_fn else None,
            )  # fmt: skip
            self._scaffold.finalize()
        self._init_op, self._local_init_op, self._ready_op = init_op, local_init_op, ready_op
        self._summary_op, self._saver, self._global_step = summary_op, saver, global_step
        self._is_chief = is_chief
        self._logdir = os.fspath(logdir) if logdir is not None else None
        self._save_summaries_secs = save_summaries_secs
        self._save_model_secs = save_model_secs
        self._recovery_wait_secs = recovery_wait_secs
        self._stop_grace_secs = stop_grace_secs
        self._save_path = os.path.join(self._logdir, checkpoint_basename) if self._logdir else None
        if summary_writer is d:
            summary_writer = FileWriter(self._logdir) if (self._logdir and is_chief) else None
        self._summary_writer = summary_writer
        self._coord = Coordinator()
        self._started_threads: list = []

    # -- properties ------------------------------------------------------------------------------

    @property
    def coord(self) -> Coordinator:
        return self._coord

    @property
    def is_chief(self) -> bool:
        return self._is_chief

    @property
    def init_op(self):
        return self._init_op

    @property
    def local_init_op(self):
        return self._local_init_op

    @property
    def ready_op(self):
        return self._ready_op

    @property
    def summary_op(self):
        return self._summary_op

    @property
    def summary_writer(self):
        return self._summary_writer

    @property
    def saver(self):
        return self._saver

    @property
    def global_step(self):
        return self._global_step

    @property
    def save_path(self):
        return self._save_path

    @property
    def save_summaries_secs(self):
        return self._save_summaries_secs

    @property
    def save_model_secs(self):
        return self._save_model_secs

    # -- sessions ------------------------------------------------------------------------------

    def prepare_or_wait_for_session(self, master: str = "", config=None,
                                    wait_for_checkpoint: bool = False, max_wait_secs: float = 7200,
                                    start_standard_services: bool = True):  # fmt: skip
        """A session with the model ready: the chief restores or initializes it, a non-chief
        waits (up to `max_wait_secs`) for the chief to have done so."""
        self._coord.clear_stop()
        with self._graph.as_default():
            if self._is_chief:
                creator = ChiefSessionCreator(
                    self._scaffold, master, config,
                    checkpoint_dir=self._logdir if self._saver is not None else None,
                )  # fmt: skip
            else:
                creator = WorkerSessionCreator(
                    self._scaffold, master, config, max_wait_secs=max_wait_secs
                )
            sess = creator.create_session()
        if self._is_chief and start_standard_services:
            self.start_standard_services(sess)
        if start_standard_services:
            self.start_queue_runners(sess)
        return sess

    @contextlib.contextmanager
    def managed_session(self, master: str = "", config=None, start_standard_services: bool = True,
                        close_summary_writer: bool = True):  # fmt: skip
        """A prepared session; on leaving, the services and queue runners are stopped (an
        OutOfRangeError inside ends the loop cleanly; other errors are re-raised after the
        threads are joined) and the session is closed."""
        sess = self.prepare_or_wait_for_session(
            master=master, config=config, start_standard_services=start_standard_services
        )
        try:
            yield sess
        except Exception as e:  # noqa: BLE001 - reported, then re-raised by stop()
            self.request_stop(e)
        finally:
            try:
                self.stop(close_summary_writer=close_summary_writer)
            finally:
                sess.close()

    def start_queue_runners(self, sess, queue_runners=None) -> list:
        """Starts the queue runners (of the graph's collection, by default) under the
        Supervisor's Coordinator."""
        if queue_runners is None:
            threads = start_queue_runners(sess, self._coord, daemon=True)
        else:
            threads = []
            for qr in queue_runners:
                threads.extend(qr.create_threads(sess, self._coord, daemon=True, start=True))
        self._started_threads.extend(threads)
        return threads

    def start_standard_services(self, sess) -> list:
        """Writes the graph, then starts the checkpoint and summary threads (each only where
        its interval, its op and the log directory are set)."""
        threads = []
        if self._summary_writer is not None:
            self._summary_writer.add_graph(self._graph)
        if self._saver is not None and self._save_path and self._save_model_secs:
            threads.append(self.loop(self._save_model_secs, self._save_checkpoint, (sess,)))
        if self._summary_op is not None and self._summary_writer and self._save_summaries_secs:
            threads.append(self.loop(self._save_summaries_secs, self._write_summary, (sess,)))
        return threads

    def _step(self, sess):
        return int(sess.run(self._global_step)) if self._global_step is not None else None

    def _save_checkpoint(self, sess) -> None:
        self._saver.save(sess, self._save_path, global_step=self._global_step)

    def _write_summary(self, sess) -> None:
        self.summary_computed(sess, sess.run(self._summary_op), self._step(sess))

    def summary_computed(self, sess, summary, global_step=None) -> None:
        """Writes a summary the program computed itself."""
        if self._summary_writer is None:
            raise RuntimeError("the Supervisor has no summary writer (it needs a logdir)")
        if global_step is None and self._global_step is not None:
            global_step = self._step(sess)
        self._summary_writer.add_summary(summary, global_step)

    def loop(self, timer_interval_secs: float, target, args=None, kwargs=None):
        """Starts a thread calling `target(*args, **kwargs)` every `timer_interval_secs` until
        a stop is requested."""
        t = _Looper(self._coord, timer_interval_secs, target, args or (), kwargs)
        t.start()
        self._started_threads.append(t)
        return t

    # -- stopping ------------------------------------------------------------------------------

    def should_stop(self) -> bool:
        return self._coord.should_stop()

    def request_stop(self, ex=None) -> None:
        self._coord.request_stop(ex)

    def wait_for_stop(self) -> None:
        self._coord.wait_for_stop()

    def stop(self, threads=None, close_summary_writer: bool = True,
             ignore_live_threads: bool = False) -> None:  # fmt: skip
        """Requests a stop and joins the threads (within stop_grace_secs), then flushes and
        closes the summary writer; re-raises an error a thread reported."""
        self._coord.request_stop()
        try:
            self._coord.join(
                list(threads or ()) + self._started_threads,
                stop_grace_period_secs=self._stop_grace_secs,
                ignore_live_threads=ignore_live_threads,
            )
        finally:
            self._started_threads = []
            if self._summary_writer is not None:
                self._summary_writer.flush()
                if close_summary_writer:
                    self._summary_writer.close()
