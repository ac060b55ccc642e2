"""The `ptxgen` command. Each subcommand lives in its own module here, exposing
`add_parser(subparsers)` and `run(args) -> int`; this module only dispatches and turns every
PtxgenError (and argument error) into one line on stderr with a non-zero exit."""
import argparse
import importlib
import sys
import textwrap

from ..errors import PtxgenError, cli_text

# Order is the order of `ptxgen --help`.
COMMANDS = ["demo", "emit", "run", "compare", "analyze", "isa", "simulate", "calibrate",
            "occupancy", "roofline", "banks", "tune", "lift"]


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        # main() prints "ptxgen: error: " before it: a subcommand's name only
        raise PtxgenError(message if self.prog == "ptxgen" else f"{self.prog}: {message}")


def build_parser():
    p = _Parser(prog="ptxgen", description="PTX emitter, analyzer, emulator and simulator")
    from .. import __version__
    p.add_argument("--version", action="version", version=f"ptxgen {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"{__name__}.{name}":
                continue
            raise
        sp = mod.add_parser(sub)
        sp.set_defaults(_run=mod.run)
    return p


def short_usage(parser):
    """What a bare `ptxgen` prints: the usage line and one line per command."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    width = max(len(c.dest) for c in sub._choices_actions)
    lines = ["usage: ptxgen COMMAND [options]   (ptxgen COMMAND --help: its options; "
             "ptxgen --help: all)", "", "commands:"]
    for c in sub._choices_actions:
        lines += textwrap.wrap(c.help, 100, initial_indent=f"  {c.dest:{width}}  ",
                               subsequent_indent=" " * (width + 4))
    return "\n".join(lines) + "\n"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser()
        if not argv:
            sys.stderr.write(short_usage(parser))
            return 2
        args = parser.parse_args(argv)
        return args._run(args) or 0
    except PtxgenError as e:
        print(f"ptxgen: error: {cli_text(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ptxgen: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
