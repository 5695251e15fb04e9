"""``import ctxlab`` and ``ctxlab --help`` load no CUDA library: they work, fast, where there is none; a lab's own
``--help`` loads that lab's package alone, and none of its scenarios."""

import json
import subprocess
import sys

import pytest

from ctxlab.labs import LABS

PROBE = """
import json, sys
import ctxlab, ctxlab.cli, ctxlab.api
from click.testing import CliRunner
CliRunner().invoke(ctxlab.cli.cli, ["--help"])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("cupy", "cuda", "cupti", "numba", "torch", "jax"))
maps = open("/proc/self/maps").read()
names = ("libcuda", "libcudart", "libcupti", "libnvrtc")
libs = sorted({line.split()[-1] for line in maps.splitlines() if any(n in line for n in names)})
print(json.dumps({"modules": heavy, "libraries": libs}))
"""


def test_import_and_help_load_no_cuda_module_or_library():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"modules": [], "libraries": []}


def test_help_loads_neither_the_audit_nor_a_lab_and_audit_help_still_lists_every_rule():
    probe = ("import json, sys\nfrom click.testing import CliRunner\nimport ctxlab.cli\n"
             "CliRunner().invoke(ctxlab.cli.cli, ['--help'])\n"
             "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('ctxlab.audit', 'ctxlab.labs.')))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
    from click.testing import CliRunner

    from ctxlab.audit.rules.catalogue import RULES
    from ctxlab.cli import cli

    shown = CliRunner().invoke(cli, ["audit", "--help"]).output
    assert all(rule.id in shown for rule in RULES)
    assert "Run a Python program under the tracer" in CliRunner().invoke(cli, ["--help"]).output


@pytest.mark.parametrize("name", sorted(LABS))
def test_a_labs_help_loads_its_package_alone_and_no_scenario(name):
    probe = ("import json, sys\nfrom click.testing import CliRunner\nimport ctxlab.cli\n"
             f"done = CliRunner().invoke(ctxlab.cli.cli, [{name!r}, '--help'])\nassert done.exit_code == 0\n"
             "print(json.dumps(sorted(m for m in sys.modules if m.startswith('ctxlab.labs.'))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert f"ctxlab.labs.{name}" in loaded and all(m.split(".")[2] == name for m in loaded), loaded
    assert not [m for m in loaded if m.endswith("scenarios")], loaded
