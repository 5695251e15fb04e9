"""A real scrape (issue 28): node_exporter's textfile collector reads ctxlab's metrics files and Prometheus
scrapes them; the series are read back through Prometheus' HTTP API.

Two node_exporters stand for two nodes of a fleet: one with the metrics of the run recorded on an H200
(labs/results/check.json), one with this machine's own ``ctxlab check --openmetrics`` where it cannot run
(here, without a GPU) or a recorded environment-error record where it can. Everything listens on 127.0.0.1
only and every wait is bounded. Skipped with the reason where the Debian packages are absent
(``apt-get install prometheus prometheus-node-exporter``). With CTXLAB_RECORD_SCRAPE=PATH the answers are
written to PATH (labs/results/fleet/prometheus-scrape.json holds one such run).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import RESULTS, gpu_absence

NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(not (NODE_EXPORTER and PROMETHEUS),
                                reason="needs prometheus and prometheus-node-exporter "
                                       "(apt-get install prometheus prometheus-node-exporter)")
WAIT = 60.0  # seconds any one thing may take to come up


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback only
        return response.read()


def wait_for(what: str, probe, procs: list[subprocess.Popen]):
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                pytest.fail(f"{proc.args[0]} ended with {proc.returncode} while waiting for {what}")
        try:
            value = probe()
            if value:
                return value
        except OSError:
            pass
        time.sleep(0.25)
    pytest.fail(f"{what}: not within {WAIT} s")


def query(port: int, promql: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    answer = json.loads(get(url))
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def node_metrics(tmp: Path, name: str) -> Path:
    """A textfile directory for one node, its ctxlab.prom written by the ctxlab CLI itself."""
    folder = tmp / name
    folder.mkdir()
    cli = [sys.executable, "-m", "ctxlab"]
    if name == "h200":
        subprocess.run([*cli, "show", str(RESULTS / "check.json"), "--format", "openmetrics",
                        "-o", str(folder / "ctxlab.prom")], check=True, capture_output=True, timeout=60)
    elif gpu_absence():  # this machine is a node that cannot run: check writes its record
        done = subprocess.run([*cli, "check", "--openmetrics", str(folder / "ctxlab.prom"),
                               "--json", str(tmp / "unable.json")], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and done.stderr.startswith("Error: no usable GPU"), done.stderr
    else:
        subprocess.run([*cli, "show", str(RESULTS / "fleet" / "check-no-gpu.json"), "--format", "openmetrics",
                        "-o", str(folder / "ctxlab.prom")], check=True, capture_output=True, timeout=60)
    return folder


def test_prometheus_scrapes_the_textfile_collector(tmp_path):
    nodes = {name: (node_metrics(tmp_path, name), free_port()) for name in ("h200", "cpu")}
    prom_port = free_port()
    procs: list[subprocess.Popen] = []
    try:
        for folder, port in nodes.values():
            procs.append(subprocess.Popen(
                [NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
                 "--collector.textfile", f"--collector.textfile.directory={folder}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        targets = ", ".join(f"'127.0.0.1:{port}'" for _, port in nodes.values())
        (tmp_path / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"scrape_configs:\n  - job_name: ctxlab\n    static_configs:\n      - targets: [{targets}]\n")
        procs.append(subprocess.Popen(
            [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for name, (_, port) in nodes.items():
            exposed = wait_for(f"node_exporter of {name}", lambda p=port: get(f"http://127.0.0.1:{p}/metrics"),
                               procs).decode()
            assert "ctxlab_up" in exposed and 'node_textfile_scrape_error 0' in exposed, exposed[-2000:]
        up = wait_for("both nodes' ctxlab_up in Prometheus",
                      lambda: (r := query(prom_port, "ctxlab_up")) and len(r) == 2 and r, procs)
        by_instance = {s["metric"]["instance"]: float(s["value"][1]) for s in up}
        assert by_instance == {f"127.0.0.1:{nodes['h200'][1]}": 1.0, f"127.0.0.1:{nodes['cpu'][1]}": 0.0}
        verdicts = query(prom_port, "count by (verdict) (ctxlab_claim_verdict == 1)")
        counts = {s["metric"]["verdict"]: int(s["value"][1]) for s in verdicts}
        recorded = json.loads((RESULTS / "check.json").read_text())["runs"]
        expected: dict[str, int] = {}
        for run in recorded:
            for claim in run["claims"]:
                expected[claim["verdict"]] = expected.get(claim["verdict"], 0) + 1
        assert counts == expected
        reason = query(prom_port, "ctxlab_environment_error == 1")
        assert [s["metric"]["instance"] for s in reason] == [f"127.0.0.1:{nodes['cpu'][1]}"]
        info = query(prom_port, "ctxlab_environment_info")
        gpus = {s["metric"]["instance"]: s["metric"]["gpu"] for s in info}
        assert gpus[f"127.0.0.1:{nodes['h200'][1]}"] == "NVIDIA H200"
        assert not any("hostname" in s["metric"] for s in info)
        record = os.environ.get("CTXLAB_RECORD_SCRAPE")
        if record:
            ports = {str(port): name for name, (_, port) in nodes.items()}

            def named(series: list[dict]) -> list[dict]:  # ports differ per run: name the node instead
                return [{"node": ports[s["metric"]["instance"].rsplit(":", 1)[1]] if "instance" in s["metric"]
                         else "all",
                         "metric": {k: v for k, v in s["metric"].items() if k != "instance"},
                         "value": s["value"][1]} for s in series]

            Path(record).write_text(json.dumps({
                "what": "Prometheus 127.0.0.1 scraping two node_exporter textfile collectors: node h200 holds "
                        "`ctxlab show labs/results/check.json --format openmetrics`, node cpu this machine's "
                        "`ctxlab check --openmetrics` without a GPU; answers of its HTTP API (tests/"
                        "test_prometheus_scrape.py)",
                "prometheus": subprocess.run([PROMETHEUS, "--version"], capture_output=True, text=True)
                .stdout.splitlines()[0],
                "node_exporter": subprocess.run([NODE_EXPORTER, "--version"], capture_output=True, text=True)
                .stdout.splitlines()[0] or "",
                "queries": {"ctxlab_up": named(up), "count by (verdict) (ctxlab_claim_verdict == 1)": named(verdicts),
                            "ctxlab_environment_error == 1": named(reason), "ctxlab_environment_info": named(info),
                            "ctxlab_lab_duration_seconds": named(query(prom_port, "ctxlab_lab_duration_seconds")),
                            "ctxlab_claim_verdict{verdict=\"holds\"} == 1": named(
                                query(prom_port, 'ctxlab_claim_verdict{verdict="holds"} == 1'))}},
                indent=1) + "\n")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
