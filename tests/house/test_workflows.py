"""The CI workflows run exactly the README's two commands."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    blocks = re.findall(r"```\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)
    return [b.strip() for b in blocks if "pip install" in b][:2]


def steps(job: str) -> list[dict]:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    return workflow["jobs"][job]["steps"]


def test_readme_has_the_two_commands():
    main, tests = readme_commands()
    assert main.endswith("ctxlab check") and tests.endswith("pytest -n auto")


def test_cpu_job_runs_the_readme_test_command():
    _, tests = readme_commands()
    assert tests in [s.get("run") for s in steps("cpu-tests")]


def test_ci_script_runs_the_readme_test_command():
    _, tests = readme_commands()
    assert tests in (ROOT / ".ci" / "run").read_text().splitlines()


def test_gpu_job_runs_the_readme_main_command_with_reports():
    main, _ = readme_commands()
    run = next(s["run"] for s in steps("gpu-check") if "ctxlab check" in s.get("run", ""))
    assert run.startswith(main + " ")
    for flag in ("--junit", "--markdown", "--json", "--baseline labs/results/check.json"):
        assert flag in run
    uploads = [s for s in steps("gpu-check") if s.get("uses", "").startswith("actions/upload-artifact")]
    assert uploads and "ctxlab-junit.xml" in uploads[0]["with"]["path"]
