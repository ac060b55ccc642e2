"""ptxgen's operators as torch custom ops (`torch.ops.ptxgen.*`): torch.compile traces them
without graph breaks (each has a fake implementation giving the result's shape and dtype),
CUDA graphs capture their launches (they run on torch's current stream and allocate through
torch), and autograd differentiates them: matmul's backward is two ptxgen GEMMs in the layouts
the kernel reads in place (dA = dC·Bᵀ, dB = Aᵀ·dC); attention's backward is not implemented
and says so rather than returning a wrong gradient."""
import torch

from ..errors import PtxgenError


def _register():
    from .functions import attention_impl, matmul_impl

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

    def attention_setup(ctx, inputs, output):
        pass

    def attention_backward(ctx, grad_o, grad_lse):
        raise PtxgenError("ptxgen.attention: backward not implemented (the forward has no "
                          "gradient yet; use torch's scaled_dot_product_attention to train)")

    attention.register_autograd(attention_backward, setup_context=attention_setup)


_register()
