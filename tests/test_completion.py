"""`yolotui completion bash|zsh|fish`: scripts a shell accepts, naming every subcommand, completing run names."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest
from syspkg import require

from yolotui.cli import COMMANDS


def completion(shell, yolotui_cmd, cli_env, *extra):
    result = subprocess.run([*yolotui_cmd, "completion", shell, *extra], capture_output=True, text=True,
                            env=cli_env, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture
def shim(tmp_path, cli_env):
    """A `yolotui` on PATH that runs this checkout (the scripts call `yolotui completion --runs`), and a
    state folder of its own holding three indexed runs, one with a name no shell may see."""
    from yolotui.runs import index

    home = tmp_path / "home"
    env = dict(cli_env, YOLOTUI_HOME=str(home))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "yolotui"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m yolotui "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    old = os.environ.get("YOLOTUI_HOME")
    os.environ["YOLOTUI_HOME"] = str(home)
    try:
        for name in ("shapes-a", "shapes-b", "coco", "$(touch pwned)"):
            folder = tmp_path / "runs" / f"r{len(name)}-{abs(hash(name))}"
            folder.mkdir(parents=True)
            index.add(folder, name)
    finally:
        if old is None:
            os.environ.pop("YOLOTUI_HOME")
        else:
            os.environ["YOLOTUI_HOME"] = old
    return env


def test_bash_script_parses_and_names_every_subcommand(yolotui_cmd, cli_env, tmp_path):
    script = completion("bash", yolotui_cmd, cli_env)
    path = tmp_path / "yolotui.bash"
    path.write_text(script)
    check = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    for name in COMMANDS:
        assert f"        {name})" in script, f"no completion branch for {name}"
    assert "complete -o bashdefault -o default -F _yolotui yolotui" in script


def complete_in_bash(script_path, words, env, cwd):
    """What bash's completion function offers for the command line `words` (the last word being typed)."""
    line = " ".join(f"'{w}'" for w in words)
    program = (f"source '{script_path}'; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _yolotui; "
               'printf "%s\\n" "${COMPREPLY[@]}"')
    result = subprocess.run(["bash", "-c", program], capture_output=True, text=True, env=env, cwd=cwd, timeout=120)
    return [w for w in result.stdout.splitlines() if w]


def test_bash_completes_subcommands_flags_choices_and_run_names(yolotui_cmd, shim, tmp_path):
    path = tmp_path / "yolotui.bash"
    path.write_text(completion("bash", yolotui_cmd, shim))
    assert set(complete_in_bash(path, ["yolotui", "re"], shim, tmp_path)) == {"resume", "restore"}
    assert "--batch-size" in complete_in_bash(path, ["yolotui", "train", "--batch"], shim, tmp_path)
    assert complete_in_bash(path, ["yolotui", "train", "--optimizer", "Ad"], shim, tmp_path) == ["Adam", "AdamW"]
    assert sorted(complete_in_bash(path, ["yolotui", "attach", "shapes"], shim, tmp_path)) == ["shapes-a", "shapes-b"]
    assert complete_in_bash(path, ["yolotui", "train", "--after", "co"], shim, tmp_path) == ["coco"]
    everything = complete_in_bash(path, ["yolotui", "status", ""], shim, tmp_path)
    assert {"shapes-a", "shapes-b", "coco"} <= set(everything)
    assert not any("touch" in word for word in everything)  # a hostile name in the index never reaches bash
    assert not (tmp_path / "pwned").exists()


def test_runs_lists_only_safe_names(yolotui_cmd, shim):
    result = subprocess.run([*yolotui_cmd, "completion", "--runs"], capture_output=True, text=True, env=shim,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.split()) == ["coco", "shapes-a", "shapes-b"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_name_every_subcommand(yolotui_cmd, cli_env, tmp_path, shell):
    script = completion(shell, yolotui_cmd, cli_env)
    for name in COMMANDS:
        assert name in script
    assert "yolotui completion --runs" in script
    require(shell, why=f"the {shell} syntax check")  # the content checks above have run either way
    path = tmp_path / f"yolotui.{shell}"
    path.write_text(script)
    check = subprocess.run([shell, "-n", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_zsh_runs_the_same_completion_through_bashcompinit(yolotui_cmd, shim, tmp_path):
    require("zsh", why="zsh's completion through bashcompinit")  # the bash tests above cover the shared function
    path = tmp_path / "yolotui.zsh"
    path.write_text(completion("zsh", yolotui_cmd, shim))
    program = (f"autoload -U +X compinit && compinit -u; source '{path}'; "
               "COMP_WORDS=(yolotui train --optimizer A); COMP_CWORD=3; _yolotui; print -l -- $COMPREPLY; "
               "COMPREPLY=(); COMP_WORDS=(yolotui attach shapes); COMP_CWORD=2; _yolotui; print -l -- $COMPREPLY")
    result = subprocess.run(["zsh", "-c", program], capture_output=True, text=True, env=shim, cwd=tmp_path,
                            timeout=120)
    offered = result.stdout.split()
    assert offered[:2] == ["Adam", "AdamW"], result.stderr
    assert sorted(offered[2:]) == ["shapes-a", "shapes-b"], result.stderr


def test_fish_completes_choices_and_run_names(yolotui_cmd, shim, tmp_path):
    require("fish", why="fish's completion")
    path = tmp_path / "yolotui.fish"
    path.write_text(completion("fish", yolotui_cmd, shim))
    program = (f"source '{path}'; complete -C 'yolotui train --optimizer A'; echo ---; "
               "complete -C 'yolotui attach shapes'")
    result = subprocess.run(["fish", "-c", program], capture_output=True, text=True, env=shim, cwd=tmp_path,
                            timeout=120)
    choices, runs = result.stdout.split("---")
    assert [line.split("\t")[0] for line in choices.strip().splitlines()] == ["Adam", "AdamW"], result.stderr
    assert sorted(line.split("\t")[0] for line in runs.strip().splitlines()) == ["shapes-a", "shapes-b"]


def test_no_shell_is_a_one_line_error(yolotui_cmd, cli_env):
    result = subprocess.run([*yolotui_cmd, "completion"], capture_output=True, text=True, env=cli_env, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip() == "yolotui: error: name a shell: yolotui completion bash, zsh or fish"
