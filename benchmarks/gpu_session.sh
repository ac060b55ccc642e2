#!/usr/bin/env bash
# Run named GPU steps in one device session; each step has its own time limit and log.
#   benchmarks/gpu_session.sh STEP[:SECONDS] ...
# Steps: gputests foundation occupancy banks reliability calibrate sgemm sgemm_edges operators
#        bandwidth (operators: transpose and row reductions only) tune tune_odd accuracy
#        launch (launch overhead per path) kernelgpu (kernel objects, torch, CUDA graphs)
#        persistent (short prefills, D128, GQA: the default schedule and its persistent form)
#        public_api (ptxgen.matmul / attention vs their kernels and torch) epilogue (fused GEMM
#        epilogues vs torch eager and max-autotune) attention_mods (score/mask mods vs
#        FlexAttention) tc_matmul attention backward (the attention backward vs SDPA's FLASH
#        and CUDNN backward) train (50 steps of a transformer block, ptxgen.attention vs SDPA) sm80_matmul sm80_attention (the sm_80 path) llm_gemms (fp8, grouped, square: its parts alone)
#        pad_copy
#        decode (attention decode over a K/V cache vs SDPA and a copy) varlen (attention over
#        packed sequences of mixed lengths vs the dense kernel on the same work) sfu (ex2/lg2/rcp/tanh
#        .approx tables for the emulator) clock (ncu: the SM clock and tensor / XU pipe shares of
#        the attention and GEMM kernels, for the simulator's clock under load)
# Logs and data land in $OUT (or ./gpu-out); everything is also packed into results.tar.gz.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT/w"; export W=$OUT/w
export PYTHONUNBUFFERED=1 OUT_DIR=$W
step() {
  case "$1" in
    gputests) python3 -m pytest -m gpu -q -p no:cacheprovider tests ;;
    foundation) OUT=$W python3 benchmarks/foundation.py ;;
    occupancy) python3 benchmarks/occupancy_sweep.py ;;
    banks) python3 benchmarks/bank_ncu.py all ;;
    reliability) OUT=$W python3 benchmarks/reliability_gpu.py ;;
    calibrate) python3 -m ptxgen calibrate --arch sm_90 -o isa/sm_90.toml --json $W/calibrate.json ;;
    sgemm) python3 benchmarks/sgemm.py --out $W ;;
    sgemm_edges) python3 benchmarks/sgemm.py --out $W --no-triton --shapes 1000x1000x1000,1024x1024x1024,4095x4097x513,4096x4096x512 ;;
    operators) python3 benchmarks/operators.py --out $W ;;
    sgemm_odd) python3 benchmarks/sgemm.py --out $W --no-triton --schedules 128x128x8_g8,128x128x16 --shapes 4096x4096x512,4096x4096x516,4095x4097x513,4096x4097x512,4095x4096x513,4096x4100x516 ;;
    sgemm_stage) python3 benchmarks/sgemm.py --out $W --no-triton --stage-c --schedules 128x128x8_g8,128x128x16,128x256x8,64x64x8 --shapes 4096x4096x4096,8192x8192x8192,4096x4096x512,1024x1024x1024,1000x1000x1000 ;;
    tune) OUT=$W python3 benchmarks/tune_matmul.py ;;
    tune_odd) OUT=$W python3 benchmarks/tune_matmul.py --shapes 4095x4097x513 --budget 30 ;;
    sgemm_all_odd) python3 benchmarks/sgemm.py --out $W --no-triton --shapes 4095x4097x513,4096x4096x512 ;;
    bandwidth) python3 benchmarks/operators.py --out $W --only transpose,row_reduce,row_max ;;
    accuracy) OUT=$W python3 benchmarks/model_accuracy.py ;;
    launch) python3 benchmarks/launch_overhead.py --out $W ;;
    kernelgpu) python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_kernel_gpu.py tests/test_gpu.py ;;
    public_api) python3 benchmarks/public_api.py --out $W ;;
    epilogue) python3 benchmarks/tc_epilogue.py --out $W ;;
    attention_mods) python3 benchmarks/attention_mods.py --budget-s 200 --out $W ;;
    tc_matmul) python3 benchmarks/tc_matmul.py --out $W ;;
    attention) python3 benchmarks/attention.py --budget-s 250 --out $W ;;
    persistent) python3 benchmarks/attention.py --configs 8,9,0,1,2,3,7 --skip-small --no-triton --no-sm80 --out $W ;;
    decode) python3 benchmarks/attention.py decode --out $W ;;
    decode_sweep) python3 benchmarks/attention.py decode --sweep --out $W ;;
    varlen) python3 benchmarks/attention.py varlen --out $W ;;
    backward) python3 benchmarks/attention.py backward --budget-s 250 --out $W ;;
    train) python3 benchmarks/attention.py train --out $W ;;
    sm80_matmul) python3 benchmarks/sm80_path.py matmul --out $W ;;
    sm80_attention) python3 benchmarks/sm80_path.py attention --out $W ;;
    llm_gemms) python3 benchmarks/llm_gemms.py --out $W ;;
    fp8) python3 benchmarks/llm_gemms.py --parts fp8emu,fp8 --out $W ;;
    grouped) python3 benchmarks/llm_gemms.py --parts grouped --out $W ;;
    square) python3 benchmarks/llm_gemms.py --parts square --out $W ;;
    pad_copy) python3 benchmarks/pad_copy.py --out $W ;;
    sfu) python3 benchmarks/numerics.py --sfu-out $W ;;
    clock) for k in "attention --B 4 --H 32 --S 4096 --D 128" "attention --B 4 --H 32 --S 4096 --D 64" \
                    "matmul --dtype bf16 --out-dtype bf16 --M 4096 --N 4096 --K 4096"; do
             ncu --clock-control none --csv --section SpeedOfLight --section ComputeWorkloadAnalysis \
                 python3 -m ptxgen run $k --backend gpu --quiet | grep '^"'; done ;;
    *) echo "unknown step $1" ;;
  esac
}
for s in "$@"; do
  name=${s%%:*}; limit=${s#*:}; [ "$limit" = "$s" ] && limit=300
  t0=$(date +%s)
  timeout "$limit" bash -c "$(declare -f step); step $name" > "$W/$name.log" 2>&1
  rc=$?
  echo "=== $name rc=$rc $(( $(date +%s) - t0 ))s"; tail -n 25 "$W/$name.log"
done
tar czf "$OUT/results.tar.gz" "$W" tests/data/*.json tests/data/*.meta.json isa/sm_90.toml 2>/dev/null
