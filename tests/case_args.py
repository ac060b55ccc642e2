"""Arguments of a random program (tests/irgen.py Case) for ptxgen.emulate: a fresh copy of each
buffer, numpy scalars typed like the parameters."""
import numpy as np

import irgen


def case_arguments(case):
    """({buffer name: uint8 array}, [arguments in parameter order])."""
    arrays, args = {}, []
    for p in case.kernel.params:
        a = case.args[p.name]
        if p.pointer is not None:
            arrays[p.name] = np.frombuffer(a, dtype=np.uint8).copy()
            args.append(arrays[p.name])
        else:
            args.append(np.dtype(irgen._NUMPY[p.type.name]).type(a))
    return arrays, args
