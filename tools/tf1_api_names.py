"""Writes tools/fixtures/tf1_api.json: TensorFlow's TF1 public names (`tf.compat.v1`) for the
modules rill.compat.v1 covers, so a test can report rill's coverage without TensorFlow.

Needs TensorFlow (any 2.x keeps the TF1 API as tf.compat.v1):

    /work/peer/bin/python tools/tf1_api_names.py        # or any python with tensorflow

A name is public when it does not start with "_"; submodules are listed under their own key,
not as names of their parent.
"""

from __future__ import annotations

import json
import pathlib
import types

OUT = pathlib.Path(__file__).resolve().parent / "fixtures" / "tf1_api.json"

# The modules of tf.compat.v1 that rill.compat.v1 mirrors ("" is the top level).
MODULES = [
    "", "nn", "nn.rnn_cell", "layers", "train", "losses", "metrics", "summary", "app", "flags",
    "gfile", "logging", "errors", "random", "math", "linalg", "image", "io", "saved_model",
    "debugging", "initializers", "dtypes", "data", "data.experimental",
]  # fmt: skip


# tf.compat.v1.layers is served by tf_keras in TensorFlow 2.x (not installed with TensorFlow);
# these are TensorFlow 1.15's tf.layers names (its API docs), used when it cannot be listed.
TF115_LAYERS = sorted(
    [f"{k}{d}D" for k in ("AveragePooling", "Conv", "MaxPooling") for d in (1, 2, 3)]
    + [f"{k}{d}d" for k in ("average_pooling", "conv", "max_pooling") for d in (1, 2, 3)]
    + ["BatchNormalization", "Conv2DTranspose", "Conv3DTranspose", "Dense", "Dropout",
       "Flatten", "InputSpec", "Layer", "SeparableConv1D", "SeparableConv2D",
       "batch_normalization", "conv2d_transpose", "conv3d_transpose", "dense", "dropout",
       "flatten", "separable_conv1d", "separable_conv2d"]
)  # fmt: skip


def names_in_source(tf, path: str) -> list[str]:
    """The names a generated API __init__.py imports, read as text (for a module whose lazy
    loader fails without tf_keras)."""
    import re

    init = pathlib.Path(tf.__file__).parent / "_api/v2/compat/v1" / path.replace(".", "/")
    text = (init / "__init__.py").read_text()
    found = re.findall(r"^from \S+ import (\w+)(?: as (\w+))?", text, re.M)
    return sorted({b or a for a, b in found if not (b or a).startswith("_")})


def names_of(module) -> list[str]:
    out = []
    for n in dir(module):
        if n.startswith("_"):
            continue
        try:
            value = getattr(module, n)
        except Exception:  # noqa: BLE001 - a lazily loaded name whose backend is missing
            value = None
        if isinstance(value, types.ModuleType):
            continue
        out.append(n)
    return sorted(out)


def main() -> None:
    import tensorflow as tf

    v1 = tf.compat.v1
    modules = {}
    for path in MODULES:
        try:
            m = v1
            for part in path.split(".") if path else []:
                m = getattr(m, part)
            modules[path or "tf"] = names_of(m)
        except Exception as e:  # noqa: BLE001 - e.g. tf.compat.v1.layers needs tf_keras
            if path == "layers":
                modules[path] = TF115_LAYERS
            else:
                modules[path] = names_in_source(tf, path)
            print(f"tf.compat.v1.{path}: listed from {'TF 1.15' if path == 'layers' else 'source'}"
                  f" ({type(e).__name__}: {e})")  # fmt: skip
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps({"tensorflow_version": tf.__version__, "modules": modules}, indent=1) + "\n"
    )
    total = sum(len(v) for v in modules.values())
    print(f"wrote {OUT} ({total} names in {len(modules)} modules, TensorFlow {tf.__version__})")


if __name__ == "__main__":
    main()
