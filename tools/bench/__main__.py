"""python -m tools.bench [NAME ...]   (no NAME: list the benchmarks)"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys

from tools.bench import print_rows


def main(argv: list[str]) -> int:
    import tools.bench as pkg

    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))
    if not argv:
        print("benchmarks:", " ".join(names))
        print("run: python -m tools.bench NAME [NAME ...]   or   python -m tools.bench all")
        return 0
    wanted = names if argv == ["all"] else argv
    _print_blas()
    rows = []
    for name in wanted:
        if name not in names:
            print(f"unknown benchmark {name!r}; known: {', '.join(names)}")
            return 2
        mod = importlib.import_module(f"tools.bench.{name}")
        print(f"# {name}: {mod.__doc__.strip().splitlines()[0]}", flush=True)
        rows.extend(mod.run())
    print_rows(rows)
    return 0


def _print_blas() -> None:
    """Which BLAS rill's products run on, and its kernels: an OPENBLAS_CORETYPE set in the
    environment (some machines set one for old OpenBLAS builds) picks older, slower kernels."""
    try:
        import numpy  # noqa: F401 - loads the BLAS
        from threadpoolctl import threadpool_info

        libs = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    except ImportError:
        return
    forced = {
        k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ
    }
    for i in libs:
        print(f"# BLAS: {i.get('internal_api')} {i.get('version')}, kernels "
              f"{i.get('architecture', '?')}" + (f" (set by {forced})" if forced else ""))  # fmt: skip


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
