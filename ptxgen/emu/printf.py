"""vprintf (CUDA's device printf, Numba's print()) formatted on the host.

A kernel calls `vprintf(format, args)`: a generic pointer to the C format string and one to a
buffer holding the arguments, each aligned to its size (ints of 4 or 8 bytes by their length
modifier, doubles, pointers). The emulator formats each calling thread's line when the call
executes, in thread order within a warp group and in execution order across them, and keeps the
lines on the launch; emulate() writes them to stdout when the kernel ends, as the GPU's printf
buffer is flushed at synchronization.
"""
import re

import numpy as np

_SPEC = re.compile(r"%([-+ #0]*)(\d+|\*)?(?:\.(\d+|\*))?(hh|h|ll|l|j|z|t|L)?"
                   r"([diouxXeEfFgGaAcspn%])")
MAX_STRING = 4096


def build_vprintf(load, store, fmt_off, args_off, ret_off):
    """An op fn(st, m) for one `call (ret), vprintf, (fmt, args)` site. `load(st, space, lanes,
    addr, dtype)`/`store(...)` access the emulator's memory; *_off are the thread-local offsets
    of the call-sequence parameters (ret_off None: the result is not kept)."""
    u64 = np.dtype(np.uint64)

    def fn(st, m):
        lanes = st.lane_ids if m is None else np.flatnonzero(m)
        for lane in lanes:
            one = np.array([lane])

            def word(space, addr, dt):
                got = load(st, space, one, np.array([addr], u64), np.dtype(dt))[0]
                return np.asarray(got).reshape(-1)[0]

            fmt_addr = int(word("local", fmt_off, u64))
            args_addr = int(word("local", args_off, u64))
            text, n = format_line(lambda a, dt: word("generic", a, dt), fmt_addr, args_addr)
            st.launch.printed.append(text)
            if ret_off is not None:
                store(st, "local", one, np.array([ret_off], u64), np.dtype(np.int32),
                      [np.array([n], np.int32)])
    return fn


def read_string(read, addr):
    out = bytearray()
    while len(out) < MAX_STRING:
        c = int(read(addr + len(out), np.uint8))
        if c == 0:
            break
        out.append(c)
    return out.decode("utf-8", errors="replace")


def format_line(read, fmt_addr, args_addr):
    """(text, number of arguments) of one printf call; read(addr, dtype) reads memory."""
    fmt = read_string(read, fmt_addr)
    pos = args_addr
    n = 0

    def take(size, dt):
        nonlocal pos, n
        pos = -(-pos // size) * size
        v = read(pos, dt)
        pos += size
        n += 1
        return v

    def conv(m):
        flags, width, prec, length, kind = m.groups()
        if kind == "%":
            return "%"
        if width == "*":
            width = str(int(take(4, np.int32)))
        if prec == "*":
            prec = str(int(take(4, np.int32)))
        spec = "%" + flags + (width or "") + (f".{prec}" if prec is not None else "")
        wide = length in ("l", "ll", "j", "z", "t")
        if kind in "di":
            return (spec + "d") % int(take(8, np.int64) if wide else take(4, np.int32))
        if kind in "ouxX":
            return (spec + kind) % int(take(8, np.uint64) if wide else take(4, np.uint32))
        if kind in "eEfFgGaA":
            v = float(take(8, np.float64))
            return (spec + kind).replace("a", "e").replace("A", "E") % v
        if kind == "c":
            return (spec + "c") % chr(int(take(4, np.uint32)) & 0xFF)
        if kind == "s":
            return (spec + "s") % read_string(read, int(take(8, np.uint64)))
        if kind == "p":
            return "0x%x" % int(take(8, np.uint64))
        return ""                                     # %n writes nothing here
    return _SPEC.sub(conv, fmt), n
