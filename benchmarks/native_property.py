"""The emulator's native engine against its interpreter on many random programs (CPU only).

    python benchmarks/native_property.py [N]     # default 1000 programs

Draws N programs from tests/irgen.py (hypothesis, no example database), runs each on the
interpreter and on the native engine (check='off' for both) and compares the output buffers
as the property tests do. Prints progress every 500 programs and, at the end, how many were
bit-identical, how many the native engine refused (with the most common reasons) and how many
differed; the first difference stops the run with the program. The program about to run is
kept in $TMPDIR/native_property_last.txt, so a crash leaves it behind.
"""
import collections
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

from hypothesis import HealthCheck, given, settings  # noqa: E402

import irgen  # noqa: E402
from case_args import case_arguments  # noqa: E402
from ptxgen.emu import emulate  # noqa: E402
from ptxgen.errors import EmulationError  # noqa: E402

LAST = os.path.join(tempfile.gettempdir(), "native_property_last.txt")


def run(case, engine):
    arrays, args = case_arguments(case)
    emulate(case.module, case.kernel.name, (case.grid, 1, 1), (case.block, 1, 1), *args,
            check="off", engine=engine)
    return {n: a.tobytes() for n, a in arrays.items()}


def main(n):
    stats, why = collections.Counter(), collections.Counter()

    @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck),
              database=None)
    @given(irgen.programs())
    def check(case):
        want = run(case, "interp")
        with open(LAST, "w") as f:
            f.write(case.describe())
        try:
            got = run(case, "native")
        except EmulationError as e:
            stats["refused"] += 1
            msg = str(e)
            why[msg.split("`")[1].split()[0] if "`" in msg else msg[:80]] += 1
        else:
            diff = case.outputs_equal(want, got)
            stats["identical" if diff is None else "different"] += 1
            if diff is not None:
                print(f"DIFFERENT: {diff}\n{case.describe()}", flush=True)
                os._exit(1)
        if sum(stats.values()) % 500 == 0:
            print(dict(stats), flush=True)
    check()
    print(f"{sum(stats.values())} programs: {dict(stats)}")
    print("most common refusals:", why.most_common(10))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
