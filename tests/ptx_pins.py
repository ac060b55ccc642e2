"""The library kernels whose emitted PTX is pinned by hash (tests/test_ptx_pins.py): every
operator family, each instruction path (SIMT, sm_80 mma.sync, sm_90a wgmma), the layouts, the
odd-K packings and the attention variants. `python tests/ptx_pins.py` rewrites the pins."""
import hashlib
import json
import sys
from pathlib import Path

PINS = Path(__file__).parent / "data" / "ptx_pins.json"


def cases():
    """(label, operator factory, shape, arch); factories keep each build on a fresh object."""
    from ptxgen.ops import OPERATORS
    from ptxgen.ops.attention import Attention
    from ptxgen.ops.tc_matmul import TcMatmul
    out = []
    for name, op in sorted(OPERATORS.items()):
        for arch in ("sm_80", "sm_90"):
            out.append((f"{name}/{arch}", lambda op=op: op, {}, arch))
    mm_shapes = {"sq": dict(M=512, N=512, K=512), "oddk": dict(M=300, N=257, K=93),
                 "big": dict(M=4096, N=4096, K=4096), "skinny": dict(M=128, N=8192, K=8192)}
    for dtype in ("bf16", "f16", "tf32"):
        for al, bl in (("row", "col"), ("col", "row"), ("row", "row")):
            if dtype == "tf32" and (al, bl) != ("row", "col"):
                continue
            for out_t in ("f32", "bf16"):
                for sname, shape in mm_shapes.items():
                    for arch in ("sm_90a", "sm_80"):
                        if arch == "sm_80" and (al, bl) != ("row", "col"):
                            continue
                        out.append((f"tc_matmul/{dtype}/{al}{bl}/{out_t}/{sname}/{arch}",
                                    lambda d=dtype, a=al, b=bl, o=out_t:
                                    TcMatmul(dtype=d, out=o, a_layout=a, b_layout=b),
                                    shape, arch))
    for k_pack in ("ldg", "fused", "fused1"):
        out.append((f"tc_matmul/bf16/kpack_{k_pack}", lambda k=k_pack: TcMatmul(k_pack=k),
                    dict(M=4096, N=4096, K=4093), "sm_90a"))
    for dtype in ("bf16", "f16"):
        for D in (64, 128):
            for causal in (False, True):
                for arch in ("sm_90a", "sm_80"):
                    out.append((f"attention/{dtype}/D{D}/causal{int(causal)}/{arch}",
                                lambda d=dtype, c=causal: Attention(dtype=d, causal=c),
                                dict(B=2, H=3, S=333, D=D), arch))
    return out


def digest(factory, shape, arch):
    from ptxgen.emit import emit_module
    op = factory()
    full = op.shape(**shape)
    return hashlib.sha256(emit_module(op.build(full, arch), arch).encode()).hexdigest()[:16]


def current():
    return {label: digest(f, s, a) for label, f, s, a in cases()}


if __name__ == "__main__":
    pins = current()
    PINS.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n")
    print(f"{len(pins)} pins written to {PINS}", file=sys.stderr)
