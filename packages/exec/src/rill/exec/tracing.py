"""Step statistics from traced runs, and their Chrome trace (JSON) form.

`RunOptions(trace_level=FULL_TRACE)` makes the executors record, per node: device, thread, start,
end and output sizes; `fill_step_stats` turns the records into RunMetadata.step_stats, and
`chrome_trace(step_stats)` into the JSON that chrome://tracing and Perfetto open.
"""

from __future__ import annotations

import json
import threading

from rill.graph import dtypes

__all__ = ["fill_step_stats", "chrome_trace"]


def fill_step_stats(step_stats, records) -> None:
    by_device: dict[str, object] = {}
    names = {t.ident: t.name for t in threading.enumerate()}
    for node, thread_id, start, end, outputs in records:
        device = node.device.name if getattr(node, "device", None) is not None else "?"
        dev = by_device.get(device)
        if dev is None:
            dev = by_device[device] = step_stats.dev_stats.add(device=device)
        ns = dev.node_stats.add()
        ns.node_name = node.name
        ns.timeline_label = f"{node.name} = {node.type}()"
        tid = thread_id & 0xFFFFFFFF
        ns.thread_id = tid
        dev.thread_names[tid] = names.get(thread_id, str(thread_id))
        ns.all_start_nanos = start
        ns.op_start_rel_nanos = 0
        ns.op_end_rel_nanos = end - start
        ns.all_end_rel_nanos = end - start
        ns.all_start_micros = start // 1000
        ns.op_end_rel_micros = (end - start) // 1000
        ns.all_end_rel_micros = (end - start) // 1000
        for slot, desc_tuple in enumerate(outputs):
            out = ns.output.add(slot=slot)
            if desc_tuple is None:
                continue
            dtype, shape, nbytes = desc_tuple
            desc = out.tensor_description
            try:
                desc.dtype = dtypes.as_dtype(dtype).enum
            except TypeError:
                pass
            for d in shape:
                desc.shape.dim.add(size=d)
            desc.allocation_description.requested_bytes = nbytes
            desc.allocation_description.allocated_bytes = nbytes
            desc.allocation_description.allocator_name = "cpu"


def chrome_trace(step_stats) -> str:
    """The Chrome trace-event JSON of a StepStats (one process per device, one row per thread)."""
    events = []
    for pid, dev in enumerate(step_stats.dev_stats):
        events.append({"name": "process_name", "ph": "M", "pid": pid,
                       "args": {"name": dev.device}})  # fmt: skip
        for tid, tname in dev.thread_names.items():
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                           "args": {"name": tname}})  # fmt: skip
        for ns in dev.node_stats:
            shapes = [[d.size for d in o.tensor_description.shape.dim] for o in ns.output]
            events.append({
                "name": ns.node_name,
                "cat": "Op",
                "ph": "X",
                "pid": pid,
                "tid": ns.thread_id,
                "ts": ns.all_start_nanos / 1000.0,
                "dur": max(ns.all_end_rel_nanos / 1000.0, 0.001),
                "args": {"label": ns.timeline_label, "output_shapes": shapes,
                         "output_bytes": sum(o.tensor_description.allocation_description
                                             .requested_bytes for o in ns.output)},
            })  # fmt: skip
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ns"})
