#!/usr/bin/env bash
# On a machine with a package registry: download into .whl/ the wheels the GPU machine lacks (it reaches no
# registry), for Python 3.12 on x86-64 Linux: cupti-python, the test plugins, the JSON schema checker, pyelftools,
# junitparser, and filecheck (numba-cuda's testing module imports it: scripts/guard-numba.sh). scripts/gpu-env.sh
# installs whatever lies in .whl/ there; a device call carries the folder (.git/info/exclude keeps it out of git).
#   scripts/gpu-wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .git/info .whl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform any -d .whl 'cupti-python==13.0.*' pyelftools junitparser jsonschema jsonschema-specifications \
  referencing rpds-py pytest-xdist execnet pytest-timeout filecheck
ls .whl
