"""docs/tutorial_fused_kernels.md: every Python example runs (on the CPU emulator), in order, in
one namespace, as a reader would paste them."""
import linecache
import pathlib
import re

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "tutorial_fused_kernels.md"


def test_every_example_of_the_tutorial_runs():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 3
    ns = {}
    for i, code in enumerate(blocks):
        name = f"<tutorial example {i + 1}>"          # its source readable, as a file's is
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        exec(compile(code, name, "exec"), ns)
    assert ns["ok"] and ns["op"].epilogue is not None
