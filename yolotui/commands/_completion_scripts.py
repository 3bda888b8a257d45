"""Shell completion scripts for bash, zsh and fish, written from yolotui's argparse tree.

`describe(parser)` reads each subcommand's flags and positional arguments and sorts what their values are: run
names (a metavar that says RUN), files (FILE, PATH, DIR ... or a flag such as --data), a fixed set of choices, or
anything. The scripts complete subcommands and flags from that, and run names by calling
`yolotui completion --runs` (the run index), so the list is the one `yolotui ls` shows at the moment of asking.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field

RUN, FILE, CHOICE, VALUE = "run", "file", "choice", "value"
FILE_METAVARS = {"FILE", "PATH", "DIR", "EXE", "IMAGE", "DATA", "MODEL", "CKPT", "NAME|PATH"}
FILE_DESTS = {"cfg", "data", "hyp", "weights", "output", "python", "repo", "project", "data_dir", "dir", "images",
              "log_config"}
SAFE_WORD = re.compile(r"^[A-Za-z0-9._+:@/=,-]+$")  # words written into a script unquoted


@dataclass
class Option:
    """One flag: its spellings, whether it takes a value, and what kind of value."""

    flags: list[str]
    kind: str | None  # None: a switch
    choices: list[str] = field(default_factory=list)
    help: str = ""


@dataclass
class Command:
    """One subcommand: its flags and what its positional arguments are (RUN, FILE or VALUE; None: none)."""

    name: str
    help: str
    options: list[Option]
    positional: str | None
    takes_command: bool = False  # `yolotui exec -- CMD ...`


def value_kind(action: argparse.Action) -> str:
    """RUN, FILE, CHOICE or VALUE for an argument that takes a value."""
    metavar = action.metavar if isinstance(action.metavar, str) else ""
    if action.choices:
        return CHOICE
    if "RUN" in metavar.split("|"):
        return RUN
    if metavar in FILE_METAVARS or action.dest in FILE_DESTS:
        return FILE
    return VALUE


def describe(parser: argparse.ArgumentParser) -> list[Command]:
    """Every subcommand of `parser` (the full `yolotui` parser) with its visible flags and positionals."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help or "" for choice in sub._choices_actions}
    commands = []
    for name, child in sub.choices.items():
        options, positional, takes_command = [], None, False
        for action in child._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
                continue
            if not action.option_strings:
                if action.nargs == argparse.REMAINDER:
                    takes_command = True
                elif positional is None or positional == VALUE:
                    positional = value_kind(action)
                continue
            kind = None if action.nargs == 0 else value_kind(action)
            choices = [str(c) for c in action.choices or () if SAFE_WORD.match(str(c))]
            text = child._get_formatter()._expand_help(action) if action.help else ""
            options.append(Option(list(action.option_strings), kind, choices, " ".join(text.split())))
        commands.append(Command(name, helps.get(name, ""), options, positional, takes_command))
    return commands


def _bash_case(command: Command) -> list[str]:
    """The `case` branch of one subcommand in the bash function."""
    lines = [f"        {command.name})"]
    if command.takes_command:
        lines.append('            [[ " ${COMP_WORDS[*]:1:$((COMP_CWORD - 1))} " == *" -- "* ]] && return 1  # the command itself')
    by_kind: dict[str, list[str]] = {}
    for option in command.options:
        if option.kind == CHOICE and option.choices:
            lines.append(f"            case $prev in {'|'.join(option.flags)}) _yolotui_words "
                         f"{' '.join(option.choices)}; return ;; esac")
        elif option.kind is not None:
            by_kind.setdefault(option.kind, []).extend(option.flags)
    if by_kind.get(RUN):
        lines.append(f"            case $prev in {'|'.join(by_kind[RUN])}) _yolotui_runs; return ;; esac")
    others = [flag for kind, flags in by_kind.items() if kind != RUN for flag in flags]
    if others:  # a file or any other value: the shell's own (file name) completion
        lines.append(f"            case $prev in {'|'.join(others)}) return 1 ;; esac")
    flags = " ".join(flag for option in command.options for flag in option.flags)
    lines.append(f'            if [[ $cur == -* ]]; then _yolotui_words {flags}; return; fi')
    if command.positional == RUN:
        lines.append("            _yolotui_runs; return 1")  # run names, and paths from the default
    elif command.positional is not None:
        lines.append("            return 1")
    lines.append("            ;;")
    return lines


def bash_script(commands: list[Command]) -> str:
    """A bash completion script (also what the zsh script runs, through bashcompinit)."""
    names = " ".join(c.name for c in commands)
    lines = [
        "# yolotui shell completion (bash), written by `yolotui completion bash`",
        "_yolotui_words() {  # the arguments that start with $cur",
        "    local word",
        "    for word in \"$@\"; do [[ $word == \"$cur\"* ]] && COMPREPLY+=(\"$word\"); done",
        "}",
        "_yolotui_runs() {  # run names from yolotui's run index",
        "    local name",
        "    while IFS= read -r name; do",
        "        [[ $name == \"$cur\"* ]] && COMPREPLY+=(\"$name\")",
        "    done < <(command yolotui completion --runs 2>/dev/null)",
        "}",
        "_yolotui() {",
        "    local cur prev cmd='' word i",
        "    COMPREPLY=()",
        "    cur=${COMP_WORDS[*]:$COMP_CWORD:1}",  # slices count from 0 in bash and zsh alike
        "    prev=${COMP_WORDS[*]:$((COMP_CWORD - 1)):1}",
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        "        word=${COMP_WORDS[*]:$i:1}",
        "        case $word in -*) ;; *) cmd=$word; break ;; esac",
        "    done",
        "    case $cmd in",
        f"        '') _yolotui_words {names} --help --version; return ;;",
    ]
    for command in commands:
        lines += _bash_case(command)
    lines += ["    esac", "    return 1", "}", "complete -o bashdefault -o default -F _yolotui yolotui", ""]
    return "\n".join(lines)


def zsh_script(commands: list[Command]) -> str:
    """A zsh completion script: the bash one, through zsh's bashcompinit."""
    return "\n".join([
        "# yolotui shell completion (zsh), written by `yolotui completion zsh`",
        "(( $+functions[compdef] )) || { autoload -U +X compinit && compinit; }",
        "autoload -U +X bashcompinit && bashcompinit",
        bash_script(commands),
    ])


def _fish_quote(text: str) -> str:
    """`text` as one single-quoted fish word."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish_script(commands: list[Command]) -> str:
    """A fish completion script."""
    names = " ".join(c.name for c in commands)
    lines = ["# yolotui shell completion (fish), written by `yolotui completion fish`",
             "function __yolotui_runs; command yolotui completion --runs 2>/dev/null; end",
             "complete -c yolotui -f",
             "complete -c yolotui -l version -d 'print the version'"]
    for command in commands:
        lines.append(f"complete -c yolotui -n '__fish_use_subcommand' -a {command.name} "
                     f"-d {_fish_quote(command.help[:80])}")
    for command in commands:
        when = f"-n '__fish_seen_subcommand_from {command.name}'"
        if command.positional == RUN:
            lines.append(f"complete -c yolotui {when} -a '(__yolotui_runs)' -F")
        elif command.positional is not None or command.takes_command:
            lines.append(f"complete -c yolotui {when} -F")
        for option in command.options:
            spell = " ".join(f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}" for flag in option.flags)
            extra = ""
            if option.kind == RUN:
                extra = " -r -a '(__yolotui_runs)' -F"
            elif option.kind == FILE:
                extra = " -r -F"
            elif option.kind == CHOICE and option.choices:
                extra = f" -x -a {_fish_quote(' '.join(option.choices))}"  # -x: these words, no file names
            elif option.kind is not None:
                extra = " -x"
            lines.append(f"complete -c yolotui {when} {spell}{extra} -d {_fish_quote(option.help[:80])}")
    lines.append(f"# subcommands: {names}")
    return "\n".join(lines) + "\n"


SCRIPTS = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}
