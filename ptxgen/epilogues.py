"""`from ptxgen.epilogues import tanh, where, ...`: the operations a fused epilogue may use
(ptxgen/library/epilogues.py)."""
from .library.epilogues import *  # noqa: F401,F403
from .library.epilogues import __all__  # noqa: F401
