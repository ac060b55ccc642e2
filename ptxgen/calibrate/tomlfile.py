"""Write measured values into an isa/*.toml file, changing nothing else.

The machine-model files are hand-written with comments and a source for every number, so they
are edited as text: each updated entry's line `key = {value = …, source = "…"}` is replaced in
place; an entry the file lacks is added at the end of its table (a table it lacks at the end
of the file). The result is parsed back with tomllib and checked with ptxgen.isa's loader
before it replaces the file, so a bad update never leaves a broken model behind.
"""
import os
import re
import stat
import tempfile
import tomllib

from .. import isa as isamod
from ..errors import IsaDataError, PtxgenError

_TABLE = re.compile(r"^\s*\[([A-Za-z0-9_.\"-]+)\]\s*(#.*)?$")


def _toml_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def _toml_number(v):
    if isinstance(v, bool):
        raise PtxgenError(f"not a number: {v!r}")
    if isinstance(v, int):
        return str(v)
    text = repr(float(v))
    return text if ("." in text or "e" in text or "inf" in text or "nan" in text) \
        else text + ".0"


def entry_line(key, value, source, indent=""):
    if source is None:                 # a plain value (a new class's unit name)
        return f"{indent}{key} = {_toml_string(value)}"
    return f"{indent}{key} = {{value = {_toml_number(value)}, source = {_toml_string(source)}}}"


def update_text(text, updates):
    """`text` with each "table.key" of `updates` ({path: (value, source)}) set."""
    lines = text.split("\n")
    by_table = {}
    for path, (value, source) in updates.items():
        table, _, key = path.rpartition(".")
        if not table or not key:
            raise PtxgenError(f"not a table.key path: {path!r}")
        by_table.setdefault(table, {})[key] = (value, source)

    # where each table's lines are: [start, end) after its header
    spans, current, start = {}, None, 0
    for i, line in enumerate(lines):
        m = _TABLE.match(line)
        if m:
            if current is not None:
                spans[current] = (start, i)
            current, start = m.group(1), i + 1
    if current is not None:
        spans[current] = (start, len(lines))

    inserts = []                     # (position, [lines]) for entries a table lacks
    for table, entries in by_table.items():
        if table not in spans:
            continue
        s, e = spans[table]
        todo = dict(entries)
        for i in range(s, e):
            m = re.match(r"^(\s*)([A-Za-z0-9_-]+)(\s*=\s*)(\{.*\}|\"[^\"]*\")\s*(#.*)?$",
                         lines[i])
            if m and m.group(2) in todo:
                value, source = todo.pop(m.group(2))
                lines[i] = entry_line(m.group(2), value, source, m.group(1))
        if todo:
            # after the table's last entry: blank lines and comments before the next table
            # header (a section rule like `# -- arithmetic`) belong to what follows
            pos = e
            while pos > s and (not lines[pos - 1].strip() or
                               lines[pos - 1].lstrip().startswith("#")):
                pos -= 1
            inserts.append((pos, [entry_line(k, v, src) for k, (v, src) in todo.items()]))
    for pos, new in sorted(inserts, reverse=True):
        lines[pos:pos] = new
    missing = [t for t in by_table if t not in spans]
    if missing:
        while lines and not lines[-1].strip():
            lines.pop()
        for t in missing:
            lines += ["", f"[{t}]"]
            lines += [entry_line(k, v, src) for k, (v, src) in by_table[t].items()]
        lines.append("")
    return "\n".join(lines)


def update_file(path, updates):
    """Apply `updates` to the machine-model file at `path` (atomically, after checking that
    the result still loads). Returns the new text."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise PtxgenError(f"cannot read {path}: {e.strerror}") from None
    new = update_text(text, updates)
    try:
        tomllib.loads(new)
    except tomllib.TOMLDecodeError as e:
        raise IsaDataError(f"{path}: the update would not be valid TOML ({e}); file unchanged") \
            from None
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".calibrate-", suffix=".toml", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(new)
        os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        isamod.load_path(tmp)          # the loader's checks: sources, positive values, schema
        os.replace(tmp, path)
    except (OSError, PtxgenError) as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, PtxgenError):
            raise IsaDataError(f"{path}: the update does not pass the machine-model checks "
                               f"({e}); file unchanged") from None
        raise PtxgenError(f"cannot write {path}: {e.strerror}") from None
    isamod.load.cache_clear()
    return new
