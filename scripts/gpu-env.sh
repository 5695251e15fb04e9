# Sourced by the GPU scripts, from the repository root: installs the wheels of packages the GPU machine
# lacks (no registry there; they may lie in .whl/) into a folder of their own, and puts it and this
# checkout on PYTHONPATH.
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/ctxlab-site .whl/*.whl
  export PYTHONPATH=/tmp/ctxlab-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
