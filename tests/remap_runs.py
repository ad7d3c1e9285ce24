"""Runs a graph with the remapper's fusions on and off, for the tests that compare the fused
kernels with the chains they replace (tests/exec/test_remap*.py)."""

from __future__ import annotations

from rill.exec import ConfigProto, RunMetadata, RunOptions, Session


def remap_config(remap: bool) -> ConfigProto:
    """A ConfigProto with the remapper on or off."""
    cfg = ConfigProto()
    cfg.rill.disable_remapper = not remap
    return cfg


def run_both(g, fetches, feeds):
    """(fused results, unfused results, op types of the fused plan)."""
    out: list = []
    types: list[str] = []
    for remap in (True, False):
        with Session(graph=g, config=remap_config(remap)) as s:
            md = RunMetadata()
            res = s.run(fetches, feeds, options=RunOptions(output_partition_graphs=True),
                        run_metadata=md)  # fmt: skip
            out.append(res)
            if remap:
                types = [n.op for gd in md.partition_graphs for n in gd.node]
    return out[0], out[1], types
