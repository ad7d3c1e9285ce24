"""Runs one fuzz case in a forked child under a memory cap and a time cap, and classifies it.

The driver process imports rill once; each case runs in a fork of it (cheap), so that a crash,
a hang or a blowup of one case cannot touch the next. Outcomes:

- accepted: the input loaded (and ran) without error;
- clean:    a documented rill error (the target's `clean` classes);
- escape:   any other exception;
- hang:     the time cap ended it (10 s of CPU time, or 30 s of wall time while blocked);
- crash:    another signal (SIGSEGV, SIGABRT, ...);
- blowup:   MemoryError, or killed (SIGKILL) under the memory cap.
"""

from __future__ import annotations

import os
import resource
import signal
import struct
import traceback

OUTCOMES = ("accepted", "clean", "escape", "hang", "crash", "blowup")
MEM_CAP = 4 << 30
TIME_CAP = 10


def _child(fn, data, clean, mem_cap, time_cap, w) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (mem_cap, mem_cap))
    # CPU time bounds a busy loop whatever the machine's load; a wall-clock alarm at three times
    # the cap bounds a blocked wait.
    resource.setrlimit(resource.RLIMIT_CPU, (time_cap, time_cap + 1))
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)
    signal.alarm(3 * time_cap)
    try:
        fn(data)
        outcome, detail = "accepted", ""
    except clean as e:
        outcome, detail = "clean", f"{type(e).__name__}: {str(e)[:300]}"
    except MemoryError as e:
        outcome, detail = "blowup", f"MemoryError: {str(e)[:300]}"
    except BaseException as e:  # noqa: BLE001 - classifying every escape is the point
        tb = traceback.extract_tb(e.__traceback__)
        at = f"{os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else "?"
        outcome, detail = "escape", f"{type(e).__name__} at {at}: {str(e)[:300]}"
    msg = f"{outcome}\n{detail}".encode("utf-8", "replace")
    os.write(w, struct.pack("<I", len(msg)) + msg)
    os._exit(0)


def run_case(fn, data, clean, mem_cap: int = MEM_CAP, time_cap: int = TIME_CAP):
    """(outcome, detail) of fn(data) run in a fork."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            _child(fn, data, clean, mem_cap, time_cap, w)
        finally:
            os._exit(1)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 1 << 16)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    raw = b"".join(chunks)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGXCPU:
            return "hang", f"over {time_cap} s of CPU time"
        if sig == signal.SIGALRM:
            return "hang", f"over {3 * time_cap} s of wall time"
        if sig == signal.SIGKILL:
            return "blowup", "killed (SIGKILL)"
        return "crash", f"signal {signal.Signals(sig).name}"
    if len(raw) < 4:
        return "crash", f"child exited {os.WEXITSTATUS(status)} without a result"
    text = raw[4:].decode("utf-8", "replace")
    outcome, _, detail = text.partition("\n")
    return outcome, detail
