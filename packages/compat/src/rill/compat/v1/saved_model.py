"""`tf.saved_model` of TensorFlow 1.x (rill.train.saved_model): the SavedModel builder, loader,
signature helpers and constants."""

# ruff: noqa: F401 - a namespace of re-exports

from rill.train.saved_model import (
    SavedModelBuilder as Builder,
)
from rill.train.saved_model import (
    build_signature_def,
    build_tensor_info,
    builder,
    classification_signature_def,
    constants,
    contains_saved_model,
    get_tensor_from_tensor_info,
    is_valid_signature,
    load,
    loader,
    maybe_saved_model_directory,
    predict_signature_def,
    regression_signature_def,
    signature_constants,
    signature_def_utils,
    simple_save,
    tag_constants,
    utils,
)

# The constants TF1 also exports at the top of tf.saved_model.
for _ns in (constants, tag_constants, signature_constants):
    globals().update(vars(_ns))
del _ns
