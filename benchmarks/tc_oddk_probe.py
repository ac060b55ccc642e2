"""One launch of the GEMM at 4096 x 4096 x K (K = 4093 unless given) bf16 with the cp.async
producer (k_pack="ldg"), then one with pad copies, same schedule (128x256, 3 stages, TMA
epilogue), for ncu; nothing is timed or checked here (benchmarks/tc_matmul.py does that):

    ncu --clock-control none --kernel-name tc_matmul --launch-count 2 --section SpeedOfLight \
        --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
        --csv --log-file ncu.csv python benchmarks/tc_oddk_probe.py
"""
import sys
import numpy as np
from numba import cuda
from ptxgen.ops.tc_matmul import TcMatmul
from ptxgen.runtime import bound_steps, load_steps
from ptxgen.schedule.tc_matmul import TcMatmulSchedule

shape = dict(M=4096, N=4096, K=int(sys.argv[1]) if len(sys.argv) > 1 else 4093)
for kp in ("ldg", "pad"):
    op = TcMatmul("bf16", "bf16", TcMatmulSchedule(epilogue="tma", stages=3), k_pack=kp)
    arrays = dict(op.make_inputs(shape, np.random.default_rng(0)), **op.workspace_arrays(shape))
    dev = {k: cuda.to_device(v) for k, v in arrays.items()}
    kernels = load_steps(op, shape, op.build(shape, "sm_90a"), "sm_90a")
    bound_steps(op, shape, kernels, dev, "sm_90a")()
    cuda.synchronize()
    print(kp, "launched", op.ldg(shape))
