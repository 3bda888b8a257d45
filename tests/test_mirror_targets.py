"""The mirror's targets: a local folder, an fsspec URL (memory:// in-process, file:// through the copying child) and
rsync over ssh to a real sshd on 127.0.0.1; what TARGET means; the copy order that keeps a mirror restorable;
and `yolotui restore` refusing a damaged mirror or a live run with one line."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from spotkit import cli
from sshkit import start_sshd

from yolotui.errors import UserError
from yolotui.mirror import pull
from yolotui.mirror.push import push, store_for
from yolotui.mirror.snapshot import describes, extend_copy, read_manifest, sha256_file, take
from yolotui.mirror.target import FSSPEC, LOCAL, RSYNC, check_usable, parse_target, split_run
from yolotui.runs import lock

FILES = ("run.yaml", "opt.yaml", "hyp.yaml", "results.csv", "events.jsonl", "status.json")


def _checkpoint(run_dir: Path, name: str, size: int = 30000, step: int = 1) -> str:
    """Write weights/NAME and its manifest as the trainer does; returns the sha256."""
    data = os.urandom(size)
    digest = hashlib.sha256(data).hexdigest()
    (run_dir / "weights").mkdir(parents=True, exist_ok=True)
    (run_dir / "weights" / name).write_bytes(data)
    (run_dir / "weights" / f"{name}.json").write_text(json.dumps(
        {"sha256": digest, "bytes": size, "epoch": 0, "step": step, "epochs": 2}))
    return digest


def _fake_run(folder: Path, name: str = "exp") -> Path:
    run_dir = folder / name
    (run_dir / "weights").mkdir(parents=True)
    for file_name in FILES:
        (run_dir / file_name).write_text(f"{file_name}: {{}}\n" if file_name.endswith("yaml") else "{}\n")
    (run_dir / "opt.yaml").write_text(f"save_dir: {run_dir}\nepochs: 2\n")
    (run_dir / "run.yaml").write_text(f"name: {name}\nbackend: exec\ncommand: [true]\ncwd: {run_dir}\n")
    _checkpoint(run_dir, "last.pt")
    _checkpoint(run_dir, "best.pt")
    return run_dir


def _copy(run_dir: Path, target_text: str):
    snapshot = take(run_dir)
    try:
        return push(snapshot, store_for(parse_target(target_text), run_dir.name))
    finally:
        snapshot.discard()


def _assert_mirrors(run_dir: Path, mirrored: Path, restored: bool = False) -> None:
    for name in ("last.pt", "best.pt"):
        checkpoint = mirrored / "weights" / name
        assert sha256_file(checkpoint) == sha256_file(run_dir / "weights" / name)
        assert describes(read_manifest(checkpoint.with_name(name + ".json"))[0], sha256_file(checkpoint),
                         checkpoint.stat().st_size)
    for file_name in FILES:
        if restored and file_name in ("run.yaml", "opt.yaml", "status.json"):  # pointed at the new folder
            assert str(mirrored) in (mirrored / file_name).read_text() or file_name == "status.json"
            continue
        assert (mirrored / file_name).read_bytes() == (run_dir / file_name).read_bytes()


# ------------------------------------------------------------------------------------------------- TARGET

def test_target_kinds_as_rsync_tells_them_apart(tmp_path):
    assert parse_target("s3://bucket/runs").kind == FSSPEC
    assert parse_target("file:///mnt/x").kind == FSSPEC
    assert parse_target("box:/data/mirror").kind == RSYNC
    assert parse_target("me@box:mirror").remote_path == "mirror"
    assert parse_target("box:~/m").remote_path == "m"
    local = parse_target("mirror/x", base=tmp_path)
    assert local.kind == LOCAL and local.location == str(tmp_path / "mirror" / "x")
    assert parse_target("./a:b", base=tmp_path).kind == LOCAL  # a slash before the colon: a path
    for text, kind, where, name in [("box:/data/m/exp", RSYNC, "box:/data/m", "exp"), ("box:exp", RSYNC, "box:", "exp"),
                                    ("box:/exp", RSYNC, "box:/", "exp"), ("s3://b/p/exp", FSSPEC, "s3://b/p", "exp"),
                                    ("/mnt/m/exp", LOCAL, "/mnt/m", "exp")]:
        target, run = split_run(text)
        assert (target.kind, target.location, run) == (kind, where, name)
        assert target.join(run) == text


@pytest.mark.parametrize("text", ["", "s3://", "-x:y", "a\nb", "9bad://x"])
def test_a_bad_target_is_one_line(text):
    with pytest.raises(UserError) as caught:
        target = parse_target(text)
        check_usable(target)
    assert "\n" not in str(caught.value)


def test_memory_urls_are_refused_for_a_run_and_unknown_protocols_named():
    with pytest.raises(UserError, match="one process"):
        check_usable(parse_target("memory://x"))
    with pytest.raises(UserError, match="no protocol"):
        check_usable(parse_target("nosuchproto://x/y"))


# ------------------------------------------------------------------------------------------------- local

def test_local_mirror_copies_checks_and_keeps_only_the_latest(tmp_path):
    run_dir = _fake_run(tmp_path / "runs")
    mirror = tmp_path / "mirror"
    first = _copy(run_dir, str(mirror))
    assert sorted(first.sent) == ["best.pt", "last.pt"]
    _assert_mirrors(run_dir, mirror / "exp")
    _checkpoint(run_dir, "last.pt", size=31000, step=3)  # a newer checkpoint; best.pt unchanged
    second = _copy(run_dir, str(mirror))
    assert second.sent == ["last.pt"] and second.unchanged == ["best.pt"] and second.step == 3
    _assert_mirrors(run_dir, mirror / "exp")
    names = sorted(str(p.relative_to(mirror)) for p in mirror.rglob("*") if p.is_file())
    assert names == sorted(["exp/" + f for f in FILES] + [f"exp/weights/{n}" for n in
                                                           ("last.pt", "last.pt.json", "best.pt", "best.pt.json")])
    assert not (run_dir / ".mirror" / "stage").exists()  # the stage is gone after each copy


def test_extend_copy_writes_only_the_new_complete_lines_and_rewrites_a_cut_back_file(tmp_path):
    source, copy = tmp_path / "events.jsonl", tmp_path / "copy.jsonl"
    assert extend_copy(source, copy) is None and not copy.exists()
    source.write_bytes(b"".join(b'{"epoch": %d, "pad": "%s"}\n' % (i, b"x" * 200) for i in range(100)))
    assert extend_copy(source, copy) == source.stat().st_size and copy.read_bytes() == source.read_bytes()
    inode = copy.stat().st_ino
    with open(source, "ab") as handle:
        handle.write(b'{"epoch": 100}\n{"epoch": 10')  # a line being written: not sent yet
    assert extend_copy(source, copy) == len(b'{"epoch": 100}\n') and copy.stat().st_ino == inode
    assert extend_copy(source, copy) == 0
    with open(source, "ab") as handle:
        handle.write(b'1}\n')
    assert extend_copy(source, copy) == len(b'{"epoch": 101}\n') and copy.read_bytes() == source.read_bytes()
    cut = source.read_bytes()[: 50 * 228]  # a resume dropped what came after its checkpoint, then went on
    source.write_bytes(cut + b'{"epoch": 50, "resumed": true}\n')
    assert extend_copy(source, copy) == source.stat().st_size and copy.read_bytes() == source.read_bytes()
    assert copy.stat().st_ino != inode  # rewritten whole, atomically
    inode = copy.stat().st_ino
    source.write_bytes(cut + b"".join(b'{"epoch": %d, "again": "%s"}\n' % (i, b"z" * 300) for i in range(50, 120)))
    assert source.stat().st_size > copy.stat().st_size  # cut back, then grown past the copy: not a prefix of it
    assert extend_copy(source, copy) == source.stat().st_size and copy.read_bytes() == source.read_bytes()
    assert copy.stat().st_ino != inode
    big = b"".join(b'{"epoch": %d, "pad": "%s"}\n' % (i, b"w" * 1000) for i in range(3000))  # ~3 MB
    source.write_bytes(big + b"p" * 100_000)  # and a 100 KB line still being written
    assert extend_copy(source, copy) == len(big) and copy.read_bytes() == big
    link = tmp_path / "link.jsonl"
    link.symlink_to(source)
    with pytest.raises(UserError, match="plain file"):
        extend_copy(link, tmp_path / "other.jsonl")


def test_a_long_runs_mirror_sends_what_each_epoch_added_not_its_history(tmp_path):
    run_dir = _fake_run(tmp_path / "runs")
    mirror = tmp_path / "mirror"
    events = run_dir / "events.jsonl"
    events.write_bytes(b"".join(b'{"type": "epoch", "epoch": %d, "pad": "%s"}\n' % (i, b"y" * 900)
                                for i in range(300)))  # 300 epochs of history, ~280 KB
    _copy(run_dir, str(mirror))
    kept, copied = run_dir / ".mirror" / "grown" / "events.jsonl", mirror / "exp" / "events.jsonl"
    inodes = (kept.stat().st_ino, copied.stat().st_ino)
    for epoch in (300, 301):
        with open(events, "ab") as handle:
            handle.write(b'{"type": "epoch", "epoch": %d}\n' % epoch)
        with open(run_dir / "results.csv", "ab") as handle:
            handle.write(b"%d,0.5\n" % epoch)
        _copy(run_dir, str(mirror))
        assert (kept.stat().st_ino, copied.stat().st_ino) == inodes  # extended in place, never rewritten
        _assert_mirrors(run_dir, mirror / "exp")
    assert not (run_dir / ".mirror" / "stage").exists()


def test_snapshot_between_the_trainers_two_renames_takes_the_pending_manifest(tmp_path):
    run_dir = _fake_run(tmp_path / "runs")
    old = (run_dir / "weights" / "last.pt.json").read_bytes()
    _checkpoint(run_dir, "last.pt", size=32000, step=5)  # the new checkpoint is in place ...
    new = (run_dir / "weights" / "last.pt.json").read_bytes()
    (run_dir / "weights" / "last.pt.json.next").write_bytes(new)  # ... its manifest still pending
    (run_dir / "weights" / "last.pt.json").write_bytes(old)
    snapshot = take(run_dir)
    try:
        assert snapshot.last().manifest["step"] == 5
    finally:
        snapshot.discard()


def test_a_copy_cut_short_before_the_manifest_rename_is_settled_when_restored(tmp_path):
    run_dir = _fake_run(tmp_path / "runs")
    mirror = tmp_path / "mirror"
    _copy(run_dir, str(mirror))
    stale = (mirror / "exp" / "weights" / "last.pt.json").read_bytes()
    _checkpoint(run_dir, "last.pt", size=33000, step=7)
    snapshot = take(run_dir)
    store = store_for(parse_target(str(mirror)), "exp")
    staged = snapshot.last()
    store.put(snapshot.stage, [staged.pending_rel, staged.rel])  # cut here: checkpoint in place, manifest pending
    snapshot.discard()
    assert (mirror / "exp" / "weights" / "last.pt.json").read_bytes() == stale
    into = tmp_path / "back"
    pull.fetch(parse_target(str(mirror)), "exp", into)
    assert pull.settle(into) and pull.problems(into) == []
    assert read_manifest(into / "weights" / "last.pt.json")[0]["step"] == 7


# ------------------------------------------------------------------------------------------------- fsspec

def test_fsspec_memory_target_round_trip(tmp_path):
    run_dir = _fake_run(tmp_path / "runs")
    report = _copy(run_dir, "memory://bucket/mirror")
    assert sorted(report.sent) == ["best.pt", "last.pt"]
    assert _copy(run_dir, "memory://bucket/mirror").sent == []  # unchanged checkpoints are not sent again
    import fsspec

    stored = fsspec.filesystem("memory").find("/bucket/mirror/exp")
    assert not [p for p in stored if p.endswith(".mirror-tmp") or p.endswith(".next")]
    into = tmp_path / "back"
    found = pull.fetch(parse_target("memory://bucket/mirror"), "exp", into)
    assert "weights/last.pt" in found and pull.problems(into) == []
    _assert_mirrors(run_dir, into)


def test_fsspec_file_url_through_the_copying_child(tmp_path, cli_env):
    run_dir = _fake_run(tmp_path / "runs")
    url = f"file://{tmp_path / 'bucket'}"
    done = subprocess.run([sys.executable, "-m", "yolotui.mirror.copy", str(run_dir), url, "--tries", "1"],
                          env=cli_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads((run_dir / ".mirror" / "result.json").read_text())
    assert result["ok"] and result["where"] == f"{url}/exp" and sorted(result["sent"]) == ["best.pt", "last.pt"]
    _assert_mirrors(run_dir, tmp_path / "bucket" / "exp")


# ------------------------------------------------------------------------------------------------- rsync

@pytest.fixture
def sshd(tmp_path, monkeypatch):
    server = start_sshd(tmp_path / "sshd")
    monkeypatch.setenv("RSYNC_RSH", server.rsh)
    yield server
    server.stop()


def test_rsync_over_ssh_to_a_real_sshd(tmp_path, sshd, cli_env):
    run_dir = _fake_run(tmp_path / "runs")
    remote = tmp_path / "remote disk"  # a space in the path: quoted on the way through ssh
    target = f"{sshd.login}:{remote}"
    env = {**cli_env, "RSYNC_RSH": sshd.rsh}
    done = subprocess.run([sys.executable, "-m", "yolotui.mirror.copy", str(run_dir), target, "--tries", "1"],
                          env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    _assert_mirrors(run_dir, remote / "exp")
    _checkpoint(run_dir, "last.pt", size=34000, step=9)
    report = _copy(run_dir, target)
    assert report.sent == ["last.pt"] and report.unchanged == ["best.pt"]
    _assert_mirrors(run_dir, remote / "exp")
    assert not list((remote / "exp").rglob("*.next"))
    restored = cli(env, "restore", f"{target}/exp", "--project", str(tmp_path / "elsewhere"))
    assert restored.returncode == 0, restored.stdout + restored.stderr
    _assert_mirrors(run_dir, tmp_path / "elsewhere" / "exp", restored=True)


def test_rsync_to_a_host_that_refuses_says_why_in_one_line(tmp_path, sshd):
    run_dir = _fake_run(tmp_path / "runs")
    with pytest.raises(UserError) as caught:
        _copy(run_dir, f"nobody@127.0.0.1:{tmp_path / 'x'}")
    assert "nobody@127.0.0.1" in str(caught.value) and "\n" not in str(caught.value)


# ------------------------------------------------------------------------------------------------- restore refusals

def test_restore_refuses_a_mirror_whose_checkpoint_does_not_match_its_manifest(tmp_path, cli_env):
    run_dir = _fake_run(tmp_path / "runs")
    mirror = tmp_path / "mirror"
    _copy(run_dir, str(mirror))
    damaged = mirror / "exp" / "weights" / "last.pt"
    damaged.write_bytes(damaged.read_bytes()[:-10] + b"0123456789")
    done = cli(cli_env, "restore", str(mirror / "exp"), "--project", str(tmp_path / "new"))
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not match its manifest" in lines[0] and "nothing was restored" in lines[0]
    assert not (tmp_path / "new" / "exp").exists() and not list((tmp_path / "new").glob(".*"))


def test_restore_refuses_over_a_live_run_and_a_folder_in_use(tmp_path, cli_env):
    run_dir = _fake_run(tmp_path / "runs")
    _copy(run_dir, str(tmp_path / "mirror"))
    fd = lock.claim(run_dir, "a test's supervisor")
    try:
        done = cli(cli_env, "restore", str(tmp_path / "mirror" / "exp"), "--project", str(tmp_path / "runs"))
    finally:
        lock.release(fd)
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1
    assert "is a live run" in done.stderr and "a test's supervisor" in done.stderr
    again = cli(cli_env, "restore", str(tmp_path / "mirror" / "exp"), "--project", str(tmp_path / "runs"))
    assert again.returncode != 0 and "already holds files" in again.stderr
    forced = cli(cli_env, "restore", str(tmp_path / "mirror" / "exp"), "--project", str(tmp_path / "runs"), "--force")
    assert forced.returncode == 0, forced.stderr


def test_restore_of_a_name_the_mirror_does_not_hold_is_one_line(tmp_path, cli_env):
    (tmp_path / "mirror").mkdir()
    done = cli(cli_env, "restore", str(tmp_path / "mirror" / "nope"), "--project", str(tmp_path / "new"))
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1
    assert "no mirrored run there" in done.stderr


def test_a_mirror_folder_of_another_run_of_the_same_name_is_never_overwritten(tmp_path):
    first, second = _fake_run(tmp_path / "project-a"), _fake_run(tmp_path / "project-b")  # both named exp
    (first / "status.json").write_text(json.dumps({"name": "exp", "started": 1000.0}))
    (second / "status.json").write_text(json.dumps({"name": "exp", "started": 2000.0}))
    _copy(first, str(tmp_path / "mirror"))
    with pytest.raises(UserError, match="holds another run of this name"):
        _copy(second, str(tmp_path / "mirror"))
    _assert_mirrors(first, tmp_path / "mirror" / "exp")  # untouched
    _checkpoint(first, "last.pt", step=4)
    assert _copy(first, str(tmp_path / "mirror")).sent == ["last.pt"]  # the same run goes on mirroring


def test_a_mirror_onto_the_run_folder_itself_is_refused(tmp_path):
    from yolotui.mirror.copy import copy_with_retries

    run_dir = _fake_run(tmp_path / "runs")
    before = (run_dir / "events.jsonl").read_bytes()
    result = copy_with_retries(run_dir, str(tmp_path / "runs"), tries=1, log=lambda line: None)
    assert not result["ok"] and "would be the run folder itself" in result["error"]
    assert (run_dir / "events.jsonl").read_bytes() == before
