"""FlexAttention's programming model for ptxgen.attention (`from ptxgen.mods import ...`): the
standard mask_mods and score_mods, block masks, and what a mod may call (traced operations:
ptxgen/schedule/score_mods.py; ptxgen/ops/attention_mods.py)."""
from ..ops.attention_mods import (BlockMask, alibi, alibi_slopes, causal, create_block_mask,
                                  document, prefix_lm, sliding_window, soft_cap)
from ..schedule.score_mods import (ModTensor, absolute, exp, log, maximum, minimum, sqrt, tanh,
                                   where)

__all__ = ["BlockMask", "ModTensor", "absolute", "alibi", "alibi_slopes", "causal",
           "create_block_mask", "document", "exp", "log", "maximum", "minimum", "prefix_lm",
           "sliding_window", "soft_cap", "sqrt", "tanh", "where"]
