"""``import ctxlab`` and ``ctxlab --help`` load no CUDA library: they work, fast, where there is none."""

import json
import subprocess
import sys

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
