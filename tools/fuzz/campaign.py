"""Runs a fuzz campaign: `python -m tools.fuzz.campaign FORMAT [--cases N] [--seed S]`.

Each case is a mutation of a seed (tests' fixtures and small models the harness builds), run in
a fork under a 4 GiB memory cap and a 10 s time cap (tools/fuzz/sandbox.py). Prints the tally of
outcomes and one line per distinct escape/hang/crash/blowup; `--save DIR` keeps those inputs.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("RILL_INTRA_OP_THREADS", "1")

from tools.fuzz.sandbox import MEM_CAP, OUTCOMES, TIME_CAP, run_case  # noqa: E402
from tools.fuzz.targets import TARGETS  # noqa: E402

_NUMBERS = re.compile(r"0x[0-9a-f]+|\d{3,}")


def _signature(outcome: str, detail: str) -> str:
    """A key grouping findings of one cause: the exception type and where it was raised."""
    head = detail.split(":", 1)[0] if outcome == "escape" else detail
    return f"{outcome}: " + _NUMBERS.sub("N", head)


def campaign(fmt: str, cases: int, seed: int = 0, mem_cap: int = MEM_CAP,
             time_cap: int = TIME_CAP, save: str | None = None, progress=None):  # fmt: skip
    """(tally of outcomes, {signature: (count, example detail)})."""
    target = TARGETS[fmt]
    rng = random.Random(seed)
    seeds = target.seeds()
    clean = target.clean()
    # Forks inherit no threads: kernels must not split work over a pool made before the fork.
    import rill.exec.kernels.intra_op as intra_op

    intra_op._THREADS = 1
    # Run the (trusted) seeds once in the driver itself, so that every module and kernel is
    # imported before the forks: each case then pays for its own work only.
    for s in seeds:
        try:
            target.run(s)
        except Exception:  # noqa: BLE001, S110 - a seed may end in a clean error
            pass
    tally = collections.Counter()
    findings: dict[str, list] = {}
    for i in range(cases):
        data = target.mutate(rng.choice(seeds), rng)
        outcome, detail = run_case(target.run, data, clean, mem_cap, time_cap)
        tally[outcome] += 1
        if outcome not in ("accepted", "clean"):
            sig = _signature(outcome, detail)
            f = findings.setdefault(sig, [0, detail])
            f[0] += 1
            if save and f[0] == 1:
                os.makedirs(save, exist_ok=True)
                with open(os.path.join(save, f"{fmt}-{i}-{outcome}.bin"), "wb") as fh:
                    fh.write(data)
        if progress and (i + 1) % progress == 0:
            print(f"{fmt}: {i + 1} cases {dict(tally)}", file=sys.stderr, flush=True)
    return tally, findings


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("format", choices=sorted(TARGETS))
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", default=None)
    ap.add_argument("--progress", type=int, default=500)
    ap.add_argument("--json", default=None, help="write a summary of the campaign to this file")
    a = ap.parse_args(argv)
    tally, findings = campaign(a.format, a.cases, a.seed, save=a.save, progress=a.progress)
    if a.json:
        summary = {
            "format": a.format,
            "cases": a.cases,
            "seed": a.seed,
            "mem_cap_bytes": MEM_CAP,
            "time_cap_s": TIME_CAP,
            **{o: tally[o] for o in OUTCOMES},
            "findings": [{"signature": sig, "count": n, "example": d[:200]}
                         for sig, (n, d) in sorted(findings.items(), key=lambda kv: -kv[1][0])],
        }  # fmt: skip
        with open(a.json, "w") as fh:
            json.dump(summary, fh, indent=1)
            fh.write("\n")
    print(f"{a.format}: cases {a.cases}, " + ", ".join(f"{o} {tally[o]}" for o in OUTCOMES))
    for sig, (n, detail) in sorted(findings.items(), key=lambda kv: -kv[1][0]):
        print(f"  {n:5d}  {sig}  | {detail[:200]}")
    bad = sum(tally[o] for o in OUTCOMES[2:])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
