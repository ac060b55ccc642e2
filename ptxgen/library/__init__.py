"""ptxgen's operators as functions on torch tensors and numpy arrays (docs/operators.md):
`ptxgen.matmul(a, b)`, `ptxgen.attention(q, k, v, causal=True)`, ... — compiled once per shape
and target, cached in memory and on disk, torch custom ops under torch.compile and autograd."""
import sys

from . import epilogues
from .attention_ops import attention, attention_decode, attention_varlen, kv_cache_append
from .compiled import clear_memory as clear_cache
from .elementwise_ops import add, row_max, row_sum, saxpy, scale, softmax, transpose
from .launch import LaunchRecord, last_launch
from .matmul_ops import grouped_matmul, matmul

__all__ = ["LaunchRecord", "add", "attention", "attention_decode", "attention_varlen",
           "clear_cache", "epilogues", "grouped_matmul", "kv_cache_append", "last_launch",
           "matmul", "row_max", "row_sum", "saxpy", "scale", "softmax", "transpose"]

# A torch user's first call may come inside torch.compile, where defining a custom op cannot
# be traced: with torch already imported, the ops are defined now, at import (~0.1 s).
if "torch" in sys.modules:
    from .common import ensure_torch_ops
    ensure_torch_ops()
