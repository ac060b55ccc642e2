"""PTX text → the ptxgen IR. `parse_ptx(text, filename)` returns a Module or raises ParseError."""
from .parser import parse_ptx

__all__ = ["parse_ptx"]
