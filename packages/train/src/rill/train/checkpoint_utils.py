"""Reading checkpoints from a program (TF1's tf.train.load_checkpoint / NewCheckpointReader) and
starting variables from one (tf.train.init_from_checkpoint, the usual way to fine-tune a
pre-trained model): either checkpoint format, rill's or TensorFlow's."""

from __future__ import annotations

import numpy as np

from rill.exec.tf_checkpoint import open_checkpoint
from rill.graph.errors import InvalidArgumentError, NotFoundError
from rill.graph.graph import get_default_graph
from rill.graph.ops.io_ops import restore_v2
from rill.graph.ops.state_ops import GLOBAL_VARIABLES, Variable, assign_variable_op
from rill.train.checkpoint_management import _prefix_for

__all__ = ["CheckpointReader", "NewCheckpointReader", "init_from_checkpoint", "load_checkpoint"]


class CheckpointReader:
    """TensorFlow's py_checkpoint_reader API over rill's readers."""

    def __init__(self, ckpt_dir_or_file):
        self._prefix = _prefix_for(ckpt_dir_or_file)
        self._reader = open_checkpoint(self._prefix)

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        return {n: list(self._reader.shape(n)) for n in self._reader.names()}

    def get_variable_to_dtype_map(self) -> dict:
        return {n: self._reader.dtype(n) for n in self._reader.names()}

    def has_tensor(self, name: str) -> bool:
        return self._reader.has_tensor(name)

    def get_tensor(self, name: str) -> np.ndarray:
        if not self._reader.has_tensor(name):
            raise NotFoundError(f"Key {name} not found in checkpoint {self._prefix}")
        return self._reader.read(name)

    def debug_string(self) -> bytes:
        lines = [
            f"{n} ({self._reader.dtype(n).name}) {list(self._reader.shape(n))}"
            for n in sorted(self._reader.names())
        ]
        return ("\n".join(lines) + "\n").encode()


def NewCheckpointReader(filepattern) -> CheckpointReader:  # noqa: N802 - TensorFlow's name
    return CheckpointReader(filepattern)


def load_checkpoint(ckpt_dir_or_file) -> CheckpointReader:
    return CheckpointReader(ckpt_dir_or_file)


def _variables_by_name(graph) -> dict[str, Variable]:
    out = {}
    for v in graph.get_collection(GLOBAL_VARIABLES):
        if isinstance(v, Variable):
            out[v.op.name] = v
    return out


def init_from_checkpoint(ckpt_dir_or_file, assignment_map) -> None:
    """Makes the variables named by `assignment_map` start from the checkpoint: their
    initializers assign the checkpoint's values instead of their own initial values.

    assignment_map maps checkpoint names to variables, TF's way: {"ckpt_scope/": "scope/"} maps
    every tensor under the checkpoint scope to the variable of the same name under the graph
    scope; {"ckpt/name": "graph/name" or a Variable} maps one tensor.
    """
    prefix = _prefix_for(ckpt_dir_or_file)
    reader = open_checkpoint(prefix)
    g = get_default_graph()
    by_name = _variables_by_name(g)
    pairs: list[tuple[str, Variable]] = []
    for ckpt_name, target in assignment_map.items():
        if isinstance(target, Variable):
            pairs.append((ckpt_name, target))
            continue
        if ckpt_name.endswith("/") or target.endswith("/"):
            src = "" if ckpt_name == "/" else ckpt_name
            dst = "" if target == "/" else target
            matched = False
            for name in reader.names():
                if name.startswith(src):
                    var_name = dst + name[len(src) :]
                    if var_name in by_name:
                        pairs.append((name, by_name[var_name]))
                        matched = True
            if not matched:
                raise NotFoundError(
                    f"init_from_checkpoint: no checkpoint tensor under {ckpt_name!r} matches a "
                    f"variable under {target!r}"
                )
            continue
        if target not in by_name:
            raise NotFoundError(f"init_from_checkpoint: the graph has no variable {target!r}")
        pairs.append((ckpt_name, by_name[target]))
    for ckpt_name, v in pairs:
        if not reader.has_tensor(ckpt_name):
            raise NotFoundError(f"Key {ckpt_name} not found in checkpoint {prefix}")
        shape = list(reader.shape(ckpt_name))
        if not v.shape.is_compatible_with(shape) or reader.dtype(ckpt_name) is not v.dtype:
            raise InvalidArgumentError(
                f"init_from_checkpoint: variable {v.op.name} is {v.dtype.name}{v.shape}, the "
                f"checkpoint's {ckpt_name!r} is {reader.dtype(ckpt_name).name}{shape}"
            )
        with g.as_default(), g.name_scope(v.op.name + "/InitFromCheckpoint"), g.device("/cpu:0"):
            (value,) = restore_v2(prefix, [ckpt_name], [""], [v.dtype])
        with g.as_default(), g.colocate_with(v.handle.op):
            v._initializer_op = assign_variable_op(v.handle, value, name=v.op.name + "/Assign_ckpt")
        v._initial_value = value
