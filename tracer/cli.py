"""Command-line entry point: argparse subcommands, and the one place errors become exit codes
(tracer/errors.py has the table; README lists it)."""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from types import ModuleType

from tracer import __version__
from tracer.errors import InternalError, TracerError

# tracer/commands/NAME.py each; a command's module is imported only when it is on the command line
# (every one for --help): what one command imports costs no other command start-up time.
COMMANDS = ("quickstart", "kernels", "run", "trace", "sanitize", "profile", "campaign", "plot", "report", "doctor")
INTERRUPTED = 130
BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of stdout went away (`| head`); what a shell reports for a killed writer


def command_module(name: str) -> ModuleType:
    return importlib.import_module(f"tracer.commands.{name}")


def command_named(argv: Sequence[str]) -> tuple[int | None, str | None]:
    """(position, name) of the command in argv: its first word (tracer's own options take no value);
    name None when that word names no module (then every parser is built: `demo` is report.py's)."""
    at = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    return at, argv[at] if at is not None and argv[at] in COMMANDS else None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser; with `only`, that command's and the others as bare names (argparse
    parses only the command given, and their modules are not imported)."""
    parser = argparse.ArgumentParser(prog="tracer", description="Investigate GPU kernel-ordering and numerical-corruption bugs.")
    parser.add_argument("--version", action="version", version=f"tracer {__version__}")
    parser.add_argument("--debug", action="store_true", help="on an internal error, print the traceback (default: to a log file)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        if only is None or name == only:
            command_module(name).add_parser(sub)
        else:
            sub.add_parser(name)
    return parser


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A parser's subcommands by name."""
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    return dict(sub.choices) if sub is not None else {}


def with_default_action(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """`tracer sanitize WORKLOAD` -> `tracer sanitize run WORKLOAD`: a command module's DEFAULT_ACTION
    is inserted when the word after the command is not one of its actions (or --help)."""
    at, name = command_named(argv)
    default = getattr(command_module(name), "DEFAULT_ACTION", None) if name else None
    if at is None or default is None:
        return argv
    rest = argv[at + 1:]
    if rest and (rest[0] in _actions(_actions(parser)[argv[at]]) or rest[0] in ("-h", "--help")):
        return argv
    return argv[:at + 1] + [default] + rest


def _crash(exc: BaseException, debug: bool) -> int:
    """tracer's own bug: one line naming a log file with the traceback (--debug: the traceback)."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if debug:
        sys.stderr.write(text)
        return InternalError.exit_code
    import tempfile

    try:
        fd, log = tempfile.mkstemp(prefix="tracer-crash-", suffix=".log")
        with os.fdopen(fd, "w") as fh:
            fh.write(f"tracer {__version__}\nargv: {sys.argv}\n\n{text}")
        where = f"traceback in {log}"
    except OSError:
        where = "the traceback could not be written to a log file; rerun with --debug"
    first = (str(exc).splitlines() or [""])[0][:200]
    print(f"tracer: internal error (a bug in tracer, not a finding): {type(exc).__name__}: {first}; {where} "
          "(tracer --debug ... prints it)", file=sys.stderr)
    return InternalError.exit_code


def _stdout_gone() -> int:
    """stdout's reader closed the pipe: stop quietly, and keep the interpreter's final flush quiet too."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return BROKEN_PIPE


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:  # everything after -- is the user's command (trace run, sanitize)
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    at, name = command_named(argv)
    parser = build_parser(None if {"-h", "--help"} & set(argv[:at]) else name)  # `tracer -h trace`: every command's help
    args = parser.parse_args(with_default_action(parser, argv))
    args.command_after_dashdash = extra
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()
        return code
    except TracerError as exc:
        print(f"tracer: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tracer: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        return _stdout_gone()
    except Exception as exc:  # the one place tracer's own bugs become exit code 70
        return _crash(exc, args.debug)


if __name__ == "__main__":
    sys.exit(main())
