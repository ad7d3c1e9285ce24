"""Saver: writes variables to checkpoints and restores them (TensorFlow-1's tf.train.Saver).

A Saver builds its ops once, when it is constructed, under the name scope "save":

- `save/filename`: a string PlaceholderWithDefault, fed with the checkpoint prefix;
- `save/SaveV2` writing one read of each variable under its checkpoint name, and
  `save/control_dependency`, the filename passed through once the save ran (fetching it saves);
- `save/RestoreV2` reading every name, one AssignVariableOp per variable, grouped into
  `save/restore_all`.

The reads and assignments are colocated with their variables; SaveV2 and RestoreV2 are placed on
`/device:CPU:0` (their kernels are CPU kernels) and tensors travel between devices as any other.
`sharded=True` is accepted and writes the same single-shard checkpoint (there is no
MergeV2Checkpoints yet).

A partitioned variable (its shards carry a SaveSliceInfo) is written once, whole, under its
logical name: the shards' reads travel to the writing device, which joins them, so no shared
filesystem is needed. Each shard restores its slice of that tensor (RestoreV2 with the shard's
shape_and_slice), so a checkpoint restores into any other partitioning, or none.

`save(sess, "ckpt/model", global_step=100)` writes the checkpoint `ckpt/model-100` (the file
format is rill.exec's; see rill-exec's README, "Checkpoint format"), then rewrites the state file
`ckpt/checkpoint` (see `checkpoint_management`) with paths relative to `ckpt/`, then deletes the
files of checkpoints the Saver no longer keeps. Each step is atomic, so a crash at any point
leaves the previous latest checkpoint listed and restorable.

Which checkpoints are kept: the `max_to_keep` most recent, plus (rill extension) with
`keep_best=k` the k best by the metric given to `save(..., metric=value)` — smallest first with
`best_mode="min"`, largest with `"max"`; a checkpoint saved without a metric (or with NaN) only
counts as recent. A checkpoint about to be deleted is kept instead when it is the first one past
the next `keep_checkpoint_every_n_hours` mark (and then no longer tracked).

>>> import os, tempfile
>>> import rill.graph as rg
>>> from rill.exec import Session
>>> d = tempfile.mkdtemp()
>>> with rg.Graph().as_default():
...     w = rg.Variable([1.0, 2.0], name="w")
...     saver = Saver()
...     with Session() as sess:
...         sess.run(w.initializer)
...         path = saver.save(sess, os.path.join(d, "model"), global_step=7)
...         _ = sess.run(w.assign([0.0, 0.0]))
...         saver.restore(sess, path)
...         print(os.path.basename(path), sess.run(w))
model-7 [1. 2.]
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
import time

import numpy as np

from rill.exec.tf_checkpoint import open_checkpoint, write_tf_checkpoint
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError, NotFoundError
from rill.graph.graph import Graph, constant, get_default_graph
from rill.graph.ops.array_ops import group, identity, placeholder_with_default
from rill.graph.ops.io_ops import restore_v2, save_v2
from rill.graph.ops.state_ops import GLOBAL_VARIABLES, Variable
from rill.graph.shapes import TensorShape
from rill.train import checkpoint_management as cm
from rill.train.partitioned_variables import PartitionedVariable, SlicedVariable, saver_entries

__all__ = ["SAVERS", "SAVEABLE_OBJECTS", "Saver", "SaverDef"]

SAVERS = "savers"  # tf.GraphKeys.SAVERS: the Saver a Scaffold uses by default
SAVEABLE_OBJECTS = "saveable_objects"  # tf.GraphKeys.SAVEABLE_OBJECTS
_IO_DEVICE = "/device:CPU:0"


@dataclasses.dataclass(frozen=True)
class SaverDef:
    """The names of a Saver's ops and its settings (TensorFlow's SaverDef message)."""

    filename_tensor_name: str
    save_tensor_name: str
    restore_op_name: str
    max_to_keep: int
    sharded: bool
    keep_checkpoint_every_n_hours: float
    version: int = 2


@dataclasses.dataclass
class _Kept:
    """A checkpoint the Saver keeps: its prefix (as given to save), time and metric."""

    path: str
    timestamp: float
    metric: float | None = None


def _key(path: str) -> str:
    return os.path.normpath(os.path.abspath(path))


def _unique(entries: list[_Kept]) -> list[_Kept]:
    seen, out = set(), []
    for e in entries:
        if _key(e.path) not in seen:
            seen.add(_key(e.path))
            out.append(e)
    return out


def _describe(dtype, shape) -> str:
    """float32[2,3], int64[], float32[?,3] or float32[<unknown rank>]."""
    shape = TensorShape(shape) if not isinstance(shape, TensorShape) else shape
    if shape.rank is None:
        dims = "<unknown rank>"
    else:
        dims = ",".join("?" if d is None else str(d) for d in shape.as_list())
    return f"{dtypes.as_dtype(dtype).name}[{dims}]"


def _names_to_variables(var_list) -> dict:
    """{checkpoint name: Variable or SlicedVariable (the shards of a partitioned variable)}."""
    if isinstance(var_list, dict):
        items = list(var_list.items())
        for name, _ in items:
            if not isinstance(name, str):
                raise TypeError(f"var_list keys must be checkpoint names (str), found {name!r}")
    else:
        if isinstance(var_list, (Variable, PartitionedVariable)):
            var_list = [var_list]
        items = []
        for v in var_list:
            if not isinstance(v, (Variable, PartitionedVariable)):
                raise TypeError(
                    f"Saver saves Variables; var_list holds {v!r}. Pass a dict name -> Variable "
                    "to choose the checkpoint names."
                )
            items.append((None, v))
    for name, v in items:
        ok = isinstance(v, (Variable, PartitionedVariable)) or (
            isinstance(v, (list, tuple)) and v and all(isinstance(x, Variable) for x in v)
        )
        if not ok:
            raise TypeError(f"var_list[{name!r}] is {v!r}, not a Variable")
    out: dict = {}
    for name, v in saver_entries(items):
        name = name if name is not None else v.op.name
        if name in out:
            raise ValueError(f"At least two variables have the same name: {name}")
        out[name] = v
    return dict(sorted(out.items()))


class Saver:
    """Saves and restores variables (TF1 `tf.train.Saver`), with a keep-best extension.

    Args:
        var_list: the variables to save: a list (checkpoint names are the variables' op names,
            e.g. "dense/kernel") or a dict checkpoint name -> Variable (to save under other
            names, or restore a checkpoint written with other names). Default: every global
            variable (and the "saveable_objects" collection).
        reshape: not supported (must be False).
        sharded: accepted; the checkpoint is written as one shard either way.
        max_to_keep: how many recent checkpoints to keep; None or 0 keeps all (and lists only
            the latest in the state file), as in TensorFlow.
        keep_checkpoint_every_n_hours: additionally keep one checkpoint per this many hours.
        name: the name scope of the Saver's ops (default "save").
        restore_sequentially: ignored (restores read every tensor, then assign).
        saver_def: save and restore through the ops this SaverDef names (how
            import_meta_graph rebuilds a Saver); var_list is then ignored.
        builder: not supported (must be None).
        defer_build: build the ops later, with `build()`.
        allow_empty: a Saver with no variables is allowed and does nothing (save returns None).
        write_version: must be 2.
        pad_step_number: write the step with 8 digits ("model-00000100").
        save_relative_paths: write the state file with paths relative to its directory (default
            True, unlike TensorFlow, so checkpoint directories can be moved).
        filename: the prefix used when `save/filename` is not fed.
        keep_best: (rill) also keep the `keep_best` best checkpoints by the metric given to
            `save(..., metric=...)`; their metrics are recorded in the state file.
        best_mode: (rill) "min" (a smaller metric is better, e.g. a loss) or "max".

    Raises:
        ValueError: no variables to save (and not allow_empty), two variables with one name,
            or a bad setting.
        TypeError: var_list holds something other than Variables.
    """

    def __init__(
        self,
        var_list=None,
        reshape: bool = False,
        sharded: bool = False,
        max_to_keep: int | None = 5,
        keep_checkpoint_every_n_hours: float = 10000.0,
        name: str | None = None,
        restore_sequentially: bool = False,
        saver_def=None,
        builder=None,
        defer_build: bool = False,
        allow_empty: bool = False,
        write_version: int = 2,
        pad_step_number: bool = False,
        save_relative_paths: bool = True,
        filename: str | None = None,
        *,
        keep_best: int = 0,
        best_mode: str = "min",
    ):
        if reshape:
            raise NotImplementedError("Saver(reshape=True) is not supported")
        if builder is not None:
            raise NotImplementedError("Saver(builder=...) is not supported")
        if write_version != 2:
            raise ValueError(
                f"write_version must be 2 (the only checkpoint format), got {write_version}"
            )
        if best_mode not in ("min", "max"):
            raise ValueError(f'best_mode must be "min" or "max", got {best_mode!r}')
        if not isinstance(keep_best, numbers.Integral) or keep_best < 0:
            raise ValueError(f"keep_best must be an integer >= 0, got {keep_best!r}")
        if max_to_keep is not None and max_to_keep < 0:
            raise ValueError(f"max_to_keep must be >= 0 or None, got {max_to_keep}")
        self._var_list = var_list
        self._sharded = sharded
        self._max_to_keep = max_to_keep
        self._keep_every_n_hours = keep_checkpoint_every_n_hours
        self._name = name
        self._allow_empty = allow_empty
        self._pad_step_number = pad_step_number
        self._save_relative_paths = save_relative_paths
        self._filename = filename
        self._keep_best = int(keep_best)
        self._best_mode = best_mode
        self._last: list[_Kept] = []
        self._best: list[_Kept] = []
        now = time.time()
        self._next_checkpoint_time = now + keep_checkpoint_every_n_hours * 3600
        self._last_preserved_timestamp = now
        self._built = False
        self._is_empty = False
        self._items: dict[str, Variable] = {}
        self._saver_def: SaverDef | None = None
        if saver_def is not None:
            self._use_saver_def(saver_def)
        elif not defer_build:
            self.build()

    def _use_saver_def(self, sd) -> None:
        """Saves and restores through the ops a SaverDef names (a Saver of an imported meta
        graph): the checkpoint is matched against the variables by its restore op alone."""
        g = get_default_graph()
        try:
            self._filename_tensor = g.as_graph_element(sd.filename_tensor_name)
            self._save_tensor = g.as_graph_element(sd.save_tensor_name)
            self._restore_op = g.as_graph_element(sd.restore_op_name)
        except (KeyError, ValueError) as e:
            raise ValueError(f"Saver(saver_def=...): {e}") from None
        self._max_to_keep = sd.max_to_keep
        self._sharded = sd.sharded
        self._keep_every_n_hours = sd.keep_checkpoint_every_n_hours or 10000.0
        self._saver_def = SaverDef(
            filename_tensor_name=sd.filename_tensor_name,
            save_tensor_name=sd.save_tensor_name,
            restore_op_name=sd.restore_op_name,
            max_to_keep=sd.max_to_keep,
            sharded=sd.sharded,
            keep_checkpoint_every_n_hours=sd.keep_checkpoint_every_n_hours,
            version=int(sd.version) or 2,
        )
        self._built = True

    # -- building ---------------------------------------------------------------------------

    def build(self) -> None:
        """Builds the save and restore ops (once)."""
        if self._built:
            return
        if self._var_list is None:
            g = get_default_graph()
            var_list = g.get_collection(GLOBAL_VARIABLES) + g.get_collection(SAVEABLE_OBJECTS)
            var_list = list(dict.fromkeys(var_list))
        else:
            var_list = self._var_list
        self._items = _names_to_variables(var_list)
        if not self._items:
            if self._allow_empty:
                self._is_empty = self._built = True
                return
            raise ValueError("No variables to save")
        graphs = {id(v.graph): v.graph for v in self._items.values()}
        if len(graphs) > 1:
            raise ValueError("the variables to save belong to different graphs")
        g: Graph = next(iter(graphs.values()))
        names = list(self._items)
        variables = list(self._items.values())
        # What RestoreV2 reads: each variable whole, each shard its slice of its logical tensor.
        targets, restore_names, restore_specs = [], [], []
        for name, v in self._items.items():
            if isinstance(v, SlicedVariable):
                targets += v.shards
                restore_names += [name] * len(v.shards)
                restore_specs += v.specs
            else:
                targets.append(v)
                restore_names.append(name)
                restore_specs.append("")
        with g.as_default(), g.name_scope(self._name or "save") as scope:
            reads = []
            for v in variables:
                if isinstance(v, SlicedVariable):
                    reads.append(None)  # joined on the writing device below
                    continue
                with g.colocate_with(v):
                    reads.append(v.value())
            with g.device(_IO_DEVICE):
                # The shards of a partitioned variable travel to the writer, which joins them:
                # the checkpoint holds each logical variable once, whole.
                reads = [v.joined() if r is None else r for r, v in zip(reads, variables)]
                self._filename_tensor = placeholder_with_default(
                    constant(self._filename or "model", dtypes.string, name="filename/input"),
                    shape=[],
                    name="filename",
                )
                with g.name_scope("SaveV2") as op_scope:
                    save_op = save_v2(
                        self._filename_tensor,
                        constant(names, dtypes.string, name="tensor_names"),
                        constant([""] * len(names), dtypes.string, name="shape_and_slices"),
                        reads,
                        name=op_scope,
                    )
                with g.control_dependencies([save_op]):
                    self._save_tensor = identity(self._filename_tensor, name="control_dependency")
                with g.name_scope("RestoreV2") as op_scope:
                    restored = restore_v2(
                        self._filename_tensor,
                        constant(restore_names, dtypes.string, name="tensor_names"),
                        constant(restore_specs, dtypes.string, name="shape_and_slices"),
                        [v.dtype for v in targets],
                        name=op_scope,
                    )
            assigns = []
            for v, value in zip(targets, restored):
                with g.colocate_with(v):
                    assigns.append(v.assign(value, read_value=False))
            self._restore_op = group(*assigns, name="restore_all")
        self._saver_def = SaverDef(
            filename_tensor_name=self._filename_tensor.name,
            save_tensor_name=self._save_tensor.name,
            restore_op_name=self._restore_op.name,
            max_to_keep=self._max_to_keep or 0,
            sharded=self._sharded,
            keep_checkpoint_every_n_hours=self._keep_every_n_hours,
        )
        self._scope = scope
        self._built = True

    @property
    def saver_def(self) -> SaverDef | None:
        return self._saver_def

    def as_saver_def(self) -> SaverDef | None:
        return self._saver_def

    # -- bookkeeping ------------------------------------------------------------------------

    @property
    def last_checkpoints(self) -> list[str]:
        """The recent checkpoints kept (oldest first), not counting those kept only for their
        metric."""
        return [e.path for e in self._last]

    @property
    def best_checkpoints(self) -> list[tuple[str, float]]:
        """(rill) The checkpoints kept for their metric, best first, with their metrics."""
        return [(e.path, e.metric) for e in self._best]

    def set_last_checkpoints_with_time(self, last_checkpoints_with_time) -> None:
        """Sets the recent checkpoints: a list of (prefix, timestamp), oldest first."""
        self._last = [_Kept(p, float(t)) for p, t in last_checkpoints_with_time]

    def set_last_checkpoints(self, last_checkpoints) -> None:
        """Deprecated in TensorFlow; sets the recent checkpoints with no timestamps."""
        self._last = [_Kept(p, math.inf) for p in last_checkpoints]

    def recover_last_checkpoints(self, checkpoint_paths) -> None:
        """Tracks `checkpoint_paths` (oldest first) as the recent checkpoints, timed by their
        files' modification times; those missing are skipped."""
        recovered = []
        for p in checkpoint_paths:
            mtimes = cm.get_checkpoint_mtimes([p])
            if mtimes:
                recovered.append((p, mtimes[0]))
        self.set_last_checkpoints_with_time(recovered)

    def recover_checkpoint_state(self, checkpoint_dir, latest_filename: str | None = None) -> bool:
        """(rill) Takes over the bookkeeping of a state file: its recent checkpoints and the
        metrics and best checkpoints it records, so that this Saver goes on deleting and ranking
        them. Returns False when the directory has no state file."""
        state = cm.get_checkpoint_state(checkpoint_dir, latest_filename)
        if state is None:
            return False
        metrics = {_key(m.path): m for m in state.checkpoint_metrics}
        stamps = state.all_model_checkpoint_timestamps
        last = []
        for i, p in enumerate(state.all_model_checkpoint_paths):
            if not cm.checkpoint_exists(p):
                continue
            m = metrics.get(_key(p))
            t = stamps[i] if len(stamps) == len(state.all_model_checkpoint_paths) else None
            if t is None:
                t = (cm.get_checkpoint_mtimes([p]) or [time.time()])[0]
            last.append(_Kept(p, t, m.metric if m else None))
        self._last = last if self._max_to_keep else []
        best = []
        for p in state.best_model_checkpoint_paths:
            m = metrics.get(_key(p))
            if m is not None and cm.checkpoint_exists(p):
                best.append(_Kept(p, m.timestamp, m.metric))
        self._best = self._rank(best)[: self._keep_best] if self._keep_best else []
        if state.last_preserved_timestamp:
            self._last_preserved_timestamp = state.last_preserved_timestamp
        return True

    def _rank(self, entries: list[_Kept]) -> list[_Kept]:
        # Stable: among equal metrics the checkpoint ranked (or saved) first stays ahead.
        sign = 1.0 if self._best_mode == "min" else -1.0
        return sorted(entries, key=lambda e: sign * e.metric)

    # -- saving -----------------------------------------------------------------------------

    def save(
        self,
        sess,
        save_path,
        global_step=None,
        latest_filename: str | None = None,
        meta_graph_suffix: str = "meta",
        write_meta_graph: bool = True,
        write_state: bool = True,
        strip_default_attrs: bool = False,
        save_debug_info: bool = False,
        *,
        metric=None,
        checkpoint_format: str = "rill",
    ) -> str | None:
        """Saves the variables to a checkpoint and returns its prefix.

        Args:
            sess: the Session holding the variables.
            save_path: the checkpoint prefix, e.g. "ckpt/model"; its directory must exist.
            global_step: when given (an int, or a tensor/variable to read), appended as
                "-<step>" to the prefix.
            latest_filename: the state file's name (default "checkpoint").
            meta_graph_suffix: the suffix of meta graph files deleted with old checkpoints.
            write_meta_graph: also write the session graph's MetaGraphDef, with this Saver and
                the graph's collections, to "<checkpoint>.<meta_graph_suffix>"
                (tf.train.import_meta_graph reads it back).
            write_state: update the state file and delete checkpoints no longer kept.
            metric: (rill) the checkpoint's metric for keep_best (a number, or a tensor to
                run); recorded in the state file.
            checkpoint_format: (rill) "rill" (the default: rill.exec.checkpoint_format) or
                "tensorflow" (TensorFlow's tensor bundle, which TensorFlow's Saver and
                tf.train.load_checkpoint read; see rill.exec.tf_checkpoint).

        Returns:
            The checkpoint prefix ("ckpt/model-100"), or None for an empty Saver.

        Raises:
            RuntimeError: built with defer_build and build() not called.
            ValueError: the directory of save_path does not exist; latest_filename is a path.
        """
        if not self._built:
            raise RuntimeError("`build()` should be called before save if defer_build==True")
        latest_filename = latest_filename or "checkpoint"
        if os.path.split(latest_filename)[0]:
            raise ValueError("'latest_filename' must not contain path components")
        save_path = os.fspath(save_path)
        if global_step is not None:
            if not isinstance(global_step, numbers.Integral):
                global_step = int(sess.run(global_step))
            step = f"{int(global_step):08d}" if self._pad_step_number else str(int(global_step))
            checkpoint_file = f"{save_path}-{step}"
        else:
            checkpoint_file = save_path
        save_dir = os.path.dirname(save_path)
        if save_dir and not os.path.isdir(save_dir):
            raise ValueError(f"Parent directory of {save_path} doesn't exist, can't save.")
        if metric is not None and not isinstance(metric, numbers.Real):
            metric = sess.run(metric)
        if metric is not None:
            metric = float(np.asarray(metric).reshape(()))
        if self._is_empty:
            return None
        if checkpoint_format == "tensorflow":
            values = sess.run(list(self._items.values()))
            tensors = dict(zip(self._items, values))
            write_tf_checkpoint(
                checkpoint_file, tensors, {n: v.dtype for n, v in self._items.items()}
            )
            model_checkpoint_path = checkpoint_file
        elif checkpoint_format == "rill":
            out = sess.run(self._save_tensor, {self._filename_tensor: checkpoint_file})
            if isinstance(out, np.ndarray):
                out = out.item()  # a scalar string tensor (bytes from a remote session, as TF's)
            model_checkpoint_path = out.decode() if isinstance(out, bytes) else str(out)
        else:
            raise ValueError(
                f'checkpoint_format must be "rill" or "tensorflow", got {checkpoint_format!r}'
            )
        if write_meta_graph and getattr(sess, "graph", None) is not None:
            self.export_meta_graph(
                f"{checkpoint_file}.{meta_graph_suffix}", graph=sess.graph,
                strip_default_attrs=strip_default_attrs,
            )  # fmt: skip
        if write_state:
            self._record(
                model_checkpoint_path, save_dir, latest_filename, metric, meta_graph_suffix
            )
        return model_checkpoint_path

    def export_meta_graph(self, filename=None, collection_list=None, as_text: bool = False,
                          export_scope=None, clear_devices: bool = False,
                          clear_extraneous_savers: bool = False,
                          strip_default_attrs: bool = False, save_debug_info: bool = False,
                          graph=None):  # fmt: skip
        """The MetaGraphDef of the graph with this Saver's SaverDef (see rill.train.meta_graph),
        written to `filename` when given."""
        from rill.train.meta_graph import export_meta_graph

        if graph is None:
            graphs = {id(v.graph): v.graph for v in self._items.values() if hasattr(v, "graph")}
            graph = next(iter(graphs.values())) if graphs else get_default_graph()
        return export_meta_graph(
            filename=filename, saver_def=self._saver_def, collection_list=collection_list,
            as_text=as_text, graph=graph, export_scope=export_scope,
            clear_devices=clear_devices, strip_default_attrs=strip_default_attrs,
        )  # fmt: skip

    def _record(self, path, save_dir, latest_filename, metric, meta_graph_suffix) -> None:
        """Updates the kept checkpoints, writes the state file, then deletes what is no longer
        kept. Nothing changes in memory unless the state file was written."""
        now = time.time()
        entry = _Kept(path, now, metric)
        k = _key(path)
        last = [e for e in self._last if _key(e.path) != k]
        best = [e for e in self._best if _key(e.path) != k]
        dropped: list[_Kept] = []
        if self._max_to_keep:
            last.append(entry)
            while len(last) > self._max_to_keep:
                dropped.append(last.pop(0))
        else:
            last = []
        if self._keep_best and metric is not None and not math.isnan(metric):
            best = self._rank(best + [entry])
            dropped += best[self._keep_best :]
            best = best[: self._keep_best]
        kept = {_key(e.path) for e in last + best} | {k}
        doomed = sorted(
            (e for e in _unique(dropped) if _key(e.path) not in kept), key=lambda e: e.timestamp
        )
        next_time, preserved_ts = self._next_checkpoint_time, self._last_preserved_timestamp
        delete = []
        for e in doomed:
            if self._keep_every_n_hours and e.timestamp > next_time and e.timestamp != math.inf:
                next_time += self._keep_every_n_hours * 3600
                preserved_ts = e.timestamp
            else:
                delete.append(e)
        listed = last or [entry]
        state = self._state(save_dir, entry, listed, best, preserved_ts)
        cm._write_state(save_dir or ".", state, latest_filename)
        cm._stage("state_renamed", {"state": cm._state_path(save_dir or ".", latest_filename)})
        self._last, self._best = last, best
        self._next_checkpoint_time, self._last_preserved_timestamp = next_time, preserved_ts
        if self._max_to_keep:
            for e in delete:
                cm.remove_checkpoint(e.path, meta_graph_suffix=meta_graph_suffix)

    def _state(self, save_dir, latest, listed, best, preserved_ts) -> cm.CheckpointState:
        directory = save_dir or "."

        def rel(p: str) -> str:
            return cm._relative(p, directory) if self._save_relative_paths else p

        state = cm.CheckpointState(
            model_checkpoint_path=rel(latest.path),
            all_model_checkpoint_paths=[rel(e.path) for e in listed],
            all_model_checkpoint_timestamps=[e.timestamp for e in listed],
            last_preserved_timestamp=preserved_ts,
        )
        if self._keep_best:
            state.best_mode = self._best_mode
            state.best_model_checkpoint_paths = [rel(e.path) for e in best]
        state.checkpoint_metrics = [
            cm.CheckpointMetric(rel(e.path), e.metric, e.timestamp)
            for e in _unique(listed + best)
            if e.metric is not None
        ]
        return state

    # -- restoring --------------------------------------------------------------------------

    def restore(self, sess, save_path) -> None:
        """Restores the variables from the checkpoint at `save_path` (a prefix).

        Every variable's value is read (and its checksum checked) before any is assigned, so a
        failed restore changes nothing. Checkpoint tensors that no variable takes are ignored
        (restoring part of a checkpoint is allowed) unless something else does not match.

        Raises:
            ValueError: save_path is None or names no checkpoint.
            NotFoundError: variables are missing from the checkpoint.
            InvalidArgumentError: a variable's dtype or shape differs from the checkpoint's.
            The messages list every difference: missing variables, checkpoint tensors no
            variable takes, and each (expected vs found) dtype or shape.
            DataLossError: the checkpoint's files are corrupt or truncated.
        """
        if self._is_empty:
            return
        if not self._built:
            raise RuntimeError("`build()` should be called before restore if defer_build==True")
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        save_path = os.fspath(save_path)
        if not cm.checkpoint_exists(save_path):
            hint = (
                " (it is a directory: pass latest_checkpoint(dir) to restore its latest)"
                if os.path.isdir(save_path)
                else ""
            )
            raise ValueError(f"The passed save_path is not a valid checkpoint: {save_path}{hint}")
        self._check_matches(save_path)
        sess.run(self._restore_op, {self._filename_tensor: save_path})

    def _check_matches(self, save_path: str) -> None:
        reader = open_checkpoint(save_path)
        missing, differs = [], []
        for name, v in self._items.items():
            sliced = isinstance(v, SlicedVariable)
            what = (
                f"partitioned variable, slices {', '.join(repr(s) for s in v.specs)}"
                if sliced
                else f"variable {v.op.name}"
            )
            if not reader.has_tensor(name):
                missing.append(f"{name!r} ({_describe(v.dtype, v.shape)}, {what})")
                continue
            dt, shape = reader.dtype(name), reader.shape(name)
            if dt is not v.dtype or not v.shape.is_compatible_with(TensorShape(list(shape))):
                slices = f" ({what})" if sliced else ""
                differs.append(
                    f"{name!r}: the variable is {_describe(v.dtype, v.shape)}{slices}, the "
                    f"checkpoint has {_describe(dt, list(shape))}"
                )
        if not missing and not differs:
            return
        unused = [
            f"{n!r} ({_describe(reader.dtype(n), list(reader.shape(n)))})"
            for n in reader.names()
            if n not in self._items
        ]
        lines = [f"Restoring from checkpoint {save_path} failed: it does not match the variables."]
        if missing:
            lines.append(f"  variables missing from the checkpoint ({len(missing)}):")
            lines += [f"    {m}" for m in missing]
        if unused:
            lines.append(f"  tensors in the checkpoint that no variable takes ({len(unused)}):")
            lines += [f"    {u}" for u in unused]
        if differs:
            lines.append(f"  variables whose dtype or shape differs ({len(differs)}):")
            lines += [f"    {d}" for d in differs]
        lines.append(
            "  To restore under other names, build the Saver with a dict var_list "
            "{checkpoint name: variable}; to restore part of the variables, pass only those."
        )
        cls = NotFoundError if missing else InvalidArgumentError
        raise cls("\n".join(lines))

    def __repr__(self) -> str:
        n = len(self._items)
        return f"<rill.train.Saver {n} variables max_to_keep={self._max_to_keep}>"
