"""Every import in packages/ must be allowed by the layering table of DESIGN.md.

The table, as DESIGN.md states it (third-party names are top-level import names):

| package      | may import                                                           |
|--------------|----------------------------------------------------------------------|
| graph        | numpy, protobuf, ml_dtypes (bfloat16); onnx only in rill.graph.onnx (its backend, CLI and parity report also run graphs with rill.exec) |
| autodiff     | rill.graph, numpy (the gradient checker's arithmetic)                |
| exec         | rill.graph, numpy, protobuf (RunOptions/StepStats); cupy and cupyx, which the cupy wheels ship (`gpu` extras); numba only in rill.exec.kernels._loops, ._lstm_loops, ._conv_loops, ._exp_tanh_loops, ._depthwise_loops, ._winograd_loops, ._winograd_team and ._direct_conv_loops (the compiled loops, see the exec README), and with llvmlite in ._sigmoid_loops (explicit fused multiply-adds), ._spin (the intra-op pool's compiled waits), ._depthwise_vec, ._conv_vec and ._gemm_vec (loops emitted as LLVM vector IR); threadpoolctl only in rill.exec.threads (BLAS threads) |
| distributed  | rill.graph, rill.exec, grpcio, protobuf, numpy                       |
| train        | rill.graph, rill.autodiff, rill.exec, numpy                          |
| mobile       | interpreter: numpy, flatbuffers, tflite (schema bindings); threadpoolctl only in rill.mobile.threads (BLAS threads); numba only in rill.mobile.kernels._loops, ._program_loops, ._program_gemm, ._program_math, ._program_dw, ._program_direct, ._program_dwtiles and ._program_int8 (optional compiled loops, the `jit` extra); rill.mobile.convert also rill.graph, rill.exec |
| compat       | every other rill package, absl-py, numpy                             |

rill.train.summary also imports tensorboardX (the event writer and protos, see the train README).
"""

from __future__ import annotations

import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
STDLIB = set(sys.stdlib_module_names)

ALLOWED: dict[str, set[str]] = {
    "graph": {"numpy", "google.protobuf", "ml_dtypes"},
    "autodiff": {"rill.graph", "numpy"},
    "exec": {"rill.graph", "numpy", "cupy", "cupyx", "google.protobuf"},
    "distributed": {"rill.graph", "rill.exec", "grpc", "google.protobuf", "numpy"},
    "train": {"rill.graph", "rill.autodiff", "rill.exec", "numpy"},
    "mobile": {"numpy", "flatbuffers", "tflite"},
    "compat": {
        "rill.graph",
        "rill.autodiff",
        "rill.exec",
        "rill.distributed",
        "rill.train",
        "rill.mobile",
        "absl",
        "numpy",
    },
}
# Sub-packages with extra allowances (an extra's own dependencies).
EXTRA: dict[str, set[str]] = {
    "rill.graph.onnx": {"onnx"},
    # The ONNX backend and CLI run graphs: they import rill.exec lazily (rill-exec installed).
    "rill.graph.onnx.backend": {"rill.exec"},
    "rill.graph.onnx.cli": {"rill.exec"},
    # The parity report compares with onnxruntime (a test peer), imported where it runs.
    "rill.graph.onnx.parity": {"rill.exec", "onnxruntime"},
    # The default export opset is the newest the installed onnxruntime loads (optional import).
    "rill.graph.onnx.versions": {"onnxruntime"},
    "rill.mobile.convert": {"rill.graph", "rill.exec"},
    # The compiled CPU loops; every kernel keeps a numpy path for when numba is unavailable.
    "rill.exec.kernels._loops": {"numba"},
    # TensorBoard event files: tensorboardX's record writer and Summary/Event protos.
    "rill.train.summary": {"tensorboardX"},
    "rill.exec.kernels._lstm_loops": {"numba"},
    # The interpreter's optional compiled loops (the `jit` extra); numpy paths stay the default.
    "rill.mobile.kernels._loops": {"numba"},
    "rill.mobile.kernels._program_loops": {"numba"},  # whole-subgraph programs (optional)
    "rill.mobile.kernels._program_gemm": {"numba"},  # their register-tiled products
    "rill.mobile.kernels._program_math": {"numba"},  # their exp and GELU
    "rill.mobile.kernels._program_int8": {"numba"},  # fused int8 runs (optional)
    "rill.mobile.kernels._program_dw": {"numba"},  # the programs' depthwise convolution
    "rill.mobile.kernels._program_direct": {"numba"},  # their direct convolutions' tiles
    "rill.mobile.kernels._program_dwtiles": {"numba"},
    "rill.exec.kernels._conv_loops": {"numba"},
    # The float32 Sigmoid's and exp's loops: numba, with llvmlite for the explicit llvm.fma.
    "rill.exec.kernels._sigmoid_loops": {"numba", "llvmlite"},
    "rill.exec.kernels._exp_tanh_loops": {"numba"},
    "rill.exec.kernels._winograd_loops": {"numba"},
    "rill.exec.kernels._winograd_team": {"numba"},  # their pieces through the pool's team
    "rill.exec.kernels._depthwise_loops": {"numba"},
    "rill.exec.kernels._direct_conv_loops": {"numba"},
    # The intra-op pool's compiled waits (atomic loads and stores emitted through llvmlite,
    # numba's own code generator).
    "rill.exec.kernels._spin": {"numba", "llvmlite"},
    # Register-blocked convolution loops emitted as LLVM vector IR (numba intrinsics).
    "rill.exec.kernels._depthwise_vec": {"numba", "llvmlite"},
    "rill.exec.kernels._conv_vec": {"numba", "llvmlite"},
    "rill.exec.kernels._gemm_vec": {"numba", "llvmlite"},
    # The thread policy takes the BLAS library's threads under rill's control.
    "rill.exec.threads": {"threadpoolctl"},
    # The interpreter's num_threads bounds the BLAS library's threads during invoke.
    "rill.mobile.threads": {"threadpoolctl"},
}


def _module_name(path: pathlib.Path) -> str:
    src = next(p for p in path.parents if p.name == "src")
    return ".".join(path.relative_to(src).with_suffix("").parts).removesuffix(".__init__")


def _imports(path: pathlib.Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def _allowed(module: str, pkg: str, imported: str) -> bool:
    top = imported.split(".")[0]
    if top in STDLIB or top == "__future__":
        return True
    if imported == f"rill.{pkg}" or imported.startswith(f"rill.{pkg}."):
        return True
    allowed = set(ALLOWED[pkg])
    for prefix, extra in EXTRA.items():
        if module == prefix or module.startswith(prefix + "."):
            allowed |= extra
    return any(imported == a or imported.startswith(a + ".") for a in allowed)


def violations(root: pathlib.Path = ROOT) -> list[str]:
    out = []
    for path in sorted(root.glob("packages/*/src/rill/**/*.py")):
        pkg = path.relative_to(root).parts[1]
        module = _module_name(path)
        for line, imported in _imports(path):
            if imported == "rill":
                out.append(f"{path.relative_to(root)}:{line}: bare 'import rill'")
            elif not _allowed(module, pkg, imported):
                out.append(f"{path.relative_to(root)}:{line}: {module} imports {imported}")
    return out


def test_imports_follow_the_layering_table():
    bad = violations()
    assert not bad, "imports that DESIGN.md's table does not allow:\n" + "\n".join(bad)


def test_no_rill_init_anywhere():
    assert not list(ROOT.glob("packages/*/src/rill/__init__.py"))


def test_checker_catches_a_violation(tmp_path):
    bad = tmp_path / "packages" / "graph" / "src" / "rill" / "graph" / "bad.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("import numpy\nfrom rill.exec import session\n")
    assert violations(tmp_path) == [
        "packages/graph/src/rill/graph/bad.py:2: rill.graph.bad imports rill.exec"
    ]
