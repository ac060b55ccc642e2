"""Shared-memory bank conflicts: words 0, 32, 64, 96 all live in bank 0 and take 4 wavefronts
(a 4-way conflict); words 0, 1, 2, 3 sit in four banks and take one.

Shared memory has 32 banks of 4 bytes (from the machine model); word w is in bank w mod 32, and
one wavefront delivers one word per bank. First the bank model on address lists, then a kernel
doing both accesses, analysed statically from its PTX (ptxgen banks), run, and fixed by the
padding the analysis suggests.

    python samples/bank_conflicts.py
"""
import numpy as np
from _common import backend, run_kernel, say_backend

from ptxgen import bank_conflicts, emit_module, isa
from ptxgen.analysis.banks_static import static_bank_conflicts
from ptxgen.ir import Builder, Module, Param, ptr
from ptxgen.ir import types as T
from ptxgen.parse import parse_ptx

LANES = 4                          # the four lanes of the example; a full warp follows


def kernel(stride):
    """Each thread t of one CTA fills smem, then reads word stride*t and word t into out."""
    m = Module(target="sm_90")
    k = m.add_kernel("strided", [Param("x", T.u64, ptr(T.f32)), Param("out", T.u64, ptr(T.f32))])
    b = Builder(k)
    smem = b.shared("smem", T.f32, 32 * 33)
    tid = b.special("tid.x")
    base = b.address_of(smem)
    x, out = b.param("x"), b.param("out")
    with b.for_range(0, 33, 1, type=T.u32, name="r") as r:       # fill every word
        w = b.mad(r, 32, tid, name="w")
        b.st("shared", b.add(base, b.shl(w, 2)), b.ld("global", T.f32, b.element_addr(x, w, 4)))
    b.bar_sync(0)
    strided = b.ld("shared", T.f32, b.add(base, b.mul(tid, 4 * stride)), name="s")
    consecutive = b.ld("shared", T.f32, b.add(base, b.shl(tid, 2)), name="c")
    b.st("global", b.element_addr(out, tid, 4), b.add(strided, consecutive))
    b.ret()
    return m


def main():
    h = isa.load("sm_90").header
    where = backend()
    print(f"{h.shared_banks} banks of {h.shared_bank_bytes} bytes: word w is in bank "
          f"w mod {h.shared_banks}\n")
    print("1. the bank model (ptxgen.bank_conflicts) on word addresses of 4-byte loads:")
    for label, words in (("stride 32", [0, 32, 64, 96]), ("consecutive", [0, 1, 2, 3]),
                         ("stride 32, full warp", [32 * i for i in range(32)]),
                         ("stride 33, full warp", [33 * i for i in range(32)])):
        r = bank_conflicts([4 * w for w in words], 4)
        banks = sorted({w % h.shared_banks for w in words})
        shown = ", ".join(map(str, words if len(words) <= 4 else words[:3] + ["..."]))
        where_ = (f"bank {banks[0]}" if len(banks) == 1 else
                  f"banks {', '.join(map(str, banks))}" if len(banks) <= 4 else
                  f"{len(banks)} banks")
        print(f"  {label:<21} words {shown:<16} in {where_:<16} {r.wavefronts:>2} "
              f"wavefront(s), {r.degree:g}-way")

    print(f"\n2. a kernel reading word 32*t and word t ({LANES} threads), analysed from its PTX:")
    ptx = emit_module(kernel(32))
    module = parse_ptx(ptx)
    rep = static_bank_conflicts(module.entries[0], (LANES,), module=module)
    loads = [a for a in rep.accesses if a.kind == "load"]
    for a in loads:
        words = [x // 4 for x in a.lane_addresses]
        print(f"  PTX line {a.line}: {a.text}")
        print(f"    address {a.expression} → words {words}: {a.wavefronts} wavefront(s), "
              f"ideal {a.ideal}, {a.degree:g}-way")
    print(f"  suggestion: {rep.variables['smem'].get('suggestion')}")

    print("\n3. with rows padded to 33 words (stride 33), a full warp of 32 threads:")
    for stride in (32, 33):
        m = kernel(stride)
        r = static_bank_conflicts(m.kernel("strided"), (32,), module=m)
        a = next(a for a in r.accesses if a.kind == "load")
        print(f"  stride {stride}: {a.wavefronts} wavefront(s) ({a.degree:g}-way)")

    x = np.arange(32 * 33, dtype=np.float32)
    out = np.zeros(LANES, np.float32)
    where, _ = run_kernel(kernel(32), "strided", 1, LANES, [x, out])
    want = x[32 * np.arange(LANES)] + x[np.arange(LANES)]
    ok = bool(np.array_equal(out, want))
    print(f"\n4. run on {say_backend(where)}: out = smem[32t] + smem[t] = {out.tolist()} "
          f"({'ok' if ok else 'WRONG'}); the conflict costs time, not correctness")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
