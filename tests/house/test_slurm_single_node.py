"""The Slurm health check on a real single-node Slurm (issue 28): munged, slurmctld and slurmd from Debian's
``slurm-wlm`` and ``munge`` packages, started as root in a temporary folder (their own key, socket, ports
and state; loopback only), a batch job that runs fleet/slurm/ctxlab-healthcheck.sh with the real ctxlab.

On this machine without a GPU, check writes its environment-error record and the job drains the node with
the reason ``ctxlab: cannot run: ...``; the script, run again with a holding result, resumes it. Skipped
with the reason where the packages are absent, where not root, or where a GPU is present (there check
would run the labs). With CTXLAB_RECORD_SLURM=PATH the log of the run is written to PATH
(labs/results/fleet/slurm-single-node.log holds one).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import RESULTS, gpu_absence

ROOT = Path(__file__).resolve().parents[2]
NEEDED = ["munged", "mungekey", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo"]
MISSING = [name for name in NEEDED if not shutil.which(name)]
pytestmark = [
    pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)} (apt-get install slurm-wlm munge)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="slurmd runs as root"),
    pytest.mark.skipif(not gpu_absence(), reason="a GPU is present: check would run the labs, not drain"),
]
WAIT = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def until(what: str, probe, timeout: float = WAIT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.5)
    pytest.fail(f"{what}: not within {timeout} s")


def test_a_batch_job_drains_the_node_that_cannot_run_and_a_holding_result_resumes_it(tmp_path):
    base = tmp_path
    host = socket.gethostname().split(".")[0]
    node_line = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    node_line = node_line.split(" UpTime")[0]
    conf = base / "slurm.conf"
    (base / "state").mkdir()
    (base / "spool").mkdir()
    conf.write_text("\n".join([
        "ClusterName=ctxlabtest", f"SlurmctldHost={host}(127.0.0.1)", f"SlurmctldPort={free_port()}",
        f"SlurmdPort={free_port()}", "AuthType=auth/munge", "CredType=cred/munge",
        f"AuthInfo=socket={base / 'munge.sock'}", "SlurmUser=root", "SlurmdUser=root",
        f"StateSaveLocation={base / 'state'}", f"SlurmdSpoolDir={base / 'spool'}",
        f"SlurmctldPidFile={base / 'slurmctld.pid'}", f"SlurmdPidFile={base / 'slurmd.pid'}",
        f"SlurmctldLogFile={base / 'slurmctld.log'}", f"SlurmdLogFile={base / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU", "ReturnToService=2", "MpiDefault=none",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        f"{node_line} State=UNKNOWN", "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""]))
    env = dict(os.environ, SLURM_CONF=str(conf))
    log: list[str] = [f"$ slurmd -V: {subprocess.run(['slurmd', '-V'], capture_output=True, text=True).stdout.strip()}"]

    def run(*argv: str) -> str:
        done = subprocess.run(list(argv), capture_output=True, text=True, env=env, timeout=30)
        log.append(f"$ {' '.join(argv)}\n{done.stdout}{done.stderr}".rstrip())
        return done.stdout

    subprocess.run(["mungekey", "--create", f"--keyfile={base / 'munge.key'}"], check=True, timeout=30)
    subprocess.run(["munged", "--force", f"--socket={base / 'munge.sock'}", f"--key-file={base / 'munge.key'}",
                    f"--log-file={base / 'munged.log'}", f"--pid-file={base / 'munged.pid'}",
                    f"--seed-file={base / 'munged.seed'}"], check=True, timeout=30)
    daemons: list[subprocess.Popen] = []
    try:
        daemons.append(subprocess.Popen(["slurmctld", "-D", "-f", str(conf)], env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        until("slurmctld", lambda: subprocess.run(["scontrol", "ping"], env=env, capture_output=True,
                                                  text=True).stdout.count("UP") > 0)
        daemons.append(subprocess.Popen(["slurmd", "-D", "-f", str(conf)], env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        node = node_line.split()[0].split("=")[1]
        until("the node idle", lambda: "idle" in run("sinfo", "-h", "-o", "%t"))
        (base / "bin").mkdir()
        wrapper = base / "bin" / "ctxlab"
        wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -m ctxlab \"$@\"\n")
        wrapper.chmod(0o755)
        result = base / "out" / "ctxlab.json"
        job = base / "job.sh"
        job.write_text("\n".join([
            "#!/bin/bash", f"export PATH={base / 'bin'}:$PATH PYTHONPATH={ROOT} SLURM_CONF={conf}",
            f"export CTXLAB_RESULT={result} CTXLAB_TEXTFILES={base / 'out'} CTXLAB_PYTHON={sys.executable}",
            f"mkdir -p {base / 'out'}", f"bash {ROOT / 'fleet' / 'slurm' / 'ctxlab-healthcheck.sh'}",
            'echo "health check exit $?"', ""]))
        run("sbatch", "-o", str(base / "job.log"), str(job))
        state = until("the node drained", lambda: "drain" in (s := run("sinfo", "-h", "-o", "%t %E")) and s)
        reason = run("scontrol", "show", "node", node)
        assert "Reason=ctxlab: cannot run: no-" in reason and "DRAIN" in reason, reason
        until("the job's log", lambda: "health check exit" in (base / "job.log").read_text()
              if (base / "job.log").exists() else False)
        log.append(f"--- job log\n{(base / 'job.log').read_text().rstrip()}")
        assert "ctxlab_up 0" in (base / "out" / "ctxlab.prom").read_text()
        assert state
        # the node's next health check finds a holding result: ctxlab resumes the drain it made
        shutil.copy(RESULTS / "check.json", result)
        done = subprocess.run(["bash", str(ROOT / "fleet" / "slurm" / "ctxlab-healthcheck.sh")], capture_output=True,
                              text=True, timeout=60, env=dict(env, PYTHONPATH=str(ROOT), CTXLAB_RESULT=str(result),
                                                              CTXLAB_PYTHON=sys.executable, NODENAME=node))
        log.append(f"$ ctxlab-healthcheck.sh (holding result)\n{done.stdout}{done.stderr}".rstrip())
        until("the node resumed", lambda: run("sinfo", "-h", "-o", "%t").strip() == "idle")
        run("sinfo", "-R")
    finally:
        for proc in reversed(daemons):
            proc.send_signal(signal.SIGTERM)
        for proc in reversed(daemons):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        subprocess.run(["munged", f"--socket={base / 'munge.sock'}", "--stop"], capture_output=True, timeout=30)
        record = os.environ.get("CTXLAB_RECORD_SLURM")
        if record:
            Path(record).write_text("\n".join(line.replace(str(base), "$TMP").replace(str(ROOT), "$REPO")
                                              for line in log) + "\n")
