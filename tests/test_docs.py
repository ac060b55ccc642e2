"""The tutorials' code runs as written (each file's python blocks in order, from the
repository root), so the docs cannot drift from the library."""
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("doc", ["first_kernel.md", "foreign_ptx.md", "../README.md"])
def test_tutorial_code_runs(doc, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    text = (ROOT / "docs" / doc).read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    env = {"__name__": "tutorial"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/{doc} block {i + 1}", "exec"), env)
    out = capsys.readouterr().out
    if doc == "first_kernel.md":
        # the printed errors are the ones the text promises
        assert "parameter x points to f32; got an array of float64" in out
        assert "shared-memory race" in out
        assert "operand %n0 is u32, expected f32" in out


def test_readme_command_table_has_every_command():
    """A row per `ptxgen` command in the README's table (its first cell names the command)."""
    from ptxgen.cli import COMMANDS
    text = (ROOT / "README.md").read_text()
    table = text.split("## Commands", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `ptxgen (\w+)", table, re.M)
    assert set(rows) == set(COMMANDS), set(COMMANDS) ^ set(rows)


def test_api_reference_names_real_objects():
    import importlib
    text = (ROOT / "docs" / "api.md").read_text()
    names = re.findall(r"^::: ([\w.]+)", text, re.M)
    assert names
    for name in names:
        mod, _, attr = name.rpartition(".")
        try:
            obj = getattr(importlib.import_module(mod), attr)
        except ModuleNotFoundError:
            obj = importlib.import_module(name)
        assert obj is not None, name
    assert os.path.exists(ROOT / "mkdocs.yml")


@pytest.mark.parametrize("name,most", [("MODEL.md", 600), ("PERF.md", 500), ("EMULATOR.md", 400)])
def test_reference_docs_stay_within_their_length(name, most):
    """The reference docs describe the product and its current figures, not their history."""
    lines = (Path(__file__).resolve().parents[1] / "docs" / name).read_text().count("\n")
    assert lines <= most, f"docs/{name} has {lines} lines, more than {most}"
