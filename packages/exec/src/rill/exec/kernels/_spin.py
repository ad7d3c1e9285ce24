"""Compiled waits for the intra-op pool (rill.exec.kernels.intra_op; import that module).

A thread that waits here polls one int64 cell of a numpy array with the GIL released, for at
most a given number of polls. Waking a sleeping thread costs what the operating system and the
hypervisor make it cost: on the 2-vCPU VMs this was tuned on, whose idle vCPUs halt at once
(the guest's halt polling is off), a hand-off from one rill thread to another and back took
90-120 µs through a condition variable, against a few µs for a thread that polls. A poll that
sees the change waits `settle` more polls before it returns: the thread that stored it still
holds the GIL for a few µs (the rest of its Python up to its own kernel), and a thread that
asks for the GIL meanwhile sleeps until it is released, which costs the same wake-up again.

The loads are atomic with acquire order and the stores release order (llvmlite emits them), so
the compiler can neither hoist a load out of the loop nor reorder a store, on any target. Each
poll is preceded by sched_yield(): a runnable thread that shares the CPU (a kernel on one of the
process's inter-op threads, another process) runs at once instead of after the poll, and with
none the call returns at once (about 0.2 µs a poll here).
"""

from __future__ import annotations

import numba
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_jit = numba.njit(nogil=True, cache=True)


@intrinsic
def _load(typingctx, cells, i):  # pragma: no cover - compiled
    sig = types.int64(cells, i)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]])
        return builder.load_atomic(ptr, "acquire", 8)

    return sig, codegen


@intrinsic
def _store(typingctx, cells, i, value):  # pragma: no cover - compiled
    sig = types.void(cells, i, value)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]])
        builder.store_atomic(args[2], ptr, "release", 8)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _yield(typingctx):  # pragma: no cover - compiled
    """sched_yield(): another runnable thread on this CPU (the process's own: a kernel on an
    inter-op thread) runs now instead of waiting for the poll to end; none, it returns at once."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        import llvmlite.ir as ir

        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield"
        )
        builder.call(fn, [])
        return context.get_dummy_value()

    return sig, codegen


@_jit
def await_change(cells, i, old, polls, settle):  # pragma: no cover - compiled
    """Polls cells[i] until it differs from `old`, at most `polls` times; after a change,
    `settle` more polls before returning. Returns the last value read."""
    v = _load(cells, i)
    n = 0
    while v == old and n < polls:
        _yield()
        v = _load(cells, i)
        n += 1
    if v != old:
        for _ in range(settle):
            _yield()
            _load(cells, i)
    return v


@_jit
def store_await(cells, si, value, i, old, polls, settle):  # pragma: no cover - compiled
    """Stores `value` in cells[si] (released by the GIL already, so a thread polling for it
    takes the GIL without waiting), then await_change(cells, i, old, polls, settle)."""
    _store(cells, si, value)
    return await_change(cells, i, old, polls, settle)
