"""Static analysis of PTX: instruction mix, control flow and loops, llvm-mca style throughput per
block, register pressure and memory traffic. Entry point: analyze()."""
from .report import AnalysisResult, KernelReport, analyze

__all__ = ["analyze", "AnalysisResult", "KernelReport"]
