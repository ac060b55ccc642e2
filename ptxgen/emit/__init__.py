from .ptx import emit_kernel_text, emit_module

__all__ = ["emit_module", "emit_kernel_text"]
