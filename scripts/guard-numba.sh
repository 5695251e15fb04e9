#!/usr/bin/env bash
# The pytest guard (pytest --ctxlab-guard) on a real library's GPU tests: numba-cuda ships its tests in
# its wheel (numba_cuda/numba/cuda/tests/cudadrv/ in numba-cuda 0.30). The driver tests chosen need no
# kernel compilation by Numba (on the GPU machine Numba's compiler may fail with its numpy): context
# stack, memory, deallocations, events, streams, pinned and host memory, device reset and selection
# (test_cuda_driver is left out: it imports cffi, which that machine lacks). Their testing module needs
# the filecheck package (carried as a wheel to the GPU machine).
# They are copied into a scratch folder and run there (numba_cuda/numba has no __init__.py, so pytest
# would name the files as a package called "cuda", which is cuda-python's). A failing test is a result
# to record, not a failure of this script: the JUnit XML and the log are kept, with a summary of the
# guard's findings; the script fails only when numba-cuda is missing (2) or no report was written (1).
#   scripts/guard-numba.sh OUTDIR [test_module ...]
set -uo pipefail
out=${1:?usage: scripts/guard-numba.sh OUTDIR [test_module ...]}
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
modules=("$@")
if [ ${#modules[@]} -eq 0 ]; then
  modules=(test_context_stack test_cuda_memory test_deallocations test_events test_streams test_pinned
           test_host_alloc test_reset_device test_select_device test_cuda_auto_context)
fi
src=$(python3 -c "import os, numba_cuda; print(os.path.join(os.path.dirname(numba_cuda.__file__), 'numba', 'cuda', 'tests', 'cudadrv'))" 2>/dev/null)
if [ -z "$src" ] || [ ! -d "$src" ]; then
  echo "guard-numba: numba-cuda (with its tests) is not installed here" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
files=()
for m in "${modules[@]}"; do
  if [ -f "$src/$m.py" ]; then cp "$src/$m.py" "$work/" && files+=("$m.py"); else echo "guard-numba: no $m.py in $src" >&2; fi
done
# Their fixtures (initialize_from_pytest_config) and options live in numba-cuda's conftest.py: the nearest one
# above the tests comes along.
conftest=$(python3 - "$src" <<'PY'
import os, sys
here = sys.argv[1]
for _ in range(5):
    if os.path.isfile(os.path.join(here, "conftest.py")):
        print(os.path.join(here, "conftest.py"))
        break
    here = os.path.dirname(here)
PY
)
if [ -n "$conftest" ]; then cp "$conftest" "$work/conftest.py"; else echo "guard-numba: no conftest.py above $src" >&2; fi
if ! grep -q "def initialize_from_pytest_config" "$work/conftest.py" 2>/dev/null; then
  # The wheel ships no conftest with it: the one fixture the tests ask for (it only passes pytest's
  # --dump-failed-filechecks option to the FileCheck tests) is declared here, with that option off.
  cat >> "$work/conftest.py" <<'PY'
import pytest


@pytest.fixture(scope="class")
def initialize_from_pytest_config(request):
    request.cls._dump_failed_filechecks = False
PY
fi
python3 -c "from importlib.metadata import version; print('numba-cuda', version('numba-cuda'))" > "$out/guard-numba-versions.txt" 2>&1
# Where ctxlab is installed its pytest11 entry point loads the plugin; from the source tree, -p loads it.
plugin=$(python3 -c "from importlib.metadata import entry_points
print('' if any(e.value == 'ctxlab.audit.pytest_plugin' for e in entry_points(group='pytest11')) else '-p ctxlab.audit.pytest_plugin')")
if [ ${#files[@]} -eq 0 ]; then
  echo "guard-numba: none of the named test modules is in $src" >&2
  exit 2
fi
junit="$out/guard-numba.junit.xml"
rm -f "$junit"
# A module that cannot be imported (a test dependency missing) is reported, and the others still run.
(cd "$work" && python3 -m pytest -p no:cacheprovider $plugin --ctxlab-guard -q -rfE --rootdir "$work" \
   --continue-on-collection-errors \
   --junitxml "$junit" "${files[@]}") > "$out/guard-numba.log" 2>&1
status=$?
echo "pytest exit status: $status" >> "$out/guard-numba.log"
# The reports name the scratch copy of the tests, and this machine's paths, by what they are.
[ -f "$junit" ] && python3 scripts/repo_relative.py --map "$work=<numba-cuda cudadrv tests>" "$out/guard-numba.log" "$junit"
tail -n 30 "$out/guard-numba.log"
if [ ! -f "$junit" ]; then
  echo "guard-numba: pytest wrote no report" >&2
  exit 1
fi
python3 - "$junit" > "$out/guard-numba-summary.txt" <<'PY'
import sys
import xml.etree.ElementTree as ET

# A test whose call failed and whose teardown failed the guard is written as two cases of one name.
cases = list(ET.parse(sys.argv[1]).getroot().iter("testcase"))
names = {(c.get("classname"), c.get("name")) for c in cases}
failed = [(c, f) for c in cases for f in (c.find("failure"), c.find("error")) if f is not None]
guard = [(c, f) for c, f in failed if "ctxlab guard:" in (f.text or "") + (f.get("message") or "")]
print(f"{len(names)} tests, {len({(c.get('classname'), c.get('name')) for c, _ in failed})} failed or errored, "
      f"{len({(c.get('classname'), c.get('name')) for c, _ in guard})} of them by the guard")
for c, f in guard:
    lines = [x for x in (f.text or "").splitlines() if "ctxlab guard:" in x]
    print(f"{c.get('classname')}::{c.get('name')}: " + " | ".join(x.strip() for x in lines[:4]))
PY
cat "$out/guard-numba-summary.txt"
exit 0
