"""Clusters on the emulator: distributed shared memory between 2 and 4 CTAs, cluster special
registers, barrier.cluster, remote mbarrier arrivals, multicast TMA with complete_tx on every
destination CTA, their one-line errors and deadlocks, and the tensor-core GEMM's 2-CTA variant
against float64 and bit for bit against the variant without clusters."""
import numpy as np
import pytest

from ptxgen.arrays import TiledMap
from ptxgen.emu import EmulationWarning, emulate, run_operator
from ptxgen.emu.cluster import address as cluster_address
from ptxgen.errors import EmulationError, PtxgenError
from ptxgen.ir import Builder, Module, Param, ptr, types as T
from ptxgen.ir.builder_tensor import cluster_dims, tensor_map_param
from ptxgen.ops import async_probes as A
from ptxgen.ops.tc_matmul import TcMatmul
from ptxgen.schedule.tc_matmul import TcMatmulSchedule
from ptxgen.emit.ptx import emit_module
from ptxgen.toolchain import assemble, have_tool

SPECIALS = ("cluster_ctarank", "cluster_nctarank", "clusterid.x", "clusterid.y",
            "nclusterid.x", "nclusterid.y", "cluster_ctaid.x", "cluster_ctaid.y",
            "cluster_nctaid.x", "cluster_nctaid.y", "ctaid.x", "ctaid.y")


def _kernel(name, params, dims=None):
    m = Module(target="sm_90")
    k = m.add_kernel(name, params)
    if dims:
        cluster_dims(k, *dims)
    return m, Builder(k)


def exchange_kernel(dims=None, sync=True):
    """Every thread stores a value into the next CTA's (rank + 1 mod n) shared memory through
    mapa; after barrier.cluster each reads what the previous CTA left; the cluster special
    registers and getctarank of the remote address go to `regs`."""
    m, b = _kernel("xchg", [Param("out", T.u64, ptr(T.u32)), Param("regs", T.u64, ptr(T.u32))],
                   dims)
    buf = b.address_of(b.shared("buf", T.u32, 32, align=16))
    tid = b.special("tid.x")
    rank, n = b.cluster_special("cluster_ctarank"), b.cluster_special("cluster_nctarank")
    nxt = b.add(rank, 1)
    nxt = b.selp(0, nxt, b.setp("eq", nxt, n), type=T.u32)
    cta = b.mad(b.special("ctaid.y"), b.special("nctaid.x"), b.special("ctaid.x"), name="cta")
    mine = b.mad(tid, 4, buf)
    remote = b.mapa(mine, nxt)
    b.st("shared::cluster", remote, b.mad(cta, 1000, tid), type=T.u32)
    if sync:
        b.cluster_sync()
    b.st("global", b.element_addr(b.param("out"), b.mad(cta, 32, tid), 4),
         b.ld("shared", T.u32, mine))
    with b.if_(b.setp("eq", tid, 0)):
        vals = [b.cluster_special(s) if s.startswith(("cluster", "ncluster")) else b.special(s)
                for s in SPECIALS] + [b.getctarank(remote)]
        for i, v in enumerate(vals):
            b.st("global", b.element_addr(b.param("regs"),
                                          b.mad(cta, len(SPECIALS) + 1, i), 4), v)
    if sync:
        b.cluster_sync()
    b.ret()
    return m


@pytest.mark.parametrize("grid, dims", [((6, 1), (2, 1, 1)), ((8, 2), (4, 1, 1)),
                                        ((4, 4), (2, 2, 1))])
def test_distributed_shared_memory_exchange_and_special_registers(grid, dims):
    ncta = grid[0] * grid[1]
    out = np.zeros((ncta, 32), np.uint32)
    regs = np.zeros((ncta, len(SPECIALS) + 1), np.uint32)
    emulate(exchange_kernel(dims), "xchg", grid, (32,), out, regs)
    cx, cy, _ = dims
    n = cx * cy
    for cta in range(ncta):
        x, y = cta % grid[0], cta // grid[0]
        rank = x % cx + cx * (y % cy)
        want = dict(zip(SPECIALS, (rank, n, x // cx, y // cy, grid[0] // cx, grid[1] // cy,
                                   x % cx, y % cy, cx, cy, x, y)))
        assert dict(zip(SPECIALS, regs[cta][:-1].tolist())) == want
        assert regs[cta][-1] == (rank + 1) % n                 # getctarank of the mapa address
        prev = (rank - 1) % n                                  # who wrote into this CTA
        px, py = (x - x % cx) + prev % cx, (y - y % cy) + prev // cx
        assert (out[cta] == (px + grid[0] * py) * 1000 + np.arange(32)).all()


def test_launch_cluster_argument_and_no_cluster_defaults():
    m = exchange_kernel()                     # no .reqnctapercluster: clusters from the launch
    out, regs = np.zeros((4, 32), np.uint32), np.zeros((4, len(SPECIALS) + 1), np.uint32)
    emulate(m, "xchg", (4,), (32,), out, regs, cluster=2)
    assert (out[1] == 0 * 1000 + np.arange(32)).all() and (regs[:, 0] == [0, 1, 0, 1]).all()
    emulate(m, "xchg", (4,), (32,), out, regs)           # every CTA a cluster of one
    assert (out == np.arange(4)[:, None] * 1000 + np.arange(32)).all()
    assert regs[:, :6].tolist() == [[0, 1, c, 0, 4, 1] for c in range(4)]


def test_dsmem_race_across_ctas_without_the_cluster_barrier():
    with pytest.raises(EmulationError, match=r"shared-memory race: read of a location that "
                                             r"block \(1, 0, 0\) thread .* wrote"):
        emulate(exchange_kernel((2, 1, 1), sync=False), "xchg", (2,), (32,),
                np.zeros((2, 32), np.uint32), np.zeros((2, 13), np.uint32))


def test_multicast_tma_completes_on_every_destination_cta():
    rng = np.random.default_rng()
    H, W, Wp, clusters = 40, 50, 52, 8                   # boxes over the right and both y edges
    x = rng.standard_normal((H, Wp)).astype(np.float32)
    raw, out = np.zeros((2 * clusters, 512), np.uint32), np.zeros((2 * clusters, 131), np.uint32)
    tm = TiledMap(x, "f32", A.CLUSTER_BOX[0], A.CLUSTER_BOX[1], rows=H, cols=W, row_stride=Wp)
    x0, y0 = W - 18, -4        # x0 = 32: 128 bytes (a TMA box starts on 16 bytes along x)
    emulate(A.cluster_probe(), "cluster_probe", (2 * clusters,), (128,), tm, raw, out,
            np.int32(x0), np.int32(y0))
    want_raw, want_out = A.cluster_expected(x[:, :W], clusters, x0, y0)
    assert np.array_equal(raw, want_raw)
    assert np.array_equal(out, want_out)


def test_tma_mbarrier_ring_with_parity_waits():
    rng = np.random.default_rng()
    H, W, Wp, ctas, steps = 120, 90, 92, 3, 8           # 128 rows, 96 columns of boxes
    x = rng.standard_normal((H, Wp)).astype(np.float32)
    w = rng.standard_normal(steps).astype(np.float32)
    out = np.zeros((ctas, 512), np.float32)
    emulate(A.pipeline_tma_probe(steps), "pipeline_tma_probe", (ctas,), (A.PIPE_THREADS,),
            TiledMap(x, "f32", *A.PIPE_BOX, rows=H, cols=W, row_stride=Wp), w, out)
    assert np.array_equal(out, A.pipeline_tma_expected(x[:, :W], w, ctas, steps))


def remote_tx_kernel(arrive=True):
    """Rank 1 expects the bytes on rank 0's barrier (a remote arrive.expect_tx) and TMA-loads a
    box into rank 0's shared memory; rank 0 waits and copies the box out."""
    m, b = _kernel("remote_tx", [tensor_map_param("x"), Param("out", T.u64, ptr(T.u32))],
                   (2, 1, 1))
    tile = b.address_of(b.shared("tile", T.b8, 1024, align=1024))
    bar = b.address_of(b.shared("bar", T.b64, 1, align=8))
    tid, rank = b.special("tid.x"), b.cluster_special("cluster_ctarank")
    with b.if_(b.setp("eq", tid, 0)):
        b.mbarrier_init(bar, 1)
        b.fence_mbarrier_init()
    b.cluster_sync()
    with b.if_(b.and_(b.setp("eq", tid, 0), b.setp("eq", rank, 1))):
        rbar = b.mapa(bar, 0)
        if arrive:
            b.mbarrier_arrive_expect_tx(rbar, 1024, cluster=True)
        b.cp_async_bulk_tensor_load(b.mapa(tile, 0), "x", (0, 0), rbar)
    with b.if_(b.setp("eq", rank, 0)):
        b.mbarrier_wait_parity(bar, 0)
        for j in range(8):
            i = b.mad(tid, 8, j, type=T.u32)
            b.st("global", b.element_addr(b.param("out"), i, 4),
                 b.ld("shared", T.u32, b.mad(i, 4, tile, type=T.u32)))
    b.cluster_sync()
    b.ret()
    return m


def test_remote_arrive_expect_tx_and_a_copy_into_the_peer():
    x = np.random.default_rng().integers(0, 1 << 30, (8, 32)).astype(np.uint32)
    out = np.zeros(256, np.uint32)
    tm = TiledMap(x.view(np.float32), "f32", 8, 32)
    emulate(remote_tx_kernel(), "remote_tx", (2,), (32,), tm, out)
    assert np.array_equal(out, A.smem_image(x.view(np.float32)).view(np.uint32))
    # without the arrival the phase never completes: a deadlock naming both waits
    with pytest.raises(EmulationError) as e:
        emulate(remote_tx_kernel(arrive=False), "remote_tx", (2,), (32,), tm, out)
    msg = str(e.value)
    assert "deadlock" in msg and "mbarrier at shared address" in msg and "\n" not in msg
    assert "1 of 1 arrivals pending, -1024 transaction bytes" in msg
    assert "cluster barrier of the cluster of block (0, 0, 0)" in msg


def _cluster_barrier_misuse(kind):
    m, b = _kernel("misuse", [tensor_map_param("x"), Param("out", T.u64, ptr(T.u32))],
                   (2, 1, 1))
    buf = b.address_of(b.shared("buf", T.u32, 32, align=16))
    rank = b.cluster_special("cluster_ctarank")
    if kind == "wait_only":
        b.barrier_cluster_wait()
    elif kind == "twice":
        b.barrier_cluster_arrive()
        b.barrier_cluster_arrive()
    elif kind == "mapa_rank":
        b.mapa(buf, b.add(rank, 2))
    elif kind == "mapa_global":
        a = b.param("out")
        b._op("mapa", ("u64",), T.u64, (a, b.operand(0, T.u32)), name="r")
    elif kind == "bad_address":
        b.st("shared::cluster", b.const(cluster_address(3, 0), T.u32), 1, type=T.u32)
    elif kind == "mask":
        b.cp_async_bulk_tensor_load(buf, "x", (0, 0), buf, multicast_mask=0b101)
    b.ret()
    return m


@pytest.mark.parametrize("kind, message", [
    ("wait_only", r"barrier\.cluster\.wait without a barrier\.cluster\.arrive before it"),
    ("twice", r"barrier\.cluster\.arrive twice without a barrier\.cluster\.wait between"),
    ("mapa_rank", r"mapa to CTA rank 2, but the cluster has 2 CTAs"),
    ("mapa_global", r"mapa of 0x[0-9a-f]+, which is not a generic address of shared memory"),
    ("bad_address", r"store through a shared::cluster address naming CTA rank 3, but the "
                    r"cluster has 2 CTAs \(ranks 0\.\.1\) at shared::cluster address "
                    r"0x4000000"),
    ("mask", r"multicast mask 0x0005 names CTA rank 2, but the cluster has 2 CTAs"),
])
def test_cluster_errors_are_one_line(kind, message):
    tm = TiledMap(np.zeros((8, 32), np.float32), "f32", 8, 32)
    with pytest.raises(EmulationError, match=message) as e:
        emulate(_cluster_barrier_misuse(kind), "misuse", (2,), (32,), tm,
                np.zeros(4, np.uint32), verify=False)
    assert "\n" not in str(e.value) and "block (0, 0, 0) thread (0, 0, 0)" in str(e.value)


def test_cluster_shape_errors():
    m = exchange_kernel((2, 1, 1))
    args = (np.zeros((3, 32), np.uint32), np.zeros((3, 13), np.uint32))
    with pytest.raises(PtxgenError, match=r"cluster dims \(2, 1, 1\) do not divide the grid "
                                          r"\(3, 1, 1\)"):
        emulate(m, "xchg", (3,), (32,), *args)
    with pytest.raises(PtxgenError, match=r"cluster=\(4, 1, 1\) differs from the kernel's "
                                          r"\.reqnctapercluster \(2, 1, 1\)"):
        emulate(m, "xchg", (4,), (32,), *args, cluster=4)
    with pytest.raises(PtxgenError, match="a cluster of 32 CTAs"):
        emulate(exchange_kernel(), "xchg", (32,), (32,), *args, cluster=32)
    with pytest.raises(EmulationError, match="native engine does not run clusters"):
        emulate(m, "xchg", (2,), (32,), *args, engine="native", check="off")


def test_warn_mode_reports_and_drops_a_bad_rank():
    with pytest.warns(EmulationWarning, match="naming CTA rank 3"):
        emulate(_cluster_barrier_misuse("bad_address"), "misuse", (2,), (32,),
                TiledMap(np.zeros((8, 32), np.float32), "f32", 8, 32), np.zeros(4, np.uint32),
                check="warn", verify=False)


@pytest.mark.needs_ptxas
def test_builder_cluster_helpers_text_and_ptxas():
    m, b = _kernel("helpers", [Param("out", T.u64, ptr(T.u32))], (2, 1, 1))
    bar = b.address_of(b.shared("bar", T.b64, 1, align=8))
    remote = b.mapa(bar, 1)
    b.st("global", b.element_addr(b.param("out"), 0, 4), b.getctarank(remote))
    b.mbarrier_arrive_expect_tx(remote, 64, cluster=True)
    b.fence_acq_rel_cluster()
    b.barrier_cluster_arrive(sem="relaxed", aligned=False)
    b.barrier_cluster_wait(aligned=False)
    explicit = b.cluster_special("is_explicit_cluster")
    assert explicit.type == T.pred
    b.ret()
    text = emit_module(m)
    for line in ("getctarank.shared::cluster.u32 %rank0, %remote0;",
                 "mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [%remote0], 64;",
                 "fence.acq_rel.cluster;", "barrier.cluster.arrive.relaxed;",
                 "barrier.cluster.wait;", "mov.pred %is_explicit_cluster0, %is_explicit_cluster;"):
        assert line in text, line
    assert assemble(text, m.target).cubin


def _cluster_ptx(version, target, arrivals, body, result=None):
    """A 2-CTA cluster kernel k(out) in hand-written PTX: shared `bar` (an mbarrier expecting
    `arrivals`), `buf` and `cnt` (zeroed); %r1 = tid, %r2 = rank, %r3/%r9/%r12 = the addresses of
    bar/cnt/buf, %rd2 = out; then `body`; with `result` (a register) the end stores it to
    out[ctaid * 32 + tid] and leaves after a cluster barrier."""
    if result:
        body += f"""    mov.u32 %r13, %ctaid.x;
    mad.lo.u32 %r13, %r13, 32, %r1;
    mul.wide.u32 %rd7, %r13, 4;
    add.s64 %rd7, %rd2, %rd7;
    st.global.u32 [%rd7], {result};
    barrier.cluster.arrive;
    barrier.cluster.wait;
    ret;
"""
    return f""".version {version}
.target {target}
.address_size 64
.visible .entry k(.param .u64 out)
.reqnctapercluster 2, 1, 1
{{
    .shared .align 8 .b64 bar;
    .shared .align 16 .u32 buf[64];
    .shared .align 4 .u32 cnt;
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %cluster_ctarank;
    mov.u32 %r3, bar;
    mov.u32 %r9, cnt;
    mov.u32 %r12, buf;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 mbarrier.init.shared::cta.b64 [%r3], {arrivals};
    @%p1 st.shared.u32 [%r9], 0;
    fence.mbarrier_init.release.cluster;
{body}}}
"""


PARSED = _cluster_ptx("8.0", "sm_90a", 32, """    barrier.cluster.arrive.relaxed.aligned;
    barrier.cluster.wait.acquire.aligned;
    xor.b32 %r4, %r2, 1;
    mapa.shared::cluster.u32 %r5, %r3, %r4;
    mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r5];
    mapa.shared::cluster.u32 %r10, %r9, %r4;
    atom.shared::cluster.add.u32 %r11, [%r10], 1;
    {
    .reg .pred P1;
    waitLoop:
    mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 P1, [%r3], 0;
    @!P1 bra waitLoop;
    }
    fence.acq_rel.cluster;
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.aligned;
    mov.pred %p2, %is_explicit_cluster;
    selp.u32 %r6, 7, 0, %p2;
    mov.u32 %r7, %clusterid.x;
    mov.u32 %r8, %nclusterid.x;
    ld.shared::cta.u32 %r11, [%r9];
    mad.lo.u32 %r6, %r7, 100, %r6;
    mad.lo.u32 %r6, %r11, 1000, %r6;
""", result="%r6")


def test_parsed_cluster_ptx_with_scoped_qualifiers():
    """Hand-written PTX in the CUTLASS style: .relaxed/.acquire/.release barrier.cluster forms,
    a remote arrive and atom through mapa, a .acquire.cluster try_wait loop in its own scope,
    fence.acq_rel.cluster, %is_explicit_cluster and ld.shared::cta."""
    out = np.zeros((4, 32), np.uint32)
    emulate(PARSED, "k", (4,), (32,), out)
    # 32 peer threads each added 1 to the counter; explicit cluster: 7; %clusterid.x · 100
    assert (out == np.array([32007, 32007, 32107, 32107], np.uint32)[:, None]).all()
    # one arrival short (the peer's 32 of 33): both CTAs' waits are named (PTX line 34)
    with pytest.raises(EmulationError, match=r"deadlock: .* block \(1, 0, 0\) .*PTX line 34\) "
                                             r"on the mbarrier .*1 of 33 arrivals pending"):
        emulate(PARSED.replace("], 32;", "], 33;"), "k", (2,), (32,),
                np.zeros((2, 32), np.uint32))


ST_ASYNC = _cluster_ptx("8.1", "sm_90", 1, """    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 384;
    xor.b32 %r4, %r2, 1;
    mapa.shared::cluster.u32 %r5, %r3, %r4;
    shl.b32 %r13, %r1, 3;
    add.u32 %r13, %r13, %r12;
    mapa.shared::cluster.u32 %r6, %r13, %r4;
    mad.lo.u32 %r7, %r2, 1000, %r1;
    add.u32 %r8, %r7, 500;
    st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.u32 [%r6], {%r7, %r8}, [%r5];
    mapa.shared::cluster.u32 %r10, %r9, %r4;
    red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 [%r10], %r1, [%r5];
    {
    .reg .pred P1;
    waitLoop:
    mbarrier.try_wait.parity.shared::cta.b64 P1, [%r3], 0;
    @!P1 bra waitLoop;
    }
    ld.shared.v2.u32 {%r14, %r15}, [%r13];
    ld.shared.u32 %r11, [%r9];
    mov.u32 %r7, %ctaid.x;
    mad.lo.u32 %r7, %r7, 32, %r1;
    mul.wide.u32 %rd3, %r7, 12;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r14;
    st.global.u32 [%rd4+4], %r15;
    st.global.u32 [%rd4+8], %r11;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ret;
""")


def test_st_async_and_red_async_complete_on_the_peers_mbarrier():
    """Each thread st.async's a pair into the peer's buffer and red.async's its tid into the
    peer's counter, both completing bytes on the peer's mbarrier (32·8 + 32·4 = 384 expected)."""
    out = np.zeros((4, 32, 3), np.uint32)
    emulate(ST_ASYNC, "k", (4,), (32,), out)
    t = np.arange(32)
    for cta in range(4):
        peer = 1 - cta % 2
        assert (out[cta, :, 0] == peer * 1000 + t).all() and (out[cta, :, 1] == peer * 1000 + t
                                                             + 500).all()
        assert (out[cta, :, 2] == t.sum()).all()
    if have_tool("ptxas"):
        assert assemble(ST_ASYNC, "sm_90").cubin
    # 4 bytes short: the phase never completes
    with pytest.raises(EmulationError, match=r"deadlock: .*\(phase 0: 0 of 1 arrivals pending, "
                                             r"4 transaction bytes pending\)"):
        emulate(ST_ASYNC.replace("], 384;", "], 388;"), "k", (2,), (32,),
                np.zeros((2, 32, 3), np.uint32))


GENERIC = _cluster_ptx("8.0", "sm_90", 1, """    mov.u64 %rd3, buf;
    cvta.shared::cluster.u64 %rd4, %rd3;
    xor.b32 %r4, %r2, 1;
    mapa.u64 %rd5, %rd4, %r4;
    isspacep.shared::cluster %p1, %rd5;
    selp.u32 %r5, 1, 0, %p1;
    mul.wide.u32 %rd6, %r1, 4;
    add.s64 %rd7, %rd5, %rd6;
    st.u32 [%rd7], %r2;
    barrier.cluster.arrive;
    barrier.cluster.wait;
    add.s64 %rd7, %rd4, %rd6;
    ld.u32 %r6, [%rd7];
    mad.lo.u32 %r6, %r5, 10, %r6;
""", result="%r6")


def test_generic_addresses_of_distributed_shared_memory():
    """cvta.shared::cluster, mapa on a generic address, isspacep.shared::cluster and plain
    (generic) st/ld through the peer's address."""
    out = np.zeros((4, 32), np.uint32)
    emulate(GENERIC, "k", (4,), (32,), out)
    assert (out == np.array([11, 10, 11, 10], np.uint32)[:, None]).all()   # 10: isspacep; peer
    if have_tool("ptxas"):
        assert assemble(GENERIC, "sm_90").cubin


# -- the tensor-core GEMM with 2-CTA clusters (multicast B, remote empty-slot arrivals) ------------
@pytest.mark.parametrize("extra", [dict(), dict(inflight=0, epilogue="tma", stages=3)])
def test_tc_matmul_x2_matches_float64_and_the_single_cta_variant(extra):
    base = {**dict(BM=64, BN=64, wgmma_n=64, consumers=1, stages=2), **extra}
    seed = np.random.SeedSequence().entropy            # fresh inputs, the same for both
    results = []
    for cm in (2, 1):
        op = TcMatmul("bf16", "bf16" if extra else "f32", TcMatmulSchedule(cluster_m=cm, **base))
        shape = op.shape(M=133, N=75 if not extra else 136, K=70)
        arrays = op.make_inputs(shape, np.random.default_rng(seed))
        if cm == 2:
            assert ".reqnctapercluster 2" in " ".join(op.build(shape, "sm_90a").kernels[0]
                                                      .directives)
        run_operator(op, shape, arrays, "sm_90a")
        a, bt = op.values(arrays["A"], op.dtype), op.values(arrays["Bt"], op.dtype)
        got = op.values(arrays["C"], op.out)
        bound = op.error_bound(shape, np.abs(a) @ np.abs(bt).T)
        assert np.isfinite(got).all() and (np.abs(got - a @ bt.T) <= bound).all()
        results.append(arrays["C"])
    assert np.array_equal(results[0].view(np.uint8), results[1].view(np.uint8))
