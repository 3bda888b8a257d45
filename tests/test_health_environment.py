"""Environment probe (cached, in a subprocess), its comparison with the run, and logind's logout policy."""

from __future__ import annotations

from yolotui.health import environment
from yolotui.health.environment import compare_environment, probe_environment, recorded_environment
from yolotui.placement.logind import AT_RISK, SCOPE, SETSID, check_logind, kill_user_processes_from_conf

CURRENT = {"torch": "2.14.1+cu130", "torchvision": "0.29.1", "cuda": "13.0", "cuda_available": True,
           "device_count": 1, "devices": [{"name": "H200"}], "error": None}


def test_probe_runs_once_then_comes_from_the_cache(monkeypatch):
    calls = []

    def fake_probe(timeout=0, python=None):
        calls.append(1)
        return dict(CURRENT)

    monkeypatch.setattr(environment, "run_probe", fake_probe)
    first, cached_first = probe_environment()
    second, cached_second = probe_environment()
    assert first == second == CURRENT
    assert (cached_first, cached_second) == (False, True) and len(calls) == 1
    probe_environment(refresh=True)
    assert len(calls) == 2


def test_real_probe_subprocess_reports_torch():
    import torch

    probe = environment.run_probe()
    assert probe["torch"] == str(torch.__version__)
    assert probe["cuda_available"] == torch.cuda.is_available()


def test_versions_and_gpu_compared_with_the_run():
    recorded = recorded_environment({"torch": "2.13.0", "torchvision": "0.29.1"},
                                    {"world_size": 2, "devices": ["cuda:0", "cuda:1"]})
    issues = {i.what: i for i in compare_environment(recorded, CURRENT)}
    assert issues["torch"].severity == "warning" and issues["torch"].recorded == "2.13.0"
    assert "torchvision" not in issues
    assert issues["gpus"].recorded == 2 and issues["gpus"].now == 1
    no_gpu = dict(CURRENT, cuda_available=False, device_count=0, devices=[])
    gpu_issue = {i.what: i for i in compare_environment(recorded, no_gpu)}["gpu"]
    assert gpu_issue.severity == "error" and "CPU" in gpu_issue.advice
    patch_only = {i.what: i for i in compare_environment({"torch": "2.14.0"}, CURRENT)}
    assert patch_only["torch"].severity == "info"


def fake_runner(outputs):
    def run(argv):
        key = " ".join(argv[:2])
        return outputs.get(key, (1, "Failed to connect to bus"))
    return run


def test_logind_kill_no_means_setsid(tmp_path):
    info = check_logind("alice", runner=fake_runner({"loginctl show-session": (0, "KillUserProcesses=no")}),
                        linger_dir=str(tmp_path))
    assert info.kill_user_processes is False and info.strategy == SETSID and not info.needs_scope


def test_logind_kill_yes_with_linger_and_scope_uses_systemd_run(tmp_path):
    runner = fake_runner({"loginctl show-session": (0, "KillUserProcesses=yes"),
                          "loginctl show-user": (0, "Linger=yes"), "systemd-run --user": (0, "")})
    info = check_logind("alice", runner=runner, linger_dir=str(tmp_path))
    assert info.strategy == SCOPE and info.needs_scope and "systemd-run --user --scope" in info.advice


def test_logind_kill_yes_without_linger_advises_enable_linger(tmp_path):
    runner = fake_runner({"loginctl show-session": (0, "KillUserProcesses=yes"),
                          "loginctl show-user": (0, "Linger=no"), "systemd-run --user": (0, "")})
    info = check_logind("alice", runner=runner, linger_dir=str(tmp_path))
    assert info.strategy == AT_RISK and "loginctl enable-linger alice" in info.advice


def test_logind_falls_back_to_conf_files_and_linger_dir(tmp_path):
    conf = tmp_path / "logind.conf"
    conf.write_text("[Login]\n#KillUserProcesses=no\nKillUserProcesses=yes\n")
    dropins = tmp_path / "logind.conf.d"
    dropins.mkdir()
    (dropins / "90-keep.conf").write_text("[Login]\nKillUserProcesses=no\n")
    assert kill_user_processes_from_conf([str(conf)], []) == (True, str(conf))
    assert kill_user_processes_from_conf([str(conf)], [str(dropins)])[0] is False
    linger = tmp_path / "linger"
    linger.mkdir()
    (linger / "bob").touch()
    info = check_logind("bob", runner=fake_runner({}), linger_dir=str(linger), conf_files=[str(conf)], conf_dirs=[])
    assert info.kill_user_processes is True and info.linger is True
    assert info.scope_usable is False and info.strategy == AT_RISK


def test_logind_on_this_machine_does_not_crash():
    info = check_logind()
    assert info.strategy in (SETSID, SCOPE, AT_RISK) and info.advice


def test_a_cpu_run_is_not_flagged_for_missing_gpu():
    recorded = recorded_environment({"torch": "2.14.1+cu130"}, {"world_size": 1, "devices": ["cpu"]})
    no_gpu = dict(CURRENT, cuda_available=False, device_count=0, devices=[])
    issues = {i.what: i for i in compare_environment(recorded, no_gpu)}
    assert issues["gpu"].severity == "info" and "gpus" not in issues
    gpu_run = recorded_environment(None, {"world_size": 1, "devices": ["NVIDIA H200"]})
    assert {i.what: i for i in compare_environment(gpu_run, no_gpu)}["gpu"].severity == "error"
