"""The second held-out group (held2) of the model benchmark set (benchmarks/model_set.py):
kinds of kernel not in the set before, added before the second round of model changes
(model_eval.py --hide held2 kept their errors out of sight meanwhile). Moved out of
model_set.py unchanged (branch sim6); the Numba kernels are in model_set_numba.py."""

FAMILIES = {"transpose_naive", "warp_reduce", "spmv_csr", "row_scan", "bitonic_step",
            "stencil3d", "softmax_rows", "strided_copy", "triton_fused", "triton_rowmax"}


def cases():
    """(family, source, size label, parameters) of every held2 case."""
    out = []
    for s in (4096, 8192):
        out.append(("transpose_naive", "numba", f"{s}^2", dict(m=s)))
    for n in (1 << 24, 1 << 26):
        out.append(("warp_reduce", "numba", f"n={n}", dict(n=n)))
    for r in (1 << 18, 1 << 20):
        out.append(("spmv_csr", "numba", f"rows={r} nnz/row=16", dict(rows=r, per_row=16)))
    for r, c in ((16384, 1024), (4096, 4096)):
        out.append(("row_scan", "numba", f"{r}x{c}", dict(rows=r, cols=c)))
    for j, k in ((1, 2), (1 << 16, 1 << 17)):
        out.append(("bitonic_step", "numba", f"n=16777216 j={j}", dict(n=1 << 24, j=j, k=k)))
    for s in (256, 512):
        out.append(("stencil3d", "numba", f"{s}^3", dict(m=s)))
    for r, c in ((8192, 1024), (2048, 8192)):
        out.append(("softmax_rows", "numba", f"{r}x{c}", dict(rows=r, cols=c)))
    for st in (2, 8):
        out.append(("strided_copy", "numba", f"n=4194304 stride={st}",
                    dict(n=1 << 22, stride=st)))
    for n in (1 << 22, 1 << 24):
        out.append(("triton_fused", "triton", f"n={n}", dict(n=n)))
    for r, c in ((4096, 4096), (16384, 1024)):
        out.append(("triton_rowmax", "triton", f"{r}x{c}", dict(rows=r, cols=c)))
    return out


def numba_case(g, c):
    """(args, grid, block, check, {argument index: init}) of a held2 Numba case."""
    torch, fam = g.torch, c["family"]
    check, inits = None, {}
    if fam == "transpose_naive":
        m = c["m"]
        a, b = g.randn(m, m), g.empty(m, m)
        args, grid, block = [a, b], (m // 32, m // 8), (32, 8)
        check = lambda: float((b - a.t()).norm() / a.norm())  # noqa: E731
    elif fam == "warp_reduce":
        x, p = g.randn(c["n"]), g.empty(132 * 8 * 256 // 32)
        args, grid, block = [x, p], (132 * 8,), (256,)
        check = lambda: abs(float(p.double().sum() - x.double().sum())) / float(  # noqa: E731
            x.double().abs().sum())
    elif fam == "spmv_csr":
        r, k = c["rows"], c["per_row"]
        rowptr = torch.arange(0, r * k + 1, k, device="cuda", dtype=torch.int32)
        cols = torch.randint(0, r, (r * k,), device="cuda", dtype=torch.int32)
        vals, x, y = g.randn(r * k), g.randn(r), g.empty(r)
        args, grid, block = [rowptr, cols, vals, x, y], ((r + 255) // 256,), (256,)
        inits = {0: dict(kind="arange", step=k), 1: dict(kind="randint", low=0, high=r)}

        def check():
            ref = (vals.double().view(r, k) * x.double()[cols.long()].view(r, k)).sum(1)
            return float((y.double() - ref).norm() / ref.norm())
    elif fam == "row_scan":
        r, cc = c["rows"], c["cols"]
        x, o = g.randn(r, cc), g.empty(r, cc)
        args, grid, block = [x, o], (r // 8,), (256,)

        def check():
            ref = x.double().cumsum(1)
            return float((o.double() - ref).norm() / ref.norm())
    elif fam == "bitonic_step":
        n = c["n"]
        a, b = g.randn(n), g.empty(n)
        args, grid, block = [a, b, c["j"], c["k"]], (n // 256,), (256,)
    elif fam == "stencil3d":
        m = c["m"]
        a, b = g.randn(m, m, m), torch.zeros(m, m, m, device="cuda")
        args, grid, block = [a, b], (m // 32, m // 8, m), (32, 8, 1)
    elif fam == "softmax_rows":
        r, cc = c["rows"], c["cols"]
        x, y = g.randn(r, cc), g.empty(r, cc)
        args, grid, block = [x, y], (r,), (256,)
        check = lambda: float((y - torch.softmax(x, 1)).norm() / torch.softmax(x, 1).norm())  # noqa
    elif fam == "strided_copy":
        n, st = c["n"], c["stride"]
        x, o = g.randn(n * st), g.empty(n)
        args, grid, block = [x, o, st], (n // 256,), (256,)
        check = lambda: float((o - x[::st]).norm() / x[::st].norm())  # noqa: E731
    else:
        raise KeyError(fam)
    return args, grid, block, check, inits
