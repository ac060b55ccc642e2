"""ptxgen demo: the main job end to end — build IR, emit PTX, assemble, analyze, run, check."""
import importlib.util

from .. import isa, toolchain
from ..reports.run import BACKENDS, run_operator
from ..emit import emit_module
from ..errors import ToolchainError
from ..ir.verify import verify_module
from ..ops import get_operator
from .common import add_arch, fit


def add_parser(sub):
    p = sub.add_parser("demo", help="emit, assemble, analyze and run saxpy and matmul")
    add_arch(p)
    p.add_argument("--backend", choices=BACKENDS, default="auto")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the random inputs (default: fresh each run)")
    return p


def run(args):
    cases = [("saxpy", {"n": 100_003}), ("matmul", {"M": 67, "N": 45, "K": 33})]
    failed = 0
    for name, dims in cases:
        op = get_operator(name)
        shape = op.shape(**dims)
        module = verify_module(op.build(shape, args.arch))
        ptx = emit_module(module, args.arch)
        n_instr = sum(1 for l in ptx.splitlines() if l.startswith("\t") and l.rstrip().endswith(";")
                      and not l.lstrip().startswith("."))
        print(f"== {name} {' '.join(f'{k}={v}' for k, v in shape.items())}")
        print(f"emitted {len(ptx.splitlines())} lines of PTX for {args.arch}")
        try:
            asm = toolchain.assemble(ptx, args.arch)
            r = asm.resources[op.kernel_name()]
            print(f"ptxas: {r.registers} registers, {r.shared_bytes} B shared, "
                  f"{r.spills} B spilled")
        except ToolchainError as e:
            print(f"ptxas: skipped ({e})")
        if args.arch not in isa.model_targets():
            print(f"analysis: {n_instr} instructions (no machine model for {args.arch})")
        elif importlib.util.find_spec("ptxgen.analysis.analyzer") is not None:
            from ..analysis.analyzer import analyze
            k = analyze(module, arch=args.arch).kernels[0]
            top = sorted(k.opcodes.items(), key=lambda kv: -kv[1])[:5]
            print(fit(f"analysis: {k.instructions} instructions; top: "
                      + ", ".join(f"{o}×{c}" for o, c in top)))
        else:
            print(f"analysis: {n_instr} instructions")
        res = run_operator(op, shape, args.backend, arch=args.arch, check=True, seed=args.seed)
        where = "GPU" if res.backend == "gpu" else "CPU emulator"
        print(f"ran on the {where}: {'PASS' if res.ok else 'FAIL'} "
              f"(max relative error {res.max_rel_error:.2e} vs float64 numpy)")
        failed += not res.ok
        print()
    return 1 if failed else 0
