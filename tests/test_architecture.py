"""The layout docs/ARCHITECTURE.md draws, enforced: every module's imports (module-level and
function-level alike) are parsed with `ast`, and

- each stage (a subpackage or top-level module of ptxgen) imports only from stages below it, so
  no cycle exists between stages;
- no cycle exists between files either, inside a package included (a package's __init__ counts
  as a file);
- numba is imported only under ptxgen/runtime/;
- no module imports another's private (_underscored) names, and only ptxgen.emu itself is the
  emulator's interface to the rest;
- no hardware number (an SM count, a shared-memory size, a clock, a launch limit: any
  distinctive number of isa/*.toml) is written in Python, and no numeric literal is bound to a
  hardware quantity's name (sm_count=132, MAX_GRID_Y = 65535, latency=4): those come from isa/;
- no target name ("sm_90") is written in code outside ptxgen/arch.py (DEFAULT_TARGET).

The checks take the repository root, so the last tests run them on small broken packages to show
that each one fails when it should.
"""
import ast
import functools
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Stages, lowest first. A module may import from its own stage unit and from units of lower
# stages only. A new subpackage or top-level module must be placed here (the test says so).
LAYERS = [
    ("errors", {"errors"}),
    ("cache root", {"cachedir"}),
    ("program cache", {"progcache"}),
    ("names", {"names", "arrays"}),
    ("targets", {"arch"}),
    ("toolchain", {"toolchain"}),
    ("ir", {"ir"}),
    ("machine model", {"isa"}),
    ("launch rules", {"launch_shape"}),
    ("text", {"emit", "parse"}),
    ("LLVM lowering", {"llvm"}),
    ("static analyses", {"analysis", "reorder"}),
    ("lifting", {"lift"}),
    ("schedules", {"schedule"}),
    ("lowering", {"lower"}),
    ("operators", {"ops"}),
    ("runners", {"emu", "runtime", "sim"}),
    ("kernel objects", {"kernel_object"}),
    ("PyTorch ops", {"torch_ops"}),
    ("reports", {"reports", "calibrate", "frontends"}),
    ("public operators", {"library"}),
    ("tuner", {"tune"}),
    ("command line", {"cli"}),
    ("entry points", {"__main__", "ptxgen", "epilogues", "mods"}),
]
NUMBA_HOME = "runtime"
PUBLIC_ONLY = {"emu"}          # stages the rest of ptxgen reaches only through their __init__
HARDWARE_NAME = re.compile(
    r"(^|_)(sm_?count|sms|num_sms|latency|latencies|issue_interval|throughput|bandwidth\w*|"
    r"clock\w*|l2_bytes|max_threads\w*|threads_per_sm|max_block\w*|max_grid\w*|grid_dim\w*|"
    r"block_dim\w*|shared_limit|dynamic_shared_limit|shared_per_(sm|block)\w*|"
    r"(regs|registers)_per_(sm|block|thread)|max_(regs|registers)_per_thread)($|_)", re.I)


# -- reading the package -----------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _tree(path):
    return ast.parse(path.read_text(), str(path))


@functools.lru_cache(maxsize=None)
def modules(root):
    """{dotted module name: (path, is_package)} of every module of ptxgen under root."""
    out = {}
    for p in sorted((root / "ptxgen").rglob("*.py")):
        parts = list(p.relative_to(root).with_suffix("").parts)
        pkg = parts[-1] == "__init__"
        if pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (p, pkg)
    return out


def unit(name):
    """The stage unit of a module: its subpackage or top-level module ('ptxgen' for the root)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "ptxgen"


@functools.lru_cache(maxsize=None)
def imports(root):
    """[(importer, imported module, names, line)] of every ptxgen import anywhere in a module,
    plus (importer, 'numba...', (), line) for numba imports."""
    mods = modules(root)
    out = []
    for name, (path, pkg) in mods.items():
        tree = _tree(path)
        here = name.split(".") if pkg else name.split(".")[:-1]
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                for a in n.names:
                    out.append((name, a.name, (), n.lineno))
            elif isinstance(n, ast.ImportFrom):
                if n.level:
                    base = here[:len(here) - (n.level - 1)] + ([n.module] if n.module else [])
                    target = ".".join(base)
                else:
                    target = n.module
                names = tuple(a.name for a in n.names)
                subs = [f"{target}.{a}" for a in names if f"{target}.{a}" in mods]
                for s in subs:                       # `from pkg import submodule`
                    out.append((name, s, (), n.lineno))
                rest = tuple(a for a in names if f"{target}.{a}" not in mods)
                if rest or not subs:
                    out.append((name, target, rest, n.lineno))
    return [e for e in out if e[1].split(".")[0] in ("ptxgen", "numba")]


def layer_of():
    return {u: i for i, (_, units) in enumerate(LAYERS) for u in units}


def _edges(root):
    for src, dst, names, line in imports(root):
        if dst.split(".")[0] != "ptxgen":
            continue
        if dst == "ptxgen" and set(names) <= {"__version__"}:
            continue                             # a constant of the root, read by the CLI/tuner
        yield src, dst, names, line


# -- the checks: each returns a list of one-line violations --------------------------------------
def unplaced_units(root):
    layers = layer_of()
    return sorted({f"{unit(m)}: not placed in LAYERS (docs/ARCHITECTURE.md)"
                   for m in modules(root) if unit(m) not in layers})


def upward_imports(root):
    layers = layer_of()
    bad = []
    for src, dst, _, line in _edges(root):
        a, b = unit(src), unit(dst)
        if a == b or a not in layers or b not in layers:
            continue
        if layers[b] >= layers[a]:
            bad.append(f"{src}:{line} imports {dst} ({b}, stage '{LAYERS[layers[b]][0]}') "
                       f"from stage '{LAYERS[layers[a]][0]}'")
    return bad


def _cycles(graph):
    """Strongly connected components of more than one node of {node: set of nodes}, sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def unit_cycles(root):
    """Cycles between stage units (strongly connected components of more than one unit)."""
    graph = {}
    for src, dst, _, _ in _edges(root):
        a, b = unit(src), unit(dst)
        if a != b:
            graph.setdefault(a, set()).add(b)
            graph.setdefault(b, set())
    return ["cycle between " + " ↔ ".join(c) for c in _cycles(graph)]


def file_cycles(root):
    """Cycles between modules (files), function-level imports included: `from . import x` of a
    sibling is an edge to it, `from .pkg import name` one to pkg's __init__."""
    mods = modules(root)
    graph = {m: set() for m in mods}
    for src, dst, _, _ in _edges(root):
        if dst in mods and dst != src:
            graph[src].add(dst)
    return [f"import cycle between files: {' ↔ '.join(c)}" for c in _cycles(graph)]


def numba_outside_runtime(root):
    return [f"{src}:{line} imports {dst}" for src, dst, _, line in imports(root)
            if dst.split(".")[0] == "numba" and unit(src) != NUMBA_HOME]


def private_reach_ins(root):
    """`from M import _x` of another ptxgen module, `mod._x` on an imported ptxgen module, and
    submodules of PUBLIC_ONLY stages imported from outside them."""
    bad = []
    for src, dst, names, line in _edges(root):
        for n in names:
            if n.startswith("_") and not n.startswith("__") and dst != src:
                bad.append(f"{src}:{line} imports private {dst}.{n}")
        d = unit(dst)
        if d in PUBLIC_ONLY and unit(src) != d and dst != f"ptxgen.{d}":
            bad.append(f"{src}:{line} imports {dst}: use ptxgen.{d}'s public interface")
    mods = modules(root)
    for name, (path, _) in mods.items():
        tree = _tree(path)
        aliases = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and n.level:
                aliases |= {a.asname or a.name for a in n.names}
            elif isinstance(n, ast.Import):
                aliases |= {a.asname or a.name.split(".")[0] for a in n.names
                            if a.name.startswith("ptxgen")}
        for n in ast.walk(tree):
            if (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                    and n.value.id in aliases and n.attr.startswith("_")
                    and not n.attr.startswith("__")):
                bad.append(f"{name}:{n.lineno} reaches into {n.value.id}.{n.attr}")
    return bad


def _isa_numbers(root):
    """Scalar numbers of isa/*.toml distinctive enough that Python code has no other reason to
    write them: every SM count, and others above 64 that are no power of two (sizes, masks),
    no all-ones mask (2^k - 1) and no round decimal (100, 200: percentages, budgets). Cycle
    counts of [ops] and [memory] are small numbers; the name rule catches those."""
    found = {}

    def walk(d, where):
        if isinstance(d, dict) and "value" in d and "source" in d:
            x = d["value"]
            cycles = where.split(".")[2] in ("ops", "memory") and \
                not where.endswith("bandwidth_gbs")
            if isinstance(x, (int, float)) and not isinstance(x, bool) and not cycles:
                found.setdefault(x, where)
        elif isinstance(d, dict):
            for k, v in d.items():
                walk(v, f"{where}.{k}")
    for f in sorted((root / "isa").glob("*.toml")):
        with open(f, "rb") as fh:
            walk(tomllib.load(fh), f.name)
    keep = {}
    for x, where in found.items():
        i = int(x) if float(x).is_integer() else None
        common = i is not None and (i & (i - 1) == 0 or i & (i + 1) == 0
                                    or re.fullmatch(r"[1-9]0+", str(i)))
        if where.endswith("sm_count") or (x > 64 and not common):
            keep[x] = where
    return keep


def _fold(n):
    """The value of a numeric literal or an arithmetic expression of literals (48 * 1024)."""
    if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) \
            and not isinstance(n.value, bool):
        return n.value
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
        v = _fold(n.operand)
        return None if v is None else -v
    if isinstance(n, ast.BinOp):
        a, b = _fold(n.left), _fold(n.right)
        ops = {ast.Mult: lambda: a * b, ast.Add: lambda: a + b, ast.Sub: lambda: a - b,
               ast.Pow: lambda: a ** b if abs(b) < 64 else None, ast.LShift: lambda: a << b}
        if a is not None and b is not None and type(n.op) in ops:
            return ops[type(n.op)]()
    return None


def _bindings(tree):
    """(name, value node, line) of every name a literal could be bound to."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, (ast.Name, ast.Attribute)):
                    yield getattr(t, "id", None) or t.attr, n.value, n.lineno
        elif isinstance(n, ast.AnnAssign) and n.value is not None:
            t = n.target
            yield getattr(t, "id", None) or getattr(t, "attr", ""), n.value, n.lineno
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = n.args
            pos = a.posonlyargs + a.args
            for arg, d in zip(pos[len(pos) - len(a.defaults):], a.defaults):
                yield arg.arg, d, n.lineno
            for arg, d in zip(a.kwonlyargs, a.kw_defaults):
                if d is not None:
                    yield arg.arg, d, n.lineno
        elif isinstance(n, ast.Call):
            for k in n.keywords:
                if k.arg:
                    yield k.arg, k.value, n.lineno
        elif isinstance(n, ast.Dict):
            for k, v in zip(n.keys, n.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    yield k.value, v, n.lineno


def hardware_constants(root):
    numbers = _isa_numbers(root)
    bad = []
    for name, (path, _) in modules(root).items():
        tree = _tree(path)
        for n in ast.walk(tree):             # literals, and products like 48 * 1024, alike
            v = _fold(n)
            if v is not None and v in numbers:
                bad.append(f"{name}:{n.lineno} writes {v}, a hardware number of "
                           f"{numbers[v]} (read it through ptxgen.isa)")
        for key, value, line in _bindings(tree):
            items = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
            vals = [v for v in map(_fold, items) if v is not None and v not in (0, 1)]
            if key and vals and HARDWARE_NAME.search(key):
                bad.append(f"{name}:{line} binds {key} = {vals[0] if len(vals) == 1 else vals}:"
                           f" a hardware quantity belongs in isa/*.toml")
    return sorted(set(bad))


def target_literals(root):
    """A target name written in code (not in a docstring) outside ptxgen/arch.py: defaults use
    arch.DEFAULT_TARGET, and target tables live in isa/."""
    bad = []
    for name, (path, _) in modules(root).items():
        if name == "ptxgen.arch":
            continue
        tree = _tree(path)
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and n.body and isinstance(n.body[0], ast.Expr)
                and isinstance(n.body[0].value, ast.Constant)}
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs \
                    and re.fullmatch(r"sm_\d+a?", n.value):
                bad.append(f"{name}:{n.lineno} writes the target {n.value!r} (use "
                           f"ptxgen.arch.DEFAULT_TARGET or isa/)")
    return bad


def unresolved_imports(root):
    """A ptxgen import (function-level ones included, which only fail when the function runs)
    must name a module that exists, or a name its parent package defines."""
    mods = modules(root)
    bad = set()
    for src, dst, names, line in imports(root):
        if dst.split(".")[0] != "ptxgen" or dst in mods:
            continue
        parent = dst.rsplit(".", 1)[0]
        if parent in mods and dst.rsplit(".", 1)[1] in _defined(mods[parent][0]):
            continue                     # `from .pkg import name` recorded as pkg.name
        bad.add(f"{src}:{line} imports {dst}, which does not exist")
    return sorted(bad)


def _defined(path):
    """Names a module binds at its top level (definitions, assignments, imports)."""
    out = set()
    for n in _tree(path).body:
        if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            out.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.Assign):
            out.update(t.id for t in n.targets if isinstance(t, ast.Name))
    return out


CHECKS = [unplaced_units, upward_imports, unit_cycles, file_cycles, numba_outside_runtime,
          private_reach_ins, hardware_constants, target_literals, unresolved_imports]


# -- on ptxgen ---------------------------------------------------------------------------------
@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_ptxgen_keeps_its_architecture(check):
    bad = check(ROOT)
    assert not bad, f"{len(bad)} violation(s):\n" + "\n".join(bad)


def test_importing_every_module_loads_no_numba():
    """numba's imports under runtime/ are lazy: loading all of ptxgen (but the twins' kernel
    sources, which exist to be compiled by Numba) leaves numba unloaded."""
    code = ("import importlib, pkgutil, sys, ptxgen\n"
            "skip = {'ptxgen.__main__', 'ptxgen.runtime.twin_sources'}\n"
            "for m in pkgutil.walk_packages(ptxgen.__path__, 'ptxgen.'):\n"
            "    if m.name not in skip:\n"
            "        importlib.import_module(m.name)\n"
            "print(sorted(k for k in sys.modules if k.split('.')[0] == 'numba'))\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr[-500:]
    assert p.stdout.strip() == "[]", p.stdout


def test_dir_lists_the_lazy_names_without_importing_them():
    """dir(ptxgen) shows what `ptxgen.<tab>` can reach (kernel, emulate, …, every __all__
    name), and listing them imports none of their modules."""
    code = ("import sys, ptxgen\n"
            "names = dir(ptxgen)\n"
            "print(all(n in names for n in ptxgen.__all__), 'kernel' in names,\n"
            "      'emulate' in names, 'ptxgen.emu' in sys.modules, 'torch' in sys.modules)\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.stdout.split() == ["True", "True", "True", "False", "False"], p.stderr[-500:]


def test_the_parser_sees_function_level_imports():
    """The graph includes imports inside functions (the tuner loads the simulator lazily)."""
    edges = {(s, d) for s, d, _, _ in imports(ROOT)}
    assert ("ptxgen.tune.static", "ptxgen.sim") in edges
    assert ("ptxgen.runtime.driver", "numba") in edges
    assert len(edges) > 300


def test_architecture_doc_names_every_stage():
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    for title, units in LAYERS:
        assert f" {title} " in doc.replace("\n", " "), f"no stage '{title}' in the drawing"
        for u in units - {"ptxgen"}:
            assert re.search(rf"\b{u}(/|\.py|\b)", doc), f"docs/ARCHITECTURE.md does not name {u}"


# -- each check fails on a package that breaks its rule --------------------------------------
def _package(tmp_path, files):
    (tmp_path / "isa").mkdir()
    (tmp_path / "isa" / "sm_90.toml").write_text(
        'arch = "sm_90"\n[header]\nsm_count = {value = 132, source = "whitepaper"}\n'
        'shared_per_block = {value = 49152, source = "guide"}\n')
    for rel, text in {"ptxgen/__init__.py": "", **files}.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


@pytest.mark.parametrize("check, files, expect", [
    (unplaced_units, {"ptxgen/newstage/__init__.py": ""}, "newstage: not placed"),
    (upward_imports, {"ptxgen/ir/__init__.py": "def f():\n    from ..sim import x\n"},
     "ptxgen.ir:2 imports ptxgen.sim"),
    (unit_cycles, {"ptxgen/ops/__init__.py": "from ..tune import cache\n",
                   "ptxgen/tune/__init__.py": "def f():\n    from ..ops import Matmul\n"},
     "cycle between ops ↔ tune"),
    (file_cycles, {"ptxgen/emu/__init__.py": "", "ptxgen/emu/program.py": "def f():\n"
                   "    from . import alu\n", "ptxgen/emu/alu.py": "from .program import Op\n"},
     "import cycle between files: ptxgen.emu.alu ↔ ptxgen.emu.program"),
    (file_cycles, {"ptxgen/sim/__init__.py": "from .a import x\n", "ptxgen/sim/a.py":
                   "from .b import y\n", "ptxgen/sim/b.py": "def g():\n    from . import z\n"},
     "ptxgen.sim ↔ ptxgen.sim.a ↔ ptxgen.sim.b"),
    (numba_outside_runtime, {"ptxgen/tune/gpu.py": "def f():\n    from numba import cuda\n"},
     "ptxgen.tune.gpu:2 imports numba"),
    (private_reach_ins, {"ptxgen/emu/__init__.py": "", "ptxgen/emu/alu.py": "",
                         "ptxgen/emu/floats.py": "from .alu import _srcs\n"},
     "ptxgen.emu.floats:1 imports private ptxgen.emu.alu._srcs"),
    (private_reach_ins, {"ptxgen/emu/__init__.py": "", "ptxgen/emu/api.py": "",
                         "ptxgen/reports/w.py": "from ..emu.api import as_module\n"},
     "use ptxgen.emu's public interface"),
    (private_reach_ins, {"ptxgen/arch.py": "", "ptxgen/isa.py": "from . import arch\n"
                         "def f():\n    return arch._targets()\n"},
     "reaches into arch._targets"),
    (hardware_constants, {"ptxgen/ops/base.py": "def launch(shape, sm_count=132):\n    pass\n"},
     "writes 132, a hardware number of sm_90.toml.header.sm_count"),
    (hardware_constants, {"ptxgen/runtime/driver.py": "LIMIT = 48 * 1024\n"},
     "writes 49152"),
    (hardware_constants, {"ptxgen/runtime/twins.py": "def f(n):\n    return min(n, 132 * 32)\n"},
     "writes 132"),
    (hardware_constants, {"ptxgen/launch.py": "MAX_BLOCK_DIM = (1024, 1024, 64)\n"},
     "binds MAX_BLOCK_DIM = [1024, 1024, 64]"),
    (hardware_constants, {"ptxgen/ops/t.py": "MAX_GRID_Y = 65535\n"},
     "binds MAX_GRID_Y = 65535"),
    (hardware_constants, {"ptxgen/sim/x.py": "OPS = {'latency': 4.5}\n"},
     "binds latency = 4.5"),
    (target_literals, {"ptxgen/ops/base.py": "def build(shape, arch='sm_90'):\n    pass\n"},
     "ptxgen.ops.base:1 writes the target 'sm_90'"),
])
def test_each_check_catches_its_violation(tmp_path, check, files, expect):
    bad = check(_package(tmp_path, files))
    assert any(expect in b for b in bad), bad


def test_checks_pass_a_package_that_keeps_the_rules(tmp_path):
    root = _package(tmp_path, {
        "ptxgen/ir/__init__.py": "from ..errors import X\n",
        "ptxgen/errors.py": "",
        "ptxgen/emu/__init__.py": "from .alu import make\n",
        "ptxgen/emu/alu.py": "def make():\n    return 2 * 32\n",
        "ptxgen/reports/w.py": "def f(isa, arch):\n    from ..emu import make\n"
                               "    return isa.sm_count(arch), make()\n",
        "ptxgen/runtime/driver.py": "def f():\n    from numba import cuda\n    return cuda\n"})
    for check in CHECKS:
        assert check(root) == [], check.__name__
