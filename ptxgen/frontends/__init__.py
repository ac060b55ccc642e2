"""Front ends that produce ptxgen IR from a higher-level description of a kernel."""
from . import block

__all__ = ["block"]
