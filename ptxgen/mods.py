"""`from ptxgen.mods import sliding_window, alibi, ...`: attention's score and mask mods
(ptxgen/library/mods.py)."""
from .library.mods import *  # noqa: F401,F403
from .library.mods import __all__  # noqa: F401
