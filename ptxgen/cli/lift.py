"""ptxgen lift FILE.ptx [--kernel NAME] [-o kernel.py]"""
from ..lift import lift_ptx
from .common import output, read_text


def add_parser(sub):
    p = sub.add_parser("lift", help="turn a PTX file into a Python script that rebuilds it "
                                    "with the Builder")
    p.add_argument("ptx", help="PTX file (Numba's, Triton's, nvcc's or hand-written)")
    p.add_argument("--kernel", help="lift only this entry (its name, its demangled name or a "
                                    "unique part of it) and the module's functions")
    p.add_argument("-o", "--output", help="write the script here instead of stdout")
    return p


def run(args):
    text = read_text(args.ptx)
    output(args.output, lift_ptx(text, args.ptx, kernel=args.kernel))
    return 0
