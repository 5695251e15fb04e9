"""``ctxlab audit`` on the GPU: each hazard example under examples/hazards/ fires its rule at the line
marked ``# HAZARD`` and no other error rule fires; the clean programs (examples/first_context.py,
examples/programs/) give no error; the pytest guard catches the leaking tests of tests/guard_sample/.
With CTXLAB_RESULTS set, the JSON and SARIF reports are kept under $CTXLAB_RESULTS/audit/."""

import importlib.util
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from tests.audit.test_audit_report import SARIF_LEVELS
from tests.audit_events import guard_plugin_args

pytestmark = pytest.mark.gpu
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEEP = os.environ.get("CTXLAB_RESULTS")
ENV = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
ERROR_RULES = ("no-context", "destroyed-while-current", "primary-released-under-runtime",
               "reset-with-live-allocations", "cross-context-handle", "fork-after-init",
               "green-context-on-two-threads")


def out_dir(tmp_path) -> str:
    if KEEP:
        path = os.path.join(KEEP, "audit")
        os.makedirs(path, exist_ok=True)
        return path
    return str(tmp_path)


def marked_line(path: str, marker: str) -> int:
    with open(os.path.join(ROOT, path)) as handle:
        lines = [i for i, line in enumerate(handle, 1) if marker in line]
    assert len(lines) == 1, (path, marker, lines)
    return lines[0]


def audit(tmp_path, name: str, *program: str, fmt: str = "json", timeout: int = 300):
    """Run ``ctxlab audit`` as a user does, from the repository root; the report parsed, and the process."""
    suffix = {"json": "json", "sarif": "sarif", "junit": "xml", "table": "txt"}[fmt]
    out = os.path.join(out_dir(tmp_path), f"{name}.{suffix}")
    if os.path.exists(out):
        os.remove(out)  # a report from an earlier run must not pass for this one
    done = subprocess.run([sys.executable, "-m", "ctxlab", "audit", "--format", fmt, "-o", out, *program],
                          capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=timeout)
    assert os.path.exists(out), f"no report (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    with open(out) as handle:
        text = handle.read()
    return (json.loads(text) if fmt in ("json", "sarif") else text), done


def check_sarif(doc: dict) -> None:
    assert doc["version"] == "2.1.0"
    (run,) = doc["runs"]
    rules = run["tool"]["driver"]["rules"]
    for item in run["results"]:
        assert rules[item["ruleIndex"]]["id"] == item["ruleId"] and item["level"] in SARIF_LEVELS


HAZARDS = [  # example, rule, audit exit status, the program's own exit status
    ("no_context.py", "no-context", 3, 0),
    ("destroyed_while_current.py", "destroyed-while-current", 3, 0),
    ("primary_released_under_runtime.py", "primary-released-under-runtime", 3, 0),
    ("reset_with_live_allocations.py", "reset-with-live-allocations", 3, 0),
    ("cross_context_handle.py", "cross-context-handle", 3, 1),  # CuPy's exception is not caught
    ("fork_after_init.py", "fork-after-init", 3, 0),
    ("several_runtime_copies.py", "several-runtime-copies", 0, 0),  # info: no exit 3
    # a warning; the ordering errors that follow from it (ALSO_ERRORS) exit 3
    ("pointer_from_another_context.py", "pointer-from-another-context", 3, 0),
    ("green_context_on_two_threads.py", "green-context-on-two-threads", 3, 0),
]


# the errors a hazard example also gives, each at the line its marker names (the program's header says why)
ALSO_ERRORS = {"pointer_from_another_context.py": {"unordered-access": "# READ", "freed-while-in-use": "# FREED"}}


@pytest.mark.parametrize("script,rule,status,program_status", HAZARDS, ids=[h[1] for h in HAZARDS])
def test_hazard_example_fires_its_rule_at_the_marked_line(tmp_path, script, rule, status, program_status):
    path = f"examples/hazards/{script}"
    doc, done = audit(tmp_path, rule, "--", path)
    assert done.returncode == status, done.stdout + done.stderr
    assert doc["exit_status"] == program_status, done.stdout + done.stderr
    assert f"the program exited with status {program_status}" in done.stderr
    mine = [f for f in doc["findings"] if f["rule"] == rule]
    assert mine, json.dumps(doc["findings"], indent=1)
    assert mine[0]["location"] == {"file": path, "line": marked_line(path, "# HAZARD"),
                                   "function": mine[0]["location"]["function"]}, json.dumps(mine[0], indent=1)
    also = ALSO_ERRORS.get(script, {})
    others = [f["rule"] for f in doc["findings"] if f["severity"] == "error" and f["rule"] != rule]
    assert sorted(others) == sorted(also), json.dumps(doc["findings"], indent=1)
    for f in doc["findings"]:
        if f["rule"] in also:
            assert f["location"]["line"] == marked_line(path, also[f["rule"]]), json.dumps(f, indent=1)
    sarif, done = audit(tmp_path, rule, "--", path, fmt="sarif")
    assert done.returncode == status
    check_sarif(sarif)
    results = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == rule]
    region = results[0]["locations"][0]["physicalLocation"]
    assert region["artifactLocation"]["uri"] == path
    assert region["region"]["startLine"] == marked_line(path, "# HAZARD")


def test_destroyed_while_current_names_where_the_context_was_destroyed(tmp_path):
    path = "examples/hazards/destroyed_while_current.py"
    doc, _ = audit(tmp_path, "destroyed-while-current-related", "--", path)
    (finding,) = [f for f in doc["findings"] if f["rule"] == "destroyed-while-current"]
    assert finding["thread"] == "holder" and finding["location_from"] == "callback"
    assert {"what": "destroyed at", "location": {"file": path, "line": marked_line(path, "# DESTROY"),
                                                 "function": "main"}} in finding["related"]


def needs(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed here")


CLEAN = [  # program, arguments, module it needs, the program's own exit statuses accepted
    ("examples/first_context.py", (), "cupy", (0,)),
    # ctxlab's own scenarios that intend no hazard, in one process (the labs fork them, out of the audit's sight)
    ("examples/programs/labs_clean.py", (), "cupy", (0,)),
    ("examples/programs/cuda_core_kernel.py", (), "cuda.core", (0,)),
    ("examples/programs/torch_train_step.py", (), "torch", (0,)),
    ("examples/programs/numba_kernel.py", ("--context-only",), "numba", (0,)),
    # numba-cuda 0.30 cannot compile kernels with numpy 2.5 and exits 3: the audit's own status stays 0
    ("examples/programs/numba_kernel.py", (), "numba", (0, 3)),
]


@pytest.mark.parametrize("script,args,module,accepted", CLEAN,
                         ids=["first_context", "labs_clean", "cuda_core", "torch_train_step", "numba_context",
                              "numba_kernel"])
def test_clean_programs_give_no_error(tmp_path, script, args, module, accepted):
    needs(module)
    name = "clean-" + os.path.basename(script).removesuffix(".py") + ("-" + "-".join(a.strip("-") for a in args)
                                                                        if args else "")
    doc, done = audit(tmp_path, name, "--", script, *args, timeout=600)
    errors = [f for f in doc["findings"] if f["severity"] == "error"]
    assert not errors, json.dumps(errors, indent=1)
    # one context per device in each (green contexts share the primary's memory): no foreign kernel argument
    foreign = [f for f in doc["findings"] if f["rule"] == "pointer-from-another-context"]
    assert not foreign, json.dumps(foreign, indent=1)
    assert done.returncode == 0, done.stdout + done.stderr
    assert doc["exit_status"] in accepted, done.stdout + done.stderr
    if script.endswith("labs_clean.py"):  # every relay verified (or skipped where green contexts cannot be made)
        for line in done.stdout.splitlines():
            if "handoffs verified" in line:
                verified, _, total = line.split(": ", 1)[1].split(" handoffs")[0].partition(" of ")
                assert verified == total and line.endswith("True"), line
    print(json.dumps({k: doc["stats"].get(k) for k in ("launch_callbacks", "launches_inspected", "allocations_seen",
                                                         "launch_records", "green_contexts")}))


def test_pointer_from_another_context_names_the_allocation_and_the_launch_hook_counts(tmp_path):
    """The warning's related location is the CuPy allocation's line; the stats say how many launch callbacks the
    hook saw against the launches CUPTI recorded (driver and runtime): more callbacks than cuLaunch* records
    means the runtime's launches reach the hook through cuLaunchKernel beneath them."""
    path = "examples/hazards/pointer_from_another_context.py"
    doc, done = audit(tmp_path, "pointer-from-another-context-related", "--", path)
    (finding,) = [f for f in doc["findings"] if f["rule"] == "pointer-from-another-context"]
    assert finding["severity"] == "warning" and finding["location_from"] == "callback"
    assert {"what": "allocated at", "location": {"file": path, "line": marked_line(path, "# ALLOCATED"),
                                                 "function": "main"}} in finding["related"], json.dumps(finding)
    assert doc["stats"]["launches_inspected"] >= 1 and doc["stats"]["launch_callbacks"] >= 1, doc["stats"]
    print(json.dumps({k: doc["stats"].get(k) for k in ("launch_callbacks", "launches_inspected", "launch_records")}))


def test_the_guard_fails_the_leaking_tests_of_the_sample_suite(tmp_path):
    sample = "tests/guard_sample/sample_guarded.py"
    junit = os.path.join(out_dir(tmp_path), "guard_sample.junit.xml")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *guard_plugin_args(),
                           "--ctxlab-guard", "-q",
                           f"--junitxml={junit}", sample], capture_output=True, text=True, env=ENV, cwd=ROOT,
                          timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert cases["test_clean"].find("failure") is None and cases["test_clean"].find("error") is None
    assert cases["test_clean_created_and_destroyed"].find("failure") is None
    # the guard fails a test's teardown (it judges what the test left once its fixtures are gone)
    leak = cases["test_leaks_a_context"].find("error")
    assert leak is not None and "ctxlab guard: context-leak" in (leak.text or "") + (leak.get("message") or "")
    assert f"{sample}:{marked_line(sample, '# LEAK')}" in (leak.text or "")
    current = cases["test_leaves_context_current"].find("error")
    assert current is not None and "context-left-current" in (current.text or "")
    assert f"{sample}:{marked_line(sample, '# CURRENT')}" in (current.text or "")
    assert "ctxlab guard: 2 test(s) failed the guard" in done.stdout


def test_audit_overhead_is_measured(tmp_path):
    """The audit's cost, recorded: the launch benchmark traced as the audit traces, and whole programs bare
    against audited, with no finding on the clean launch loop. The figures are the benchmarks' to judge
    (benchmarks/audit_overhead.py, trace_overhead.py: goals there, recorded under labs/results/), not a timed
    test's: a slower runner is not a broken audit."""
    out = out_dir(tmp_path)
    launch = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "trace_overhead.py"), "--audit",
                             "--json", os.path.join(out, "trace_overhead-audit.json")], capture_output=True,
                            text=True, env=ENV, cwd=ROOT, timeout=600)
    assert launch.returncode == 0, launch.stdout + launch.stderr
    print(launch.stdout)
    programs = ["launch-loop"] + (["examples/programs/torch_train_step.py"]
                                  if importlib.util.find_spec("torch") else [])
    whole = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "audit_overhead.py"), "--repeats", "3",
                            "--json", os.path.join(out, "audit_overhead.json"), *programs], capture_output=True,
                           text=True, env=ENV, cwd=ROOT, timeout=600)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    print(whole.stdout)
    launches = json.load(open(os.path.join(out, "trace_overhead-audit.json")))
    assert launches["traced_us_per_launch"] > 0 and launches["untraced_us_per_launch"] > 0, launches
    assert launches["findings_per_run"] == 0, launches  # 5,000 launches of one array in one context: clean
    doc = json.load(open(os.path.join(out, "audit_overhead.json")))
    assert [entry["program"] for entry in doc["programs"]] == programs, doc["programs"]
    for entry in doc["programs"]:
        assert "error" not in entry, entry  # the bare program ran
        assert entry["bare_median"] > 0 and entry["audited_median"] > 0, entry
        assert entry["audit_line"] and entry["audit_line"].startswith("ctxlab audit: 0 error(s)"), entry


def test_the_guard_on_numba_cudas_own_driver_tests(tmp_path):
    """scripts/guard-numba.sh: numba-cuda's cudadrv tests under --ctxlab-guard; the tests' own failures are
    results (kept in the JUnit XML and the summary), not this test's failure."""
    needs("numba_cuda")
    out = out_dir(tmp_path)
    done = subprocess.run(["bash", os.path.join(ROOT, "scripts", "guard-numba.sh"), out], capture_output=True,
                          text=True, env=ENV, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    cases = list(ET.parse(os.path.join(out, "guard-numba.junit.xml")).getroot().iter("testcase"))
    assert cases, done.stdout
    # Tests that could not be imported or set up (a missing test dependency or fixture) say nothing about the
    # guard: some must have run through and passed it.
    passed = [c for c in cases if all(c.find(tag) is None for tag in ("failure", "error", "skipped"))]
    assert passed, open(os.path.join(out, "guard-numba.log")).read()[-3000:]
    print(open(os.path.join(out, "guard-numba-summary.txt")).read())
