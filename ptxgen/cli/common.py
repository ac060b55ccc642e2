"""Argument helpers shared by subcommands."""
import argparse
import os
import re
import sys
import textwrap

from .. import arch as archmod
from ..arch import DEFAULT_TARGET
from ..errors import PtxgenError


def positive_int(text):
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {v}")
    return v


def non_negative_int(text):
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {v}")
    return v


def lengths(text):
    """A comma-separated list of sequence lengths (non-negative integers)."""
    try:
        out = tuple(int(x, 10) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of lengths: "
                                         f"{text!r}") from None
    if min(out) < 0:
        raise argparse.ArgumentTypeError(f"lengths must be >= 0, got {min(out)}")
    if not any(out):
        raise argparse.ArgumentTypeError("every sequence is empty")
    return out


def is_ptx_file(name):
    """Whether a KERNEL argument names a PTX file rather than a library kernel."""
    return name.endswith(".ptx") or os.path.sep in name or os.path.isfile(name)


def add_arch(p, default=DEFAULT_TARGET, needs="target"):
    """--arch, its help listing the targets the command works for: `needs` is 'target' (any
    target ptxgen emits for), 'limits' (resource limits known) or 'model' (a machine model)."""
    p.add_argument("--arch", default=default, help=arch_help(needs))


def arch_help(needs="target"):
    if needs == "model":
        from .. import isa
        return (f"target with a machine model: {', '.join(isa.model_targets())} "
                f"(isa/sm_XX.toml)")
    if needs == "limits":
        from .. import isa
        return f"target: {', '.join(isa.limit_targets())}"
    return f"target: {', '.join(archmod.targets())}"


def add_shape(p):
    """Shape options shared by every operator (each operator uses the ones it has)."""
    for name in ("M", "N", "K"):
        p.add_argument(f"--{name}", type=positive_int, default=None)
    p.add_argument("--n", type=positive_int, default=None, help="element count (saxpy)")
    for name in ("B", "H", "S", "D"):
        p.add_argument(f"--{name}", type=positive_int, default=None,
                       help="attention: batch, heads, sequence length, head dim (64 or 128)")
    p.add_argument("--groups", dest="G", type=positive_int, default=None,
                   help="matmul: the grouped (mixture-of-experts) GEMM with this many experts; "
                        "--M is then every expert's tokens together (ops/grouped_matmul.py)")
    p.add_argument("--group-layout", choices=("offsets", "masked"), default="offsets",
                   help="matmul with --groups: experts' rows given by their end offsets, or "
                        "by counts within M/G-row blocks")


# the decode's shape names and the options that give them
DECODE_OPTIONS = {"S_q": "S", "H_kv": "kv_heads", "S_max": "kv_len"}


def shape_from_args(op, args):
    given = {k: getattr(args, DECODE_OPTIONS.get(k, k), None) for k in op.shape_names}
    if "H_kv" in given and given["H_kv"] is None and given.get("H") is not None:
        given["H_kv"] = given["H"]                  # no --kv-heads: one per query head
    if getattr(args, "varlen", None) is not None:
        given["seqlens_q"] = args.varlen
    return op.shape(**given)


def add_dtype(p):
    """--dtype / --out-dtype: matmul on the tensor cores (ops/tc_matmul.py); attention's
    input type."""
    p.add_argument("--dtype", choices=("bf16", "f16", "tf32", "e4m3", "e5m2"),
                   help="matmul: bf16, f16 or tf32 inputs on the tensor cores (wgmma on "
                        "sm_90a, mma.sync on the other targets), e4m3/e5m2: the fp8 GEMM "
                        "with per-tensor scales (sm_90a only); attention: bf16 (default) "
                        "or f16")
    p.add_argument("--b-dtype", choices=("e4m3", "e5m2"), default=None,
                   help="matmul with an fp8 --dtype: B's format, where it differs from A's")
    p.add_argument("--out-dtype", choices=("f32", "bf16"), default="f32",
                   help="matmul with --dtype: type of C")
    p.add_argument("--a-layout", choices=("row", "col"), default="row",
                   help="matmul with --dtype: A row-major (M x K) or column-major (given K x M)")
    p.add_argument("--b-layout", choices=("row", "col"), default="col",
                   help="matmul with --dtype: B column-major (given as Bt, N x K) or row-major "
                        "(K x N)")
    p.add_argument("--epilogue", default=None, metavar="NAME",
                   help="matmul with --dtype: a named epilogue fused before C is stored (bias, "
                        "relu, gelu_tanh, gelu_erf, silu, residual, row_scale, col_scale, "
                        "bias_gelu, bias_silu, ...; schedule/named_epilogues.py NAMED)")
    p.add_argument("--causal", action="store_true", help="attention: causal mask")
    p.add_argument("--scale", type=float, default=None,
                   help="attention: softmax scale (default 1/sqrt(D))")
    p.add_argument("--mask", default=None, metavar="SPEC",
                   help="attention: a mask_mod with its block mask: causal, sliding:W, "
                        "document:LEN (documents of LEN tokens) or prefix:N")
    p.add_argument("--score-mod", default=None, metavar="SPEC",
                   help="attention: a score_mod: alibi or softcap:C")
    p.add_argument("--kv-heads", type=positive_int, default=None, metavar="N",
                   help="attention: K/V heads (grouped-query attention; --H a multiple of it)")
    p.add_argument("--decode", action="store_true",
                   help="attention: the decode over a K/V cache (ops/attention_decode.py): "
                        "--S new tokens per sequence (default 1, at most 16), --kv-len keys "
                        "of cache per sequence")
    p.add_argument("--kv-len", dest="kv_len", type=positive_int, default=None, metavar="N",
                   help="attention with --decode: the cache's positions per sequence (S_max)")
    p.add_argument("--page-size", dest="page_size", type=positive_int, default=None,
                   metavar="N", help="attention with --decode: a paged cache of N-key pages "
                                     "(a multiple of 16 up to 256) and a block table")
    p.add_argument("--varlen", type=lengths, default=None, metavar="LENGTHS",
                   help="attention: packed sequences of these lengths (comma-separated, e.g. "
                        "64,4096,1000; 0 allowed), one cu_seqlens batch "
                        "(ops/attention_varlen.py); with --H, --kv-heads, --D, --causal")
    p.add_argument("--backward", action="store_true",
                   help="attention: the backward (dQ, dK, dV from Q, K, V, O, dO and LSE; "
                        "bf16, mma.sync, its three kernels; ops/attention_backward.py)")


def operator_from_args(args):
    """The library operator args.kernel names; with --dtype, the tensor-core matmul;
    `attention` is the fused attention forward (ops/attention.py, bf16 by default). Both take
    their sm_80 path (mma.sync) for a target without wgmma."""
    from ..ops import OPERATORS
    if args.kernel not in OPERATORS and args.kernel != "attention":
        raise PtxgenError(f"unknown kernel {args.kernel!r}; known: "
                          f"{', '.join(sorted([*OPERATORS, 'attention']))}")
    decode = getattr(args, "decode", False)
    if not decode and (getattr(args, "kv_len", None) or getattr(args, "page_size", None)):
        raise PtxgenError("--kv-len and --page-size apply to attention --decode only")
    if decode and args.kernel != "attention":
        raise PtxgenError(f"--decode applies to attention only, not {args.kernel}")
    if args.kernel == "attention":
        from ..ops.attention import Attention
        if getattr(args, "dtype", None) not in (None, "bf16", "f16"):
            raise PtxgenError(f"attention: --dtype must be bf16 or f16, got {args.dtype}")
        if decode:
            return decode_from_args(args)
        from ..ops.attention_mods import mask_from_spec, score_mod_from_spec
        mask, smod = getattr(args, "mask", None), getattr(args, "score_mod", None)
        S = getattr(args, "S", None) or Attention.defaults["S"]
        H = getattr(args, "H", None) or Attention.defaults["H"]
        kv = getattr(args, "kv_heads", None)
        if kv is not None and H % kv:
            raise PtxgenError(f"--H {H} is not a multiple of --kv-heads {kv}")
        if getattr(args, "varlen", None) is not None:
            return varlen_from_args(args)
        if getattr(args, "backward", False):
            from ..ops.attention_backward import AttentionBackward
            return AttentionBackward(dtype=getattr(args, "dtype", None) or "bf16",
                                     causal=getattr(args, "causal", False),
                                     scale=getattr(args, "scale", None),
                                     kv_group=H // kv if kv else 1,
                                     mask_mod=mask_from_spec(mask, S) if mask else None,
                                     score_mod=score_mod_from_spec(smod, H) if smod else None)
        return Attention(dtype=getattr(args, "dtype", None) or "bf16",
                         causal=getattr(args, "causal", False), scale=getattr(args, "scale", None),
                         mask_mod=mask_from_spec(mask, S) if mask else None,
                         score_mod=score_mod_from_spec(smod, H) if smod else None,
                         kv_group=H // kv if kv else 1)
    if getattr(args, "causal", False) or getattr(args, "scale", None) is not None or \
            getattr(args, "mask", None) or getattr(args, "score_mod", None) or \
            getattr(args, "kv_heads", None) or getattr(args, "backward", False) or \
            getattr(args, "varlen", None) is not None:
        raise PtxgenError(f"--causal, --scale, --mask, --score-mod, --kv-heads, --backward and "
                          f"--varlen apply to attention only, not {args.kernel}")
    op = OPERATORS[args.kernel]
    if getattr(args, "G", None) is not None:
        if args.kernel != "matmul":
            raise PtxgenError(f"--groups applies to matmul only, not {args.kernel}")
        if getattr(args, "epilogue", None):
            raise PtxgenError("--epilogue applies to the dense matmul, not with --groups")
        from ..ops.grouped_matmul import GroupedMatmul
        # --b-layout col: W is G x N x K (K-major, nn.Linear's); row: G x K x N (N-major)
        return GroupedMatmul(args.dtype or "bf16", out=args.out_dtype,
                             layout=args.group_layout, b_dtype=getattr(args, "b_dtype", None),
                             w_layout="kn" if getattr(args, "b_layout", "col") == "row"
                             else "nk")
    if getattr(args, "epilogue", None) and (args.kernel != "matmul" or
                                            not getattr(args, "dtype", None)):
        raise PtxgenError("--epilogue applies to the tensor-core matmul only (matmul with "
                          "--dtype bf16|f16|tf32|e4m3|e5m2)")
    if getattr(args, "dtype", None):
        if args.kernel != "matmul":
            raise PtxgenError(f"--dtype applies to matmul and attention only, not "
                              f"{args.kernel}")
        from ..ops.tc_matmul import TcMatmul
        if getattr(args, "b_dtype", None) and args.dtype not in ("e4m3", "e5m2"):
            raise PtxgenError(f"matmul: --b-dtype applies to an fp8 --dtype (e4m3, e5m2), not "
                              f"{args.dtype}")
        if args.dtype in ("e4m3", "e5m2"):
            if (getattr(args, "a_layout", "row"), getattr(args, "b_layout", "col")) != \
                    ("row", "col"):
                raise PtxgenError("matmul: fp8 wgmma reads K-major operands only: --a-layout "
                                  "must be row and --b-layout col with --dtype "
                                  f"{args.dtype}")
            from ..ops.fp8_matmul import Fp8Matmul
            return Fp8Matmul(args.dtype, out=args.out_dtype,
                             b_dtype=getattr(args, "b_dtype", None),
                             epilogue=getattr(args, "epilogue", None))
        op = TcMatmul(dtype=args.dtype, out=args.out_dtype,
                      a_layout=getattr(args, "a_layout", "row"),
                      b_layout=getattr(args, "b_layout", "col"),
                      epilogue=getattr(args, "epilogue", None))
    return op


def decode_from_args(args):
    """attention --decode: the AttentionDecode operator (--causal, --mask, --score-mod do not
    apply: the new tokens attend causally to the whole cache)."""
    from ..ops.attention_decode import AttentionDecode
    if getattr(args, "backward", False):
        raise PtxgenError("attention --decode: --backward does not apply (the decode is "
                          "inference only)")
    if getattr(args, "varlen", None) is not None:
        raise PtxgenError("attention --decode: --varlen does not apply (the decode's sequences "
                          "are the cache's, --kv-len long)")
    for opt in ("causal", "mask", "score_mod"):
        if getattr(args, opt, None):
            raise PtxgenError(f"attention --decode: --{opt.replace('_', '-')} does not apply "
                              f"(the new tokens see the whole cache, causally)")
    return AttentionDecode(dtype=getattr(args, "dtype", None) or "bf16",
                           page_size=getattr(args, "page_size", None),
                           scale=getattr(args, "scale", None))


def varlen_from_args(args):
    """attention --varlen: the AttentionVarlen operator over sequences of those lengths (--B
    and --S follow from them; --mask, --score-mod, --backward are not implemented for it)."""
    from ..ops.attention_varlen import AttentionVarlen
    for opt in ("B", "S"):
        if getattr(args, opt, None) is not None:
            raise PtxgenError(f"attention --varlen: --{opt} does not apply (the lengths give "
                              f"the sequences)")
    for opt in ("mask", "score_mod", "backward"):
        if getattr(args, opt, None):
            raise PtxgenError(f"attention --varlen: --{opt.replace('_', '-')} is not "
                              f"implemented for packed sequences")
    H = getattr(args, "H", None) or AttentionVarlen.defaults["H"]
    kv = getattr(args, "kv_heads", None)
    return AttentionVarlen(dtype=getattr(args, "dtype", None) or "bf16",
                           causal=getattr(args, "causal", False),
                           scale=getattr(args, "scale", None), kv_group=H // kv if kv else 1)


# what a report line may take on a terminal unless --wide asks for its whole length
WIDTH = 100


def add_wide(p):
    p.add_argument("--wide", action="store_true",
                   help=f"lines as long as the report makes them (by default at most {WIDTH} "
                        f"columns: long lines wrap, wide tables are rearranged)")


def fit(text, wide=False, width=WIDTH):
    """`text` with every line longer than `width` wrapped at spaces (wide: unchanged). A
    continuation starts under the line's last column (after its last gap of two spaces in the
    first 60 columns), else 4 further in than the line."""
    if wide:
        return text
    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        lead = len(line) - len(line.lstrip(" "))
        gaps = [m.end() for m in re.finditer(r"\S {2,}", line[:60]) if m.end() > lead]
        hang = gaps[-1] if gaps else lead + 4
        out += textwrap.wrap(line, width, subsequent_indent=" " * hang, break_on_hyphens=False)
    return "\n".join(out)


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError as e:
        raise PtxgenError(f"cannot read {path}: {e.strerror}") from None


def write_text(path, text):
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise PtxgenError(f"cannot write {path}: {e.strerror}") from None


def output(path, text):
    """Write `text` to the -o file when one was given, else to stdout."""
    if path:
        write_text(path, text)
    else:
        sys.stdout.write(text)


def select_entry(module, name, path):
    """The entry named by --kernel, or the module's only entry; otherwise a one-line error."""
    if name:
        return module.kernel(name)
    entries = module.entries
    if len(entries) == 1:
        return entries[0]
    names = ", ".join(k.name for k in entries) or "none"
    raise PtxgenError(f"{path}: choose an entry with --kernel (entries: {names})")
