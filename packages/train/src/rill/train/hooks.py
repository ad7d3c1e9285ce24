"""Session run hooks (TF1's session_run_hook and basic_session_run_hooks).

A hook takes part in every `MonitoredSession.run`:

- `begin()` once, before the session is created (the graph may still be changed: build ops here);
- `after_create_session(session, coord)` each time a session is created or restored (the graph
  is final by then);
- `before_run(run_context)` before each run, returning None or `SessionRunArgs(fetches,
  feed_dict, options)`: what it wants run along with the caller's fetches;
- `after_run(run_context, run_values)` after each run, with `run_values.results` the hook's
  fetched values; `run_context.request_stop()` makes `should_stop()` true;
- `end(session)` once when the session is closed without an error.

Hooks are called in the order given, for every step.

>>> import rill.graph as rg
>>> from rill.train.monitored_session import MonitoredTrainingSession
>>> from rill.train.training_util import get_or_create_global_step
>>> with rg.Graph().as_default():
...     step = get_or_create_global_step()
...     train = step.assign_add(1)
...     with MonitoredTrainingSession(hooks=[StopAtStepHook(last_step=3)]) as sess:
...         while not sess.should_stop():
...             n = sess.run(train)
>>> int(n)
3
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from rill.graph.graph import Tensor, get_default_graph
from rill.graph.ops.state_ops import Variable
from rill.train import checkpoint_management as cm
from rill.train import training_util

__all__ = [
    "CheckpointSaverHook",
    "CheckpointSaverListener",
    "FeedFnHook",
    "LoggingTensorHook",
    "NanLossDuringTrainingError",
    "NanTensorHook",
    "SecondOrStepTimer",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunHook",
    "SessionRunValues",
    "StepCounterHook",
    "StopAtStepHook",
]

_log = logging.getLogger("rill.train")


# -- the hook API -------------------------------------------------------------------------------


class SessionRunHook:
    """The base class of hooks: every method does nothing."""

    def begin(self) -> None:
        """Called once before the session is created; the graph can still be changed."""

    def after_create_session(self, session, coord) -> None:
        """Called when a session is created (or re-created after an error), with the
        Coordinator of the session's queue runners."""

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        """Called before each run; returns what to add to it, or None."""
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Called after each successful run with the results of this hook's fetches."""

    def end(self, session) -> None:
        """Called once at the end of a session that ended without an error."""


class SessionRunArgs(NamedTuple):
    """What a hook adds to a run: fetches (any structure Session.run takes), feeds, options."""

    fetches: Any
    feed_dict: dict | None = None
    options: Any = None


class SessionRunValues(NamedTuple):
    """The results of a hook's fetches (same structure), and the run's options and metadata."""

    results: Any
    options: Any
    run_metadata: Any


class SessionRunContext:
    """The run in progress: the caller's fetches and feeds, the session, and a stop request."""

    def __init__(self, original_args: SessionRunArgs, session):
        self._original_args = original_args
        self._session = session
        self._stop_requested = False

    @property
    def original_args(self) -> SessionRunArgs:
        return self._original_args

    @property
    def session(self):
        """The raw Session (runs made with it bypass the hooks)."""
        return self._session

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested

    def request_stop(self) -> None:
        """Makes the monitored session's should_stop() true after this run."""
        self._stop_requested = True


# -- timers -------------------------------------------------------------------------------------


class SecondOrStepTimer:
    """Triggers every `every_secs` seconds or every `every_steps` steps (exactly one given)."""

    def __init__(self, every_secs: float | None = None, every_steps: int | None = None):
        if (every_secs is None) == (every_steps is None):
            raise ValueError("exactly one of every_secs and every_steps should be provided")
        if every_steps is not None and every_steps <= 0:
            raise ValueError(f"every_steps must be positive, got {every_steps}")
        if every_secs is not None and every_secs <= 0:
            raise ValueError(f"every_secs must be positive, got {every_secs}")
        self._every_secs = every_secs
        self._every_steps = every_steps
        self.reset()

    def reset(self) -> None:
        self._last_time: float | None = None
        self._last_step: int | None = None

    def should_trigger_for_step(self, step: int) -> bool:
        """Whether `step` is due (always for the first step, never for the last one again)."""
        if self._last_step is None:
            return True
        if step == self._last_step:
            return False
        if self._every_secs is not None:
            return time.monotonic() >= self._last_time + self._every_secs
        return step >= self._last_step + self._every_steps

    def update_last_triggered_step(self, step: int):
        """Records a trigger at `step`; returns (seconds, steps) since the previous one, or
        (None, None) for the first."""
        now = time.monotonic()
        elapsed = (None, None)
        if self._last_time is not None:
            elapsed = (now - self._last_time, step - self._last_step)
        self._last_time, self._last_step = now, step
        return elapsed

    def last_triggered_step(self) -> int | None:
        return self._last_step


class _NeverTimer(SecondOrStepTimer):
    def __init__(self):
        self.reset()

    def should_trigger_for_step(self, step: int) -> bool:
        return False


def _require_global_step(hook: str):
    step = training_util.get_global_step()
    if step is None:
        raise RuntimeError(f"Global step should be created to use {hook}.")
    return step


def _as_graph_elements(tensors) -> dict[str, Any]:
    """tag -> tensor for a dict of tags -> tensors or names, or a list of tensors or names."""
    g = get_default_graph()

    def element(t):
        if isinstance(t, str):
            return g.as_graph_element(t)
        return t

    if isinstance(tensors, Mapping):
        return {str(k): element(v) for k, v in tensors.items()}
    out = {}
    for t in tensors:
        name = t if isinstance(t, str) else t.name
        out[name] = element(t)
    return out


# -- basic hooks --------------------------------------------------------------------------------


class StopAtStepHook(SessionRunHook):
    """Requests a stop when the global step reaches `last_step`, or after `num_steps` steps
    counted from the global step when the session is created (exactly one of them)."""

    def __init__(self, num_steps: int | None = None, last_step: int | None = None):
        if num_steps is None and last_step is None:
            raise ValueError("One of num_steps or last_step must be specified.")
        if num_steps is not None and last_step is not None:
            raise ValueError("Only one of num_steps or last_step can be specified.")
        if num_steps is not None and num_steps < 0:
            raise ValueError(f"num_steps must be >= 0, got {num_steps}")
        self._num_steps = num_steps
        self._last_step = last_step

    @property
    def last_step(self) -> int | None:
        """The step at which training stops (known once the session exists)."""
        return self._last_step

    def begin(self) -> None:
        self._global_step = _require_global_step("StopAtStepHook")

    def after_create_session(self, session, coord) -> None:
        step = int(session.run(self._global_step))
        if self._last_step is None:
            self._last_step = step + self._num_steps
        self._step = step

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step)

    def after_run(self, run_context, run_values):
        # The value fetched may have been read before or after this run's increment; confirm
        # with a fresh read before stopping.
        if (
            int(run_values.results) + 1 >= self._last_step
            and int(run_context.session.run(self._global_step)) >= self._last_step
        ):
            run_context.request_stop()


class CheckpointSaverListener:
    """Called around the saves of a CheckpointSaverHook; after_save returning True stops
    training."""

    def begin(self) -> None:
        pass

    def before_save(self, session, global_step_value: int) -> None:
        pass

    def after_save(self, session, global_step_value: int) -> bool | None:
        pass

    def end(self, session, global_step_value: int) -> None:
        pass


class CheckpointSaverHook(SessionRunHook):
    """Saves a checkpoint every `save_secs` seconds or `save_steps` steps (exactly one), once
    when the session is created (unless the directory's latest checkpoint is already that
    step's, i.e. the session was restored from it), and once at the end.

    Args:
        checkpoint_dir: the directory (created when missing).
        save_secs, save_steps: how often.
        saver: the Saver (default: the scaffold's, else the one in the "savers" collection).
        checkpoint_basename: checkpoints are `<checkpoint_dir>/<basename>-<global step>`.
        scaffold: a Scaffold whose saver to use (not with `saver`).
        listeners: CheckpointSaverListeners.
        save_graph_def: also write `graph.pb` (the binary GraphDef, which TensorFlow's tools
            and rill's import_graph_def read) in checkpoint_dir; TensorFlow writes a text
            `graph.pbtxt` instead.
        metric: (rill) the metric each checkpoint is saved with for a Saver with keep_best: a
            tensor or tensor name (run at save time), or a function (session, step) -> float.
    """

    def __init__(
        self,
        checkpoint_dir,
        save_secs: float | None = None,
        save_steps: int | None = None,
        saver=None,
        checkpoint_basename: str = "model.ckpt",
        scaffold=None,
        listeners=None,
        save_graph_def: bool = True,
        *,
        metric=None,
    ):
        if saver is not None and scaffold is not None:
            raise ValueError("You cannot provide both saver and scaffold.")
        self._checkpoint_dir = os.fspath(checkpoint_dir)
        self._save_path = os.path.join(self._checkpoint_dir, checkpoint_basename)
        self._saver = saver
        self._scaffold = scaffold
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._listeners = list(listeners or [])
        self._save_graph_def = save_graph_def
        self._metric = metric

    def begin(self) -> None:
        self._global_step = _require_global_step("CheckpointSaver")
        if isinstance(self._metric, str):
            self._metric = get_default_graph().as_graph_element(self._metric)
        os.makedirs(self._checkpoint_dir, exist_ok=True)
        for listener in self._listeners:
            listener.begin()

    def after_create_session(self, session, coord) -> None:
        step = int(session.run(self._global_step))
        if self._save_graph_def:
            _write_graph_def(session.graph, self._checkpoint_dir, "graph.pb")
        # The checkpoint written here is the state at `step`, before any training step. When
        # the session was just restored from this very checkpoint it is not written again:
        # rewriting a prefix in place is the one save that is not atomic.
        if cm.latest_checkpoint(self._checkpoint_dir) != f"{self._save_path}-{step}":
            self._save(session, step)
        self._timer.update_last_triggered_step(step)

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step)

    def after_run(self, run_context, run_values):
        stale = int(run_values.results)
        if self._timer.should_trigger_for_step(stale + 1):
            step = int(run_context.session.run(self._global_step))
            if self._timer.should_trigger_for_step(step):
                self._timer.update_last_triggered_step(step)
                if self._save(run_context.session, step):
                    run_context.request_stop()

    def end(self, session) -> None:
        last_step = int(session.run(self._global_step))
        if last_step != self._timer.last_triggered_step():
            self._save(session, last_step)
        for listener in self._listeners:
            listener.end(session, last_step)

    def _get_saver(self):
        if self._saver is not None:
            return self._saver
        if self._scaffold is not None:
            return self._scaffold.saver
        from rill.train.saver import SAVERS

        savers = get_default_graph().get_collection(SAVERS)
        if not savers:
            raise RuntimeError(
                "No items in collection savers. Please add a saver to the collection, or pass "
                "saver= or scaffold= to CheckpointSaverHook."
            )
        if len(savers) > 1:
            raise RuntimeError(f"More than one item in collection savers: {savers}")
        self._saver = savers[0]
        return self._saver

    def _metric_value(self, session, step: int):
        if self._metric is None:
            return None
        if callable(self._metric) and not isinstance(self._metric, (Tensor, Variable)):
            return self._metric(session, step)
        return session.run(self._metric)

    def _save(self, session, step: int) -> bool:
        _log.info("Saving checkpoints for %d into %s.", step, self._save_path)
        for listener in self._listeners:
            listener.before_save(session, step)
        self._get_saver().save(
            session, self._save_path, global_step=step, metric=self._metric_value(session, step)
        )
        stop = False
        for listener in self._listeners:
            if listener.after_save(session, step):
                _log.info("A CheckpointSaverListener requested that training be stopped.")
                stop = True
        return stop


def _write_graph_def(graph, directory: str, name: str) -> None:
    path = os.path.join(directory, name)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(graph.as_graph_def().SerializeToString())
    os.replace(tmp, path)


class StepCounterHook(SessionRunHook):
    """Measures the global steps per second every `every_n_steps` steps or `every_n_secs`
    seconds and logs "global_step/sec: <rate>" (INFO, logger "rill.train").

    `output_dir` and `summary_writer` are accepted for TensorFlow compatibility; no summary is
    written. The latest rate is in `steps_per_sec`.
    """

    def __init__(
        self,
        every_n_steps: int | None = 100,
        every_n_secs: float | None = None,
        output_dir=None,
        summary_writer=None,
    ):
        if (every_n_steps is None) == (every_n_secs is None):
            raise ValueError("exactly one of every_n_steps and every_n_secs should be provided.")
        self._timer = SecondOrStepTimer(every_steps=every_n_steps, every_secs=every_n_secs)
        self.steps_per_sec: float | None = None

    def begin(self) -> None:
        self._global_step = _require_global_step("StepCounterHook")

    def after_create_session(self, session, coord) -> None:
        self._timer.reset()

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step)

    def after_run(self, run_context, run_values):
        stale = int(run_values.results)
        if self._timer.should_trigger_for_step(stale + 1):
            step = int(run_context.session.run(self._global_step))
            if self._timer.should_trigger_for_step(step):
                secs, steps = self._timer.update_last_triggered_step(step)
                if secs is not None and secs > 0:
                    self.steps_per_sec = steps / secs
                    _log.info("global_step/sec: %g", self.steps_per_sec)


def _format_value(v) -> str:
    a = np.asarray(v)
    if a.dtype.kind in "SO" and a.ndim == 0:
        x = a[()]
        return x.decode(errors="replace") if isinstance(x, bytes) else str(x)
    if a.ndim == 0 and a.dtype.kind == "f":
        return f"{float(a):.4g}"
    if a.ndim == 0:
        return str(a[()])
    return np.array2string(a, precision=4, threshold=8, edgeitems=2).replace("\n", "")


class LoggingTensorHook(SessionRunHook):
    """Logs tensors (INFO, logger "rill.train") every `every_n_iter` runs or `every_n_secs`
    seconds (exactly one), and with `at_end` once more at the end.

    Args:
        tensors: a dict tag -> tensor (or tensor name), or a list of tensors or names.
        formatter: a function dict tag -> value -> the message (default "tag = value, ...").
    """

    def __init__(
        self,
        tensors,
        every_n_iter: int | None = None,
        every_n_secs: float | None = None,
        at_end: bool = False,
        formatter: Callable[[dict], str] | None = None,
    ):
        only_log_at_end = at_end and every_n_iter is None and every_n_secs is None
        if not only_log_at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError(
                "either at_end and/or exactly one of every_n_iter and every_n_secs must be "
                "provided."
            )
        if every_n_iter is not None and every_n_iter <= 0:
            raise ValueError(f"invalid every_n_iter={every_n_iter}.")
        if isinstance(tensors, Mapping):
            self._tag_order = [str(k) for k in tensors]
        else:
            self._tag_order = [t if isinstance(t, str) else t.name for t in tensors]
        self._tensors = tensors
        self._formatter = formatter
        self._log_at_end = at_end
        self._timer = (
            _NeverTimer()
            if only_log_at_end
            else SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_iter)
        )

    def begin(self) -> None:
        self._timer.reset()
        self._iter_count = 0
        self._current_tensors = _as_graph_elements(self._tensors)

    def before_run(self, run_context):
        self._should_trigger = self._timer.should_trigger_for_step(self._iter_count)
        if self._should_trigger:
            return SessionRunArgs(self._current_tensors)
        return None

    def _log_tensors(self, values: dict) -> None:
        secs, _ = self._timer.update_last_triggered_step(self._iter_count)
        if self._formatter is not None:
            _log.info("%s", self._formatter(values))
            return
        text = ", ".join(f"{tag} = {_format_value(values[tag])}" for tag in self._tag_order)
        if secs is not None:
            _log.info("%s (%.3f sec)", text, secs)
        else:
            _log.info("%s", text)

    def after_run(self, run_context, run_values):
        if self._should_trigger:
            self._log_tensors(run_values.results)
        self._iter_count += 1

    def end(self, session) -> None:
        if self._log_at_end:
            self._log_tensors(session.run(self._current_tensors))


class NanLossDuringTrainingError(RuntimeError):
    def __str__(self) -> str:
        return "NaN loss during training."


class NanTensorHook(SessionRunHook):
    """Fails (NanLossDuringTrainingError) or requests a stop when `loss_tensor` is NaN."""

    def __init__(self, loss_tensor, fail_on_nan_loss: bool = True):
        self._loss_tensor = loss_tensor
        self._fail_on_nan_loss = fail_on_nan_loss

    def before_run(self, run_context):
        return SessionRunArgs(self._loss_tensor)

    def after_run(self, run_context, run_values):
        if np.isnan(run_values.results).any():
            if self._fail_on_nan_loss:
                _log.error("Model diverged with loss = NaN.")
                raise NanLossDuringTrainingError
            _log.warning("Model diverged with loss = NaN. Requesting a stop.")
            run_context.request_stop()


class FeedFnHook(SessionRunHook):
    """Adds `feed_fn()` (a feed dict) to every run."""

    def __init__(self, feed_fn: Callable[[], dict]):
        self.feed_fn = feed_fn

    def before_run(self, run_context):
        return SessionRunArgs(fetches=None, feed_dict=self.feed_fn())
