"""Command-line entry point: argparse subcommands, and the one place errors become exit codes
(tracer/errors.py has the table; docs/exit-codes.md lists it)."""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from tracer import __version__
from tracer.errors import InternalError, OutputError, TracerError
from tracer.helptext import apply as apply_help
from tracer.textsafe import EscapingStream, shown

if TYPE_CHECKING:
    from tracer.progress import Spinner

# tracer/commands/NAME.py each; a command's module is imported only when it is on the command line
# (every one for --help): what one command imports costs no other command start-up time.
COMMANDS = ("quickstart", "kernels", "run", "trace", "diff", "sanitize", "profile", "campaign", "plot", "report", "serve",
            "doctor", "completion")
# Commands that work silently (the `run` actions and sanitize print their own progress lines instead).
SPINNER_COMMANDS = ("trace", "diff", "plot", "report", "demo", "profile", "campaign")
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
            sub.add_parser(name, add_help=False)  # never parsed: no -h to build (start-up, issue 27)
    apply_help(parser)
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


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """argparse's parse_args, except that unknown extra arguments are refused with the usage of the
    subcommand they were given to (argparse's own names only the top-level usage)."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        deepest = parser
        for word in argv:
            deepest = _actions(deepest).get(word, deepest)
        deepest.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def terminal_output(args: argparse.Namespace) -> Spinner | None:
    """At a terminal: colour on stdout (not for --json, nor with NO_COLOR) and, for the commands that
    read and judge, a spinner on stderr after 2 s that goes away before the result is printed."""
    from tracer import progress, style

    coloured = not getattr(args, "json", False) and style.wanted(sys.stdout)
    action = getattr(args, f"{args.command}_command", None)
    label = " ".join(w for w in (args.command, action) if w)
    spinner = progress.Spinner(f"tracer {label}: working").start() if (
        args.command in SPINNER_COMMANDS and action != "run" and progress.wanted()) else None
    if coloured or spinner is not None:
        sys.stdout = style.ColourStream(sys.stdout, coloured, spinner.stop if spinner else lambda: None)
    return spinner


def _crash(exc: BaseException, debug: bool) -> int:
    """tracer's own bug: one line naming a log file with the traceback (--debug: the traceback)."""
    import traceback  # start-up: only a crash formats one (issue 27)

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


def _error(exc: TracerError) -> int:
    """One line on stderr (names in it escaped: a newline in a file name cannot add a line)."""
    try:
        print(f"tracer: error: {shown(exc)}", file=sys.stderr)
    except (OSError, TracerError):
        pass  # stderr is gone too: the exit code still says it
    return exc.exit_code


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
    args = parse(parser, with_default_action(parser, argv))
    args.command_after_dashdash = extra
    streams = sys.stdout, sys.stderr
    spinner = terminal_output(args)  # colour and the spinner next to the terminal; names escaped before them
    sys.stdout, sys.stderr = EscapingStream(sys.stdout, _stdout_failed), EscapingStream(sys.stderr, _stdout_failed)
    try:
        return _run(args)
    finally:
        if spinner is not None:
            spinner.stop()
        if sys.stdout is not streams[0]:
            try:
                sys.stdout.flush()
            except OSError:
                pass
        sys.stdout, sys.stderr = streams


def _stdout_failed(exc: OSError) -> OutputError:
    return OutputError(f"cannot write to standard output: {exc.strerror or exc}")


def _run(args: argparse.Namespace) -> int:
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()
        return code
    except TracerError as exc:
        return _error(exc)
    except KeyboardInterrupt:
        print("tracer: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        return _stdout_gone()
    except RecursionError as exc:  # a reader that recursed on hostile input: still tracer's bug, but never a hang
        return _crash(exc, args.debug)
    except Exception as exc:
        return _crash(exc, args.debug)


if __name__ == "__main__":
    sys.exit(main())
