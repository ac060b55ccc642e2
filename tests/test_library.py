"""ptxgen's public operator functions (ptxgen/library): numpy (ml_dtypes) arrays and torch
tensors in, results out, float64 references at odd shapes, layouts read in place, the kernel
cache, torch custom ops under torch.compile and autograd, and bit equality of the GPU with the
emulator on the same inputs."""
import os
import subprocess
import sys

import numpy as np
import pytest

import ptxgen
from ptxgen.errors import PtxgenError

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = ml_dtypes.bfloat16


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXGEN_CACHE_DIR", str(tmp_path / "cache"))


def rand(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def matmul_bound(a, b, out_bf16):
    """Per element: 2K f32 ulps of sum |a||b| (accumulation), a bf16 ulp for a bf16 C."""
    absprod = np.abs(a) @ np.abs(b)
    return 2 * a.shape[1] * 2.0 ** -23 * absprod + (2.0 ** -8 * absprod if out_bf16 else 0)


@pytest.mark.parametrize("M,N,K", [(67, 45, 40), (33, 70, 93)])
@pytest.mark.parametrize("dtype", [BF16, np.float16])
def test_matmul_numpy_matches_float64(M, N, K, dtype):
    rng = np.random.default_rng()
    a, b = rand(rng, (M, K), dtype), rand(rng, (K, N), dtype)
    c = ptxgen.matmul(a, b)
    assert c.shape == (M, N)
    assert c.dtype == (np.dtype(BF16) if dtype is BF16 else np.float32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    err = np.abs(c.astype(np.float64) - a64 @ b64)
    assert np.all(err <= matmul_bound(a64, b64, dtype is BF16))
    rec = ptxgen.last_launch()
    assert rec.function == "matmul" and rec.backend == "emu" and "wgmma" in rec.path


def test_skinny_matmul_takes_split_k_and_matches_float64():
    rng = np.random.default_rng()
    a = rng.standard_normal((16, 4096)).astype(BF16)
    b = rng.standard_normal((4096, 200)).astype(BF16)
    c = ptxgen.matmul(a, b)
    assert "split_k=2" in ptxgen.last_launch().schedule
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert np.all(np.abs(c.astype(np.float64) - a64 @ b64) <= matmul_bound(a64, b64, True))


def test_matmul_reads_transposed_operands_in_place():
    rng = np.random.default_rng()
    a, bt = rand(rng, (48, 64), BF16), rand(rng, (40, 64), BF16)
    plain = ptxgen.matmul(a, np.ascontiguousarray(bt.T))    # B row-major
    view = ptxgen.matmul(a, bt.T)                    # B as the kernel's column-major layout
    assert ptxgen.last_launch().launches == ("tc_matmul",)
    assert np.array_equal(plain.view(np.uint16), view.view(np.uint16))
    at = rand(rng, (64, 48), BF16)
    c = ptxgen.matmul(at.T, bt.T)                    # A column-major too
    ref = at.T.astype(np.float64) @ bt.T.astype(np.float64)
    assert np.all(np.abs(c.astype(np.float64) - ref) <=
                  matmul_bound(at.T.astype(np.float64), bt.T.astype(np.float64), True))


def test_matmul_fp32_is_the_simt_gemm_and_tf32_the_tensor_cores():
    rng = np.random.default_rng()
    a, b = rand(rng, (37, 29), np.float32), rand(rng, (29, 41), np.float32)
    c = ptxgen.matmul(a, b)
    assert ptxgen.last_launch().path.startswith("SIMT")
    assert np.allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
    c = ptxgen.matmul(a, b, precision="tf32")
    assert "wgmma" in ptxgen.last_launch().path
    assert np.allclose(c, a.astype(np.float64) @ b, rtol=3e-2, atol=3e-2)


def test_matmul_sm80_path_on_request():
    rng = np.random.default_rng()
    a, b = rand(rng, (40, 32), BF16), rand(rng, (32, 24), BF16)
    c = ptxgen.matmul(a, b, target="sm_80")
    assert ptxgen.last_launch().path == "mma.sync (sm_80)"
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert np.all(np.abs(c.astype(np.float64) - a64 @ b64) <= matmul_bound(a64, b64, True))


@pytest.mark.parametrize("call,message", [
    (lambda: ptxgen.matmul(np.ones((3, 4), BF16), np.ones((5, 6), BF16)),
     "inner dimensions 4 and 5 differ"),
    (lambda: ptxgen.matmul(np.ones((3, 4), BF16), np.ones((4, 6), np.float16)),
     "b is f16 but a is bf16"),
    (lambda: ptxgen.matmul(np.ones((3, 4), np.int32), np.ones((4, 6), np.int32)),
     "a has dtype int32"),
    (lambda: ptxgen.matmul([[1.0]], np.ones((1, 1), BF16)), "a must be a torch tensor"),
    (lambda: ptxgen.matmul(np.ones((3, 4), BF16), np.ones((4, 6), BF16), backend="tpu"),
     "backend must be one of"),
    (lambda: ptxgen.attention(*[np.ones((1, 1, 8, 48), BF16)] * 3), "head dim D=48"),
])
def test_bad_input_is_one_line_in_python_words(call, message):
    with pytest.raises(PtxgenError) as e:
        call()
    assert message in str(e.value) and "\n" not in str(e.value)
    assert "--" not in str(e.value)


def test_attention_numpy_matches_float64():
    from ptxgen.ops.attention import attention_reference
    rng = np.random.default_rng()
    q, k, v = (rand(rng, (1, 2, 77, 64), BF16) for _ in range(3))
    for causal in (False, True):
        o, lse = ptxgen.attention(q, k, v, causal=causal, return_lse=True)
        ref = attention_reference(*(x.astype(np.float64) for x in (q, k, v)), 1 / 8, causal,
                                  2.0 ** -8)
        assert np.all(np.abs(o.astype(np.float64) - ref["O"]) <= ref["O_bound"])
        assert np.all(np.abs(lse - ref["LSE"]) <= ref["LSE_bound"])


@pytest.mark.parametrize("causal", [False, True])
def test_attention_varlen_numpy_matches_float64_and_one_kernel_serves_every_batch(causal):
    from ptxgen.ops.attention_varlen import AttentionVarlen
    rng = np.random.default_rng()
    lens, H, H_kv, D = [1, 37, 0, 130, 64], 4, 2, 64
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    q, k, v = (rng.standard_normal((int(cu[-1]), h, D)).astype(BF16) for h in (H, H_kv, H_kv))
    o, lse = ptxgen.attention_varlen(q, k, v, cu, cu, max(lens), max(lens), causal=causal,
                                     return_lse=True)
    assert o.shape == q.shape and o.dtype == BF16 and lse.shape == (H, int(cu[-1]))
    ref = AttentionVarlen("bf16", causal=causal, kv_group=2).reference(
        {"D": D}, {"Q": q.view(np.uint16), "K": k.view(np.uint16), "V": v.view(np.uint16),
               "cu_seqlens_q": cu, "cu_seqlens_k": cu})
    assert np.all(np.abs(o.astype(np.float64) - ref["O"]) <= ref["O_bound"])
    # other lengths, the same kernel (the lengths are launch arguments, not code)
    lens2 = [50, 3, 77]
    cu2 = np.concatenate([[0], np.cumsum(lens2)]).astype(np.int32)
    q2, k2 = (rng.standard_normal((int(cu2[-1]), h, D)).astype(BF16) for h in (H, H_kv))
    ptxgen.attention_varlen(q2, k2, k2, cu2, cu2, 77, 77, causal=causal)
    assert ptxgen.last_launch().cache == "memory"


def test_attention_varlen_under_torch_compile_is_the_eager_one():
    import torch
    cu = torch.tensor([0, 5, 40, 41], dtype=torch.int32)
    q, k, v = (torch.randn(41, h, 64, dtype=torch.bfloat16) for h in (4, 1, 1))
    # eager first: the custom ops are defined on the first call with torch tensors (or at
    # import when torch came first), never inside a traced region (docs/operators.md)
    want = ptxgen.attention_varlen(q, k, v, cu, cu, 35, 35, causal=True, return_lse=True)
    f = torch.compile(lambda *a: ptxgen.attention_varlen(*a, 35, 35, causal=True,
                                                         return_lse=True),
                      fullgraph=True, backend="eager")
    o, lse = f(q, k, v, cu, cu)
    assert torch.equal(o, want[0]) and torch.equal(lse, want[1]) and lse.shape == (4, 41)


def test_attention_varlen_autograd_runs_the_varlen_backward_operator():
    """torch autograd through attention_varlen gives the backward operator's own gradients
    (tests/test_attention_varlen_backward.py checks those against float64), bit for bit."""
    import torch
    from ptxgen.emu.backend import run_operator
    from ptxgen.ops.attention_varlen_backward import AttentionVarlenBackward
    lens = [1, 37, 0, 80]
    cu = torch.tensor(np.concatenate([[0], np.cumsum(lens)]), dtype=torch.int32)
    T, H, H_kv, D = int(cu[-1]), 4, 2, 64
    q, k, v = (torch.randn(T, h, D, dtype=torch.bfloat16, requires_grad=True)
               for h in (H, H_kv, H_kv))
    o, lse = ptxgen.attention_varlen(q, k, v, cu, cu, 80, 80, causal=True, return_lse=True)
    do = torch.randn_like(o)
    o.backward(do)
    op = AttentionVarlenBackward("bf16", causal=True, kv_group=H // H_kv)
    shape = op.shape(H=H, D=D, seqlens_q=lens)
    bits = {n: t.detach().view(torch.int16).numpy().view(np.uint16) for n, t in
            (("Q", q), ("K", k), ("V", v), ("O", o), ("dO", do))}
    arrays = dict(bits, LSE=lse.detach().numpy(), cu_seqlens_q=cu.numpy().view(np.uint32),
                  cu_seqlens_k=cu.numpy().view(np.uint32))
    for n, like in (("dQ", "Q"), ("dK", "K"), ("dV", "V")):
        arrays[n] = np.full_like(bits[like], 0x7FC0)
    run_operator(op, shape, arrays, "sm_90a")
    for n, t in (("dQ", q), ("dK", k), ("dV", v)):
        assert np.array_equal(t.grad.view(torch.int16).numpy().view(np.uint16), arrays[n]), n


def test_attention_varlen_bad_input_is_one_line():
    q = np.zeros((10, 4, 64), BF16)
    cu = np.array([0, 4, 10], np.int32)
    with pytest.raises(PtxgenError, match="cu_seqlens_q must rise from 0 to 10 by steps of at "
                                          "most max_seqlen"):
        ptxgen.attention_varlen(q, q, q, np.array([0, 4, 9], np.int32), cu, 6, 6)
    with pytest.raises(PtxgenError, match="max_seqlen_k must be a positive int"):
        ptxgen.attention_varlen(q, q, q, cu, cu, 6, 0)
    with pytest.raises(PtxgenError, match="H a multiple of H_kv"):
        ptxgen.attention_varlen(q, np.zeros((10, 3, 64), BF16), np.zeros((10, 3, 64), BF16),
                                cu, cu, 6, 6)


def test_cached_call_reuses_compiled_kernels_and_disk_serves_a_new_process(tmp_path):
    from ptxgen.library import clear_cache
    rng = np.random.default_rng()
    a, b = rand(rng, (20, 16), BF16), rand(rng, (16, 24), BF16)
    ptxgen.matmul(a, b)
    assert ptxgen.last_launch().cache == "built"
    ptxgen.matmul(a, b)
    assert ptxgen.last_launch().cache == "memory"
    clear_cache()
    ptxgen.matmul(a, b)
    assert ptxgen.last_launch().cache == "disk"
    code = ("import numpy as np, ml_dtypes, ptxgen; x = np.ones((20, 16), ml_dtypes.bfloat16);"
            "y = np.ones((16, 24), ml_dtypes.bfloat16); ptxgen.matmul(x, y);"
            "print(ptxgen.last_launch().cache)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ), check=True).stdout.split()
    assert out == ["disk"]


def test_a_cached_call_hashes_no_configuration_text(monkeypatch):
    """The second call of one operator object and shape finds its kernels by the object, not
    by hashing the operator's configuration again (host cost, docs/operators.md)."""
    from ptxgen.library import compiled
    rng = np.random.default_rng()
    a, b = rand(rng, (20, 16), BF16), rand(rng, (16, 24), BF16)
    ptxgen.matmul(a, b)

    def no_hash(*args):
        raise AssertionError("cache_key called on a cached call")
    monkeypatch.setattr(compiled, "cache_key", no_hash)
    ptxgen.matmul(a, b)
    assert ptxgen.last_launch().cache == "memory"
    compiled.clear_memory()
    with pytest.raises(AssertionError, match="cache_key called"):
        ptxgen.matmul(a, b)


def test_dir_lists_the_lazy_names():
    names = dir(ptxgen)
    for n in ("kernel", "emulate", "matmul", "attention", "last_launch"):
        assert n in names


# -- torch ---------------------------------------------------------------------------------------
torch_only = pytest.mark.skipif("torch" not in sys.modules and
                                __import__("importlib").util.find_spec("torch") is None,
                                reason="torch not installed")


@torch_only
def test_matmul_torch_cpu_tensors_and_out():
    import torch
    a = torch.randn(19, 24, dtype=torch.bfloat16)
    b = torch.randn(24, 13, dtype=torch.bfloat16)
    c = ptxgen.matmul(a, b)
    assert c.dtype == torch.bfloat16 and c.shape == (19, 13)
    ref = a.double() @ b.double()
    assert torch.all((c.double() - ref).abs() <= torch.from_numpy(
        matmul_bound(a.double().numpy(), b.double().numpy(), True)))
    x = torch.randn(2, 3, 24, dtype=torch.bfloat16)      # leading dimensions are rows
    assert ptxgen.matmul(x, b).shape == (2, 3, 13)


@torch_only
def test_matmul_gradcheck_fp32_on_the_emulator():
    import torch
    a = torch.randn(5, 7, requires_grad=True)
    b = torch.randn(7, 3, requires_grad=True)
    assert torch.autograd.gradcheck(ptxgen.matmul, (a, b), eps=1e-2, atol=1e-2, rtol=1e-2)


@torch_only
def test_matmul_bf16_gradients_against_float64():
    import torch
    a = torch.randn(21, 16, dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(16, 11, dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(21, 11, dtype=torch.bfloat16)
    ptxgen.matmul(a, b).backward(g)
    ga = g.double() @ b.detach().double().T
    gb = a.detach().double().T @ g.double()
    assert torch.allclose(a.grad.double(), ga, rtol=2 ** -7, atol=0.05)
    assert torch.allclose(b.grad.double(), gb, rtol=2 ** -7, atol=0.05)


@torch_only
@pytest.mark.parametrize("causal, H, H_kv, S, D", [(True, 2, 2, 37, 64), (False, 4, 2, 50, 128)])
def test_attention_gradients_against_float64_autograd(causal, H, H_kv, S, D):
    """ptxgen.attention is differentiable: CPU bf16 tensors through the emulator's forward
    and backward, against float64 autograd of the reference attention within the bound of
    ops/attention_backward.py (given the forward's O and LSE); GQA's dK, dV summed over the
    group."""
    import torch
    from ptxgen.ops.attention_backward import backward_reference
    q = torch.randn(1, H, S, D, dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(1, H_kv, S, D, dtype=torch.bfloat16, requires_grad=True)
            for _ in range(2))
    g = torch.randn(1, H, S, D, dtype=torch.bfloat16)
    o, lse = ptxgen.attention(q, k, v, causal=causal, return_lse=True)
    o.backward(g)
    assert "attn_bwd_dq" in ptxgen.last_launch().launches
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    kr, vr = (x.repeat_interleave(H // H_kv, dim=1) for x in (k64, v64))
    s = q64 @ kr.transpose(-1, -2) / D ** 0.5
    if causal:
        s = s.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    (torch.softmax(s, -1) @ vr).backward(g.double())
    ref = backward_reference(*(x.detach().numpy() for x in (q64, kr, vr)), g.double().numpy(),
                             D ** -0.5, causal, o.detach().double().numpy(),
                             lse.detach().double().numpy())
    for name, got, want in (("dQ", q.grad, q64.grad), ("dK", k.grad, k64.grad),
                            ("dV", v.grad, v64.grad)):
        bound = ref[name + "_bound"]
        if name != "dQ":                              # the group's query heads summed
            bound = bound.reshape(1, H_kv, H // H_kv, S, D).sum(2)
        assert got.dtype == torch.bfloat16 and got.shape == want.shape, name
        assert np.all(np.abs(got.double().numpy() - want.numpy()) <= bound), name


@torch_only
def test_attention_backward_under_compile_is_the_eager_one_bit_for_bit():
    import torch
    q, k, v = (torch.randn(1, 2, 40, 64, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    ptxgen.attention(q.detach(), k.detach(), v.detach())         # the custom ops registered
    torch._dynamo.reset()
    f = torch.compile(lambda q, k, v: ptxgen.attention(q, k, v, causal=True), fullgraph=True)
    f(q, k, v).float().sum().backward()
    compiled = [x.grad.clone() for x in (q, k, v)]
    for x in (q, k, v):
        x.grad = None
    ptxgen.attention(q, k, v, causal=True).float().sum().backward()
    assert all(torch.equal(c, x.grad) for c, x in zip(compiled, (q, k, v)))


@torch_only
def test_compile_fullgraph_traces_a_two_layer_block_without_breaks():
    import torch

    def block(x, w1, w2):
        return ptxgen.matmul(torch.relu(ptxgen.matmul(x, w1)), w2)
    x = torch.randn(9, 16, dtype=torch.bfloat16)
    w1 = torch.randn(16, 24, dtype=torch.bfloat16)
    w2 = torch.randn(24, 8, dtype=torch.bfloat16)
    eager = block(x, w1, w2)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(block)(x, w1, w2)
    assert explained.graph_break_count == 0
    got = torch.compile(block, fullgraph=True, backend="aot_eager")(x, w1, w2)
    assert torch.equal(got, eager)


# -- GPU -----------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K", [(67, 45, 40), (130, 257, 72)])
def test_gpu_matmul_is_bit_equal_to_the_emulator(M, N, K):
    import torch
    a = torch.randn(M, K, dtype=torch.bfloat16)
    b = torch.randn(K, N, dtype=torch.bfloat16)
    on_cpu = ptxgen.matmul(a, b)
    on_gpu = ptxgen.matmul(a.cuda(), b.cuda())
    assert ptxgen.last_launch().backend == "gpu"
    assert torch.equal(on_gpu.cpu(), on_cpu)
    view = ptxgen.matmul(a.cuda(), b.T.contiguous().cuda().T)
    assert torch.equal(view.cpu(), ptxgen.matmul(a, b.T.contiguous().T))


@pytest.mark.gpu
def test_gpu_skinny_split_k_matmul_reuses_its_workspace_and_matches_the_emulator():
    """The split-K default (counters that must start at zero, left at zero by the kernel):
    three calls in a row on the kept workspace, each bit-equal to the emulator."""
    import torch
    a = torch.randn(16, 4096, dtype=torch.bfloat16)
    b = torch.randn(4096, 200, dtype=torch.bfloat16)
    on_cpu = ptxgen.matmul(a, b)
    for _ in range(3):
        on_gpu = ptxgen.matmul(a.cuda(), b.cuda())
        assert "split_k=2" in ptxgen.last_launch().schedule
        assert torch.equal(on_gpu.cpu(), on_cpu)


@pytest.mark.gpu
def test_gpu_attention_varlen_and_decode_and_backward_match_the_emulator():
    import torch
    cu = torch.tensor([0, 37, 37, 167, 231], dtype=torch.int32)
    q, k, v = (torch.randn(231, h, 64, dtype=torch.bfloat16) for h in (4, 2, 2))
    o_cpu = ptxgen.attention_varlen(q, k, v, cu, cu, 130, 130, causal=True)
    o_gpu = ptxgen.attention_varlen(q.cuda(), k.cuda(), v.cuda(), cu.cuda(), cu.cuda(), 130,
                                    130, causal=True)
    assert torch.equal(o_gpu.cpu(), o_cpu)
    qa, ka, va = (torch.randn(1, h, 77, 64, dtype=torch.bfloat16) for h in (4, 2, 2))
    grads = []
    for dev in ("cpu", "cuda"):
        xs = [t.detach().to(dev).requires_grad_() for t in (qa, ka, va)]     # leaves on dev
        ptxgen.attention(*xs, causal=True).float().square().sum().backward()
        grads.append([x.grad.cpu() for x in xs])
    assert all(torch.equal(g, c) for g, c in zip(*grads))


@pytest.mark.gpu
def test_gpu_grouped_matmul_takes_offsets_on_the_device_and_replays_in_a_cuda_graph():
    """offs on the GPU reach the kernel without a round trip to the host: the call captures
    in a CUDA graph, and new offsets written into the same tensor change the replay."""
    import torch
    x = torch.randn(150, 64, dtype=torch.bfloat16)
    w = torch.randn(3, 64, 48, dtype=torch.bfloat16)
    offs = torch.tensor([40, 40, 130], dtype=torch.int32)
    on_cpu = ptxgen.grouped_matmul(x, w, offs)
    xg, wg, og = x.cuda(), w.cuda(), offs.cuda()
    assert torch.equal(ptxgen.grouped_matmul(xg, wg, og).cpu(), on_cpu)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        c = ptxgen.grouped_matmul(xg, wg, og)
    og.copy_(torch.tensor([10, 90, 150], dtype=torch.int32))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(c.cpu(), ptxgen.grouped_matmul(x, w, og.cpu()))


@pytest.mark.gpu
def test_gpu_attention_is_bit_equal_to_the_emulator():
    import torch
    q, k, v = (torch.randn(1, 2, 77, 64, dtype=torch.bfloat16) for _ in range(3))
    o_cpu = ptxgen.attention(q, k, v, causal=True)
    o_gpu = ptxgen.attention(q.cuda(), k.cuda(), v.cuda(), causal=True)
    assert torch.equal(o_gpu.cpu(), o_cpu)


@pytest.mark.gpu
def test_gpu_numpy_on_request_and_cuda_graph_capture():
    import torch
    rng = np.random.default_rng()
    a, b = rand(rng, (64, 32), BF16), rand(rng, (32, 48), BF16)
    c = ptxgen.matmul(a, b, backend="gpu")
    assert isinstance(c, np.ndarray) and c.dtype == np.dtype(BF16)
    assert np.array_equal(c.view(np.uint16), ptxgen.matmul(a, b).view(np.uint16))
    x = torch.randn(64, 32, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(32, 48, dtype=torch.bfloat16, device="cuda")
    ptxgen.matmul(x, w)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        ptxgen.matmul(x, w)
        with torch.cuda.graph(g):
            y = ptxgen.matmul(x, w)
    x.copy_(torch.randn_like(x))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, ptxgen.matmul(x, w))


def test_matmul_with_a_named_and_a_traced_epilogue():
    import math
    from ptxgen.epilogues import tanh
    rng = np.random.default_rng()
    M, N, K = 67, 45, 40
    a, b = rand(rng, (M, K), BF16), rand(rng, (K, N), BF16)
    bias = rng.standard_normal(N).astype(np.float32)
    acc = a.astype(np.float64) @ b.astype(np.float64)
    c = ptxgen.matmul(a, b, epilogue="bias_gelu", bias=bias)
    x = acc + bias
    want = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    bound = matmul_bound(a.astype(np.float64), b.astype(np.float64), True) * 1.2 + \
        2.0 ** -8 * np.abs(want) + 1e-5
    assert np.all(np.abs(c.astype(np.float64) - want) <= bound)
    assert "bias_gelu" in ptxgen.last_launch().kernel

    def mine(acc, row, col, s, resid):
        return tanh(acc * s) + resid[row, col]
    r = rng.standard_normal((M, N)).astype(np.float32)
    c = ptxgen.matmul(a, b, epilogue=mine, s=0.1, resid=r)
    want = np.tanh(0.1 * acc) + r
    assert np.all(np.abs(c.astype(np.float64) - want) <= 2.0 ** -8 * np.abs(want) + 1e-3)
    with pytest.raises(PtxgenError, match="missing bias"):
        ptxgen.matmul(a, b, epilogue="bias_gelu")
    with pytest.raises(PtxgenError, match="has shape"):
        ptxgen.matmul(a, b, epilogue="bias", bias=np.ones(7, np.float32))


def test_attention_with_mods_matches_the_float64_reference_of_the_same_mods():
    from ptxgen.mods import alibi, alibi_slopes, causal, sliding_window
    from ptxgen.ops.attention import Attention
    rng = np.random.default_rng()
    q, k, v = (rand(rng, (1, 2, 201, 64), BF16) for _ in range(3))
    mask, score = sliding_window(64), alibi(alibi_slopes(2))
    o, lse = ptxgen.attention(q, k, v, mask_mod=mask, score_mod=score, return_lse=True)
    op = Attention("bf16", mask_mod=mask, score_mod=score)
    shape = op.shape(B=1, H=2, S=201, D=64)
    arrays = {"Q": q.view(np.uint16), "K": k.view(np.uint16), "V": v.view(np.uint16),
              "O": o.view(np.uint16), "LSE": lse}
    assert op.check(shape, arrays)[0]
    plain = ptxgen.attention(q, k, v)
    arrays["O"] = plain.view(np.uint16)
    assert not op.check(shape, arrays)[0]                  # the mods changed the result
    as_mask = ptxgen.attention(q, k, v, mask_mod=causal())
    assert np.array_equal(as_mask.view(np.uint16),
                          ptxgen.attention(q, k, v, causal=True).view(np.uint16))


def test_attention_with_fewer_kv_heads_is_grouped_query_attention():
    from ptxgen.ops.attention import attention_reference
    rng = np.random.default_rng()
    q = rand(rng, (1, 8, 90, 64), BF16)
    k, v = (rand(rng, (1, 2, 90, 64), BF16) for _ in range(2))
    o = ptxgen.attention(q, k, v, causal=True)
    ref = attention_reference(q.astype(np.float64), np.repeat(k.astype(np.float64), 4, axis=1),
                              np.repeat(v.astype(np.float64), 4, axis=1), 1 / 8, True, 2.0 ** -8)
    assert np.all(np.abs(o.astype(np.float64) - ref["O"]) <= ref["O_bound"])
    with pytest.raises(PtxgenError, match="multiple of H_kv"):
        ptxgen.attention(q, k[:, :1].repeat(3, axis=1), v[:, :1].repeat(3, axis=1))


def test_fp8_matmul_with_per_tensor_scales():
    E4M3 = ml_dtypes.float8_e4m3fn
    rng = np.random.default_rng()
    M, N, K = 67, 45, 64
    a = rng.standard_normal((M, K)).astype(E4M3)
    b = np.asfortranarray(rng.standard_normal((K, N)).astype(E4M3))   # column-major B
    c = ptxgen.matmul(a, b, scale_a=0.5, scale_b=3.0)
    assert c.dtype == np.dtype(BF16) and "wgmma" in ptxgen.last_launch().path
    ref = 1.5 * (a.astype(np.float64) @ b.astype(np.float64))
    absprod = 1.5 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    assert np.all(np.abs(c.astype(np.float64) - ref) <= 2.0 ** -8 * np.abs(ref) +
                  2.0 ** -12 * absprod + 1e-6)
    with pytest.raises(PtxgenError, match="scale_a and scale_b apply to fp8"):
        ptxgen.matmul(rand(rng, (4, 8), BF16), rand(rng, (8, 4), BF16), scale_a=2.0)


def test_fp8_matmul_with_an_epilogue_on_the_scaled_product():
    E4M3 = ml_dtypes.float8_e4m3fn
    rng = np.random.default_rng()
    M, N, K = 67, 45, 64
    a = rng.standard_normal((M, K)).astype(E4M3)
    b = np.asfortranarray(rng.standard_normal((K, N)).astype(E4M3))
    bias = rng.standard_normal(N).astype(np.float32)
    c = ptxgen.matmul(a, b, scale_a=0.5, scale_b=3.0, epilogue="bias_silu", bias=bias)
    acc = 1.5 * (a.astype(np.float64) @ b.astype(np.float64)) + bias
    ref = acc / (1 + np.exp(-acc))
    absprod = 1.5 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    assert np.all(np.abs(c.astype(np.float64) - ref) <= 2.0 ** -7 * np.abs(ref) +
                  2.0 ** -11 * absprod + 1e-5)
    # the scales multiply before the bias: 1.5 (a @ b) + bias, not 1.5 (a @ b + bias)
    wrong = 1.5 * (a.astype(np.float64) @ b.astype(np.float64) + bias)
    assert not np.allclose(c.astype(np.float64), wrong / (1 + np.exp(-wrong)), atol=1e-2)


def test_grouped_matmul_as_torch_grouped_mm_takes_it():
    rng = np.random.default_rng()
    M, K, N, G = 150, 64, 48, 3
    x = rand(rng, (M, K), BF16)
    w = rand(rng, (G, K, N), BF16)
    offs = np.array([40, 40, 130], np.int32)                        # an empty expert, a tail
    want = np.zeros((M, N))
    lo = 0
    for g, hi in enumerate(offs):
        want[lo:hi] = x[lo:hi].astype(np.float64) @ w[g].astype(np.float64)
        lo = hi
    bound = 2 * K * 2.0 ** -23 * np.abs(want).max() + 2.0 ** -8 * np.abs(want) + 1e-6
    for weights in (w, np.swapaxes(np.ascontiguousarray(np.swapaxes(w, 1, 2)), 1, 2)):
        c = ptxgen.grouped_matmul(x, weights, offs)                  # (G,K,N) and a (G,N,K) view
        assert np.all(np.abs(c.astype(np.float64) - want) <= bound)
        assert np.all(c[130:].astype(np.float64) == 0)
    with pytest.raises(PtxgenError, match="ascending integer end rows"):
        ptxgen.grouped_matmul(x, w, np.array([50, 40, 130], np.int32))
    import torch                                                     # offs as a CPU tensor
    c = ptxgen.grouped_matmul(torch.from_numpy(x.view(np.int16)).view(torch.bfloat16),
                              torch.from_numpy(w.view(np.int16)).view(torch.bfloat16),
                              torch.from_numpy(offs))
    assert np.all(np.abs(c.float().numpy().astype(np.float64) - want) <= bound)
