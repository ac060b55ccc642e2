"""The result of the static bank-conflict analysis (ptxgen.analysis.banks_static): one row per
shared access and the kernel's report, as a dict (--json) or as text."""
from dataclasses import dataclass, field

from ..names import display_name


@dataclass
class SharedAccess:
    index: int                   # statement index in the kernel body
    line: int                    # PTX line (0 for IR never printed)
    text: str
    kind: str                    # load, store, atomic, copy
    width: int                   # bytes per lane
    variable: str = None         # the shared array addressed
    expression: str = None       # the address, affine in the thread index, when it is
    uniform_terms: list = field(default_factory=list)
    wavefronts: int = None       # warp 0
    ideal: int = None
    degree: float = None
    worst_warp: int = None       # the warp needing the most wavefronts over its ideal
    worst_wavefronts: int = None
    worst_ideal: int = None
    warps: int = 0
    lane_addresses: list = field(default_factory=list)    # warp 0, bytes in the shared window
    predicated: bool = False
    guard: str = None            # how the guard was treated, for a predicated access
    varies_per_trip: bool = False
    suggestion: str = None
    note: str = None

    @property
    def conflicted(self):
        return self.worst_wavefronts is not None and self.worst_wavefronts > self.worst_ideal

    def to_dict(self):
        d = dict(self.__dict__)
        d["conflicted"] = self.conflicted
        return d


@dataclass
class BankReport:
    kernel: str
    arch: str
    block: tuple
    banks: int
    bank_bytes: int
    accesses: list
    variables: dict              # shared array → {bytes, offset, suggestion, ...}
    assumptions: list = field(default_factory=list)

    @property
    def conflicted(self):
        return [a for a in self.accesses if a.conflicted]

    def to_dict(self):
        return {"kernel": self.kernel, "arch": self.arch, "block": list(self.block),
                "banks": self.banks, "bank_bytes": self.bank_bytes,
                "accesses": [a.to_dict() for a in self.accesses],
                "variables": self.variables, "assumptions": list(self.assumptions)}

    def to_text(self, only_conflicts=False):
        """The report as text; with only_conflicts, only the accesses that conflict."""
        bx, by, bz = self.block
        L = [f"{display_name(self.kernel)}: block {bx}x{by}x{bz} ({-(-bx * by * bz // 32)} warps), {self.arch} "
             f"shared memory ({self.banks} banks x {self.bank_bytes} B)"]
        shown = [a for a in self.accesses if a.conflicted or not only_conflicts]
        rows = [("line", "width", "wavefronts", "ideal", "degree", "address / instruction")]
        for a in shown:
            where = str(a.line) if a.line else f"#{a.index}"
            if a.wavefronts is None:
                rows.append((where, a.width, "-", "-", "-", a.text))
                continue
            wf = str(a.wavefronts)
            if (a.worst_wavefronts, a.worst_ideal) != (a.wavefronts, a.ideal):
                wf += f" (warp {a.worst_warp}: {a.worst_wavefronts})"
            rows.append((where, a.width, wf, a.ideal, f"{a.degree:g}", a.text))
        widths = [max(len(str(r[i])) for r in rows) for i in range(5)]
        said = set()
        for k, r in enumerate(rows):
            L.append("  " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths)) + "  " + r[5])
            if not k:
                continue
            a = shown[k - 1]
            pad = " " * (sum(widths) + 12)
            if a.wavefronts is None:
                L.append(f"{pad}{a.note}")
                continue
            L.append(f"{pad}= {a.expression or 'non-affine in the thread index'}"
                     + (" (pattern changes between loop trips: first trip)" if a.varies_per_trip
                        else ""))
            if a.conflicted:
                tip = a.suggestion or "no padding or swizzle found"
                if a.variable in said:
                    tip = f"as above ({a.variable})"
                said.add(a.variable)
                L.append(f"{pad}{a.degree:g}-way conflict; suggestion: {tip}")
        L.append(f"  {len(self.accesses)} shared accesses, {len(self.conflicted)} with bank "
                 f"conflicts")
        for name, v in self.variables.items():
            if "wavefronts" in v:
                L.append(f"  {name} ({v['bytes']} B at {v['offset']}): {v['wavefronts']} "
                         f"wavefronts per block, ideal {v['ideal']}")
        L += [f"  note: {x}" for x in self.assumptions]
        return "\n".join(L) + "\n"
