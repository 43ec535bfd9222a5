"""`tracer completion bash|zsh|fish` used by the shells themselves: bash and zsh run interactively on
a pseudo-terminal, the script loaded as a user loads it, and the line is completed with a real TAB
(then echoed, to read what the line editor made of it); fish answers through `complete -C`, its own
completion engine. Each skips with a reason where its shell is not installed (scripts/install_shells.sh
installs them; CI runs it)."""
from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tracer.cli import build_parser
from tracer.completion import Shell, script

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]|[\x07\x08\r]")
CTRL_A, CTRL_U = "\x01", "\x15"


def need(shell: str) -> str:
    path = shutil.which(shell)
    if path is None:
        pytest.skip(f"{shell} is not installed (scripts/install_shells.sh installs it as root)")
    return path


class Terminal:
    """An interactive shell on a pseudo-terminal: type into it, read until a marker appears."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.master, slave = os.openpty()
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
                                     close_fds=True)
        os.close(slave)
        self.seen = ""

    def type(self, text: str, settle: float = 0.3) -> None:
        os.write(self.master, text.encode())
        time.sleep(settle)

    def read_until(self, marker: str, timeout: float = 20) -> str:
        deadline = time.monotonic() + timeout
        while marker not in ANSI.sub("", self.seen) and time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                try:
                    self.seen += os.read(self.master, 65536).decode(errors="replace")
                except OSError:
                    break
        text = ANSI.sub("", self.seen)
        assert marker in text, f"no {marker!r} from the shell within {timeout} s; it showed:\n{text[-2000:]}"
        self.seen = ""
        return text

    def completed(self, partial: str, n: int) -> str:
        """The line after TAB: typed, completed, then made an echo of itself (Ctrl-A, a prefix, Enter)."""
        self.type(partial + "\t", settle=1.0)
        self.type(f"{CTRL_A}echo RESULT{n}: \n")
        out = self.read_until(f"RESULT{n}: tracer")
        return out.rsplit(f"RESULT{n}: ", 1)[1].splitlines()[0].strip()

    def listed(self, partial: str, marker: str) -> str:
        """What a double TAB lists for this line (then the line is dropped and a marker echoed)."""
        self.type(partial + "\t\t", settle=1.5)
        self.type(f"{CTRL_U}echo {marker}\n")
        return self.read_until(f"\n{marker}")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
        os.close(self.master)


def _env(tmp_path: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "TERM": "xterm", "LANG": "C.UTF-8",
            "PS1": "$ ", "PROMPT": "$ ", "INPUTRC": "/dev/null"}


def _script(tmp_path: Path, shell: Shell) -> Path:
    path = tmp_path / ("_tracer" if shell is Shell.ZSH else f"tracer.{shell.value}")
    path.write_text(script(build_parser(), shell))
    return path


def _check(term: Terminal) -> None:
    assert term.completed("tracer tr", 1) == "tracer trace"
    assert term.completed("tracer trace an", 2) == "tracer trace analyze"
    assert term.completed("tracer sanitize import --js", 3) == "tracer sanitize import --json"
    listing = term.listed("tracer trace ", "LISTED")
    assert {"analyze", "export", "import", "run"} <= set(listing.split()), listing


def test_bash_completes_on_a_terminal(tmp_path: Path) -> None:
    bash = need("bash")
    term = Terminal([bash, "--noprofile", "--norc", "-i"], _env(tmp_path))
    try:
        term.type(f"bind 'set show-all-if-ambiguous off'; source {_script(tmp_path, Shell.BASH)}; echo READY\n")
        term.read_until("\nREADY")
        _check(term)
    finally:
        term.close()


@pytest.mark.parametrize("how", ["fpath", "source"])
def test_zsh_completes_on_a_terminal(how: str, tmp_path: Path) -> None:
    """Both ways the script's header names: a file in $fpath (autoloaded at the first TAB, which must
    complete already) and `source` after compinit."""
    zsh = need("zsh")
    path = _script(tmp_path, Shell.ZSH)
    load = (f"fpath=({tmp_path} $fpath); autoload -U compinit; compinit -u -D" if how == "fpath"
            else f"autoload -U compinit; compinit -u -D; source {path}")
    term = Terminal([zsh, "-f", "-i"], _env(tmp_path))
    try:
        term.type(f"{load}; zstyle ':completion:*' list-prompt ''; echo READY\n")
        term.read_until("\nREADY")
        _check(term)
    finally:
        term.close()


def _fish(fish: str, path: Path, line: str) -> list[str]:
    res = subprocess.run([fish, "--no-config", "-c", f"source {path}; complete -C {line!r}"], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "HOME": str(path.parent)})
    assert res.returncode == 0, res.stderr
    return [ln.split("\t")[0] for ln in res.stdout.splitlines()]


def test_fish_completes(tmp_path: Path) -> None:
    fish = need("fish")
    path = _script(tmp_path, Shell.FISH)
    assert _fish(fish, path, "tracer tr") == ["trace"]
    assert {"analyze", "export", "import", "run"} <= set(_fish(fish, path, "tracer trace "))
    assert "--json" in _fish(fish, path, "tracer sanitize import --js")
    assert "--pairs" in _fish(fish, path, "tracer trace analyze --pa")


def test_the_scripts_are_what_the_cli_prints(capsys: pytest.CaptureFixture[str]) -> None:
    from tracer.cli import main

    for shell in Shell:
        assert main(["completion", shell.value]) == 0
        assert capsys.readouterr().out == script(build_parser(), shell)
