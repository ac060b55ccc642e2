"""analyze(): the whole static report for the functions of a PTX module.

    result = analyze(open("k.ptx").read(), arch="sm_90")
    result.to_dict()     # JSON-ready: {"kernels": [{"name", "instructions", "opcodes", …}]}
    result.to_text()     # the same, as tables

With sass=True the PTX is also assembled by ptxas for `arch`: resources per kernel, the SASS
instruction mix from nvdisasm, and PTX and SASS counts side by side per instruction class.
"""
import re
from dataclasses import dataclass, field

from .. import isa
from ..arch import DEFAULT_TARGET
from ..ir.module import Module
from ..names import display_name
from . import cfg as cfgmod
from . import liveness, mca, memory, mix

# SASS opcode (before the first dot) → the instruction class names Instr.cls uses for PTX, so
# the two mixes can stand side by side. Uniform-datapath forms (UIADD3, UMOV …) take the class
# of the opcode without the leading U.
_SASS_CLASS = {}
for _cls, _ops in {
    "fp32": "FFMA FADD FMUL FMNMX FSETP FSET FSEL FCHK FSWZADD FFMA32I FADD32I FMUL32I",
    "fp64": "DFMA DADD DMUL DSETP DMNMX",
    "fp16": "HFMA2 HADD2 HMUL2 HSETP2 HMNMX2 HSET2",
    "tensor": "HMMA IMMA DMMA BMMA HGMMA IGMMA QGMMA",
    "special_function": "MUFU",
    "conversion": "F2I I2F F2F I2I F2FP I2FP FRND",
    "global_memory": "LDG STG ATOMG REDG RED LDGSTS LDGDEPBAR UTMALDG UTMASTG UBLKCP",
    "generic_memory": "LD ST ATOM",
    "shared_memory": "LDS STS ATOMS LDSM STSM",
    "local_memory": "LDL STL",
    "constant_memory": "LDC",
    "control": "BRA BRX EXIT RET CALL JMP JMX BSSY BSYNC WARPSYNC BREAK KILL BPT",
    "sync": "BAR MEMBAR DEPBAR ERRBAR SYNCS FENCE CCTL",
    "warp": "SHFL VOTE MATCH REDUX",
    "special": "S2R CS2R",
    "move": "MOV MOV32I SEL PRMT P2R R2P R2UR",
    "integer": "IMAD IADD3 IADD LOP3 LOP SHF SHL SHR ISETP LEA IMNMX IABS POPC FLO BREV BMSK "
               "SGXT IDP IMUL PLOP3 VIADD VIMNMX ISCADD IMAD32I LOP32I IADD32I",
    "nop": "NOP",
}.items():
    for _op in _ops.split():
        _SASS_CLASS[_op] = _cls


_DEBUG_TARGET = re.compile(r"^[ \t]*\.target[ \t][^\n;]*\bdebug\b", re.M)


def sass_class(opcode):
    base = opcode.split(".")[0]
    c = _SASS_CLASS.get(base)
    if c is None and base.startswith("U"):
        c = _SASS_CLASS.get(base[1:])
    if c is None and base == "S2UR":
        c = "special"
    return c or "other"


@dataclass
class KernelReport:
    name: str
    kind: str
    line: int
    instructions: int
    opcodes: dict
    classes: dict
    blocks: list
    loops: list
    register_pressure: dict
    memory: dict
    sass: dict = None

    def to_dict(self):
        d = {"name": self.name, "kind": self.kind, "line": self.line,
             "instructions": self.instructions, "opcodes": self.opcodes,
             "classes": self.classes, "blocks": self.blocks, "loops": self.loops,
             "register_pressure": self.register_pressure, "memory": self.memory}
        if self.sass is not None:
            d["sass"] = self.sass
        return d


@dataclass
class AnalysisResult:
    arch: str
    filename: str
    target: str
    version: str
    kernels: list = field(default_factory=list)
    model: str = ""                  # the machine model used (sm_90 for sm_90a)

    def to_dict(self):
        return {"arch": self.arch, "model": self.model or self.arch, "file": self.filename,
                "target": self.target, "version": self.version,
                "kernels": [k.to_dict() for k in self.kernels]}

    def to_text(self):
        return _text(self.to_dict())


def analyze(src, arch=DEFAULT_TARGET, kernel=None, sass=False, filename="<ptx>"):
    """Analyze PTX text (or a parsed/built Module) for `arch`'s machine model.

    kernel: analyze only the function of that name (entries and .func both qualify).
    sass: also assemble with ptxas and disassemble with nvdisasm (needs the CUDA tools)."""
    from ..parse import parse_ptx
    table = isa.load(arch)       # an unknown arch fails before any work (sm_90a: sm_90's)
    if isinstance(src, Module):
        module, text = src, None
    else:
        text = src if isinstance(src, str) else bytes(src).decode("utf-8", errors="replace")
        module = parse_ptx(text, filename)
    if kernel is not None:
        funcs = [module.kernel(kernel)]
    else:
        funcs = list(module.kernels)
    result = AnalysisResult(arch, module.filename, module.target, module.version,
                            model=table.arch)
    for k in funcs:
        result.kernels.append(analyze_kernel(k, table))
    if sass:
        _add_sass(result, module, text, arch)
    return result


def analyze_kernel(kernel, table):
    graph = cfgmod.build_cfg(kernel)
    instrs = graph.instructions
    prepared = mca.prepare(instrs, table)
    timings = mca.block_timings(graph, prepared, table.units)
    loop_times = mca.loop_timings(graph, prepared, table.units, timings)
    blocks = []
    for b, t in zip(graph.blocks, timings):
        blocks.append({
            "index": b.index, "label": b.name, "line": b.line, "instructions": len(b.instrs),
            "succs": list(b.succs), "preds": list(b.preds),
            "idom": graph.idom[b.index] if graph.idom else None,
            "reachable": b.reachable, "loop_depth": b.loop_depth, "timing": t.to_dict()})
    mem_ops = [memory.memory_op(i) for i in instrs]
    mem_loops = memory.bytes_per_iteration(graph, mem_ops)
    loops = []
    for i, (l, t) in enumerate(zip(graph.loops, loop_times)):
        loops.append({
            "index": i, "header": l.header, "label": graph.blocks[l.header].name,
            "line": graph.blocks[l.header].line, "depth": l.depth, "parent": l.parent,
            "innermost": l.innermost, "blocks": list(l.blocks),
            "back_edges": [list(e) for e in l.back_edges],
            "instructions": sum(len(graph.blocks[b].instrs) for b in l.blocks),
            "total_bytes_per_iteration": mem_loops[i]["total_bytes_per_iteration"],
            "timing": t.to_dict() if t is not None else None})
    mem = memory.summarize([m for m in mem_ops if m is not None])
    mem["loops"] = mem_loops
    return KernelReport(
        name=kernel.name, kind=kernel.kind, line=kernel.line, instructions=len(instrs),
        opcodes=mix.opcode_mix(instrs), classes=mix.class_mix(instrs), blocks=blocks,
        loops=loops, memory=mem,
        register_pressure=liveness.register_pressure(
            graph, kernel, [(p.uses, p.defs) for p in prepared]))


def _add_sass(result, module, text, arch):
    from .. import toolchain
    from ..emit import emit_module
    ptx = text if text is not None else emit_module(module, arch)
    # PTX compiled for debugging ('.target sm_90, debug') is only accepted by ptxas at -O0
    opt = 0 if text is not None and _DEBUG_TARGET.search(text) else 3
    asm = toolchain.assemble(ptx, arch, opt_level=opt)
    sass_text = toolchain.disassemble(asm.cubin)
    per_kernel = toolchain.sass_instructions(sass_text)
    for kr in result.kernels:
        ops = per_kernel.get(kr.name)
        res = asm.resources.get(kr.name)
        entry = {"arch": arch, "opt_level": opt, "in_cubin": ops is not None}
        if res is not None:
            entry["resources"] = {"registers": res.registers, "shared_bytes": res.shared_bytes,
                                  "stack_bytes": res.stack_bytes,
                                  "spill_stores": res.spill_stores,
                                  "spill_loads": res.spill_loads,
                                  "constant_bytes": res.constant_bytes}
        ops = ops or []
        counts = {}
        for op in ops:
            counts[op] = counts.get(op, 0) + 1
        nops = sum(1 for op in ops if op.split(".")[0] == "NOP")
        entry["instructions"] = len(ops)
        entry["nops"] = nops
        entry["opcodes"] = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        side = {}
        for c, n in kr.classes.items():
            side.setdefault(c, {"ptx": 0, "sass": 0})["ptx"] = n
        for op in ops:
            c = sass_class(op)
            side.setdefault(c, {"ptx": 0, "sass": 0})["sass"] += 1
        entry["comparison"] = {
            "instructions": {"ptx": kr.instructions, "sass": len(ops),
                             "sass_without_nops": len(ops) - nops},
            "classes": dict(sorted(side.items(), key=lambda kv: (-kv[1]["ptx"] - kv[1]["sass"],
                                                                 kv[0])))}
        kr.sass = entry


# -- text rendering ----------------------------------------------------------------------------
def _table(headers, rows, align=None):
    """Fixed-width columns; numbers right-aligned."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = []
    for j, r in enumerate(cells):
        parts = []
        for i, c in enumerate(r):
            numeric = j > 0 and isinstance(rows[j - 1][i], (int, float))
            parts.append(c.rjust(widths[i]) if numeric else c.ljust(widths[i]))
        out.append("  " + "  ".join(parts).rstrip())
    return out


def _fmt(x):
    if isinstance(x, float):
        return f"{x:.2f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))
    return "-" if x is None else str(x)


def _text(d):
    lines = [f"ptxgen analyze: {d['file']} (.target {d['target']}, PTX {d['version'] or '?'}), "
             f"machine model {d['model']}"]
    if not d["kernels"]:
        lines.append("  no functions with a body")
    for k in d["kernels"]:
        lines += [""] + _render_kernel(k)
    return "\n".join(lines) + "\n"


def _render_kernel(k):
    L = [f"== {k['kind']} {display_name(k['name'])} (line {k['line']}): "
         f"{k['instructions']} instructions, "
         f"{len(k['blocks'])} blocks, {len(k['loops'])} loops"]
    L.append("")
    L.append("Instruction classes")
    L += _table(["class", "count", "share"],
                [[c, n, f"{100 * n / max(k['instructions'], 1):.1f}%"]
                 for c, n in k["classes"].items()])
    L.append("")
    L.append("Opcodes")
    L += _table(["opcode", "count"], [[o, n] for o, n in k["opcodes"].items()])
    L.append("")
    units = list(k["blocks"][0]["timing"]["unit_cycles"]) if k["blocks"] else []
    L.append("Basic blocks (cycles per pass for one warp)")
    rows = []
    for b in k["blocks"]:
        t = b["timing"]
        rows.append([b["index"], b["label"], b["line"], b["instructions"], b["loop_depth"],
                     ",".join(map(str, b["succs"])) or "-", t["critical_path"],
                     t["cycles_per_iteration"], t["ipc"], t["bound_by"]])
    L += _table(["#", "label", "line", "instrs", "depth", "succs", "crit.path", "cycles", "IPC",
                 "bound"], rows)
    # a table of its own: beside the columns above it would not fit a terminal's width
    L.append("")
    L.append("Busy cycles per unit and basic block")
    L += _table(["#", *units], [[b["index"], *[b["timing"]["unit_cycles"].get(u, 0.0)
                                               for u in units]] for b in k["blocks"]])
    if k["loops"]:
        L.append("")
        L.append("Loops (innermost: estimated cycles per iteration for one warp; "
                 "bytes per thread per iteration)")
        rows = []
        for lp in k["loops"]:
            t = lp["timing"]
            rows.append([lp["index"], lp["label"], lp["line"], lp["depth"],
                         lp["parent"], len(lp["blocks"]), lp["instructions"],
                         t["cycles_per_iteration"] if t else None,
                         t["ipc"] if t else None, t["bound_by"] if t else None,
                         t["warps_to_hide_latency"] if t else None,
                         lp["total_bytes_per_iteration"]])
        L += _table(["#", "header", "line", "depth", "parent", "blocks", "instrs", "cycles/iter",
                     "IPC", "bound", "warps", "bytes/iter"], rows)
        for lp in k["loops"]:
            t = lp["timing"]
            if not t:
                continue
            busy = ", ".join(f"{u} {100 * v:.0f}%" for u, v in t["resource_pressure"].items()
                             if v)
            L.append(f"  loop {lp['index']} resource pressure: {busy or 'none'}; critical path "
                     f"{_fmt(t['critical_path'])} cycles; dependencies RAW "
                     f"{t['dependencies']['RAW']} WAR {t['dependencies']['WAR']} WAW "
                     f"{t['dependencies']['WAW']} ({t['loop_carried_dependencies']} "
                     f"loop-carried)")
    rp = k["register_pressure"]
    L.append("")
    L.append(f"Register pressure: at most {rp['max_live_total']} values live "
             f"({rp['max_live_32bit']} 32-bit registers) near line {rp['peak_line']}")
    L += _table(["class", "max live", "declared"],
                [[c, n, rp["declared"].get(c, 0)] for c, n in rp["max_live"].items()])
    m = k["memory"]
    L.append("")
    L.append(f"Memory operations: {m['operations']} "
             f"(widths in bits: {_kv(m['by_width_bits'])}; cache: {_kv(m['by_cache'])})")
    if m["by_space"]:
        L += _table(["space", "loads", "stores", "atomics", "copies", "load B", "store B"],
                    [[s, v["loads"], v["stores"], v["atomics"], v["copies"], v["load_bytes"],
                      v["store_bytes"]] for s, v in m["by_space"].items()])
    for lp in m["loops"]:
        per = "; ".join(f"{s} read {v['read']} write {v['write']}"
                        for s, v in lp["bytes_per_iteration"].items())
        L.append(f"  loop {lp['loop']} ({lp['header']}): {lp['total_bytes_per_iteration']} bytes "
                 f"per thread per iteration{': ' + per if per else ''}")
    s = k.get("sass")
    if s is not None:
        L.append("")
        if not s["in_cubin"]:
            L.append(f"SASS ({s['arch']}): not in the cubin (inlined or unused)")
            return L
        r = s.get("resources", {})
        L.append(f"SASS ({s['arch']}): {s['instructions']} instructions ({s['nops']} NOP); "
                 f"{r.get('registers', '?')} registers, {r.get('shared_bytes', '?')} B shared, "
                 f"{r.get('stack_bytes', '?')} B stack, spills {r.get('spill_stores', '?')}/"
                 f"{r.get('spill_loads', '?')} B")
        c = s["comparison"]
        L += _table(["class", "PTX", "SASS"],
                    [["(all)", c["instructions"]["ptx"], c["instructions"]["sass"]]]
                    + [[cl, v["ptx"], v["sass"]] for cl, v in c["classes"].items()])
        L.append("  SASS opcodes: " + _kv(s["opcodes"]))
    return L


def _kv(d):
    return ", ".join(f"{k} {v}" for k, v in d.items()) or "none"
