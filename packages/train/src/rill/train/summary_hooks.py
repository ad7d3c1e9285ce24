"""`SummarySaverHook` (TensorFlow-1's `tf.train.SummarySaverHook`): runs the summary op every N
steps or seconds alongside the training step and writes its result to an event file."""

from __future__ import annotations

from rill.graph.graph import get_default_graph
from rill.train.hooks import SecondOrStepTimer, SessionRunArgs, SessionRunHook
from rill.train.summary import FileWriterCache, SessionLog, merge_all
from rill.train.training_util import get_or_create_global_step

__all__ = ["SummarySaverHook"]


class SummarySaverHook(SessionRunHook):
    """Saves summaries every `save_steps` steps or `save_secs` seconds (exactly one).

    Args:
        output_dir: the event files' directory (FileWriterCache gives its writer), unless
            `summary_writer` is given.
        scaffold: its `summary_op`, if set, is run; `summary_op` takes precedence; default:
            every summary in the graph (merge_all) at `begin()`.
    """

    def __init__(self, save_steps=None, save_secs=None, output_dir=None, summary_writer=None,
                 scaffold=None, summary_op=None):  # fmt: skip
        if (save_steps is None) == (save_secs is None):
            raise ValueError("SummarySaverHook needs exactly one of save_steps and save_secs")
        if output_dir is None and summary_writer is None:
            raise ValueError("SummarySaverHook needs an output_dir or a summary_writer")
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._output_dir = output_dir
        self._writer = summary_writer
        self._scaffold = scaffold
        self._summary_op = summary_op
        self._request = False
        self._next_step = None

    def begin(self) -> None:
        if self._writer is None:
            self._writer = FileWriterCache.get(self._output_dir)
        if self._summary_op is None and self._scaffold is not None:
            self._summary_op = self._scaffold.summary_op
        if self._summary_op is None:
            self._summary_op = merge_all()
        # As TensorFlow's hook: the global step is created if the graph has none.
        self._global_step = get_or_create_global_step(get_default_graph())

    def after_create_session(self, session, coord) -> None:
        self._writer.add_session_log(SessionLog(status=SessionLog.START), None)

    def before_run(self, run_context):
        fetches = {"step": self._global_step}
        self._request = self._summary_op is not None and (
            self._next_step is None or self._timer.should_trigger_for_step(self._next_step)
        )
        if self._request:
            fetches["summary"] = self._summary_op
        return SessionRunArgs(fetches)

    def after_run(self, run_context, run_values) -> None:
        step = int(run_values.results["step"])
        if self._next_step is None:
            self._writer.add_session_log(SessionLog(status=SessionLog.START), step)
        if self._request:
            self._timer.update_last_triggered_step(step)
            self._writer.add_summary(run_values.results["summary"], step)
        self._next_step = step + 1

    def end(self, session) -> None:
        self._writer.flush()
