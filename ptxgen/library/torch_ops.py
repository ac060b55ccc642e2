"""ptxgen's operators as torch custom ops (`torch.ops.ptxgen.*`): torch.compile traces them
without graph breaks (each has a fake implementation giving the result's shape and dtype),
CUDA graphs capture their launches (they run on torch's current stream and allocate through
torch), and autograd differentiates them: matmul's backward is two ptxgen GEMMs in the layouts
the kernel reads in place (dA = dC·Bᵀ, dB = Aᵀ·dC); attention's is ptxgen's attention backward
(ptxgen::attention_backward, ops/attention_backward.py) on the saved Q, K, V, O and LSE.
Attention with a score_mod or mask_mod has no backward and says so rather than returning a
wrong gradient.

The ops wrap the implementations they are given (register(impl): library/common.py passes
IMPLS, every family module's), so this module imports nothing of the library back."""
import torch

from ..errors import PtxgenError

_REGISTERED = []


def register(impl):
    """Register the custom ops over `impl` ({"matmul": matmul_impl, ...}) once per process."""
    if not _REGISTERED:
        _REGISTERED.append(impl)
        _register(impl)


def _register(impl):
    matmul_impl, attention_impl = impl["matmul"], impl["attention"]

    @torch.library.custom_op("ptxgen::matmul", mutates_args=())
    def matmul(a: torch.Tensor, b: torch.Tensor, precision: str = "highest",
               backend: str = "auto", target: str | None = None) -> torch.Tensor:
        return matmul_impl(a, b, None, precision, backend, target)

    @matmul.register_fake
    def _(a, b, precision="highest", backend="auto", target=None):
        out = torch.bfloat16 if a.dtype == torch.bfloat16 else torch.float32
        return a.new_empty((*a.shape[:-1], b.shape[1]), dtype=out)

    def matmul_setup(ctx, inputs, output):
        a, b, precision, backend, target = inputs
        ctx.save_for_backward(a, b)
        ctx.config = (precision, backend, target)

    def matmul_backward(ctx, grad):
        a, b = ctx.saved_tensors
        g = grad.to(a.dtype)
        ga = gb = None
        if ctx.needs_input_grad[0]:
            ga = matmul(g, b.t(), *ctx.config).to(a.dtype)
        if ctx.needs_input_grad[1]:
            a2 = a.reshape(-1, a.shape[-1])
            gb = matmul(a2.t(), g.reshape(-1, g.shape[-1]), *ctx.config).to(b.dtype)
        return ga, gb, None, None, None

    matmul.register_autograd(matmul_backward, setup_context=matmul_setup)

    @torch.library.custom_op("ptxgen::attention", mutates_args=())
    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                  scale: float | None, backend: str = "auto",
                  target: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        return attention_impl(q, k, v, causal, scale, backend, target)

    @attention.register_fake
    def _(q, k, v, causal, scale, backend="auto", target=None):
        return torch.empty_like(q), q.new_empty(q.shape[:3], dtype=torch.float32)

    @torch.library.custom_op("ptxgen::attention_backward", mutates_args=())
    def attention_bwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                      lse: torch.Tensor, grad: torch.Tensor, causal: bool, scale: float | None,
                      backend: str = "auto", target: str | None = None) \
            -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return impl["attention_backward"](q, k, v, o, lse, grad, causal, scale, backend,
                                          target)

    @attention_bwd.register_fake
    def _(q, k, v, o, lse, grad, causal, scale, backend="auto", target=None):
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    def attention_setup(ctx, inputs, output):
        q, k, v, causal, scale, backend, target = inputs
        ctx.save_for_backward(q, k, v, *output)
        ctx.config = (causal, scale, backend, target)

    def attention_backward(ctx, grad_o, grad_lse):
        if grad_lse is not None and not torch.compiler.is_compiling() and \
                bool((grad_lse != 0).any()):
            raise PtxgenError("ptxgen.attention: backward through the LSE output not "
                              "implemented (only O's gradient is)")
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = attention_bwd(q, k, v, o, lse, grad_o.to(q.dtype).contiguous(),
                                   *ctx.config)
        return dq, dk, dv, None, None, None, None

    attention.register_autograd(attention_backward, setup_context=attention_setup)
    _register_decode(impl)
    _register_f32(impl)


def _register_decode(impl):
    """attention_decode (inference only: no autograd formula), attention_varlen (its backward:
    ops/attention_varlen_backward.py) and kv_cache_append (writes the caches in place)."""
    decode_impl, append_impl = impl["attention_decode"], impl["kv_cache_append"]

    @torch.library.custom_op("ptxgen::attention_decode", mutates_args=())
    def attention_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                         cache_seqlens: torch.Tensor, block_table: torch.Tensor | None,
                         softmax_scale: float | None, backend: str = "auto",
                         target: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        return decode_impl(q, k_cache, v_cache, cache_seqlens, block_table, softmax_scale,
                           backend, target)

    @attention_decode.register_fake
    def _(q, k_cache, v_cache, cache_seqlens, block_table, softmax_scale, backend="auto",
          target=None):
        return torch.empty_like(q), q.new_empty(q.shape[:3], dtype=torch.float32)

    @torch.library.custom_op("ptxgen::kv_cache_append", mutates_args=("k_cache", "v_cache"))
    def kv_cache_append(k_cache: torch.Tensor, v_cache: torch.Tensor, k_new: torch.Tensor,
                        v_new: torch.Tensor, cache_seqlens: torch.Tensor,
                        block_table: torch.Tensor | None, backend: str = "auto",
                        target: str | None = None) -> None:
        append_impl(k_cache, v_cache, k_new, v_new, cache_seqlens, block_table, backend,
                    target)

    varlen_impl = impl["attention_varlen"]

    @torch.library.custom_op("ptxgen::attention_varlen", mutates_args=())
    def attention_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,
                         max_seqlen_q: int, max_seqlen_k: int, causal: bool = False,
                         scale: float | None = None, backend: str = "auto",
                         target: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        return varlen_impl(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           causal, scale, backend, target)

    @attention_varlen.register_fake
    def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False,
          scale=None, backend="auto", target=None):
        return torch.empty_like(q), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)

    @torch.library.custom_op("ptxgen::attention_varlen_backward", mutates_args=())
    def varlen_bwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                   lse: torch.Tensor, grad: torch.Tensor, cu_seqlens_q: torch.Tensor,
                   cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int,
                   causal: bool, scale: float | None, backend: str = "auto",
                   target: str | None = None) \
            -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return impl["attention_varlen_backward"](q, k, v, o, lse, grad, cu_seqlens_q,
                                                 cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                                 causal, scale, backend, target)

    @varlen_bwd.register_fake
    def _(q, k, v, o, lse, grad, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
          causal, scale, backend="auto", target=None):
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    def varlen_setup(ctx, inputs, output):
        q, k, v, cu_q, cu_k, max_q, max_k, causal, scale, backend, target = inputs
        ctx.save_for_backward(q, k, v, cu_q, cu_k, *output)
        ctx.config = (max_q, max_k, causal, scale, backend, target)

    def varlen_backward(ctx, grad_o, grad_lse):
        if grad_lse is not None and not torch.compiler.is_compiling() and \
                bool((grad_lse != 0).any()):
            raise PtxgenError("ptxgen.attention_varlen: backward through the LSE output not "
                              "implemented (only O's gradient is)")
        q, k, v, cu_q, cu_k, o, lse = ctx.saved_tensors
        dq, dk, dv = varlen_bwd(q, k, v, o, lse, grad_o.to(q.dtype).contiguous(), cu_q, cu_k,
                                *ctx.config)
        return dq, dk, dv, None, None, None, None, None, None, None, None

    attention_varlen.register_autograd(varlen_backward, setup_context=varlen_setup)

    @kv_cache_append.register_fake
    def _(k_cache, v_cache, k_new, v_new, cache_seqlens, block_table, backend="auto",
          target=None):
        return None


def _register_f32(impl):
    """The fp32 operators: a custom op each, with a fake implementation and a backward written
    with torch operations (they are cheap next to the forward's kernel)."""

    def unary(name, impl, fake, backward):
        @torch.library.custom_op(f"ptxgen::{name}", mutates_args=())
        def op(x: torch.Tensor, backend: str = "auto", target: str | None = None) \
                -> torch.Tensor:
            return impl(x, backend=backend, target=target)
        op.register_fake(lambda x, backend="auto", target=None: fake(x))

        def setup(ctx, inputs, output):
            ctx.save_for_backward(inputs[0], output)

        def bwd(ctx, g):
            x, y = ctx.saved_tensors
            return backward(name, x, y, g), None, None
        op.register_autograd(bwd, setup_context=setup)

    def not_differentiable(name, x, y, g):
        raise PtxgenError(f"ptxgen.{name}: backward not implemented")

    unary("softmax", impl["softmax"], torch.empty_like,
          lambda n, x, y, g: y * (g - (g * y).sum(-1, keepdim=True)))
    unary("transpose", impl["transpose"], lambda x: x.new_empty((x.shape[1], x.shape[0])),
          lambda n, x, y, g: g.t())
    unary("row_sum", impl["row_sum"], lambda x: x.new_empty((x.shape[0],)),
          lambda n, x, y, g: g[:, None].expand_as(x))
    unary("row_max", impl["row_max"], lambda x: x.new_empty((x.shape[0],)), not_differentiable)

    @torch.library.custom_op("ptxgen::add", mutates_args=())
    def add(x: torch.Tensor, y: torch.Tensor, backend: str = "auto",
            target: str | None = None) -> torch.Tensor:
        return impl["add"](x, y, backend=backend, target=target)
    add.register_fake(lambda x, y, backend="auto", target=None: torch.empty_like(x))
    add.register_autograd(lambda ctx, g: (g, g, None, None),
                          setup_context=lambda ctx, inputs, output: None)

    @torch.library.custom_op("ptxgen::scale", mutates_args=())
    def scale(s: float, x: torch.Tensor, backend: str = "auto",
              target: str | None = None) -> torch.Tensor:
        return impl["scale"](s, x, backend=backend, target=target)
    scale.register_fake(lambda s, x, backend="auto", target=None: torch.empty_like(x))

    def scale_setup(ctx, inputs, output):
        ctx.s = inputs[0]
    scale.register_autograd(lambda ctx, g: (None, ctx.s * g, None, None),
                            setup_context=scale_setup)

    @torch.library.custom_op("ptxgen::saxpy", mutates_args=())
    def saxpy(a: float, x: torch.Tensor, y: torch.Tensor, backend: str = "auto",
              target: str | None = None) -> torch.Tensor:
        return impl["saxpy"](a, x, y, backend=backend, target=target)
    saxpy.register_fake(lambda a, x, y, backend="auto", target=None: torch.empty_like(x))
    saxpy.register_autograd(lambda ctx, g: (None, ctx.a * g, g, None, None),
                            setup_context=scale_setup_a)


def scale_setup_a(ctx, inputs, output):
    ctx.a = inputs[0]

