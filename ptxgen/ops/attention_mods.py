"""FlexAttention-style programmable attention: block masks and the standard mods.

    create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, BLOCK_SIZE=128) -> BlockMask
    causal(), sliding_window(w), document(doc_ids), prefix_lm(n)     -> mask_mod functions
    alibi(slopes), soft_cap(c)                                        -> score_mod functions

A mask_mod(b, h, q_idx, kv_idx) returns True where attention is allowed; a score_mod(score, b,
h, q_idx, kv_idx) gets the already scaled score (FlexAttention's semantics). Both are traced
once (ptxgen/schedule/score_mods.py); extra tensors are ModTensors the functions index.

The block mask is made once per mask on the host: mask_mod evaluated with numpy on the index
grid of every (query block, key block) tile, which is empty (no allowed pair: never loaded),
full (every pair of the tile inside Q_LEN x KV_LEN allowed: no mask code) or partial. Per query
block it lists the partial key blocks, then the full ones (FlexAttention's kv_num_blocks /
kv_indices and full_kv_num_blocks / full_kv_indices).
"""
import numpy as np

from ..errors import PtxgenError
from ..schedule.score_mods import ModTensor, evaluate, tanh, trace_mask_mod

GRID_ELEMENTS = 1 << 24        # mask values evaluated per numpy call (memory: a few bytes each)


class BlockMask:
    """Which (query block, key block) tiles a mask leaves empty, partial or full.

    kv_num_blocks, full_kv_num_blocks: (Bm, Hm, QB) int32; kv_indices, full_kv_indices:
    (Bm, Hm, QB, KB) int32, each row's first entries valid, ascending; Bm, Hm are B and H, or 1
    where the mask does not read b or h. allowed: (Bm, Hm) int64, the allowed (q, kv) pairs."""

    def __init__(self, mask_mod, graph, Q_LEN, KV_LEN, Q_BLOCK, KV_BLOCK, B, H, partial, full,
                 allowed):
        self.mask_mod, self.graph = mask_mod, graph
        self.Q_LEN, self.KV_LEN, self.Q_BLOCK, self.KV_BLOCK = Q_LEN, KV_LEN, Q_BLOCK, KV_BLOCK
        self.B, self.H, self.allowed = B, H, allowed
        self.kv_num_blocks, self.kv_indices = _lists(partial)
        self.full_kv_num_blocks, self.full_kv_indices = _lists(full)

    @property
    def shape(self):
        return self.kv_indices.shape

    def sparsity(self):
        """The fraction of tiles never computed (empty)."""
        tiles = np.prod(self.shape)
        return 1.0 - float((self.kv_num_blocks.sum() + self.full_kv_num_blocks.sum()) / tiles)

    def computed_pairs(self):
        """(q, kv) pairs of the tiles computed (partial and full), summed over the mask heads:
        the FLOPs FlexAttention's benchmarks count (density = 1 - sparsity)."""
        tiles = int(self.kv_num_blocks.sum() + self.full_kv_num_blocks.sum())
        return tiles * self.Q_BLOCK * self.KV_BLOCK

    def kernel_arrays(self, partial_first=False):
        """BM_counts (1 + Bm·Hm·QB rows of 2: the tile (Q_BLOCK, KV_BLOCK), then per query
        block partial, full) and BM_lists ((Bm·Hm·QB) x KB: the key blocks computed, ascending,
        a partial one's index with bit 31 set) as the kernel reads them (uint32). Ascending
        order makes a mask_mod's result the built-in mask's, bit for bit.
        partial_first (the schedule's full_apart): each row's partial blocks, then its full
        ones, each ascending; a full block holding keys past KV_LEN counts as partial (only
        the partial blocks' loop masks); the tile row's KV_BLOCK carries bit 31."""
        Bm, Hm, QB, KB = self.shape
        counts = np.stack([self.kv_num_blocks, self.full_kv_num_blocks], -1).reshape(-1, 2)
        lists = np.zeros((Bm * Hm * QB, KB), np.uint32)
        part, full = self.kv_indices.reshape(-1, KB), self.full_kv_indices.reshape(-1, KB)
        ragged = KB - 1 if self.KV_LEN % self.KV_BLOCK else -1      # the block past KV_LEN
        for r, (np_, nf) in enumerate(counts):
            p_idx, f_idx = part[r, :np_].astype(np.uint32), full[r, :nf].astype(np.uint32)
            if partial_first:
                over = f_idx == ragged
                p_idx = np.sort(np.concatenate([p_idx, f_idx[over]]))
                f_idx = f_idx[~over]
                counts[r] = len(p_idx), len(f_idx)
                lists[r, :np_ + nf] = np.concatenate([p_idx | np.uint32(1 << 31), f_idx])
                continue
            entries = np.concatenate([p_idx | np.uint32(1 << 31), f_idx])
            lists[r, :np_ + nf] = entries[np.argsort(entries & 0x7FFFFFFF, kind="stable")]
        head = np.array([[self.Q_BLOCK, self.KV_BLOCK | (1 << 31 if partial_first else 0)]])
        return {"BM_counts": np.concatenate([head, counts]).astype(np.uint32), "BM_lists": lists}

    def __repr__(self):
        Bm, Hm, QB, KB = self.shape
        return (f"BlockMask({Bm}x{Hm} mask heads, {QB}x{KB} tiles of {self.Q_BLOCK}x"
                f"{self.KV_BLOCK}, sparsity {self.sparsity():.3f})")


def _lists(flags):
    """(counts, indices) of the True key blocks of each (Bm, Hm, QB) row, ascending."""
    counts = flags.sum(-1).astype(np.int32)
    order = np.argsort(~flags, axis=-1, kind="stable").astype(np.int32)
    return counts, order


def _size(name, v, allow_none=False):
    if v is None and allow_none:
        return None
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0:
        raise PtxgenError(f"create_block_mask: {name} must be a positive integer, got {v!r}")
    return int(v)


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, BLOCK_SIZE=128):
    """The BlockMask of mask_mod for B x H heads (None: the same for every batch / head) of
    Q_LEN queries and KV_LEN keys; BLOCK_SIZE: the tile, an int or (query rows, keys) — the
    attention kernel's (128 x 128 at D = 128; its BM x BN in general)."""
    graph = trace_mask_mod(mask_mod)
    B, H = _size("B", B, True), _size("H", H, True)
    Q_LEN, KV_LEN = _size("Q_LEN", Q_LEN), _size("KV_LEN", KV_LEN)
    bq, bk = (BLOCK_SIZE, BLOCK_SIZE) if not isinstance(BLOCK_SIZE, tuple) else BLOCK_SIZE
    bq, bk = _size("BLOCK_SIZE", bq), _size("BLOCK_SIZE", bk)
    Bm = B if "b" in graph.leaves and B else 1
    Hm = H if "h" in graph.leaves and H else 1
    if ("b" in graph.leaves and B is None) or ("h" in graph.leaves and H is None):
        raise PtxgenError("create_block_mask: the mask_mod reads b or h: give B and H")
    QB, KB = -(-Q_LEN // bq), -(-KV_LEN // bk)
    partial = np.zeros((Bm, Hm, QB, KB), bool)
    full = np.zeros((Bm, Hm, QB, KB), bool)
    allowed = np.zeros((Bm, Hm), np.int64)
    kv = np.arange(KB * bk)
    inside = (kv < KV_LEN)
    chunk = max(1, GRID_ELEMENTS // (bq * KB * bk))
    for bi in range(Bm):
        for hi in range(Hm):
            for q0 in range(0, QB, chunk):
                rows = np.arange(q0 * bq, min(QB, q0 + chunk) * bq)
                ok, _ = evaluate(graph, {"b": np.int64(bi), "h": np.int64(hi),
                                         "q": rows[:, None], "kv": kv[None, :]})
                valid = (rows[:, None] < Q_LEN) & inside[None, :]
                ok = np.broadcast_to(ok, valid.shape) & valid
                allowed[bi, hi] += int(ok.sum())
                n = len(rows) // bq
                cnt = ok.reshape(n, bq, KB, bk).sum(axis=(1, 3))
                tot = valid.reshape(n, bq, KB, bk).sum(axis=(1, 3))
                sl = slice(q0, q0 + n)
                full[bi, hi, sl] = (cnt == tot) & (tot > 0)
                partial[bi, hi, sl] = (cnt > 0) & (cnt < tot)
    return BlockMask(mask_mod, graph, Q_LEN, KV_LEN, bq, bk, Bm, Hm, partial, full, allowed)


# -- the standard mods ---------------------------------------------------------------------------
def causal():
    """Key kv_idx <= q_idx (the built-in causal mask as a mask_mod)."""
    def mask_mod(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx
    return mask_mod


def sliding_window(w):
    """Causal, over the w most recent keys (the query's own included): q_idx - w < kv_idx <=
    q_idx."""
    w = _positive("sliding_window", "w", w)

    def mask_mod(b, h, q_idx, kv_idx):
        d = q_idx - kv_idx
        return (d >= 0) & (d < w)
    return mask_mod


def prefix_lm(n):
    """Bidirectional over the first n keys (the prefix), causal after them."""
    n = _positive("prefix_lm", "n", n)

    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) | (kv_idx < n)
    return mask_mod


def document(doc_ids, causal=False):
    """Packed sequences: attention only inside a token's own document (doc_ids[q_idx] ==
    doc_ids[kv_idx]; and kv_idx <= q_idx with causal). Documents that are contiguous runs read
    each query's document start and end once per row instead of a document id per key."""
    ids = np.asarray(doc_ids)
    if ids.ndim != 1 or ids.size == 0 or ids.dtype.kind not in "iu":
        raise PtxgenError(f"document: doc_ids must be a 1-D integer array, got shape "
                          f"{ids.shape} of {ids.dtype}")
    change = np.flatnonzero(np.diff(ids)) + 1
    starts = np.concatenate([[0], change])
    contiguous = len(np.unique(ids)) == len(starts)
    if contiguous:
        run = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(ids))))
        start = ModTensor(starts[run], "doc_start")
        end = ModTensor(np.append(starts, len(ids))[run + 1], "doc_end")

        def mask_mod(b, h, q_idx, kv_idx):
            lo = kv_idx >= start[q_idx]
            ok = lo & (kv_idx < end[q_idx])
            return ok & (kv_idx <= q_idx) if causal else ok
    else:
        doc = ModTensor(ids, "doc_ids")

        def mask_mod(b, h, q_idx, kv_idx):
            ok = doc[q_idx] == doc[kv_idx]
            return ok & (kv_idx <= q_idx) if causal else ok
    return mask_mod


def alibi_slopes(H):
    """ALiBi's per-head slopes 2^(-8(h+1)/H) (Press et al. 2022)."""
    return 2.0 ** (-8.0 * (np.arange(H) + 1) / H)


def alibi(slopes):
    """score + slopes[h]·(kv_idx - q_idx) (slopes: one per head, e.g. alibi_slopes(H))."""
    a = np.asarray(slopes)
    if a.ndim != 1 or a.size == 0 or a.dtype.kind not in "iuf":
        raise PtxgenError("alibi: slopes must be a 1-D array of numbers (one per head)")
    t = ModTensor(a.astype(np.float64), "alibi_slopes")

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + t[h] * (kv_idx - q_idx)
    return score_mod


def soft_cap(c):
    """c·tanh(score / c) (Gemma 2's logit soft-capping)."""
    if not isinstance(c, (int, float)) or isinstance(c, bool) or not c > 0:
        raise PtxgenError(f"soft_cap: c must be a positive number, got {c!r}")
    c = float(c)

    def score_mod(score, b, h, q_idx, kv_idx):
        return tanh(score / c) * c
    return score_mod


def _positive(fn, name, v):
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0:
        raise PtxgenError(f"{fn}: {name} must be a positive integer, got {v!r}")
    return int(v)


# -- the command line's names --------------------------------------------------------------------
def mask_from_spec(spec, S):
    """--mask causal | sliding:W | document:LEN (documents of LEN tokens) | prefix:N."""
    name, _, arg = spec.partition(":")

    def number():
        try:
            v = int(arg)
        except ValueError:
            v = 0
        if v <= 0:
            raise PtxgenError(f"--mask {spec}: {name} needs a positive integer, e.g. "
                              f"{name}:1024")
        return v
    if name == "causal" and not arg:
        return causal()
    if name == "sliding":
        return sliding_window(number())
    if name == "document":
        return document(np.arange(S) // number())
    if name == "prefix":
        return prefix_lm(number())
    raise PtxgenError(f"--mask {spec}: must be causal, sliding:W, document:LEN or prefix:N")


def score_mod_from_spec(spec, H):
    """--score-mod alibi | softcap:C."""
    name, _, arg = spec.partition(":")
    if name == "alibi" and not arg:
        return alibi(alibi_slopes(H))
    if name == "softcap":
        try:
            c = float(arg)
        except ValueError:
            c = 0.0
        if not c > 0:
            raise PtxgenError(f"--score-mod {spec}: softcap needs a positive number, e.g. "
                              f"softcap:30")
        return soft_cap(c)
    raise PtxgenError(f"--score-mod {spec}: must be alibi or softcap:C")


# -- what the Attention operator holds -------------------------------------------------------------
class ProgrammableMods:
    """An Attention operator's score_mod, mask_mod and block mask: traced once here; the block
    mask made once per (S, tile) when not given; the kernel's arrays and the FLOP count."""

    def __init__(self, score_mod, mask_mod, block_mask, causal):
        from ..schedule.score_mods import trace_score_mod
        if block_mask is not None and not isinstance(block_mask, BlockMask):
            raise PtxgenError(f"attention: block_mask must come from create_block_mask, got "
                              f"{type(block_mask).__name__}")
        if block_mask is not None and causal:
            raise PtxgenError("attention: causal=True with a block_mask: make causal part of "
                              "the mask_mod the block mask was made from")
        self.score = trace_score_mod(score_mod) if score_mod is not None else None
        if mask_mod is None and block_mask is not None:
            mask_mod = block_mask.mask_mod
        if mask_mod is not None and causal:
            user = mask_mod

            def mask_mod(b, h, q_idx, kv_idx):
                return (kv_idx <= q_idx) & user(b, h, q_idx, kv_idx)
        self.mask_mod = mask_mod
        self.mask = trace_mask_mod(mask_mod) if mask_mod is not None else None
        self.given, self._made = block_mask, {}
        self.active = self.score is not None or self.mask is not None

    def graphs(self):
        return (self.score, self.mask) if self.active else None

    def block_mask(self, shape, BM, BN):
        if self.mask is None:
            return None
        S, B, H = shape["S"], shape["B"], shape["H"]
        bm = self.given
        if bm is not None:
            if (bm.Q_LEN, bm.KV_LEN) != (S, S):
                raise PtxgenError(f"attention: block_mask is for Q_LEN={bm.Q_LEN} "
                                  f"KV_LEN={bm.KV_LEN}, the inputs have S={S}")
            if (bm.Q_BLOCK, bm.KV_BLOCK) != (BM, BN):
                raise PtxgenError(f"attention: block_mask has {bm.Q_BLOCK}x{bm.KV_BLOCK} "
                                  f"tiles, the kernel's are {BM}x{BN}: create_block_mask(..., "
                                  f"BLOCK_SIZE=({BM}, {BN}))")
            if bm.B not in (1, B) or bm.H not in (1, H):
                raise PtxgenError(f"attention: block_mask is for B={bm.B} H={bm.H}, the "
                                  f"inputs have B={B} H={H}")
            return bm
        key = (S, B, H, BM, BN)
        if key not in self._made:
            self._made[key] = create_block_mask(self.mask_mod, B, H, S, S, (BM, BN))
        return self._made[key]

    def spec(self, shape, scale, BM, BN):
        from ..schedule.score_mods import AttentionMods
        if not self.active:
            return None
        bm = self.block_mask(shape, BM, BN)
        lists = None
        if bm is not None:
            Bm, Hm, QB, KB = bm.shape
            lists = (Bm > 1, Hm > 1, QB, KB)
        return AttentionMods(self.score, self.mask, float(scale), shape["H"], lists)

    def arrays(self, shape, BM, BN, partial_first=False):
        spec = self.spec(shape, 1.0, BM, BN)
        if spec is None:
            return {}
        out = self.block_mask(shape, BM, BN).kernel_arrays(partial_first) \
            if spec.block_lists else {}
        out.update((f"t{i}", t.array) for i, t in enumerate(spec.tensors))
        return out

    def allowed_pairs(self, shape, BM, BN):
        bm = self.block_mask(shape, BM, BN)
        if bm is None:
            return None
        return int(bm.allowed.sum()) * (shape["B"] // bm.B) * (shape["H"] // bm.H)
