"""The fleet's pieces without ssh: hosts in settings.yaml, quoting for the remote shell, the version handshake's
wording, reachability backoff, the forwarded command line, and `yolotui watch --json` on local runs."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time

import pytest
from tui_fixtures import make_run

from yolotui.commands._remote import remote_argv
from yolotui.errors import UserError
from yolotui.fleet import hosts as fleet_hosts
from yolotui.fleet.hosts import Host, add_host, load_hosts, remove_host, split_remote
from yolotui.fleet.probe import compatibility
from yolotui.fleet.reach import Reach, remember
from yolotui.fleet.remote_runs import parse_runs
from yolotui.fleet.ssh import control_dir, remote_line, ssh_argv

HOSTILE = ["a;touch PWNED", "b'; touch PWNED; echo '", 'c"$(touch PWNED)"', "d `touch PWNED`", "e\ntouch PWNED",
           "f && touch PWNED", "g|touch PWNED", "h $HOME *", "-x"]


def test_hosts_are_added_listed_and_removed_in_settings_yaml(yolotui_home):
    settings = yolotui_home / "config" / "settings.yaml"
    settings.parent.mkdir(parents=True)
    settings.write_text("theme: yolo-night\n")
    add_host("gpu1", "alice@gpu1.example.org")
    add_host("lab", None, "~/venv/bin/yolotui")
    assert load_hosts() == [Host("gpu1", "alice@gpu1.example.org"), Host("lab", "lab", "~/venv/bin/yolotui")]
    assert "theme: yolo-night" in settings.read_text()  # the other settings are kept
    assert "password" not in settings.read_text()
    remove_host("gpu1")
    assert [h.name for h in load_hosts()] == ["lab"]
    with pytest.raises(UserError, match="no host called 'gpu1'.*configured: lab"):
        remove_host("gpu1")
    remove_host("lab")
    assert load_hosts() == [] and "hosts" not in settings.read_text()


@pytest.mark.parametrize("target", ["-oProxyCommand=touch PWNED", "a b", "x\ny"])
def test_a_target_ssh_would_read_as_an_option_or_two_words_is_refused(target):
    with pytest.raises(UserError, match="ssh target"):
        add_host("gpu1", target)


@pytest.mark.parametrize("name", ["local", "-x", "a b", "a;b", "", "x" * 65])
def test_bad_host_names_are_refused(name):
    with pytest.raises(UserError, match="host name"):
        add_host(name, "somewhere")


def test_host_colon_run_is_remote_only_for_a_configured_host():
    add_host("gpu1", "gpu1")
    host, run = split_remote("gpu1:exp 3")
    assert host is not None and host.name == "gpu1" and run == "exp 3"
    assert split_remote("other:exp") == (None, "other:exp")  # not a host: a local run name
    assert split_remote("local:exp") == (None, "exp")
    assert split_remote("/runs/exp") == (None, "/runs/exp")


@pytest.mark.parametrize("name", HOSTILE)
def test_every_remote_argument_reaches_the_remote_program_as_one_piece_of_data(tmp_path, name):
    """The remote line, run by a real shell as sshd would, hands each argument over verbatim; nothing runs."""
    host = Host("h", "h", f"{shlex.quote(sys.executable)} -c 'import json,sys; print(json.dumps(sys.argv[1:]))'")
    line = remote_line(host, ["stop", name, "--grace", "5"])
    done = subprocess.run(["sh", "-c", line], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["stop", name, "--grace", "5"]
    assert list(tmp_path.iterdir()) == []  # no PWNED


def test_the_ssh_command_line_multiplexes_never_prompts_and_keeps_its_sockets_private():
    argv = ssh_argv(Host("h", "alice@h"), ["ls", "--json"])
    joined = " ".join(argv)
    for option in ("BatchMode=yes", "ControlMaster=auto", "ControlPersist=", "ConnectTimeout=", "ServerAliveInterval="):
        assert option in joined
    assert argv[-3:] == ["alice@h", "--", "yolotui ls --json"]  # `--`: the target is never read as an option
    folder = control_dir()
    assert folder.stat().st_mode & 0o777 == 0o700


def test_version_mismatch_says_which_side_is_older_and_what_works():
    assert compatibility("0.1.0", "0.1.0") == ""
    older = compatibility("0.2.0", "0.1.0")
    assert "older than this 0.2.0" in older and "pip install -U yolotui" in older
    newer = compatibility("0.1.0", "0.3.1")
    assert "newer than this 0.1.0" in newer and "ls, watch, stop, resume and train work" in newer
    assert "no version" in compatibility("0.1.0", "garbage")


def test_an_unreachable_host_is_retried_with_backoff_and_comes_back():
    reach = Reach("gpu2")
    start = time.mktime((2026, 1, 1, 14, 2, 0, 0, 0, -1))
    reach.record(False, "refused", now=start)
    assert not reach.due(start + 1) and reach.due(start + 5)
    tries = []
    for i in range(1, 8):
        reach.record(False, "refused", now=start + i)
        tries.append(reach.next_try - (start + i))
    assert tries == [10, 20, 40, 80, 120, 120, 120]  # doubling, capped
    assert reach.text(start + 10).startswith("gpu2 unreachable since 14:02, retrying in")
    reach.record(True, now=start + 200)
    assert reach.ok and reach.text() == "gpu2 ok" and reach.failures == 0


def test_unreachable_since_is_remembered_between_commands():
    first = remember({"a": False, "b": True}, now=1000.0)
    assert first == {"a": 1000.0}
    assert remember({"a": False, "b": False}, now=2000.0) == {"a": 1000.0, "b": 2000.0}
    assert remember({"a": True}, now=3000.0) == {}
    assert remember({"a": False}, now=4000.0) == {"a": 4000.0}


def test_the_forwarded_command_line_drops_host_and_unwraps_host_colon_run():
    argv = ["stop", "--grace", "5", "gpu1:a;b", "--host", "gpu1"]
    assert remote_argv(argv, "stop", "a;b", "gpu1:a;b") == ["stop", "--grace", "5", "a;b"]
    assert remote_argv(["train", "--host=gpu1", "--epochs", "3", "--when-free"], "train", None, None) == [
        "train", "--epochs", "3", "--when-free"]


def test_a_hosts_ls_answer_that_is_not_a_run_list_is_refused():
    assert parse_runs('[{"name": "a", "state": "running"}, 3, {"name": 1}]') == [{"name": "a", "state": "running"}]
    with pytest.raises(ValueError):
        parse_runs('{"name": "a"}')


def _watch(run, *extra, timeout=60, cli_env=None):
    return subprocess.run([sys.executable, "-m", "yolotui", "watch", str(run), "--json", *extra], env=cli_env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_the_home_source_tags_remote_runs_and_says_how_each_host_is():
    from yolotui.fleet.probe import gpus_text
    from yolotui.fleet.remote_runs import HostRuns
    from yolotui.tui.fleet_source import FleetSource, remote_key

    source = FleetSource([Host("gpu1", "gpu1"), Host("gpu2", "gpu2")])
    assert source.status_line() == "hosts: local ok · gpu1 connecting… · gpu2 connecting…"
    at = time.mktime((2026, 1, 1, 14, 2, 0, 0, 0, -1))
    h100 = {"name": "H100", "memory_used_mb": 40960, "memory_total_mb": 81920, "utilization_pct": 90}
    source.apply([HostRuns("gpu1", [{"name": "exp;1", "state": "running", "epoch": 3, "bogus": 1}],
                           gpus=gpus_text([h100, dict(h100, utilization_pct=10)])),
                  HostRuns("gpu2", error="Connection refused", unreachable=True)], now=at)
    line = source.status_line(now=at + 1)
    assert "gpu1 ok (2x H100 (50% util, 80/160 GiB))" in line
    assert "gpu2 unreachable since 14:02, retrying in 4 s" in line
    [run] = source.summaries()
    assert run.name == "gpu1:exp;1" and run.state == "running" and run.epoch == 3
    hostile = {"name": "x", "state": "running", "epoch": "3; rm", "best_map": "nan", "epochs": float("nan"),
               "device": ["cuda"], "started": True, "slurm": "job"}
    source.apply([HostRuns("gpu2", parse_runs(json.dumps([hostile])))], now=at + 2)
    odd = [s for s in source.summaries() if s.name == "gpu2:x"][0]
    assert (odd.epoch, odd.best_map, odd.epochs, odd.device, odd.started, odd.slurm) == (None,) * 6
    assert remote_key(run.path) == ("gpu1", "exp;1") and remote_key("/runs/exp") is None
    source.apply([HostRuns("gpu2", error="yolotui not found there (yolotui); pip install yolotui")], now=at + 3)
    assert "gpu2: yolotui not found there (yolotui); pip install yolotui" in source.status_line(now=at + 3)
    source.apply([HostRuns("gpu1", [{"name": "exp;1", "state": "running"}], version="0.0.9")], now=at + 4)
    assert "gpu1 ok (2x H100 (50% util, 80/160 GiB)) [yolotui 0.0.9, older: see yolotui hosts ls]" in (
        source.status_line(now=at + 4))
    source.apply([HostRuns("gpu1", error="timeout", unreachable=True)], now=at + 10)
    assert [s.name for s in source.summaries()] == ["gpu1:exp;1", "gpu2:x"]  # the last reading stays while it is away


def test_a_remote_row_shows_its_checkpoint_age_as_the_host_read_it():
    from yolotui.fleet.remote_runs import HostRuns
    from yolotui.tui.fleet_source import FleetSource
    from yolotui.tui.home_data import HomeRow
    from yolotui.tui.widgets.run_cells import COLUMNS, cells

    source = FleetSource([Host("gpu1", "gpu1")])
    source.apply([HostRuns("gpu1", parse_runs(json.dumps([{"name": "a", "state": "running", "checkpoint_age": 125},
                                                          {"name": "b", "state": "running"}])))], now=time.time())
    shown = {s.name: cells(HomeRow(s, None), time.time())[COLUMNS.index("checkpoint")].plain
             for s in source.summaries()}
    assert shown == {"gpu1:a": "2m remote", "gpu1:b": "none"}  # was "none" for both: the column read local files


def test_watch_json_starts_from_the_tail_of_a_huge_events_file_and_ends_with_the_run(tmp_path, cli_env):
    run = make_run(tmp_path / "runs", "big", state="finished", done_epochs=3)
    line = json.dumps({"ts": 1.0, "type": "batch", "attempt": 1, "epoch": 2, "batch": 1, "pad": "x" * 200})
    with open(run.path / "events.jsonl", "a") as handle:  # ~25 MB of batch events: never read whole
        for _ in range(100_000):
            handle.write(line + "\n")
    done = _watch(run.path, "--tail", "5", cli_env=cli_env)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(x) for x in done.stdout.splitlines()]
    assert lines[0]["type"] == "status" and lines[0]["state"] == "finished" and lines[0]["name"] == "big"
    assert len(lines) == 7 and all(x["type"] == "batch" for x in lines[1:6])
    assert lines[-1] == {"type": "end", "state": "finished", "name": "big"}


def test_watch_json_follows_a_live_run_until_it_ends(tmp_path, cli_env):
    started = subprocess.run([sys.executable, "-m", "yolotui", "exec", "--name", "live", "--project",
                              str(tmp_path / "runs"), "--json", "--", sys.executable, "-c",
                              "import time; time.sleep(2)"], env=cli_env, capture_output=True, text=True, timeout=60)
    assert started.returncode == 0, started.stderr
    done = _watch(tmp_path / "runs" / "live", cli_env=cli_env)
    lines = [json.loads(x) for x in done.stdout.splitlines()]
    assert lines[0]["type"] == "status"
    assert lines[-1]["type"] == "end" and lines[-1]["state"] == "finished"


def test_watch_ends_when_its_reader_closes_stdin(tmp_path, cli_env):
    run = make_run(tmp_path / "runs", "held", state="running", hold_lock=True)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "yolotui", "watch", str(run.path), "--json"], env=cli_env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        first = json.loads(proc.stdout.readline())
        assert first["type"] == "status" and first["state"] == "running"
        proc.stdin.close()  # as sshd does when the client's side of the link is gone
        assert proc.wait(timeout=30) == 0
    finally:
        run.release()


def test_no_hosts_configured_means_the_local_machine_alone(yolotui_home):
    assert load_hosts() == []
    settings = yolotui_home / "config" / "settings.yaml"
    settings.parent.mkdir(parents=True)
    settings.write_text("hosts: [1, 2]\n")
    assert load_hosts() == []
    with pytest.raises(UserError, match="hosts: expected a mapping"):
        fleet_hosts.load_hosts(strict=True)
