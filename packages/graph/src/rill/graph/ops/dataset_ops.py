"""Input-pipeline iterators: TensorFlow's iterator ops (tensorflow/core/ops/dataset_ops.cc) and
rill's one dataset op.

A dataset is a scalar `variant` value. rill makes it with one internal op, `_Dataset`, whose
`pipeline` attr names a pipeline object held by the graph (`register_pipeline`) and whose inputs
are the graph tensors the pipeline captures (the components of `from_tensor_slices`, say, or a
placeholder fed when the iterator is initialized). The pipeline objects are Python (rill.train's
`tf.data`), so a graph with datasets runs in the process that built it; unlike TensorFlow's
dataset ops, the pipeline is not written into a GraphDef.

An iterator is a resource (IteratorV2, or OneShotIterator which initializes itself on first use);
MakeIterator starts it on a dataset and IteratorGetNext returns the next element, or raises
OutOfRangeError at the end.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     it = iterator_v2([rg.float32], [[2]], shared_name="")
...     iterator_get_next(it, [rg.float32], [[2]])
[<Tensor 'IteratorGetNext:0' f32[2]>]
"""

from __future__ import annotations

import itertools
import threading

from rill.graph import dtypes, shape_fns
from rill.graph.graph import Graph, Tensor, get_default_graph
from rill.graph.op_def import NameAttrList, defop
from rill.graph.shapes import TensorShape, as_shape

__all__ = [
    "dataset_from_pipeline",
    "iterator_from_string_handle",
    "iterator_to_string_handle",
    "iterator_get_next",
    "iterator_v2",
    "lookup_pipeline",
    "make_iterator",
    "one_shot_iterator",
    "register_pipeline",
]

_TYPES_AND_SHAPES = ["output_types: list(type) >= 1", "output_shapes: list(shape) >= 1"]


def _recorded_shapes(op) -> list[TensorShape]:
    types, shapes = op.attrs["output_types"], op.attrs["output_shapes"]
    if len(types) != len(shapes):
        raise ValueError(
            f"output_types has {len(types)} entries but output_shapes has {len(shapes)}"
        )
    return [as_shape(s) for s in shapes]


defop(
    "_Dataset",
    inputs=["captures: Tcaptures"],
    outputs=["handle: variant"],
    attrs=["Tcaptures: list(type) >= 0", "pipeline: func"] + _TYPES_AND_SHAPES,
    shape=shape_fns.scalar_shape,
    stateful=True,
    doc="The dataset of the pipeline the graph holds under the name `pipeline`, bound to the "
    "values of the tensors it captures.",
)

defop(
    "IteratorV2",
    outputs=["handle: resource"],
    attrs=["shared_name: string", "container: string"] + _TYPES_AND_SHAPES,
    shape=shape_fns.scalar_shape,
    stateful=True,
    doc="An iterator resource, uninitialized until MakeIterator runs.",
)

defop(
    "OneShotIterator",
    outputs=["handle: resource"],
    attrs=["dataset_factory: func"]
    + _TYPES_AND_SHAPES
    + ["container: string = ''", "shared_name: string = ''"],
    shape=shape_fns.scalar_shape,
    stateful=True,
    doc="An iterator that starts on its dataset the first time it runs (rill: dataset_factory "
    "names a pipeline the graph holds).",
)

defop(
    "MakeIterator",
    inputs=["dataset: variant", "iterator: resource"],
    stateful=True,
    doc="(Re)starts iterator at the beginning of dataset.",
)

defop(
    "IteratorGetNext",
    inputs=["iterator: resource"],
    outputs=["components: output_types"],
    attrs=_TYPES_AND_SHAPES,
    shape=_recorded_shapes,
    stateful=True,
    doc="The iterator's next element; OutOfRangeError at the end of its dataset.",
)

defop(
    "IteratorToStringHandle",
    inputs=["resource_handle: resource"],
    outputs=["string_handle: string"],
    shape=shape_fns.scalar_shape,
    stateful=True,
    doc="A string naming the iterator, for IteratorFromStringHandleV2 (feedable iterators).",
)

defop(
    "IteratorFromStringHandleV2",
    inputs=["string_handle: string"],
    outputs=["resource_handle: resource"],
    attrs=["output_types: list(type) >= 0 = []", "output_shapes: list(shape) >= 0 = []"],
    shape=shape_fns.scalar_shape,
    stateful=True,
    doc="The iterator a string from IteratorToStringHandle names.",
)


# -- pipelines held by the graph ----------------------------------------------------------------

_ids = itertools.count(1)
_registry_lock = threading.Lock()


def register_pipeline(pipeline, graph: Graph | None = None) -> str:
    """Keeps `pipeline` with `graph` (default: the default graph) and returns its name.

    The pipeline lives as long as the graph; `_Dataset` and `OneShotIterator` kernels find it by
    this name through the op's graph.
    """
    g = graph or get_default_graph()
    with _registry_lock:
        held = g.__dict__.setdefault("_dataset_pipelines", {})
        name = f"__rill_pipeline_{next(_ids)}"
        held[name] = pipeline
    return name


def lookup_pipeline(graph: Graph | None, name: str):
    """The pipeline `register_pipeline` kept under `name`, or None."""
    if graph is None:
        return None
    return graph.__dict__.get("_dataset_pipelines", {}).get(name)


def _types_shapes(output_types, output_shapes) -> dict:
    return {
        "output_types": [dtypes.as_dtype(t) for t in output_types],
        "output_shapes": [as_shape(s) for s in output_shapes],
    }


def dataset_from_pipeline(pipeline_name: str, captures, output_types, output_shapes,
                          name: str | None = None) -> Tensor:  # fmt: skip
    """The `_Dataset` op: a scalar variant for the named pipeline bound to `captures`."""
    attrs = {"pipeline": NameAttrList(pipeline_name)}
    attrs.update(_types_shapes(output_types, output_shapes))
    if not captures:
        attrs["Tcaptures"] = []
    op = get_default_graph().create_op("_Dataset", [list(captures)], attrs, name=name or "Dataset")
    return op.outputs[0]


def iterator_v2(output_types, output_shapes, shared_name: str = "", container: str = "",
                name: str | None = None) -> Tensor:  # fmt: skip
    """An IteratorV2 resource handle."""
    attrs = {"shared_name": shared_name, "container": container}
    attrs.update(_types_shapes(output_types, output_shapes))
    return (
        get_default_graph().create_op("IteratorV2", [], attrs, name=name or "Iterator").outputs[0]
    )


def one_shot_iterator(pipeline_name: str, output_types, output_shapes, container: str = "",
                      shared_name: str = "", name: str | None = None) -> Tensor:  # fmt: skip
    """A OneShotIterator resource handle over the named pipeline (which captures nothing)."""
    attrs = {"dataset_factory": NameAttrList(pipeline_name), "container": container,
             "shared_name": shared_name}  # fmt: skip
    attrs.update(_types_shapes(output_types, output_shapes))
    g = get_default_graph()
    return g.create_op("OneShotIterator", [], attrs, name=name or "OneShotIterator").outputs[0]


def make_iterator(dataset, iterator, name: str | None = None):
    """The MakeIterator op (an Operation: run it to start `iterator` on `dataset`)."""
    return get_default_graph().create_op("MakeIterator", [dataset, iterator], {},
                                         name=name or "MakeIterator")  # fmt: skip


def iterator_get_next(iterator, output_types, output_shapes,
                      name: str | None = None) -> list[Tensor]:  # fmt: skip
    """The IteratorGetNext op's outputs: one tensor per flattened component."""
    attrs = _types_shapes(output_types, output_shapes)
    op = get_default_graph().create_op("IteratorGetNext", [iterator], attrs,
                                       name=name or "IteratorGetNext")  # fmt: skip
    return list(op.outputs)


def iterator_to_string_handle(iterator, name: str | None = None) -> Tensor:
    """The IteratorToStringHandle op: a scalar string naming `iterator`."""
    return get_default_graph().create_op("IteratorToStringHandle", [iterator], {},
                                         name=name or "IteratorToStringHandle").outputs[0]  # fmt: skip


def iterator_from_string_handle(string_handle, output_types, output_shapes,
                                name: str | None = None) -> Tensor:  # fmt: skip
    """The IteratorFromStringHandleV2 op: the iterator resource a string handle names."""
    attrs = _types_shapes(output_types, output_shapes)
    op = get_default_graph().create_op("IteratorFromStringHandleV2", [string_handle], attrs,
                                       name=name or "IteratorFromStringHandle")  # fmt: skip
    return op.outputs[0]
