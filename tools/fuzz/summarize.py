"""Prints the markdown table of campaign summaries: `python -m tools.fuzz.summarize FILE.json...`
(the files `campaign --json` writes, e.g. tools/fuzz/results/*.json)."""

from __future__ import annotations

import json
import sys

from tools.fuzz.sandbox import OUTCOMES


def table(paths: list[str]) -> str:
    head = "| format | code | seed | cases | " + " | ".join(OUTCOMES) + " |"
    rows = [head, "|" + "---|" * (4 + len(OUTCOMES))]
    for p in paths:
        with open(p) as fh:
            s = json.load(fh)
        cells = [s["format"], s.get("commit", "?"), str(s["seed"]), f"{s['cases']:,}"]
        rows.append("| " + " | ".join(cells + [f"{s[o]:,}" for o in OUTCOMES]) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table(sys.argv[1:]))
