"""TensorFlow 1.x's SavedModel: a directory holding `saved_model.pb` (one MetaGraphDef per tag
set, each with its signatures) and `variables/` (one checkpoint in TensorFlow's tensor-bundle
format), so that TensorFlow Serving, TensorFlow's loader and rill's read the same export.

    simple_save(sess, "export/1", inputs={"x": x}, outputs={"y": y})
    with rg.Graph().as_default(), Session() as sess:
        meta = loader.load(sess, [tag_constants.SERVING], "export/1")
        sig = meta.signature_def["serving_default"]
        sess.run(sig.outputs["y"].name, {sig.inputs["x"].name: batch})

A SavedModel written by TensorFlow 1.x (reference variables, its own Saver ops) loads too: its
Saver's restore op reads the variables (rill's RestoreV2 reads TensorFlow's format). TF2's
object-based SavedModels (tf.saved_model.save of a tf.Module) are out of scope.
"""

from __future__ import annotations

import os
import types

from rill.graph import dtypes
from rill.graph.errors import GraphValueError
from rill.graph.graph import Tensor, get_default_graph
from rill.graph.graph_def import shape_to_proto
from rill.graph.meta_graph_io import parse_message, parse_text_message, write_meta_graph_file
from rill.graph.proto import meta_graph_pb2
from rill.graph.sparse_tensor import SparseTensor
from rill.train.meta_graph import export_meta_graph, import_meta_graph

__all__ = [
    "SavedModelBuilder",
    "build_signature_def",
    "build_tensor_info",
    "classification_signature_def",
    "constants",
    "contains_saved_model",
    "get_tensor_from_tensor_info",
    "is_valid_signature",
    "load",
    "maybe_saved_model_directory",
    "predict_signature_def",
    "regression_signature_def",
    "signature_constants",
    "simple_save",
    "tag_constants",
]

constants = types.SimpleNamespace(
    SAVED_MODEL_SCHEMA_VERSION=1,
    SAVED_MODEL_FILENAME_PB="saved_model.pb",
    SAVED_MODEL_FILENAME_PBTXT="saved_model.pbtxt",
    VARIABLES_DIRECTORY="variables",
    VARIABLES_FILENAME="variables",
    ASSETS_DIRECTORY="assets",
    ASSETS_KEY="saved_model_assets",
    MAIN_OP_KEY="saved_model_main_op",
    LEGACY_INIT_OP_KEY="legacy_init_op",
    TRAIN_OP_KEY="saved_model_train_op",
    DEBUG_DIRECTORY="debug",
    DEBUG_INFO_FILENAME_PB="saved_model_debug_info.pb",
)
tag_constants = types.SimpleNamespace(SERVING="serve", TRAINING="train", GPU="gpu", TPU="tpu")
signature_constants = types.SimpleNamespace(
    DEFAULT_SERVING_SIGNATURE_DEF_KEY="serving_default",
    PREDICT_METHOD_NAME="tensorflow/serving/predict",
    PREDICT_INPUTS="inputs",
    PREDICT_OUTPUTS="outputs",
    CLASSIFY_METHOD_NAME="tensorflow/serving/classify",
    CLASSIFY_INPUTS="inputs",
    CLASSIFY_OUTPUT_CLASSES="classes",
    CLASSIFY_OUTPUT_SCORES="scores",
    REGRESS_METHOD_NAME="tensorflow/serving/regress",
    REGRESS_INPUTS="inputs",
    REGRESS_OUTPUTS="outputs",
)


# -- signatures ---------------------------------------------------------------------------------


def build_tensor_info(tensor) -> meta_graph_pb2.TensorInfo:
    """The TensorInfo of a Tensor (or a SparseTensor's three tensors)."""
    if isinstance(tensor, SparseTensor):
        info = meta_graph_pb2.TensorInfo(dtype=tensor.values.dtype.enum)
        info.coo_sparse.values_tensor_name = tensor.values.name
        info.coo_sparse.indices_tensor_name = tensor.indices.name
        info.coo_sparse.dense_shape_tensor_name = tensor.dense_shape.name
        return info
    if not isinstance(tensor, Tensor):
        raise TypeError(f"build_tensor_info needs a Tensor or SparseTensor, got {tensor!r}")
    info = meta_graph_pb2.TensorInfo(name=tensor.name, dtype=tensor.dtype.enum)
    info.tensor_shape.CopyFrom(shape_to_proto(tensor.shape))
    return info


def get_tensor_from_tensor_info(tensor_info, graph=None, import_scope=None):
    """The Tensor (or SparseTensor) a TensorInfo names in `graph` (default: the default graph)."""
    g = graph if graph is not None else get_default_graph()
    prefix = f"{import_scope}/" if import_scope else ""
    kind = tensor_info.WhichOneof("encoding")
    if kind == "name":
        return g.get_tensor_by_name(prefix + tensor_info.name)
    if kind == "coo_sparse":
        c = tensor_info.coo_sparse
        return SparseTensor(
            g.get_tensor_by_name(prefix + c.indices_tensor_name),
            g.get_tensor_by_name(prefix + c.values_tensor_name),
            g.get_tensor_by_name(prefix + c.dense_shape_tensor_name),
        )
    raise GraphValueError(f"TensorInfo has no tensor name: {tensor_info}")


def build_signature_def(inputs=None, outputs=None, method_name=None) -> meta_graph_pb2.SignatureDef:
    """A SignatureDef from {key: TensorInfo} maps and a method name."""
    sig = meta_graph_pb2.SignatureDef()
    for key, info in (inputs or {}).items():
        sig.inputs[key].CopyFrom(info)
    for key, info in (outputs or {}).items():
        sig.outputs[key].CopyFrom(info)
    if method_name is not None:
        sig.method_name = method_name
    return sig


def _infos(tensors: dict, what: str) -> dict:
    if not tensors:
        raise ValueError(f"{what} cannot be None or empty.")
    return {key: build_tensor_info(t) for key, t in tensors.items()}


def predict_signature_def(inputs, outputs) -> meta_graph_pb2.SignatureDef:
    """The Predict API's signature: named input and output tensors."""
    return build_signature_def(
        _infos(inputs, "Prediction inputs"),
        _infos(outputs, "Prediction outputs"),
        signature_constants.PREDICT_METHOD_NAME,
    )


def classification_signature_def(examples, classes, scores) -> meta_graph_pb2.SignatureDef:
    """The Classify API's signature: serialized tf.Examples in, classes and/or scores out."""
    if examples is None or examples.dtype is not dtypes.string:
        raise ValueError("Classification examples must be a string Tensor.")
    if classes is None and scores is None:
        raise ValueError("Classification classes and scores cannot both be None.")
    outputs = {}
    if classes is not None:
        if classes.dtype is not dtypes.string:
            raise ValueError("Classification classes must be a string Tensor.")
        outputs[signature_constants.CLASSIFY_OUTPUT_CLASSES] = build_tensor_info(classes)
    if scores is not None:
        if not scores.dtype.is_floating:
            raise ValueError("Classification scores must be a float Tensor.")
        outputs[signature_constants.CLASSIFY_OUTPUT_SCORES] = build_tensor_info(scores)
    return build_signature_def(
        {signature_constants.CLASSIFY_INPUTS: build_tensor_info(examples)},
        outputs,
        signature_constants.CLASSIFY_METHOD_NAME,
    )


def regression_signature_def(examples, predictions) -> meta_graph_pb2.SignatureDef:
    """The Regress API's signature: serialized tf.Examples in, float predictions out."""
    if examples is None or examples.dtype is not dtypes.string:
        raise ValueError("Regression examples must be a string Tensor.")
    if predictions is None or not predictions.dtype.is_floating:
        raise ValueError("Regression predictions must be a float Tensor.")
    return build_signature_def(
        {signature_constants.REGRESS_INPUTS: build_tensor_info(examples)},
        {signature_constants.REGRESS_OUTPUTS: build_tensor_info(predictions)},
        signature_constants.REGRESS_METHOD_NAME,
    )


def is_valid_signature(signature_def) -> bool:
    """Whether a SignatureDef has a method name and inputs and outputs that name tensors."""
    if signature_def is None or not signature_def.method_name:
        return False
    if not signature_def.inputs or not signature_def.outputs:
        return False
    infos = list(signature_def.inputs.values()) + list(signature_def.outputs.values())
    return all(i.WhichOneof("encoding") is not None for i in infos)


# -- writing ------------------------------------------------------------------------------------


class SavedModelBuilder:
    """Builds a SavedModel directory (TF1's tf.saved_model.builder.SavedModelBuilder): the first
    meta graph comes with the variables, later ones (other tag sets) share them."""

    def __init__(self, export_dir):
        self._export_dir = os.fspath(export_dir)
        if os.path.exists(self._export_dir):
            if os.listdir(self._export_dir):
                raise AssertionError(
                    f"Export directory already exists, and isn't empty. Please choose a "
                    f"different export directory, or delete all the contents of the specified "
                    f"directory: {self._export_dir}"
                )
        else:
            os.makedirs(self._export_dir)
        self._saved_model = meta_graph_pb2.SavedModel(
            saved_model_schema_version=constants.SAVED_MODEL_SCHEMA_VERSION
        )
        self._has_variables = False

    def _add(self, graph, saver, tags, signature_def_map, main_op, clear_devices) -> None:
        if isinstance(tags, str) or not tags:
            raise ValueError(f"tags must be a non-empty list of strings, got {tags!r}")
        for key, sig in (signature_def_map or {}).items():
            if not isinstance(sig, meta_graph_pb2.SignatureDef):
                raise TypeError(f"signature_def_map[{key!r}] is not a SignatureDef: {sig!r}")
        with graph.as_default():
            if main_op is not None:
                graph.add_to_collection(constants.MAIN_OP_KEY, main_op)
            meta = export_meta_graph(
                saver_def=saver.as_saver_def() if saver is not None else None,
                graph=graph,
                clear_devices=clear_devices,
            )
        meta.meta_info_def.tags.extend(tags)
        for key, sig in (signature_def_map or {}).items():
            meta.signature_def[key].CopyFrom(sig)
        self._saved_model.meta_graphs.add().CopyFrom(meta)

    def add_meta_graph_and_variables(
        self,
        sess,
        tags,
        signature_def_map=None,
        assets_collection=None,
        legacy_init_op=None,
        clear_devices: bool = False,
        main_op=None,
        strip_default_attrs: bool = False,
        saver=None,
    ) -> None:
        """Saves the session's variables (TensorFlow's checkpoint format) and the graph's
        meta graph under `tags`."""
        if self._has_variables:
            raise AssertionError(
                "Graph state including variables and assets has already been saved. Please "
                "invoke `add_meta_graph()` instead."
            )
        if assets_collection:
            raise NotImplementedError("SavedModel assets are not supported")
        from rill.train.saver import Saver  # the Saver module imports meta_graph

        graph = sess.graph
        with graph.as_default():
            saver = saver or Saver(sharded=True, allow_empty=True)
            var_dir = os.path.join(self._export_dir, constants.VARIABLES_DIRECTORY)
            os.makedirs(var_dir, exist_ok=True)
            saver.save(
                sess,
                os.path.join(var_dir, constants.VARIABLES_FILENAME),
                write_meta_graph=False,
                write_state=False,
                checkpoint_format="tensorflow",
            )
        self._add(graph, saver, tags, signature_def_map, main_op or legacy_init_op, clear_devices)
        self._has_variables = True

    def add_meta_graph(
        self,
        tags,
        signature_def_map=None,
        assets_collection=None,
        legacy_init_op=None,
        clear_devices: bool = False,
        main_op=None,
        strip_default_attrs: bool = False,
        saver=None,
    ) -> None:
        """Adds the default graph's meta graph under `tags`, over the variables saved by
        add_meta_graph_and_variables."""
        if not self._has_variables:
            raise AssertionError(
                "Graph state including variables and assets has not been saved yet. Please "
                "invoke `add_meta_graph_and_variables()` first."
            )
        from rill.train.saver import Saver

        graph = get_default_graph()
        with graph.as_default():
            saver = saver or Saver(sharded=True, allow_empty=True)
        self._add(graph, saver, tags, signature_def_map, main_op or legacy_init_op, clear_devices)

    def save(self, as_text: bool = False) -> str:
        """Writes saved_model.pb (or .pbtxt) and returns its path."""
        name = (
            constants.SAVED_MODEL_FILENAME_PBTXT if as_text else constants.SAVED_MODEL_FILENAME_PB
        )
        path = os.path.join(self._export_dir, name)
        write_meta_graph_file(self._saved_model, path, as_text=as_text)
        return path


def simple_save(session, export_dir, inputs, outputs, legacy_init_op=None) -> None:
    """A SavedModel for serving in one call: the Predict signature "serving_default" over
    `inputs` and `outputs` (dicts of tensors), tagged "serve", devices cleared."""
    sig = {
        signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY: predict_signature_def(
            inputs, outputs
        )
    }
    b = SavedModelBuilder(export_dir)
    b.add_meta_graph_and_variables(
        session, [tag_constants.SERVING], signature_def_map=sig, main_op=legacy_init_op,
        clear_devices=True,
    )  # fmt: skip
    b.save()


# -- reading ------------------------------------------------------------------------------------


def maybe_saved_model_directory(export_dir) -> bool:
    """Whether `export_dir` holds a saved_model.pb or saved_model.pbtxt."""
    d = os.fspath(export_dir)
    return any(
        os.path.isfile(os.path.join(d, n))
        for n in (constants.SAVED_MODEL_FILENAME_PB, constants.SAVED_MODEL_FILENAME_PBTXT)
    )


contains_saved_model = maybe_saved_model_directory


def _read_saved_model(export_dir: str) -> meta_graph_pb2.SavedModel:
    pb = os.path.join(export_dir, constants.SAVED_MODEL_FILENAME_PB)
    txt = os.path.join(export_dir, constants.SAVED_MODEL_FILENAME_PBTXT)
    if os.path.isfile(pb):
        with open(pb, "rb") as f:
            return parse_message(meta_graph_pb2.SavedModel, f.read(), pb)
    if os.path.isfile(txt):
        with open(txt, "rb") as f:
            return parse_text_message(meta_graph_pb2.SavedModel, f.read(), txt)
    raise OSError(f"SavedModel file does not exist at: {export_dir}/{{{pb}|{txt}}}")


def load(sess, tags, export_dir, import_scope=None, **saver_kwargs):
    """Loads the meta graph tagged exactly `tags` into the session's graph, restores the
    variables and runs the main op; returns the MetaGraphDef (its signature_def names the
    tensors to feed and fetch)."""
    export_dir = os.fspath(export_dir)
    model = _read_saved_model(export_dir)
    want = set(tags)
    found = [m for m in model.meta_graphs if set(m.meta_info_def.tags) == want]
    if not found:
        available = [sorted(m.meta_info_def.tags) for m in model.meta_graphs]
        raise RuntimeError(
            f"MetaGraphDef associated with tags {sorted(want)} could not be found in SavedModel "
            f"{export_dir}. Available tag-sets: {available}"
        )
    meta = found[0]
    with sess.graph.as_default():
        saver = import_meta_graph(meta, import_scope=import_scope)
        prefix = os.path.join(
            export_dir, constants.VARIABLES_DIRECTORY, constants.VARIABLES_FILENAME
        )
        if saver is not None and os.path.isfile(prefix + ".index"):
            saver.restore(sess, prefix)
        scope = f"{import_scope}/" if import_scope else ""
        for key in (constants.MAIN_OP_KEY, constants.LEGACY_INIT_OP_KEY):
            c = meta.collection_def.get(key)
            if c is not None and c.node_list.value:
                sess.run(sess.graph.as_graph_element(scope + c.node_list.value[0]))
                break
    return meta


# TF1's submodule names: tf.saved_model.builder.SavedModelBuilder, tf.saved_model.loader.load, ...
builder = types.SimpleNamespace(SavedModelBuilder=SavedModelBuilder)
loader = types.SimpleNamespace(load=load, maybe_saved_model_directory=maybe_saved_model_directory)
signature_def_utils = types.SimpleNamespace(
    build_signature_def=build_signature_def,
    predict_signature_def=predict_signature_def,
    classification_signature_def=classification_signature_def,
    regression_signature_def=regression_signature_def,
    is_valid_signature=is_valid_signature,
)
utils = types.SimpleNamespace(
    build_tensor_info=build_tensor_info, get_tensor_from_tensor_info=get_tensor_from_tensor_info
)
