"""The library kernels whose emitted PTX is pinned by hash (tests/test_ptx_pins.py): every
operator family, each instruction path (SIMT, sm_80 mma.sync, sm_90a wgmma), the layouts, the
odd-K packings, the LLM GEMMs (fp8, split-K, grouped) and the attention variants.
`python tests/ptx_pins.py` rewrites the pins."""
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
    out += llm_gemm_cases()
    for dtype in ("bf16", "f16"):
        for D in (64, 128):
            for causal in (False, True):
                for arch in ("sm_90a", "sm_80"):
                    out.append((f"attention/{dtype}/D{D}/causal{int(causal)}/{arch}",
                                lambda d=dtype, c=causal: Attention(dtype=d, causal=c),
                                dict(B=2, H=3, S=333, D=D), arch))
    out += attention_training_and_serving_cases()
    return out


def attention_training_and_serving_cases():
    """The attention backward (causal and not, grouped heads), packed variable-length
    sequences, and the decode over a K/V cache (contiguous and paged) with its cache append."""
    from ptxgen.ops.attention_backward import AttentionBackward
    from ptxgen.ops.attention_decode import AttentionDecode, KvCacheAppend
    from ptxgen.ops.attention_varlen import AttentionVarlen
    from ptxgen.ops.attention_varlen_backward import AttentionVarlenBackward
    out = []
    for causal in (False, True):
        out.append((f"attention_varlen_backward/bf16/D128/causal{int(causal)}/gqa4/sm_90a",
                    lambda c=causal: AttentionVarlenBackward("bf16", causal=c, kv_group=4),
                    dict(H=32, D=128, seqlens_q=[64, 4096, 1000]), "sm_90a"))
    for D in (64, 128):
        for causal in (False, True):
            out.append((f"attention_varlen/bf16/D{D}/causal{int(causal)}/gqa4/sm_90a",
                        lambda c=causal: AttentionVarlen("bf16", causal=c, kv_group=4),
                        dict(H=32, D=D, seqlens_q=[64, 4096, 1000]), "sm_90a"))
    for D in (64, 128):
        for causal in (False, True):
            out.append((f"attention_backward/bf16/D{D}/causal{int(causal)}/gqa2/sm_90a",
                        lambda c=causal: AttentionBackward("bf16", causal=c, kv_group=2),
                        dict(B=2, H=4, S=333, D=D), "sm_90a"))
    serving = dict(B=16, S_q=1, H=32, H_kv=8, D=128, S_max=4096)
    for page in (None, 64):
        out.append((f"attention_decode/bf16/D128/page{page}/sm_90a",
                    lambda p=page: AttentionDecode("bf16", page_size=p), serving, "sm_90a"))
        out.append((f"kv_cache_append/bf16/D128/page{page}/sm_90a",
                    lambda p=page: KvCacheAppend("bf16", page_size=p),
                    {k: v for k, v in serving.items() if k != "H"}, "sm_90a"))
    return out


def llm_gemm_cases():
    """fp8 (per-tensor and block scales, mixed formats, an epilogue), split-K, grouped GEMMs."""
    from ptxgen.ops.fp8_matmul import Fp8Matmul
    from ptxgen.ops.grouped_matmul import GroupedMatmul
    from ptxgen.ops.tc_matmul import TcMatmul
    from ptxgen.schedule.tc_matmul import TcMatmulSchedule
    odd, big = dict(M=300, N=257, K=200), dict(M=4096, N=4096, K=4096)
    split = TcMatmulSchedule(BM=64, BN=128, wgmma_n=128, consumers=1, stages=8, split_k=2)
    return [
        ("fp8/e4m3/tensor/bf16/oddk", lambda: Fp8Matmul("e4m3", "bf16"), odd, "sm_90a"),
        ("fp8/e4m3/tensor/bf16/big", lambda: Fp8Matmul("e4m3", "bf16"), big, "sm_90a"),
        ("fp8/e5m2e4m3/tensor/f32/oddk", lambda: Fp8Matmul("e5m2", "f32", b_dtype="e4m3"),
         odd, "sm_90a"),
        ("fp8/e4m3/block/bf16/big", lambda: Fp8Matmul("e4m3", "bf16", scaling="block"), big,
         "sm_90a"),
        ("fp8/e4m3/tensor/bf16/bias_gelu", lambda: Fp8Matmul("e4m3", "bf16",
                                                             epilogue="bias_gelu"),
         odd, "sm_90a"),
        ("tc_matmul/bf16/split_k2", lambda: TcMatmul("bf16", "bf16", split),
         dict(M=16, N=8192, K=8192), "sm_90a"),
        ("grouped/bf16/offsets", lambda: GroupedMatmul("bf16"), dict(M=1000, N=512, K=256, G=8),
         "sm_90a"),
        ("grouped/bf16/masked/kn", lambda: GroupedMatmul("bf16", layout="masked", w_layout="kn"),
         dict(M=1024, N=512, K=256, G=8), "sm_90a"),
        ("grouped/e4m3/offsets", lambda: GroupedMatmul("e4m3"), dict(M=1000, N=512, K=256, G=8),
         "sm_90a"),
    ]


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
