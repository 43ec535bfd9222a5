"""Shell completion scripts for bash, zsh and fish, made from the argparse parsers themselves (so a
new command or option completes with no edit here): commands, subcommands and option names."""
from __future__ import annotations

import argparse
from enum import Enum

from tracer.errors import UsageError
from tracer.helptext import walk


class Shell(str, Enum):
    BASH = "bash"
    ZSH = "zsh"
    FISH = "fish"


def parse_shell(text: str) -> Shell:
    try:
        return Shell(text)
    except ValueError:
        raise UsageError(f"unknown shell {text!r} (allowed: {', '.join(s.value for s in Shell)})") from None


def words(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """"command subcommand" -> what may follow it: its subcommands, then its long and short options."""
    out: dict[str, list[str]] = {}
    for path, p in walk(parser):
        subs = [c for a in p._actions if isinstance(a, argparse._SubParsersAction) for c in a.choices]
        opts = [o for a in p._actions for o in a.option_strings if o.startswith("--")]
        opts += [o for a in p._actions for o in a.option_strings if not o.startswith("--")]
        out[path] = subs + opts
    return out


def bash_script(parser: argparse.ArgumentParser) -> str:
    cases = "\n".join(f'        "{path}") opts="{" ".join(ws)}" ;;' for path, ws in words(parser).items())
    return f"""# tracer completion for bash: source <(tracer completion bash)
_tracer_complete() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} path="" w opts
    for w in "${{COMP_WORDS[@]:1:COMP_CWORD-1}}"; do
        [[ $w == -- ]] && return 0
        [[ $w == -* ]] && continue
        case "$path${{path:+ }}$w" in
{chr(10).join(f'            "{p}") path="{p}" ;;' for p in words(parser) if p)}
        esac
    done
    case "$path" in
{cases}
    esac
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    [[ ${{#COMPREPLY[@]}} -eq 0 ]] && COMPREPLY=($(compgen -f -- "$cur"))
    return 0
}}
complete -o filenames -F _tracer_complete tracer
"""


def zsh_script(parser: argparse.ArgumentParser) -> str:
    """Native zsh (not bash's script through bashcompinit: zsh cannot run its word-array slices)."""
    paths = words(parser)
    steps = "\n".join(f'            "{p}") cpath="{p}" ;;' for p in paths if p)
    cases = "\n".join(f'        "{p}") opts=({" ".join(ws)}) ;;' for p, ws in paths.items())
    return f"""#compdef tracer
# tracer completion for zsh: tracer completion zsh > "${{fpath[1]}}/_tracer" (then a new shell),
# or source <(tracer completion zsh) after compinit
_tracer() {{
    local cpath="" w
    local -a opts
    for w in "${{(@)words[2,CURRENT-1]}}"; do
        [[ $w == -- ]] && {{ _files; return }}
        [[ $w == -* ]] && continue
        case "$cpath${{cpath:+ }}$w" in
{steps}
        esac
    done
    case "$cpath" in
{cases}
    esac
    compadd -- "${{opts[@]}}" || _files
}}
if [[ $funcstack[1] == _tracer ]]; then
    _tracer "$@"
else
    compdef _tracer tracer
fi
"""


def fish_script(parser: argparse.ArgumentParser) -> str:
    lines = ["# tracer completion for fish: tracer completion fish > ~/.config/fish/completions/tracer.fish",
             "complete -c tracer -f"]
    for path, p in walk(parser):
        seen = "__fish_seen_subcommand_from"
        cond = "__fish_use_subcommand" if not path else " ; and ".join(f"{seen} {w}" for w in path.split())
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for ca in a._choices_actions:
                    help_text = (ca.help or "").replace("'", "\\'").replace("%%", "%")
                    if path:
                        cond_sub = f"{cond} ; and not {seen} {' '.join(a.choices)}"
                    else:
                        cond_sub = cond
                    lines.append(f"complete -c tracer -n '{cond_sub}' -a {ca.dest} -d '{help_text[:80]}'")
            for o in a.option_strings:
                if o.startswith("--") and o != "--help":
                    lines.append(f"complete -c tracer -n '{cond}' -l {o[2:]}" + ("" if a.nargs == 0 else " -r -F"))
    return "\n".join(lines) + "\n"


def script(parser: argparse.ArgumentParser, shell: Shell) -> str:
    return {Shell.BASH: bash_script, Shell.ZSH: zsh_script, Shell.FISH: fish_script}[shell](parser)
