"""Reports that combine the things that run kernels (the emulator, the GPU runtime, the cycle
simulator) with the static analyses: run-and-check an operator on either backend (run), ptxgen's
kernel beside Numba's (compare), the roofline (roofline) and SIMT lane efficiency
(warp_efficiency). Everything below this layer is one stage; see docs/ARCHITECTURE.md."""
