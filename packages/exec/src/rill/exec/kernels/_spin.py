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


def _cell(context, builder, signature, args):
    """The pointer to cells[i] for an intrinsic whose first two arguments are (cells, i)."""
    aryty = signature.args[0]
    ary = context.make_array(aryty)(context, builder, args[0])
    return cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]])


@intrinsic
def _load(typingctx, cells, i):  # pragma: no cover - compiled
    sig = types.int64(cells, i)

    def codegen(context, builder, signature, args):
        return builder.load_atomic(_cell(context, builder, signature, args), "acquire", 8)

    return sig, codegen


@intrinsic
def _store(typingctx, cells, i, value):  # pragma: no cover - compiled
    sig = types.void(cells, i, value)

    def codegen(context, builder, signature, args):
        builder.store_atomic(args[2], _cell(context, builder, signature, args), "release", 8)
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
        _settle(cells, i, settle)
    return v


@_jit
def _settle(cells, i, settle):  # pragma: no cover - compiled
    """`settle` more polls of cells[i] after the change was seen (see the module's doc)."""
    for _ in range(settle):
        _yield()
        _load(cells, i)


# The team: compiled kernels split over the pool's polling workers with no Python in the
# hand-off (rill.exec.kernels.intra_op.team). An int64 array of cells, each on its own cache
# line: SEQ counts posts; CLAIM holds the job's number (upper bits) and its next unclaimed
# piece (lower CLAIM_BITS); DONE counts finished pieces; FN and ARGS are the job's piece
# function (a C function pointer, void(int64 *args, int64 piece)) and its arguments' address;
# PIECES its piece count; POLLING the workers polling now; LOCK is held by the one caller whose
# job the team runs (another caller runs alone meanwhile); SERVED counts pieces the workers ran.
SEQ, CLAIM, DONE, FN, ARGS, PIECES, POLLING, LOCK, SERVED = (8 * i for i in range(9))
TEAM_CELLS = 8 * 9
CLAIM_BITS = 20
# A piece function's C signature: void(int64 *args, int64 piece).
PIECE_SIG = types.void(types.CPointer(types.int64), types.int64)


@intrinsic
def _cas(typingctx, cells, i, old, new):  # pragma: no cover - compiled
    """cells[i] = new if it holds old (sequentially consistent); whether it did."""
    sig = types.boolean(cells, i, old, new)

    def codegen(context, builder, signature, args):
        ptr = _cell(context, builder, signature, args)
        pair = builder.cmpxchg(ptr, args[2], args[3], "seq_cst", "seq_cst")
        return builder.extract_value(pair, 1)

    return sig, codegen


@intrinsic
def _add(typingctx, cells, i, value):  # pragma: no cover - compiled
    """cells[i] += value atomically (sequentially consistent); the old value."""
    sig = types.int64(cells, i, value)

    def codegen(context, builder, signature, args):
        return builder.atomic_rmw("add", _cell(context, builder, signature, args), args[2],
                                  "seq_cst")  # fmt: skip

    return sig, codegen


@intrinsic
def address(typingctx, ary):  # pragma: no cover - compiled
    """The address of an array's first element, as an int64."""
    sig = types.int64(ary)

    def codegen(context, builder, signature, args):
        import llvmlite.ir as ir

        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.ptrtoint(data, ir.IntType(64))

    return sig, codegen


@intrinsic
def _pointer(typingctx, addr, like):  # pragma: no cover - compiled
    """The address `addr` (an int64) as a pointer to `like`'s type (a scalar)."""
    sig = types.CPointer(like)(addr, like)

    def codegen(context, builder, signature, args):
        elem = context.get_value_type(signature.args[1])
        return builder.inttoptr(args[0], elem.as_pointer())

    return sig, codegen


@_jit
def array_at(addr, n, like):  # pragma: no cover - compiled
    """The n elements of `like`'s type at address `addr` (a team piece's operand), as an
    array (at least one element's view, so an empty operand still has a valid array)."""
    return numba.carray(_pointer(addr, like), max(n, 1))[:n]


@intrinsic
def _call(typingctx, fn, argp, piece):  # pragma: no cover - compiled
    """Calls the C function at address fn as fn((int64 *) argp, piece)."""
    sig = types.void(fn, argp, piece)

    def codegen(context, builder, signature, args):
        import llvmlite.ir as ir

        i64 = ir.IntType(64)
        fnty = ir.FunctionType(ir.VoidType(), [i64.as_pointer(), i64])
        target = builder.inttoptr(args[0], fnty.as_pointer())
        builder.call(target, [builder.inttoptr(args[1], i64.as_pointer()), args[2]])
        return context.get_dummy_value()

    return sig, codegen


@_jit
def _take(team, job):  # pragma: no cover - compiled
    """Claims and runs pieces of job number `job` until none is left (or another job has
    replaced it); the number run. The fields are read before the claim word: a caller posts
    a job only once every piece of the last one is claimed and finished, and first stores
    its new number in the claim word, so a worker that read any new field sees a claim word
    of another number and takes nothing, and one that claims a piece read its job's fields."""
    fn, argp, pieces = _load(team, FN), _load(team, ARGS), _load(team, PIECES)
    ran = 0
    while True:
        c = _load(team, CLAIM)
        piece = c & ((1 << CLAIM_BITS) - 1)
        if c >> CLAIM_BITS != job or piece >= pieces:
            return ran
        if _cas(team, CLAIM, c, c + 1):
            _call(fn, argp, piece)
            _add(team, DONE, 1)
            ran += 1


@_jit
def store_serve(cells, si, value, i, old, polls, settle, team):  # pragma: no cover - compiled
    """A pool worker's wait for its next Python job: stores `value` in cells[si] (released by
    the GIL already, so a thread polling for it takes the GIL without waiting), then polls
    cells[i] until it differs from `old` as await_change does, running the pieces of any team
    job posted meanwhile and polling `polls` more times after each. Returns the last value of
    cells[i] read."""
    _store(cells, si, value)
    _add(team, POLLING, 1)
    seen = _load(team, SEQ)
    v = _load(cells, i)
    n = 0
    while v == old and n < polls:
        s = _load(team, SEQ)
        if s != seen:
            seen = s
            ran = _take(team, s)
            if ran:
                _add(team, SERVED, ran)
            n = 0
        else:
            _yield()
            n += 1
        v = _load(cells, i)
    _add(team, POLLING, -1)
    if v != old:
        _settle(cells, i, settle)
    return v


@_jit
def polling(team):  # pragma: no cover - compiled
    """The pool's workers polling the team now."""
    return _load(team, POLLING)


@_jit
def team_run(team, fn, args, pieces):  # pragma: no cover - compiled
    """Runs fn(args, piece) for every piece: posted to the team where a worker polls and no
    other caller holds it, the caller taking pieces beside the workers and waiting only for
    pieces a worker took; else every piece on the caller."""
    argp = address(args)
    if (1 < pieces < (1 << CLAIM_BITS) - 1 and _load(team, POLLING) > 0
            and _cas(team, LOCK, 0, 1)):  # fmt: skip
        job = (_load(team, SEQ) + 1) & ((1 << 40) - 1)
        # The new number with every piece claimed first: a worker that reads any of the new
        # fields then finds a claim it cannot take for the old job (see _take).
        _store(team, CLAIM, (job << CLAIM_BITS) | ((1 << CLAIM_BITS) - 1))
        _store(team, FN, fn)
        _store(team, ARGS, argp)
        _store(team, PIECES, pieces)
        _store(team, DONE, 0)
        _store(team, CLAIM, job << CLAIM_BITS)
        _store(team, SEQ, job)
        _take(team, job)
        while _load(team, DONE) < pieces:
            _yield()
        _store(team, LOCK, 0)
        return
    for p in range(pieces):
        _call(fn, argp, p)
