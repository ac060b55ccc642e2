"""Which way a public call goes: straight to the implementation (numpy arrays, and torch
tensors in eager code that needs no gradient: the fewest microseconds of Python), or through
the registered torch custom op (library/torch_ops.py) when torch.compile traces the call or
autograd must record it."""
import sys

from .functions import attention_impl, matmul_impl

if "torch" in sys.modules:          # register the custom ops before any torch.compile trace
    from . import torch_ops  # noqa: F401


def through_torch(*tensors):
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(tensors[0], torch.Tensor):
        return False
    if torch.compiler.is_compiling():
        return True
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def matmul_call(a, b, epilogue=None, out=None, precision="highest", backend="auto",
                target=None, tensors=None):
    if epilogue is not None or tensors:
        # fused epilogues: eager only for now (the custom op's schema has no place for a
        # traced function); autograd through them is not defined
        return matmul_impl(a, b, out, precision, backend, target, epilogue, tensors)
    if through_torch(a, b) and out is None:
        from . import torch_ops  # noqa: F401
        return sys.modules["torch"].ops.ptxgen.matmul(a, b, precision, backend, target)
    return matmul_impl(a, b, out, precision, backend, target)


def attention_call(q, k, v, causal=False, scale=None, return_lse=False, backend="auto",
                   target=None):
    if through_torch(q, k, v):
        from . import torch_ops  # noqa: F401
        o, lse = sys.modules["torch"].ops.ptxgen.attention(q, k, v, bool(causal), scale,
                                                           backend, target)
    else:
        o, lse = attention_impl(q, k, v, causal, scale, backend, target)
    return (o, lse) if return_lse else o
