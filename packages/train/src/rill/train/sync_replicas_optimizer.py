"""SyncReplicasOptimizer: synchronous data-parallel training with backup workers (paper §4.4).

Each replica computes gradients from the current parameters and applies them to one accumulator
per variable (on the variable's PS); the chief takes the average as soon as
`replicas_to_aggregate` gradients have arrived, applies it with the wrapped optimizer, advances
the global step and hands out tokens; a replica waits for a token before its next step. With
`replicas_to_aggregate < total_num_replicas` the slowest replicas are backups: their gradients
arrive late, are stale (computed at an older global step) and are dropped.

TensorFlow's algorithm and names, with what its users lacked:

- the barrier has a deadline (`barrier_timeout_secs`, 300 s by default): a replica waiting for a
  token, or the chief waiting for gradients, fails with DeadlineExceededError naming what it waited
  for, instead of hanging (a dead replica with no backup, a chief that is gone, or training run
  without the chief's hook);
- when the chief's training ends (StopAtStepHook, end of data, an error), its hook closes the
  token queue and the accumulators: replicas waiting for a token get OutOfRangeError, which a
  MonitoredSession treats as the end of training, so every replica finishes;
- every global step reports which replicas contributed and how many stale gradients were dropped,
  as a log line on the chief and in `stats` (replicas are numbered by `replica_id`, or by the
  task index of the worker the gradients are computed on);
- with the replica's number known, each replica has a token queue of its own and gives at most one
  gradient per global step (the paper's m of n): in TensorFlow's shared queue a fast replica takes
  a straggler's token and stands in for it, and a backup's spare tokens pile up and make the fast
  replicas' gradients stale. A replica's local step lives beside its queue on the global step's
  task, so its step's work on the PS (apply, take the token, set the local step) is one RunGraph;
- the chief's update is one partition on the global step's task, with two updates in flight, so
  the chief's round trip to its client is never between a step's last gradient and its tokens.

>>> import rill.graph as rg
>>> from rill.train import GradientDescentOptimizer
>>> from rill.train.training_util import get_or_create_global_step
>>> with rg.Graph().as_default():
...     w = rg.Variable([1.0], name="w")
...     opt = SyncReplicasOptimizer(GradientDescentOptimizer(0.1), replicas_to_aggregate=2,
...                                 total_num_replicas=3, replica_id=0)
...     train = opt.minimize(rg.reduce_sum(w * w), global_step=get_or_create_global_step())
...     hook = opt.make_session_run_hook(is_chief=True)
...     train.type
'AssignVariableOp'
"""

from __future__ import annotations

import logging
import threading

import numpy as np

from rill.autodiff import IndexedSlices
from rill.exec.proto import config_pb2
from rill.graph import dtypes
from rill.graph.errors import (
    AbortedError,
    CancelledError,
    DeadlineExceededError,
    OpError,
    OutOfRangeError,
    UnavailableError,
)
from rill.graph.graph import convert_to_tensor
from rill.graph.ops.accumulator_ops import ConditionalAccumulator, SparseConditionalAccumulator
from rill.graph.ops.array_ops import fill, group, identity, no_op
from rill.graph.ops.data_flow_ops import FIFOQueue
from rill.graph.ops.reduction_ops import reduce_max
from rill.graph.ops.reshape_ops import concat, reshape
from rill.graph.ops.state_ops import GLOBAL_VARIABLES, LOCAL_VARIABLES, Variable
from rill.train.hooks import SessionRunHook
from rill.train.optimizer import Optimizer
from rill.train.sync_replicas_support import (
    _UPDATES_IN_FLIGHT,
    SyncStats,
    _InOrder,
    _packed,
    _replica_from_devices,
)

__all__ = ["SyncReplicasOptimizer"]

_log = logging.getLogger("rill.train.sync_replicas")


class SyncReplicasOptimizer(Optimizer):
    """Wraps `opt` so that replicas aggregate their gradients before each update.

    Args:
        opt: the optimizer that applies the aggregated gradients.
        replicas_to_aggregate: gradients averaged per update.
        total_num_replicas: replicas training (default: replicas_to_aggregate); those beyond
            replicas_to_aggregate are backups.
        variable_averages: an ExponentialMovingAverage updated by the chief after each update.
        variables_to_average: the variables it averages.
        use_locking: passed to the apply ops.
        name: the name scope of the ops.
        replica_id: rill's own: this replica's number in [0, total_num_replicas), for its own
            token queue and the per-step report of contributors (default: the task index of the
            worker device the gradients are computed on; unknown: TensorFlow's shared token
            queue, and contributors left out of the report).
        barrier_timeout_secs: rill's own: how long a replica waits for a token and the chief for
            gradients before DeadlineExceededError (None: wait without a deadline).

    Raises:
        ValueError: replicas_to_aggregate < 1, or more than total_num_replicas.
    """

    def __init__(
        self,
        opt: Optimizer,
        replicas_to_aggregate: int,
        total_num_replicas: int | None = None,
        variable_averages=None,
        variables_to_average=None,
        use_locking: bool = False,
        name: str = "sync_replicas",
        replica_id: int | None = None,
        barrier_timeout_secs: float | None = 300.0,
    ):
        if total_num_replicas is None:
            total_num_replicas = replicas_to_aggregate
        if int(replicas_to_aggregate) < 1:
            raise ValueError(f"replicas_to_aggregate must be >= 1, got {replicas_to_aggregate}")
        if int(replicas_to_aggregate) > int(total_num_replicas):
            raise ValueError(
                f"replicas_to_aggregate ({replicas_to_aggregate}) > total_num_replicas "
                f"({total_num_replicas}): an update would wait for more gradients than there are "
                "replicas. Use replicas_to_aggregate <= total_num_replicas (fewer means backup "
                "workers)."
            )
        if replica_id is not None and not 0 <= int(replica_id) < int(total_num_replicas):
            raise ValueError(
                f"replica_id {replica_id} is outside [0, total_num_replicas={total_num_replicas})"
            )
        super().__init__(use_locking, name)
        self._opt = opt
        self._replicas_to_aggregate = int(replicas_to_aggregate)
        self._total_num_replicas = int(total_num_replicas)
        self._tokens_per_step = max(self._total_num_replicas, self._replicas_to_aggregate)
        self._variable_averages = variable_averages
        self._variables_to_average = variables_to_average
        self._replica_id = None if replica_id is None else int(replica_id)
        self._barrier_timeout_secs = barrier_timeout_secs
        self._gradients_applied = False
        self._global_step = None
        self._accumulators: list = []
        self._sync_token_queue = None  # the queue this replica takes its tokens from
        self._token_queues: list = []  # every queue the chief hands tokens out to
        self._per_replica_tokens = False
        self._chief_init_op = None
        self._local_step_init_op = None
        self._ready_for_local_init_op = None
        self._sync_fetches = None
        self.stats = SyncStats()

    # -- the Optimizer API -----------------------------------------------------------------------

    def compute_gradients(self, *args, **kwargs):
        """The wrapped optimizer's compute_gradients."""
        return self._opt.compute_gradients(*args, **kwargs)

    def get_slot(self, *args, **kwargs):
        return self._opt.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._opt.get_slot_names(*args, **kwargs)

    def variables(self):
        return self._opt.variables()

    def apply_gradients(self, grads_and_vars, global_step=None, name: str | None = None):
        """Builds the replica's train op (apply to the accumulators, then wait for a token) and
        the chief's update (take the aggregates, apply them, hand out tokens).

        Raises:
            ValueError: no global_step, no gradients, or apply_gradients called twice.
        """
        if global_step is None:
            raise ValueError("SyncReplicasOptimizer needs a global_step to check staleness")
        if not isinstance(global_step, Variable):
            raise TypeError(f"global_step must be a Variable, got {global_step!r}")
        if self._gradients_applied:
            raise ValueError("SyncReplicasOptimizer.apply_gradients was already called")
        grads_and_vars = [(g, v) for g, v in grads_and_vars]
        if not any(g is not None for g, _ in grads_and_vars):
            raise ValueError("No gradients provided for any variable")
        self._global_step = global_step
        graph = global_step.graph
        timeout_ms = (
            None if self._barrier_timeout_secs is None else int(self._barrier_timeout_secs * 1000)
        )
        replica_id = self._replica_id
        if replica_id is None:
            replica_id = _replica_from_devices(
                [g for g, _ in grads_and_vars if g is not None], self._total_num_replicas
            )
        with graph.as_default(), graph.name_scope(name or self._name):
            # The local step is this replica's own. With a known replica number it lives beside
            # the replica's token queue on the global step's task, under a name of its own, so
            # that the token taken there sets it without a transfer to the worker and back
            # (one RunGraph on the PS applies the gradients, takes the token and sets the step).
            # Otherwise it is colocated with an op on the replica's device so that a device
            # function does not put it on a PS, where every replica's graph would share it
            # (TensorFlow anchors it the same way).
            if replica_id is None:
                anchor, local_name = no_op(name="local_step_anchor"), "sync_rep_local_step"
            else:
                anchor, local_name = global_step, f"sync_rep_local_step_{replica_id}"
            with graph.name_scope(None), graph.colocate_with(anchor):
                self._local_step = Variable(
                    np.zeros((), global_step.dtype.np),
                    trainable=False,
                    collections=[LOCAL_VARIABLES],
                    name=local_name,
                )
            self._local_step_init_op = self._local_step.assign(
                global_step.read_value(), read_value=False
            )
            local_step = self._local_step.read_value()
            # rill's own record of who contributed: each replica adds its one-hot row to an
            # accumulator that drops stale rows exactly as the gradients' accumulators do. A
            # replica adds its row after all its gradients, and the chief takes the rows before
            # the gradients, so every replica step counted is in the update (a gradient that
            # lands during the takes is averaged in and counted with the next step). The last
            # column counts replicas whose number is unknown.
            with graph.colocate_with(global_step):
                contrib = ConditionalAccumulator(
                    dtypes.int64,
                    shape=[self._total_num_replicas + 1],
                    shared_name="sync_replicas/contributors",
                    reduction_type="SUM",
                    resource=True,
                )
                contributors = contrib.take_grad(self._replicas_to_aggregate)
                with graph.control_dependencies([contributors]):
                    dropped = contrib.num_dropped()  # read after this update's take
                self._per_replica_tokens = replica_id is not None
                if replica_id is None:
                    # TensorFlow's one queue: any replica may take any token.
                    names = ["sync_token_q"]
                else:
                    # One queue per replica: each takes only the tokens handed to it.
                    names = [f"sync_token_q_{r}" for r in range(self._total_num_replicas)]
                self._token_queues = [
                    FIFOQueue(-1, global_step.dtype, shapes=[[]], name=n, shared_name=n)
                    for n in names
                ]
                self._sync_token_queue = self._token_queues[0 if replica_id is None else replica_id]
            applies, aggregated = [], []
            for grad, var in _packed(graph, grads_and_vars):
                if grad is None:
                    aggregated.append(None)
                    continue
                with graph.colocate_with(var):
                    shared = f"{var.op.name}/grad_accum"
                    if isinstance(grad, IndexedSlices):
                        acc = SparseConditionalAccumulator(
                            grad.dtype, shape=var.shape, shared_name=shared
                        )
                        applies.append(acc.apply_indexed_slices_grad(grad, local_step=local_step))
                        with graph.control_dependencies([contributors]):
                            indices, values, shape = acc.take_grad(self._replicas_to_aggregate)
                        aggregated.append(IndexedSlices(values, indices, shape))
                    else:
                        acc = ConditionalAccumulator(
                            grad.dtype, shape=var.shape, shared_name=shared, resource=True
                        )
                        applies.append(acc.apply_grad(grad, local_step=local_step))
                        with graph.control_dependencies([contributors]):
                            aggregated.append(acc.take_grad(self._replicas_to_aggregate))
                self._accumulators.append(acc)
            self._accumulators.append(contrib)
            with graph.colocate_with(global_step), graph.control_dependencies(applies):
                row = np.zeros(self._total_num_replicas + 1, np.int64)
                row[self._total_num_replicas if replica_id is None else replica_id] = 1
                row = convert_to_tensor(row, dtypes.int64, name="contribution")
                contributed = contrib.apply_grad(row, local_step=local_step)
            with graph.control_dependencies([contributed]), graph.colocate_with(global_step):
                token = self._sync_token_queue.dequeue(timeout_ms=timeout_ms)
                if replica_id is not None:
                    # A replica slower than the updates finds several tokens in its queue: it
                    # takes them all and carries on from the newest (the oldest would only make
                    # its next gradient stale, and the queue would grow without end).
                    with graph.control_dependencies([token]):
                        backlog = self._sync_token_queue.size()
                    later = self._sync_token_queue.dequeue_many(backlog)
                    token = reduce_max(concat([reshape(token, [1]), later], 0))
            train_op = self._local_step.assign(token, read_value=False)

            # The whole update runs on the PS: the ops the wrapped optimizer puts under the
            # replica's device scope (its grouping NoOp, its hyperparameters) go to the global
            # step's task instead, so that the chief's step is one partition, with no round trip
            # through a worker between the takes and the tokens.
            with (
                graph.control_dependencies([contributors]),
                graph.device(None),
                graph.device(global_step.device),
            ):
                update_op = self._opt.apply_gradients(
                    [(g, v) for g, (_, v) in zip(aggregated, grads_and_vars) if g is not None],
                    global_step,
                )
            with graph.control_dependencies([update_op]):
                if self._variable_averages is not None:
                    with graph.colocate_with(global_step):
                        update_op = self._variable_averages.apply(self._variables_to_average)
            with graph.control_dependencies([update_op]), graph.colocate_with(global_step):
                step_now = global_step.read_value()
                if replica_id is None:
                    tokens = fill([self._tokens_per_step], step_now)
                    sync_op = self._sync_token_queue.enqueue_many((tokens,))
                else:
                    sync_op = group(*[q.enqueue(step_now) for q in self._token_queues])
                step_fetch = identity(step_now)
            self._sync_fetches = {
                "sync": sync_op,
                "global_step": step_fetch,
                "contributors": contributors,
                "dropped": dropped,
            }
            with graph.colocate_with(global_step):
                self._read_global_step = global_step.read_value()
            self._chief_init_op = group(
                *[a.set_global_step(global_step.read_value()) for a in self._accumulators],
                self._local_step_init_op,
            )
            from rill.train.monitored_session import _report_uninitialized_variables

            self._ready_for_local_init_op = _report_uninitialized_variables(
                graph.get_collection(GLOBAL_VARIABLES)
            )
            self._close_op = group(
                *[q.close(cancel_pending_enqueues=True) for q in self._token_queues],
                name="close_sync_token_q",
            )
        self._gradients_applied = True
        return train_op

    # -- what the chief and the replicas run ----------------------------------------------------

    def get_init_tokens_op(self, num_tokens: int = -1):
        """The op the chief runs once to let the replicas start: `num_tokens` tokens carrying the
        global step (default: replicas_to_aggregate in the shared queue, as TensorFlow; with a
        queue per replica, `num_tokens` in each, default none: a replica's first gradient goes in
        without a token).

        Raises:
            ValueError: before apply_gradients, or fewer tokens than replicas_to_aggregate -
                total_num_replicas.
        """
        if not self._gradients_applied:
            raise ValueError("get_init_tokens_op() must be called after apply_gradients()")
        needed = self._replicas_to_aggregate - self._total_num_replicas
        per_replica = self._per_replica_tokens
        if num_tokens == -1:
            # A replica's first gradient goes in without a token; with a queue per replica a
            # first token would let it give a second gradient to the first update.
            num_tokens = 0 if per_replica else self._replicas_to_aggregate
        elif num_tokens < needed:
            raise ValueError(f"too few tokens to start: {num_tokens} < {needed}")
        g = self._global_step.graph
        with g.as_default(), g.colocate_with(self._global_step):
            if num_tokens <= 0:
                return no_op(name="no_init_tokens")
            tokens = fill([num_tokens], self._global_step.read_value())
            return group(
                *[q.enqueue_many((tokens,)) for q in self._token_queues], name="init_tokens"
            )

    @property
    def chief_init_op(self):
        return self._chief_init_op

    @property
    def local_step_init_op(self):
        return self._local_step_init_op

    @property
    def ready_for_local_init_op(self):
        return self._ready_for_local_init_op

    def get_chief_queue_runner(self):
        """TF1's way of running the chief's updates without the hook (a Supervisor program:
        `sv.start_queue_runners(sess, [opt.get_chief_queue_runner()])` after running
        `get_init_tokens_op()` and the chief's local init): a queue-runner-like object whose
        threads run the update loop; when the coordinator stops (or the session ends) the
        barrier is closed, so waiting replicas see OutOfRangeError.

        Raises:
            ValueError: before apply_gradients.
        """
        if not self._gradients_applied:
            raise ValueError("get_chief_queue_runner() must be called after apply_gradients()")
        return _ChiefQueueRunner(self)

    def make_session_run_hook(self, is_chief: bool, num_tokens: int = -1) -> SessionRunHook:
        """The hook that prepares a replica's session (and, on the chief, starts the update loop
        and closes the barrier at the end)."""
        return _SyncReplicasOptimizerHook(self, is_chief, num_tokens)


class _SyncReplicasOptimizerHook(SessionRunHook):
    def __init__(self, opt: SyncReplicasOptimizer, is_chief: bool, num_tokens: int):
        self._opt = opt
        self._is_chief = is_chief
        self._num_tokens = num_tokens
        self._threads: list[threading.Thread] = []
        self._reports: _InOrder | None = None
        self._loops_lock = threading.Lock()
        self._loops_running = 0
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._session = None

    def begin(self) -> None:
        if not self._opt._gradients_applied:
            raise ValueError(
                "SyncReplicasOptimizer.apply_gradients should be called before using the hook"
            )
        if self._is_chief:
            self._local_init_op = self._opt.chief_init_op
            self._init_tokens_op = self._opt.get_init_tokens_op(self._num_tokens)
        else:
            self._local_init_op = self._opt.local_step_init_op
            self._init_tokens_op = None

    def after_create_session(self, session, coord) -> None:
        missing = session.run(self._opt.ready_for_local_init_op)
        if np.size(missing):
            raise RuntimeError(
                "Model is not ready for SyncReplicasOptimizer local init: uninitialized "
                f"{[m.decode() if isinstance(m, bytes) else m for m in np.ravel(missing)]}"
            )
        session.run(self._local_init_op)
        if self._is_chief:
            session.run(self._init_tokens_op)
            self._start_updates(session)

    def _start_updates(self, session) -> list[threading.Thread]:
        """Starts the chief's update loops in `session` (from after_create_session, or from
        get_chief_queue_runner's runner)."""
        self._session = session
        self._stop.clear()
        self._reports = _InOrder(int(session.run(self._opt._read_global_step)))
        # Two updates in flight: while one is applied and hands out tokens, the next is
        # already waiting in its takes on the PS, so the chief's round trip to its client is
        # never between the last gradient of a step and that step's tokens. The takes are
        # served in order and the second update's gradients need the first one's tokens, so
        # the updates still apply one after the other.
        self._threads = [
            threading.Thread(target=self._update_loop, name=f"sync-replicas-chief-{i}", daemon=True)
            for i in range(_UPDATES_IN_FLIGHT)
        ]
        with self._loops_lock:
            self._loops_running += len(self._threads)
        for t in self._threads:
            t.start()
        return self._threads

    def _update_loop(self) -> None:
        try:
            self._updates()
        finally:
            with self._loops_lock:
                self._loops_running -= 1
                last = self._loops_running == 0
            if last and self._reports is not None:
                self._reports.flush(self._report)  # a gap now stays a gap

    def _updates(self) -> None:
        opt = self._opt
        opts = config_pb2.RunOptions()
        if opt._barrier_timeout_secs is not None:
            opts.timeout_in_ms = int(opt._barrier_timeout_secs * 1000)
        while not self._stop.is_set():
            try:
                out = self._session.run(opt._sync_fetches, options=opts)
            except (OutOfRangeError, CancelledError):
                return  # the barrier was closed: training is over
            except (UnavailableError, AbortedError) as e:
                # A task died: the MonitoredSession recreates the session (restoring the model)
                # and this hook's after_create_session starts a new loop.
                _log.info("SyncReplicasOptimizer's update loop ends: %s", e)
                return
            except DeadlineExceededError as e:
                if self._stop.is_set():
                    return
                self._error = DeadlineExceededError(
                    f"SyncReplicasOptimizer: no update for {opt._barrier_timeout_secs} s: fewer "
                    f"than replicas_to_aggregate={opt._replicas_to_aggregate} replicas sent "
                    f"gradients (a replica died with no backup left?): {e}"
                )
                _log.error("%s", self._error)
                return
            except OpError as e:
                if not self._stop.is_set():
                    self._error = e
                    _log.error("SyncReplicasOptimizer's update failed: %s", e)
                return
            self._reports.put(int(out["global_step"]), out, self._report)

    def _report(self, step: int, out: dict) -> None:
        opt = self._opt
        step, who, dropped = opt.stats.record(step, out["contributors"], int(out["dropped"]))
        _log.info(
            "global step %d: replicas %s contributed, %d stale gradient(s) dropped "
            "(%d dropped in all)",
            step,
            who,
            dropped,
            opt.stats.dropped,
        )

    def after_run(self, run_context, run_values) -> None:
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    def end(self, session) -> None:
        self._finish(session)

    def _finish(self, session) -> None:
        if not self._is_chief:
            return
        self._stop.set()
        try:
            # Releases every replica waiting for a token (they see OutOfRangeError: the end).
            session.run(self._opt._close_op)
        except OpError as e:
            _log.warning("closing the sync token queue failed: %s", e)
        # Every update that advanced the global step before the close is reported before end()
        # returns (its thread may not have recorded it yet); bounded, and not waiting for the
        # loops themselves: one blocked in a take ends when the session closes (the accumulators
        # are closed with the session's resources, or the master cancels the step), and they are
        # daemon threads.
        try:
            step = int(session.run(self._opt._read_global_step))
        except OpError:
            step = None
        if step is not None and self._reports is not None:
            threads = self._threads
            self._reports.wait_for(step, lambda: any(t.is_alive() for t in threads))
        self._threads = []
        if self._reports is not None:
            self._reports.flush(self._report)


class _ChiefQueueRunner:
    """What get_chief_queue_runner returns: create_threads(sess, coord, daemon, start) as a
    QueueRunner's, running the chief's update loops plus one thread that, once the coordinator
    asks to stop (or every loop has ended), closes the barrier and reports a failed update to
    the coordinator."""

    def __init__(self, opt: SyncReplicasOptimizer):
        self._opt = opt
        self.name = f"{opt._name}/chief_queue_runner"
        self.exceptions_raised: list = []

    def create_threads(self, sess, coord=None, daemon: bool = False, start: bool = False):
        hook = _SyncReplicasOptimizerHook(self._opt, is_chief=True, num_tokens=0)
        loops: list[threading.Thread] = []
        # On a cluster the loops get a client session of their own, closed when they stop: its
        # close cancels the takes still waiting on the PS (nothing else would end them before
        # the barrier deadline, and a process whose server still runs them does not exit).
        target = getattr(sess, "sess_str", "") or ""
        own = None
        if target.startswith("grpc://"):
            from rill.exec import Session

            own = Session(target, graph=sess.graph, config=getattr(sess, "_config", None))
        loop_sess = own if own is not None else sess

        def run_loops():
            loops.extend(hook._start_updates(loop_sess))

        def watch():
            # Every wait is bounded; ends on the coordinator's stop or when the loops end.
            while True:
                if coord is not None and coord.wait_for_stop(0.25):
                    break
                if coord is None:
                    hook._stop.wait(0.25)
                if loops and not any(t.is_alive() for t in loops):
                    break
            if hook._error is not None:
                self.exceptions_raised.append(hook._error)
                if coord is not None:
                    coord.request_stop(hook._error)
            hook._finish(loop_sess)
            if own is not None:
                own.close()

        starter = threading.Thread(target=run_loops, name=f"{self.name}-start", daemon=daemon)
        watcher = threading.Thread(target=watch, name=f"{self.name}-watch", daemon=daemon)
        if start:
            starter.start()
            starter.join(60)
            watcher.start()
        return [starter, watcher]
