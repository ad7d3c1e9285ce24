"""MonitoredSession and MonitoredTrainingSession: a Session that initializes or restores the
model, runs hooks around every step, and saves checkpoints (TensorFlow-1's monitored_session).

What happens, in order:

1. each hook's `begin()` (the graph can still be changed);
2. the Scaffold is finalized: it builds the ops it was not given (init_op, ready_op,
   local_init_op, a Saver) and the graph is finalized (no more ops may be added);
3. a Session is created; the chief restores the latest checkpoint of `checkpoint_dir` when there
   is one (and takes over its bookkeeping: which checkpoints to keep) or else runs init_op and
   init_fn; then local_init_op; a model still not ready is an error. A non-chief waits until
   the model is ready;
4. each hook's `after_create_session(session, coord)`;
5. per `run`: the hooks' `before_run`, one Session.run of the caller's fetches with all the
   hooks' fetches and feeds, the hooks' `after_run`; a hook may request a stop;
6. on close without an error, each hook's `end(session)`; the graph is un-finalized again if
   it was not final before.

A MonitoredSession (not a SingularMonitoredSession) recovers from AbortedError and
UnavailableError raised by a run: it closes the session, creates a new one (restoring the latest
checkpoint) and runs the step again. Leaving a `with` block on OutOfRangeError or StopIteration
(the end of the input) closes normally and swallows the error.

>>> import tempfile
>>> import rill.graph as rg
>>> from rill.train.hooks import StopAtStepHook
>>> from rill.train.training_util import get_or_create_global_step
>>> d = tempfile.mkdtemp()
>>> def train(steps):
...     with rg.Graph().as_default():
...         step = get_or_create_global_step()
...         train_op = step.assign_add(1)
...         with MonitoredTrainingSession(checkpoint_dir=d,
...                                       hooks=[StopAtStepHook(num_steps=steps)]) as sess:
...             while not sess.should_stop():
...                 n = sess.run(train_op)
...     return int(n)
>>> train(3), train(2)  # the second run restores step 3 from the checkpoint
(3, 5)
"""

from __future__ import annotations

import logging
import time

import numpy as np

from rill.graph import dtypes
from rill.graph.errors import (
    AbortedError,
    DeadlineExceededError,
    OpError,
    OutOfRangeError,
    UnavailableError,
)
from rill.graph.graph import constant, get_default_graph
from rill.graph.ops.array_ops import group
from rill.graph.ops.gather_ops import gather, where
from rill.graph.ops.logic_ops import logical_not
from rill.graph.ops.reshape_ops import reshape, stack
from rill.graph.ops.state_ops import (
    GLOBAL_VARIABLES,
    LOCAL_VARIABLES,
    global_variables_initializer,
    local_variables_initializer,
)
from rill.train import checkpoint_management as cm
from rill.train.coordinator import Coordinator
from rill.train.hooks import (
    CheckpointSaverHook,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    StepCounterHook,
)
from rill.train.queue_runner import start_queue_runners
from rill.train.saver import SAVERS, Saver

__all__ = [
    "ChiefSessionCreator",
    "MonitoredSession",
    "MonitoredTrainingSession",
    "Scaffold",
    "SessionCreator",
    "SingularMonitoredSession",
    "StepContext",
    "WorkerSessionCreator",
    "USE_DEFAULT",
]

_log = logging.getLogger("rill.train")
_PREEMPTION_ERRORS = (AbortedError, UnavailableError)
INIT_OP = "init_op"
LOCAL_INIT_OP = "local_init_op"
READY_OP = "ready_op"
READY_FOR_LOCAL_INIT_OP = "ready_for_local_init_op"
# The queue by which a distributed chief announces that the model is ready (see _Readiness).
_READY_QUEUE = "rill_model_ready"


class _UseDefault:
    def __repr__(self) -> str:
        return "USE_DEFAULT"


USE_DEFAULT = _UseDefault()  # "not given": lets save_checkpoint_secs/steps default as in TF


def _new_session(master: str, graph, config):
    # A "grpc://host:port" master reaches rill.distributed through rill.exec's session-target
    # registry (an entry point), so rill.train never imports it (DESIGN.md's layering table).
    from rill.exec import Session

    return Session(master, graph=graph, config=config)


def _report_uninitialized_variables(variables, name: str = "report_uninitialized_variables"):
    """A 1-D string tensor naming the variables not yet initialized (empty when all are)."""
    g = get_default_graph()
    with g.name_scope(name):
        if not variables:
            return constant(np.array([], dtype=object), dtypes.string, name="Const")
        initialized = stack([v.is_initialized() for v in variables])
        names = constant([v.op.name for v in variables], dtypes.string, name="Const")
        missing = reshape(where(logical_not(initialized)), [-1])
        return gather(names, missing, name="boolean_mask/GatherV2")


class Scaffold:
    """The ops a monitored session needs to prepare a model; those not given are built by
    `finalize()`.

    Args:
        init_op: initializes the model (default: all global variables' initializers).
        init_feed_dict: fed to init_op.
        init_fn: called as init_fn(scaffold, session) after init_op.
        ready_op: a 1-D string tensor of what is not initialized yet, empty when the model is
            ready (default: the names of uninitialized global and local variables).
        ready_for_local_init_op: what must be initialized before a worker runs local_init_op
            (default: the names of uninitialized global variables).
        local_init_op: run after init or restore (default: local variables' initializers).
        summary_op: accepted for TensorFlow compatibility (not used).
        saver: the Saver to restore with (default: the one in the "savers" collection, or a new
            Saver of all global variables, added to that collection).
        copy_from_scaffold: take the unset fields from this Scaffold.
    """

    def __init__(
        self,
        init_op=None,
        init_feed_dict=None,
        init_fn=None,
        ready_op=None,
        ready_for_local_init_op=None,
        local_init_op=None,
        summary_op=None,
        saver=None,
        copy_from_scaffold=None,
    ):
        if copy_from_scaffold is not None:
            if not isinstance(copy_from_scaffold, Scaffold):
                raise TypeError("copy_from_scaffold is not a Scaffold instance.")
            c = copy_from_scaffold
            init_op = init_op if init_op is not None else c.init_op
            init_feed_dict = init_feed_dict if init_feed_dict is not None else c.init_feed_dict
            init_fn = init_fn or c._user_init_fn
            ready_op = ready_op if ready_op is not None else c.ready_op
            local_init_op = local_init_op if local_init_op is not None else c.local_init_op
            saver = saver if saver is not None else c.saver
        self._init_op = init_op
        self._init_feed_dict = init_feed_dict
        self._user_init_fn = init_fn
        self._init_fn = (lambda sess: init_fn(self, sess)) if init_fn else None
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._local_init_op = local_init_op
        self._summary_op = summary_op
        self._saver = saver

    @staticmethod
    def get_or_default(arg_name: str, collection_key: str, default_constructor):
        """The single op in `collection_key`, or a new one from `default_constructor` (added to
        the collection)."""
        g = get_default_graph()
        found = g.get_collection(collection_key)
        if len(found) > 1:
            raise RuntimeError(f"More than one item in the collection {collection_key!r}.")
        if found:
            return found[0]
        op = default_constructor()
        if op is not None:
            g.add_to_collection(collection_key, op)
        return op

    def finalize(self) -> Scaffold:
        """Builds the missing ops and finalizes the default graph."""
        g = get_default_graph()
        if self._init_op is None:
            self._init_op = Scaffold.get_or_default(
                "init_op", INIT_OP, lambda: group(global_variables_initializer(), name="init")
            )
        if self._ready_op is None:
            self._ready_op = Scaffold.get_or_default(
                "ready_op",
                READY_OP,
                lambda: _report_uninitialized_variables(
                    g.get_collection(GLOBAL_VARIABLES) + g.get_collection(LOCAL_VARIABLES)
                ),
            )
        if self._ready_for_local_init_op is None:
            self._ready_for_local_init_op = Scaffold.get_or_default(
                "ready_for_local_init_op",
                READY_FOR_LOCAL_INIT_OP,
                lambda: _report_uninitialized_variables(g.get_collection(GLOBAL_VARIABLES)),
            )
        if self._local_init_op is None:
            self._local_init_op = Scaffold.get_or_default(
                "local_init_op",
                LOCAL_INIT_OP,
                lambda: group(local_variables_initializer(), name="local_init"),
            )
        if self._saver is None:
            savers = g.get_collection(SAVERS)
            if len(savers) > 1:
                raise RuntimeError("More than one item in the collection 'savers'.")
            if savers:
                self._saver = savers[0]
            else:
                self._saver = Saver(sharded=True, allow_empty=True)
                g.add_to_collection(SAVERS, self._saver)
        g.finalize()
        return self

    @property
    def init_op(self):
        return self._init_op

    @property
    def init_feed_dict(self):
        return self._init_feed_dict

    @property
    def init_fn(self):
        return self._init_fn

    @property
    def ready_op(self):
        return self._ready_op

    @property
    def ready_for_local_init_op(self):
        return self._ready_for_local_init_op

    @property
    def local_init_op(self):
        return self._local_init_op

    @property
    def summary_op(self):
        return self._summary_op

    @property
    def saver(self):
        return self._saver


def _not_ready(sess, scaffold: Scaffold, op=None) -> list[str]:
    op = scaffold.ready_op if op is None else op
    if op is None:
        return []
    names = np.asarray(sess.run(op)).reshape(-1)
    return [n.decode() if isinstance(n, bytes) else str(n) for n in names]


class _Readiness:
    """How a distributed chief tells the other replicas that the model is ready, so that they
    start at once instead of polling every 30 seconds as TensorFlow's workers do.

    A queue on the global step's task (shared by name, so every replica's graph reaches the same
    one) holds a token once the chief has initialized or restored the model. A waiting replica
    takes the token and puts it back in one step (`await_op`), so one token wakes every replica.
    A restarted PS starts with an empty queue, and the chief announces again after restoring.
    """

    WAIT_SLICE_MS = 2000

    def __init__(self, graph):
        from rill.graph.ops.data_flow_ops import FIFOQueue
        from rill.train.training_util import get_global_step

        self.announce_op = self.await_op = None
        step = get_global_step(graph)
        if step is None:
            return
        with graph.as_default(), graph.name_scope(None), graph.colocate_with(step):
            with graph.name_scope("model_ready"):
                q = FIFOQueue(-1, dtypes.int32, shapes=[[]], shared_name=_READY_QUEUE,
                              name="queue")  # fmt: skip
                self.announce_op = q.enqueue(0, name="announce")
                token = q.dequeue(timeout_ms=self.WAIT_SLICE_MS, name="take")
                self.await_op = q.enqueue(token, name="await")

    @staticmethod
    def of(creator) -> _Readiness | None:
        """The readiness ops of `creator`'s distributed sessions (None for a local session),
        built on its first session, while the graph is still open, and kept for the sessions it
        creates again after a failure (the chief announces again after restoring)."""
        if not creator._master:
            return None
        if getattr(creator, "_readiness", None) is None and not get_default_graph().finalized:
            creator._readiness = _Readiness(get_default_graph())
        return getattr(creator, "_readiness", None)


class SessionCreator:
    """Creates a prepared Session."""

    def create_session(self):
        raise NotImplementedError


class ChiefSessionCreator(SessionCreator):
    """Creates a Session and initializes the model, or restores it from `checkpoint_dir`'s latest
    checkpoint (or from `checkpoint_filename_with_path`)."""

    def __init__(
        self,
        scaffold: Scaffold | None = None,
        master: str = "",
        config=None,
        checkpoint_dir=None,
        checkpoint_filename_with_path=None,
    ):
        self._scaffold = scaffold or Scaffold()
        self._master = master
        self._config = config
        self._checkpoint_dir = checkpoint_dir
        self._checkpoint_filename_with_path = checkpoint_filename_with_path

    def create_session(self):
        readiness = _Readiness.of(self)
        self._scaffold.finalize()
        s = self._scaffold
        sess = _new_session(self._master, get_default_graph(), self._config)
        try:
            restored = self._restore(sess)
            if not restored:
                if s.init_op is None and not s.init_fn and s.local_init_op is None:
                    raise RuntimeError(
                        "Model is not initialized and no init_op or init_fn or local_init_op "
                        "was given"
                    )
                if s.init_op is not None:
                    sess.run(s.init_op, feed_dict=s.init_feed_dict)
                if s.init_fn:
                    s.init_fn(sess)
            if s.local_init_op is not None:
                sess.run(s.local_init_op)
            missing = _not_ready(sess, s)
            if missing:
                raise RuntimeError(
                    "Init operations did not make model ready: uninitialized variables "
                    f"{missing} (init_op: {getattr(s.init_op, 'name', s.init_op)}, init_fn: "
                    f"{s.init_fn}, local_init_op: {getattr(s.local_init_op, 'name', None)})"
                )
            if readiness is not None and readiness.announce_op is not None:
                sess.run(readiness.announce_op)
        except BaseException:
            sess.close()
            raise
        return sess

    def _restore(self, sess) -> bool:
        saver = self._scaffold.saver
        if self._checkpoint_filename_with_path:
            saver.restore(sess, self._checkpoint_filename_with_path)
            return True
        if not self._checkpoint_dir:
            return False
        path = cm.latest_checkpoint(self._checkpoint_dir)
        if path is None:
            return False
        _log.info("Restoring parameters from %s", path)
        saver.restore(sess, path)
        # Go on keeping (and deleting) the checkpoints this directory already has.
        saver.recover_checkpoint_state(self._checkpoint_dir)
        return True


class WorkerSessionCreator(SessionCreator):
    """Creates a Session for a non-chief worker: waits until the chief has made the model ready
    (what `ready_for_local_init_op` reports), runs `local_init_op`, and checks `ready_op`, up to
    `max_wait_secs` (then DeadlineExceededError).

    On a distributed master the worker wakes as soon as the chief announces the model ready;
    otherwise (or when an announcement is missed) it checks again after `recovery_wait_secs`
    at most, starting at 50 ms and doubling.
    """

    def __init__(
        self,
        scaffold: Scaffold | None = None,
        master: str = "",
        config=None,
        max_wait_secs: float = 30 * 60,
        recovery_wait_secs: float = 30,
    ):
        self._scaffold = scaffold or Scaffold()
        self._master = master
        self._config = config
        self._max_wait_secs = max_wait_secs
        self._recovery_wait_secs = recovery_wait_secs

    def create_session(self):
        readiness = _Readiness.of(self)
        self._scaffold.finalize()
        s = self._scaffold
        deadline = time.monotonic() + self._max_wait_secs
        pause, woke = 0.05, False
        sess = _new_session(self._master, get_default_graph(), self._config)
        try:
            while True:
                missing = _not_ready(sess, s, s.ready_for_local_init_op)
                if not missing:
                    if s.local_init_op is not None:
                        sess.run(s.local_init_op)
                    missing = _not_ready(sess, s)
                    if not missing:
                        return sess
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DeadlineExceededError(
                        f"Session was not ready after waiting {self._max_wait_secs} secs; "
                        f"uninitialized: {missing}"
                    )
                _log.info("Waiting for model to be ready: uninitialized %s", missing)
                if readiness is not None and readiness.await_op is not None and not woke:
                    try:
                        sess.run(readiness.await_op)  # returns once the chief has announced
                        woke = True
                        continue
                    except DeadlineExceededError:
                        pass
                woke = False  # announced but still not ready (a PS came back): back off
                time.sleep(min(pause, self._recovery_wait_secs, max(left, 0.0)))
                pause *= 2
        except BaseException:
            sess.close()
            raise


def _merge_run_options(options, incoming):
    if options is None:
        return incoming
    if incoming is None:
        return options
    merged = type(options)()
    merged.CopyFrom(options)
    for field in ("trace_level", "timeout_in_ms", "output_partition_graphs"):
        if hasattr(merged, field):
            setattr(merged, field, max(getattr(options, field), getattr(incoming, field)))
    return merged


class StepContext:
    """What `run_step_fn`'s step_fn gets: the raw session, a run through the hooks, and a stop
    request."""

    def __init__(self, session, run_with_hooks_fn):
        self._session = session
        self._run_with_hooks_fn = run_with_hooks_fn

    @property
    def session(self):
        return self._session

    def run_with_hooks(self, *args, **kwargs):
        return self._run_with_hooks_fn(*args, **kwargs)

    def request_stop(self):
        raise StopIteration("step_fn has requested the iterations to stop.")


class _MonitoredSession:
    def __init__(self, session_creator, hooks, should_recover: bool, stop_grace_period_secs=120):
        self._graph = get_default_graph()
        self._graph_was_finalized = self._graph.finalized
        self._hooks = list(hooks or [])
        self._should_recover = should_recover
        self._session_creator = session_creator or ChiefSessionCreator()
        self._tf_sess = None
        self._coord = None
        self._stop_grace_period_secs = stop_grace_period_secs
        self._should_stop = False
        self._closed = False
        try:
            with self._graph.as_default():
                for h in self._hooks:
                    h.begin()
                self._create_session()
        except BaseException:
            self._close_tf_sess()
            if not self._graph_was_finalized:
                self._graph._finalized = False
            raise

    def _create_session(self) -> None:
        # Session creators and hooks look up the default graph; a re-creation from run() may
        # happen outside the caller's `with graph.as_default()`.
        with self._graph.as_default():
            self._tf_sess = self._session_creator.create_session()
            self._graph.finalize()
            # As TensorFlow's coordinated session: the graph's queue runners start here, under
            # a Coordinator that close() stops and joins.
            self._coord = Coordinator()
            start_queue_runners(self._tf_sess, self._coord)
            for h in self._hooks:
                h.after_create_session(self._tf_sess, self._coord)

    @property
    def graph(self):
        return self._graph

    def should_stop(self) -> bool:
        coord_stop = self._coord is not None and self._coord.should_stop()
        return self._closed or self._should_stop or coord_stop

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Runs `fetches` with the hooks; returns the caller's results.

        Raises:
            RuntimeError: run after should_stop() became true, or after close.
        """
        if self._closed:
            raise RuntimeError("Run called on a closed MonitoredSession.")
        while True:
            try:
                if self._tf_sess is None:
                    self._create_session()
                return self._hooked_run(fetches, feed_dict, options, run_metadata)
            except _PREEMPTION_ERRORS as e:
                if not self._should_recover:
                    raise
                _log.info(
                    "An error was raised; the session will be recreated. %s: %s",
                    type(e).__name__,
                    e,
                )
                self._close_tf_sess()

    def _hooked_run(self, fetches, feed_dict, options, run_metadata):
        if self._should_stop:
            raise RuntimeError("Run called even after should_stop requested.")
        sess = self._tf_sess
        context = SessionRunContext(SessionRunArgs(fetches, feed_dict), sess)
        hook_fetches = {}
        feeds = dict(feed_dict or {})
        user_feeds = set(map(id, feeds))
        hook_feeds: dict = {}
        for i, h in enumerate(self._hooks):
            request = h.before_run(context)
            if request is None:
                continue
            if request.fetches is not None:
                hook_fetches[i] = request.fetches
            for k, v in (request.feed_dict or {}).items():
                if id(k) in user_feeds:
                    raise RuntimeError(f"Same tensor is fed by a SessionRunHook and user: {k}")
                if id(k) in hook_feeds:
                    raise RuntimeError(f"Same tensor is fed by two hooks: {k}")
                hook_feeds[id(k)] = k
                feeds[k] = v
            if request.options is not None:
                options = _merge_run_options(options, request.options)
        caller_results, hook_results = sess.run(
            [fetches, hook_fetches], feed_dict=feeds or None, options=options,
            run_metadata=run_metadata,
        )  # fmt: skip
        for i, h in enumerate(self._hooks):
            h.after_run(context, SessionRunValues(hook_results.get(i), options, run_metadata))
        self._should_stop = self._should_stop or context.stop_requested
        return caller_results

    def run_step_fn(self, step_fn):
        """Runs step_fn(StepContext): it may call `run_with_hooks` and `request_stop()`."""
        try:
            return step_fn(StepContext(self._tf_sess, self.run))
        except StopIteration:
            self._should_stop = True
            return None

    def _close_tf_sess(self) -> None:
        sess, self._tf_sess = self._tf_sess, None
        coord, self._coord = self._coord, None
        if coord is not None:
            coord.request_stop()
            try:
                coord.join(stop_grace_period_secs=self._stop_grace_period_secs,
                           ignore_live_threads=True)  # fmt: skip
            except Exception:
                _log.warning("A queue runner thread reported an error.", exc_info=True)
        if sess is not None:
            try:
                sess.close()
            except Exception:
                _log.warning("An error was raised while closing the session.", exc_info=True)

    def _close_internal(self, exception_type=None) -> None:
        if self._closed:
            return
        try:
            if exception_type is None and self._tf_sess is not None:
                for h in self._hooks:
                    h.end(self._tf_sess)
        finally:
            self._closed = True
            self._close_tf_sess()
            if not self._graph_was_finalized:
                # As TensorFlow's _unsafe_unfinalize: the caller may go on building.
                self._graph._finalized = False

    def close(self) -> None:
        self._close_internal()

    def __enter__(self):
        return self

    def __exit__(self, exception_type, exception_value, traceback):
        if exception_type is not None and issubclass(
            exception_type, (OutOfRangeError, StopIteration)
        ):
            exception_type = None
        self._close_internal(exception_type)
        return exception_type is None


class MonitoredSession(_MonitoredSession):
    """A session that prepares the model (via `session_creator`, default a
    ChiefSessionCreator), runs `hooks` around each run and recovers from AbortedError and
    UnavailableError by re-creating the session."""

    def __init__(self, session_creator=None, hooks=None, stop_grace_period_secs=120):
        super().__init__(session_creator, hooks, True, stop_grace_period_secs)


class SingularMonitoredSession(_MonitoredSession):
    """A MonitoredSession that does not recover from errors and exposes `raw_session()`."""

    def __init__(
        self,
        hooks=None,
        scaffold=None,
        master: str = "",
        config=None,
        checkpoint_dir=None,
        stop_grace_period_secs=120,
        checkpoint_filename_with_path=None,
    ):
        creator = ChiefSessionCreator(
            scaffold=scaffold,
            master=master,
            config=config,
            checkpoint_dir=checkpoint_dir,
            checkpoint_filename_with_path=checkpoint_filename_with_path,
        )
        super().__init__(creator, hooks, False, stop_grace_period_secs)

    def raw_session(self):
        return self._tf_sess


def MonitoredTrainingSession(
    master: str = "",
    is_chief: bool = True,
    checkpoint_dir=None,
    scaffold: Scaffold | None = None,
    hooks=None,
    chief_only_hooks=None,
    save_checkpoint_secs=USE_DEFAULT,
    save_summaries_steps=USE_DEFAULT,
    save_summaries_secs=USE_DEFAULT,
    config=None,
    stop_grace_period_secs=120,
    log_step_count_steps: int | None = 100,
    max_wait_secs: float = 7200,
    save_checkpoint_steps=USE_DEFAULT,
    summary_dir=None,
    finish_job: bool = True,
    finish_job_grace_secs: float = 5.0,
) -> MonitoredSession:
    """A MonitoredSession set up for training, as TensorFlow-1's function of that name.

    The chief (is_chief=True) initializes the model or restores the latest checkpoint in
    `checkpoint_dir`, and, with a checkpoint_dir, also runs a CheckpointSaverHook (every
    `save_checkpoint_secs` seconds, default 600, or every `save_checkpoint_steps` steps when
    those are given instead) and a StepCounterHook (every `log_step_count_steps` steps), then
    `chief_only_hooks`, then `hooks`. A worker waits for the chief (up to `max_wait_secs`) and
    runs only `hooks`.

    With a summary_dir (or checkpoint_dir), a SummarySaverHook writes the graph's summaries
    (scaffold.summary_op, else merge_all()) every `save_summaries_steps` steps (default 100) or
    `save_summaries_secs` seconds.

    rill's own: on a distributed master (`master="grpc://..."`), when the chief's training ends
    without an error (the session is closed after StopAtStepHook, the end of the data, ...), the
    chief tells every task of the cluster that the job is finished (`finish_job`): each stops
    serving after `finish_job_grace_secs`, so PS tasks exit 0 instead of waiting forever.
    Replicas still training see the end through their own StopAtStepHook or the closed
    SyncReplicasOptimizer barrier within that grace.
    """
    if save_checkpoint_steps is USE_DEFAULT and save_checkpoint_secs is USE_DEFAULT:
        save_checkpoint_steps, save_checkpoint_secs = None, 600
    elif save_checkpoint_secs is USE_DEFAULT:
        save_checkpoint_secs = None
    elif save_checkpoint_steps is USE_DEFAULT:
        save_checkpoint_steps = None
    scaffold = scaffold or Scaffold()
    if not is_chief:
        creator = WorkerSessionCreator(
            scaffold=scaffold, master=master, config=config, max_wait_secs=max_wait_secs
        )
        return MonitoredSession(creator, list(hooks or []), stop_grace_period_secs)
    all_hooks = list(chief_only_hooks or [])
    creator = ChiefSessionCreator(
        scaffold=scaffold, checkpoint_dir=checkpoint_dir, master=master, config=config
    )
    if (summary_dir or checkpoint_dir) and log_step_count_steps and log_step_count_steps > 0:
        all_hooks.append(StepCounterHook(every_n_steps=log_step_count_steps))
    if save_summaries_steps is USE_DEFAULT and save_summaries_secs is USE_DEFAULT:
        save_summaries_steps, save_summaries_secs = 100, None
    elif save_summaries_secs is USE_DEFAULT:
        save_summaries_secs = None
    elif save_summaries_steps is USE_DEFAULT:
        save_summaries_steps = None
    if (summary_dir or checkpoint_dir) and (
        (save_summaries_steps and save_summaries_steps > 0)
        or (save_summaries_secs and save_summaries_secs > 0)
    ):
        from rill.train.summary_hooks import SummarySaverHook  # summary imports tensorboardX

        all_hooks.append(
            SummarySaverHook(
                save_steps=save_summaries_steps or None,
                save_secs=None if save_summaries_steps else save_summaries_secs,
                output_dir=summary_dir or checkpoint_dir,
                scaffold=scaffold,
            )
        )
    if checkpoint_dir and (
        (save_checkpoint_secs and save_checkpoint_secs > 0)
        or (save_checkpoint_steps and save_checkpoint_steps > 0)
    ):
        if any(isinstance(h, CheckpointSaverHook) for h in [*all_hooks, *(hooks or [])]):
            _log.warning(
                "MonitoredTrainingSession adds a CheckpointSaverHook for checkpoint_dir and "
                "another one was given: both will write checkpoints and the state file. Pass "
                "save_checkpoint_secs=None (and scaffold=Scaffold(saver=...)) to use only yours."
            )
        all_hooks.append(
            CheckpointSaverHook(
                checkpoint_dir,
                save_steps=save_checkpoint_steps,
                save_secs=save_checkpoint_secs,
                scaffold=scaffold,
            )
        )
    all_hooks.extend(hooks or [])
    if finish_job and master:
        all_hooks.append(_JobCompletionHook(finish_job_grace_secs))  # after every other end()
    return MonitoredSession(creator, all_hooks, stop_grace_period_secs)


class _JobCompletionHook(SessionRunHook):
    """The chief's last hook: when training ends cleanly, tells the cluster the job is done."""

    def __init__(self, grace_secs: float):
        self._grace_secs = float(grace_secs)
        self._op = None

    def begin(self) -> None:
        g = get_default_graph()
        with g.name_scope(None), g.device(None), g.colocate_with(None):
            self._op = g.create_op(
                "_JobDone",
                [],
                {"reason": "the chief's training ended", "grace_secs": self._grace_secs},
                name="job_done",
            )

    def end(self, session) -> None:
        try:
            session.run(self._op)
        except OpError as e:
            _log.warning("could not tell the cluster that the job is finished: %s", e)
