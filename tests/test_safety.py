"""Never delete or leak what is not yours: `rm` through links and shadowing names, notification secrets in the
logs, the serve token in an access log, planted run folders, damaged index files."""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from runs_helpers import reap_runs, wait_for  # noqa: F401 - reap_runs is an autouse fixture
from syspkg import require_module

from yolotui.cli import main
from yolotui.errors import UserError
from yolotui.jobs.rm import RemoveRequest, remove
from yolotui.notify import redact
from yolotui.placement import ownership
from yolotui.runs import index
from yolotui.runs.resolve import resolve_run
from yolotui.runs.runconfig import write_run_config
from yolotui.runs.status import RunStatus, effective_state, read_status, write_status


def ended_run(folder: Path, name: str | None = None, indexed: bool = True, state: str = "finished") -> Path:
    """A run folder with a status.json saying it ended (and a file in weights/), indexed unless told not."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "weights").mkdir(exist_ok=True)
    (folder / "weights" / "last.pt").write_bytes(b"x")
    write_status(folder, RunStatus(name=name or folder.name, run_dir=str(folder), state=state))
    if indexed:
        index.add(folder, name or folder.name)
    return folder


# ------------------------------------------------------------------------------------------------ rm

def test_rm_never_deletes_through_a_symlinked_run_folder(tmp_path):
    victim = ended_run(tmp_path / "elsewhere" / "precious", indexed=False)
    link = tmp_path / "runs" / "link"
    link.parent.mkdir(parents=True)
    link.symlink_to(victim)
    for given in (str(link), str(link) + "/"):
        with pytest.raises(UserError, match="symbolic link"):
            remove(RemoveRequest([given], files=True, confirm=lambda _folder: True))
    assert (victim / "status.json").is_file() and (victim / "weights" / "last.pt").is_file()
    assert link.is_symlink()


def test_rm_refuses_an_indexed_run_folder_that_became_a_link(tmp_path):
    run = ended_run(tmp_path / "runs" / "r1")
    victim = ended_run(tmp_path / "victim" / "data", indexed=False)
    # the indexed folder is swapped for a link to someone else's folder
    os.rename(run, tmp_path / "runs" / "moved")
    run.symlink_to(victim)
    with pytest.raises(UserError, match="symbolic link"):
        remove(RemoveRequest(["r1"], files=True))
    # a link one level up is refused too
    os.unlink(run)
    os.rename(tmp_path / "runs", tmp_path / "runs-real")
    (tmp_path / "runs").symlink_to(tmp_path / "victim")
    (tmp_path / "victim" / "r1").mkdir()
    write_status(tmp_path / "victim" / "r1", RunStatus(name="r1", state="finished"))
    with pytest.raises(UserError, match="symbolic link"):
        remove(RemoveRequest(["r1"], files=True))
    assert (victim / "status.json").is_file() and (tmp_path / "victim" / "r1" / "status.json").is_file()


def test_a_plain_name_is_the_indexed_run_not_a_folder_here(tmp_path, monkeypatch):
    indexed = ended_run(tmp_path / "runs" / "r1")
    elsewhere = tmp_path / "work"
    unrelated = ended_run(elsewhere / "r1", indexed=False)  # looks like a run, but not the one named r1
    monkeypatch.chdir(elsewhere)
    assert resolve_run("r1") == indexed
    result = remove(RemoveRequest(["r1"], files=True))
    assert result.deleted == [indexed] and not indexed.exists()
    assert (unrelated / "status.json").is_file() and (unrelated / "weights" / "last.pt").is_file()
    # with no indexed r1 left, ./r1 is a folder outside the index: asked about, refused without a yes
    with pytest.raises(UserError, match="confirm"):
        remove(RemoveRequest(["r1"], files=True))
    with pytest.raises(UserError, match="confirm"):
        remove(RemoveRequest(["r1"], files=True, confirm=lambda _folder: False))
    assert unrelated.is_dir()
    asked = []
    result = remove(RemoveRequest(["./r1"], files=True, confirm=lambda folder: asked.append(folder) or True))
    assert asked == [unrelated] and result.deleted == [unrelated] and not unrelated.exists()


def test_rm_deletes_only_folders_with_a_status_file(tmp_path):
    bare = tmp_path / "runs" / "bare"
    (bare / "weights").mkdir(parents=True)
    (bare / "results.csv").write_text("epoch\n")
    index.add(bare, "bare")
    with pytest.raises(UserError, match="no status.json"):
        remove(RemoveRequest(["bare"], files=True))
    assert (bare / "results.csv").is_file()
    # a status.json that is a link is no status file either
    (bare / "status.json").symlink_to(tmp_path / "nowhere.json")
    with pytest.raises(UserError, match="no status.json"):
        remove(RemoveRequest(["bare"], files=True))
    # forgetting it (no --files) leaves the folder alone
    assert remove(RemoveRequest(["bare"])).removed == [bare] and bare.is_dir()
    not_listed = tmp_path / "plain"
    (not_listed / "weights").mkdir(parents=True)
    with pytest.raises(UserError, match="not a run yolotui made"):
        remove(RemoveRequest([str(not_listed)], files=True, confirm=lambda _folder: True))
    assert not_listed.is_dir()


def test_rm_cli_checks_everything_before_removing_anything(tmp_path, capsys):
    a = ended_run(tmp_path / "runs" / "a")
    link = tmp_path / "runs" / "b"
    link.symlink_to(ended_run(tmp_path / "other" / "b", indexed=False))
    assert main(["rm", "--files", "a", str(link)]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert a.is_dir() and any(e.path == str(a) for e in index.entries())
    assert main(["rm", "--files", "a"]) == 0 and not a.exists()
    assert "deleted:" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------ redaction

SECRET_URLS = {
    "json://127.0.0.1:9/hook?secret=abcSECRET1": ["abcSECRET1"],
    "tgram://123456789:AAHsecretTOKEN2/12345": ["AAHsecretTOKEN2", "123456789"],
    "pbul://o.SECRETpushbullet3": ["o.SECRETpushbullet3", "SECRETpushbullet3"],
    "pover://USERKEYsecret4@APPTOKENsecret5": ["USERKEYsecret4", "APPTOKENsecret5"],
    "mailto://someone:PASSsecret6@mail.example.org": ["PASSsecret6", "someone"],
}


@pytest.mark.parametrize("url", sorted(SECRET_URLS))
def test_a_target_is_named_by_its_scheme_and_a_short_hash(url):
    label = redact.target_label(url)
    scheme = url.split("://")[0]
    assert re.fullmatch(rf"{scheme}://…#[0-9a-f]{{6}}", label), label
    for secret in SECRET_URLS[url]:
        assert secret not in label
    assert redact.target_label(url + "x") != label  # two targets are told apart
    text = f"could not post to {url} (https://api.example.org/bot{url.split('://')[1]}/send)"
    for secret in SECRET_URLS[url]:
        assert secret not in redact.scrub(text, [url])


def test_a_hook_command_with_a_secret_argument_is_never_logged_whole():
    command = "curl -s -H 'Authorization: Bearer HOOKsecret7' https://hooks.example.org/x"
    label = redact.command_label(command)
    assert label.startswith("hook command …#") and "HOOKsecret7" not in label and "curl" not in label
    assert "HOOKsecret7" not in redact.scrub("curl: (6) Bearer HOOKsecret7 refused", [command])


def test_apprise_reasons_and_errors_are_scrubbed(monkeypatch):
    apprise = require_module("apprise", why="apprise's scrubbed reasons")
    from yolotui.notify import send as notify_send

    def failing_notify(self, title="", body="", **_kwargs):
        urls = [server.url(privacy=False) for server in self]
        logging.getLogger("apprise").warning("Failed to send to %s", urls[0])
        return False

    monkeypatch.setattr(apprise.Apprise, "notify", failing_notify)
    errors = notify_send.send_urls(sorted(SECRET_URLS), "t", "b", 1.0)
    assert len(errors) == len(SECRET_URLS)
    text = "\n".join(errors)
    for url, secrets in SECRET_URLS.items():
        assert redact.target_label(url) in text
        for secret in secrets:
            assert secret not in text, (secret, text)
    assert "Failed to send" in text  # apprise's reason is kept, scrubbed

    def raising_notify(self, **_kwargs):
        raise RuntimeError(f"boom at {[server.url(privacy=False) for server in self][0]}")

    monkeypatch.setattr(apprise.Apprise, "notify", raising_notify)
    (error,) = notify_send.send_urls(["tgram://123456789:AAHsecretTOKEN2/12345"], "t", "b", 1.0)
    assert "RuntimeError: boom" in error and "AAHsecretTOKEN2" not in error


def _exec(tmp_path, yolotui_cmd, env, code: str, name: str = "x") -> Path:
    argv = [*yolotui_cmd, "exec", "--project", str(tmp_path / "runs"), "--name", name, "--",
            sys.executable, "-c", code]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return tmp_path / "runs" / name


def test_supervisor_log_has_no_secret_and_the_logs_and_index_are_private(tmp_path, yolotui_cmd, cli_env,
                                                                          yolotui_home):
    settings = Path(yolotui_home) / "config" / "settings.yaml"
    settings.parent.mkdir(parents=True, exist_ok=True)
    hook = f"echo HOOKsecret7 >&2; {sys.executable} -c 'import sys; sys.exit(3)' --token=HOOKsecret8"
    settings.write_text(yaml.safe_dump({"notify": {
        "urls": ["json://127.0.0.1:9/hook?secret=abcSECRET1", "json://user:PWsecret9@127.0.0.1:9/"],
        "command": hook, "timeout_s": 5}}))
    old_umask = os.umask(0o022)  # as on a usual machine: files are created world-readable unless asked
    try:
        run_dir = _exec(tmp_path, yolotui_cmd, cli_env, "print('hello')")
        wait_for(lambda: effective_state(run_dir) == "finished", timeout=30)
        status = wait_for(lambda: (s := read_status(run_dir)) and s.notifications and s, timeout=30)
    finally:
        os.umask(old_umask)
    assert status.notifications["failed"] == 1  # one sender, three failed targets
    log = wait_for(lambda: (t := (run_dir / "supervisor.log").read_text()).count("notify: finished:") >= 3 and t,
                   timeout=30)
    for secret in ("abcSECRET1", "PWsecret9", "HOOKsecret7", "HOOKsecret8", "secret="):
        assert secret not in log, secret
    assert redact.target_label("json://127.0.0.1:9/hook?secret=abcSECRET1") in log
    assert redact.command_label(hook) + ": exit code 3" in log
    for path in (run_dir / "supervisor.log", run_dir / "train.log", run_dir / "run.yaml", index.index_path()):
        assert path.stat().st_mode & 0o077 == 0, (path, oct(path.stat().st_mode))


def test_an_older_world_readable_log_is_made_private_on_the_next_append(tmp_path):
    from yolotui.runs.atomic import open_append

    path = tmp_path / "train.log"
    path.write_text("old\n")
    path.chmod(0o644)
    os.close(open_append(path))
    assert path.stat().st_mode & 0o777 == 0o644  # a plain append leaves a file's mode alone
    os.close(open_append(path, private=True))
    assert path.stat().st_mode & 0o777 == 0o600


def test_notify_test_names_targets_without_their_tokens(tmp_path, yolotui_cmd, cli_env):
    url = "json://127.0.0.1:9/?secret=abcSECRET1"
    done = subprocess.run([*yolotui_cmd, "notify", "test", "--notify", url], env=cli_env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1
    assert "abcSECRET1" not in done.stdout + done.stderr
    assert f"failed: {redact.target_label(url)}" in done.stdout and "targets: json://…#" in done.stdout


# ------------------------------------------------------------------------------------------ serve

def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_prints_no_access_log_with_the_token(tmp_path, yolotui_cmd, cli_env):
    require_module("textual_serve", why="yolotui serve")
    port = _free_port()
    server = subprocess.Popen([*yolotui_cmd, "serve", "--port", str(port)], env={**cli_env, "COLUMNS": "200"},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: [lines.append(line) for line in server.stdout], daemon=True)
    reader.start()
    try:
        url = wait_for(lambda: next((m.group(1) for line in list(lines)
                                     if (m := re.search(r"open (http://\S+\?token=\S+)", line))), None), timeout=60)
        token = url.split("token=", 1)[1]
        for _ in range(2):
            with urllib.request.urlopen(url, timeout=20) as page:
                assert page.status == 200
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(url.replace(token, "wrong-token-1234"), timeout=20)
        time.sleep(1.0)  # give a (wrong) access log time to be written
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
        reader.join(timeout=10)
    output = "".join(lines)
    announced = [line for line in lines if "yolotui serve: open" in line]
    assert len(announced) == 1
    assert token not in output.replace(announced[0], ""), output
    assert "wrong-token-1234" not in output and "GET /" not in output, output


# ------------------------------------------------------------------------------------------ planted folders

def planted_folder(tmp_path: Path) -> tuple[Path, Path]:
    """A run folder someone else prepared: a shell command, a queue: section, a notify.command, and a claimed
    name that is another run's. Returns (folder, the marker file its commands would write)."""
    other = ended_run(tmp_path / "runs" / "before")  # finished: the queue lets the planted run start at once
    ended_run(tmp_path / "runs" / "mine", name="mine")  # the user's own run, whose name the folder claims
    folder = tmp_path / "incoming" / "planted"
    folder.mkdir(parents=True)
    marker = tmp_path / "pwned"
    write_run_config(folder, {
        "name": "mine", "backend": "exec", "command": ["sh", "-c", f"echo pwned >> {marker}"],
        "cwd": str(folder), "env": {}, "restart": {"max_attempts": 1, "backoff_s": 1.0},
        "queue": {"after": str(other), "after_ok": False, "when_free": None},
        "notify": {"command": f"echo hook >> {marker}"}})
    write_status(folder, RunStatus(name="mine", run_dir=str(folder), state="stopped", backend="exec",
                                   command=["sh", "-c", "true"]))
    return folder, marker


def test_resume_refuses_a_folder_another_user_owns(tmp_path, monkeypatch, capsys):
    folder, marker = planted_folder(tmp_path)
    monkeypatch.setattr(ownership, "current_uid", lambda: os.geteuid() + 4242)  # the files are not "ours" now
    assert main(["resume", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "belongs to" in err and "--force" in err and err.count("\n") == 1
    time.sleep(0.5)
    assert not marker.exists() and read_status(folder).state == "stopped"
    assert all(e.path != str(folder) for e in index.entries())
    # the boot-time resume of interrupted runs never resumes such a folder either
    from yolotui.placement.service import resume_interrupted

    index.add(folder, "planted")
    write_status(folder, RunStatus(name="mine", run_dir=str(folder), state="running", backend="exec",
                                   command=["sh", "-c", "true"], supervisor_pid=999999))
    (result,) = resume_interrupted()
    assert not result.resumed and "belongs to" in result.message and not marker.exists()


def test_resume_shows_the_command_it_runs_and_keeps_the_folder_name(tmp_path, capsys):
    folder, marker = planted_folder(tmp_path)
    assert main(["resume", str(folder), "--json"]) == 0
    captured = capsys.readouterr()
    answer = json.loads(captured.out)
    assert answer["command"] == ["sh", "-c", f"echo pwned >> {marker}"]
    assert answer["notify_command"] == f"echo hook >> {marker}"
    assert f"runs: sh -c 'echo pwned >> {marker}'" in captured.err
    assert f"hook command from its run.yaml: echo hook >> {marker}" in captured.err
    wait_for(lambda: effective_state(folder) == "finished", timeout=30)
    names = {e.path: e.name for e in index.entries()}
    assert names[str(folder.resolve())] == "planted"  # not "mine", the name it claimed
    assert resolve_run("mine") == (tmp_path / "runs" / "mine").resolve()


def test_resume_cli_has_force_for_a_foreign_folder(tmp_path, monkeypatch, capsys):
    folder, marker = planted_folder(tmp_path)
    monkeypatch.setattr(ownership, "current_uid", lambda: os.geteuid() + 4242)
    assert main(["resume", str(folder), "--force"]) == 0
    assert "runs: sh -c" in capsys.readouterr().out
    wait_for(lambda: marker.exists() and "pwned" in marker.read_text(), timeout=30)


# ------------------------------------------------------------------------------------------ the index

def test_a_deeply_nested_index_row_is_skipped_not_a_traceback(tmp_path, yolotui_cmd, cli_env):
    run = ended_run(tmp_path / "runs" / "kept")
    with open(index.index_path(), "ab") as handle:
        handle.write(b"[" * 200_000 + b"\n" + b'{"path": ' * 100_000 + b"\n")
    assert [e.path for e in index.entries()] == [str(run.resolve())]
    assert "2 of 3 line(s) are not run records" in index.last_problem()
    done = subprocess.run([*yolotui_cmd, "ls"], env=cli_env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    assert "kept" in done.stdout and str(index.index_path()) in done.stderr


def test_garbage_index_is_named_not_taken_for_no_runs(capsys):
    index.index_path().parent.mkdir(parents=True, exist_ok=True)
    index.index_path().write_bytes(b"\x00\xff garbage\nnot json either\n")
    assert main(["ls"]) == 1
    captured = capsys.readouterr()
    assert "no runs yet" not in captured.out
    assert str(index.index_path()) in captured.err and "unreadable" in captured.err
    with pytest.raises(UserError, match="unreadable"):
        index.remove(Path("/nowhere"))  # never rewrite an index that could not be read
    assert index.index_path().read_bytes().startswith(b"\x00\xff garbage")


def test_an_index_over_the_size_cap_is_not_read(monkeypatch, capsys, tmp_path):
    ended_run(tmp_path / "runs" / "r")
    monkeypatch.setattr(index, "MAX_INDEX_BYTES", 64)
    assert index.entries() == [] and "over the" in index.last_problem()
    assert main(["ls"]) == 1
    assert "MiB" in capsys.readouterr().err
    with pytest.raises(UserError):
        index.remove(tmp_path / "runs" / "r")


def test_control_characters_in_names_are_printed_escaped(tmp_path, capsys):
    run = ended_run(tmp_path / "runs" / "evil", name="ev\x1b[2J\x1b]0;owned\x07il\nfake")
    assert main(["ls"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "ev\\x1b[2J\\x1b]0;owned\\x07il\\x0afake" in out
    assert run.is_dir()
