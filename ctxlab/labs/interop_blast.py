"""interop, area 5: the blast radius of tearing a context down under every library's live data.

Each teardown is one scenario, in undefined-behaviour territory (repeated, each
repeat in a fresh process): every library present first makes an array of
1..N (``interop_under.make``) and reads it back; then one teardown:

- ``reset-runtime``: ``cudaDeviceReset`` through cuda.bindings' runtime copy;
- ``reset-cupy``: ``cupy.cuda.runtime.deviceReset``, CuPy's runtime copy (skipped where CuPy has no such call);
- ``release``: ``cuDevicePrimaryCtxRelease`` until the driver refuses (the lab retained nothing: past zero);
- ``primary-reset``: ``cuDevicePrimaryCtxReset``;
- ``destroy``: the arrays are made with a ``cuCtxCreate`` context current, then ``cuCtxDestroy`` of it;

then each library reads its old array, then makes and reads a new one: ``correct``,
an error by name, or ``silent-wrong-result``. The work runs in a separate
interpreter that reports each outcome as it is known, so a library that crashes
the process (or hangs) leaves the outcomes before it, and its own reads as
"no answer" with how the process ended.
"""

from __future__ import annotations

from collections.abc import Callable

from ctxlab.claim import Claim, Inapplicable, Observations, silent_wrong, some, spread
from ctxlab.lab import Isolation, Scenario
from ctxlab.labs.interop_names import ENV, LIBRARIES, TITLES

TEARDOWNS = {
    "reset-runtime": "cudaDeviceReset (cuda.bindings.runtime)",
    "reset-cupy": "cupy.cuda.runtime.deviceReset",
    "release": "cuDevicePrimaryCtxRelease past zero",
    "primary-reset": "cuDevicePrimaryCtxReset",
    "destroy": "cuCtxDestroy of the created context the arrays were made under",
}
LINE = "CTXLAB-LINE "
CHILD_TIMEOUT = 100.0  # seconds for the whole teardown run; what did not answer by then is "no answer"
RELEASES = 16  # releases tried past the lab's (zero) retains

SOURCES = {
    "reset-runtime": ("CUDA Runtime API, cudaDeviceReset: 'Destroy all allocations and reset all state on the current "
                      "device in the current process.'; 'It is the caller's responsibility to ensure that the "
                      "resources are not accessed or passed in subsequent API calls and doing so will result in "
                      "undefined behavior.'; 'Any subsequent API call to this device will reinitialize the device.'; "
                      "'cudaDeviceReset() will not destroy memory allocations by cudaMallocAsync() and "
                      "cudaMallocFromPoolAsync().' (https://docs.nvidia.com/cuda/cuda-runtime-api/"
                      "group__CUDART__DEVICE.html)"),
    "release": ("CUDA Driver API, cuDevicePrimaryCtxRelease: 'The context is automatically reset once the last "
                "reference to it is released.'; 'Releasing a primary context that has not been previously retained "
                "will fail with CUDA_ERROR_INVALID_CONTEXT.' "
                "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PRIMARY__CTX.html)"),
    "primary-reset": ("CUDA Driver API, cuDevicePrimaryCtxReset: 'Destroy all allocations and reset all state on the "
                      "primary context.'; 'Note that it is responsibility of the calling function to ensure that no "
                      "other module in the process is using the device any more.' "
                      "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PRIMARY__CTX.html)"),
    "destroy": ("CUDA Driver API, cuCtxDestroy: 'Destroys and cleans up all resources associated with the context. "
                "It is the caller's responsibility to ensure that the context or its resources are not accessed or "
                "passed in subsequent API calls and doing so will result in undefined behavior.' "
                "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html)"),
}
SOURCES["reset-cupy"] = SOURCES["reset-runtime"] + "; through CuPy's own runtime copy"
AFTERWARDS = "; what each library sees next is not documented: recorded as observed over fresh processes"


# ---------------------------------------------------------------- in the separate interpreter

def _emit(value: dict) -> None:
    import json
    import sys

    sys.stdout.write(LINE + json.dumps(value) + "\n")
    sys.stdout.flush()


def _teardown(teardown: str, device: int, created: int | None) -> dict:
    """Do the teardown; what the call(s) returned."""
    from ctxlab.cuda import driver as drv

    if teardown == "reset-runtime":
        from cuda.bindings import runtime

        set_status = runtime.cudaSetDevice(device)[0]
        return {"status": runtime.cudaDeviceReset()[0].name, "set_device": set_status.name}
    if teardown == "reset-cupy":
        import cupy

        from ctxlab.cuda.outcome import attempt

        return {"status": attempt(cupy.cuda.runtime.deviceReset)}
    if teardown == "release":
        accepted, status = 0, "CUDA_SUCCESS"
        for _ in range(RELEASES):
            status = drv.outcome(drv.primary_release, device)["status"]
            if status != "CUDA_SUCCESS":
                break
            accepted += 1
        return {"status": f"{accepted} accepted, then {status}", "accepted": accepted}
    if teardown == "primary-reset":
        return {"status": drv.outcome(drv.primary_reset, device)["status"]}
    return {"status": drv.outcome(drv.destroy_context, created)["status"]}


def blast_main(device: int, teardown: str) -> None:
    """In a fresh interpreter: every library's array, the teardown, then what each library reads."""
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.cuda.outcome import checked, status_name
    from ctxlab.labs.interop import Missing, _primary, _require, _version
    from ctxlab.labs.interop_under import SUM, make, owner_of

    init_driver()
    created = drv.create_context(device) if teardown == "destroy" else None
    created_id = drv.context_id(created) if created else None
    made = {}
    for lib in LIBRARIES:
        try:
            _require(lib)
            m = make(lib, device)
        except Missing as why:
            _emit({"step": "made", "library": lib, "present": False, "reason": str(why)})
            continue
        except Exception as exc:
            _emit({"step": "made", "library": lib, "present": True, "version": _version(lib),
                   "made": status_name(exc)[:300]})
            continue
        made[lib] = m
        _emit({"step": "made", "library": lib, "present": True, "version": _version(lib), "made": "ok",
               "before": checked(m.read, SUM)})
    _, primary_id = _primary(device)
    ids = {"the created context": created_id, "the primary context": primary_id}
    _emit({"step": "ids", "ids": ids, "owners": {lib: owner_of(m.pointer, ids) for lib, m in made.items()}})
    _emit({"step": "teardown", **_teardown(teardown, device, created)})
    for lib, m in made.items():
        _emit({"step": "old", "library": lib, "old": checked(m.read, SUM)[:300]})
    for lib in made:
        try:
            fresh = make(lib, device)
            new = checked(fresh.read, SUM)
        except Exception as exc:
            new = status_name(exc)[:300]
        _emit({"step": "new", "library": lib, "new": new[:300]})
    _emit({"step": "done"})
    import os

    os._exit(0)  # the libraries' exit handlers would meet the torn-down context: their outcome is not the question


# ---------------------------------------------------------------- the scenario

def _run_child(device: int, teardown: str) -> tuple[list[dict], str, str]:
    """The separate interpreter's report lines, how it ended, and the tail of its standard error."""
    import json
    import subprocess
    import sys

    code = f"import sys; from {__name__} import blast_main; blast_main(int(sys.argv[1]), sys.argv[2])"
    try:
        done = subprocess.run([sys.executable, "-c", code, str(device), teardown], capture_output=True, text=True,
                              timeout=CHILD_TIMEOUT)
        out, err, ended = done.stdout, done.stderr, _how_ended(done.returncode)
    except subprocess.TimeoutExpired as exc:
        out, err = _text(exc.stdout), _text(exc.stderr)
        ended = f"killed after {CHILD_TIMEOUT:g} s"
    lines = [json.loads(ln[len(LINE):]) for ln in out.splitlines() if ln.startswith(LINE)]
    return lines, ended, err[-1000:]


def _text(raw: bytes | str | None) -> str:
    return raw.decode(errors="replace") if isinstance(raw, bytes) else (raw or "")


def _how_ended(code: int) -> str:
    import signal

    if code >= 0:
        return f"exit status {code}"
    try:
        return f"ended by {signal.Signals(-code).name}"
    except ValueError:
        return f"ended by signal {-code}"


def blast(device: int, teardown: str) -> dict:
    """One teardown against every library's live data (see the module docstring)."""
    from ctxlab.harness.recorder import Recorder
    from ctxlab.labs.common import scenario_output, skipped_output

    scenario = f"blast-{teardown}"
    if teardown == "reset-cupy":
        try:
            import cupy
        except ImportError:
            return skipped_output(scenario, "cupy is not installed")
        if not hasattr(cupy.cuda.runtime, "deviceReset"):
            return skipped_output(scenario, f"cupy.cuda.runtime has no deviceReset (CuPy {cupy.__version__})")
    rec = Recorder(scenario=scenario)
    lines, ended, stderr = _run_child(device, teardown)
    by_step: dict[str, dict] = {}
    for line in lines:
        if "library" in line:
            by_step.setdefault(line["library"], {}).update(line)
        else:
            by_step.setdefault(line["step"], {}).update(line)
    torn = by_step.get("teardown", {})
    owners = by_step.get("ids", {}).get("owners", {})
    status = torn.get("status", f"no answer ({ended})")
    rec.add("teardown", "teardown", {"teardown": teardown, "call": TEARDOWNS[teardown], "status": status,
                                     "accepted": torn.get("accepted"), "set_device": torn.get("set_device"),
                                     "ended": ended, "finished": "done" in by_step, "stderr_tail": stderr},
            context=(None, None))
    silent = f"no answer ({ended})"
    for lib in LIBRARIES:
        v = by_step.get(lib, {})
        unread = silent if v.get("made") == "ok" else "-"  # a library that made nothing reads nothing
        rec.add(lib, "blast", {"library": lib, "teardown": teardown, "status": status,
                               "present": v.get("present", True), "reason": v.get("reason"),
                               "version": v.get("version"), "made": v.get("made", silent),
                               "owner": owners.get(lib, "unknown"), "before": v.get("before", unread),
                               "old": v.get("old", unread), "new": v.get("new", unread)}, context=(None, None))
    return scenario_output(rec)


# ---------------------------------------------------------------- claims

def facts_blast(teardown: str, lib: str) -> Callable[[Observations], dict]:
    """Over the repeats: the teardown's status, and what ``lib`` read from its old array and a new one."""

    def facts(obs: Observations) -> dict:
        found = [o.value for o in some(obs, "blast", f"blast-{teardown}") if o.value["library"] == lib]
        if not found:
            raise Inapplicable(f"blast-{teardown}: no outcome for {lib}")
        absent = [v for v in found if not v["present"]]
        if absent:
            raise Inapplicable(f"blast-{teardown}: {absent[0]['reason']}")

        reads = [v["old"] for v in found] + [v["new"] for v in found]
        return {"library": TITLES[lib], "version": found[0].get("version") or "unknown",
                "call": TEARDOWNS[teardown], "runs": f"{len(found)} run(s)",
                "made": spread(v["made"] for v in found), "owner": spread(v["owner"] for v in found),
                "before": spread(v["before"] for v in found), "status": spread(v["status"] for v in found),
                "old": spread(v["old"] for v in found), "new": spread(v["new"] for v in found),
                "silent_wrong": silent_wrong(reads)}

    return facts


def _blast_claim(teardown: str, lib: str) -> Claim:
    return Claim(f"interop.blast.{teardown}.{lib}",
                 f"After {TEARDOWNS[teardown]}, what {TITLES[lib]} reads from the array it made before, and from a "
                 "new one.", SOURCES[teardown] + AFTERWARDS, "observation", (f"blast-{teardown}",),
                 facts_blast(teardown, lib),
                 "over {runs}: {library} {version} made its array ({made}; owner: {owner}; read before: {before}); "
                 "{call} -> {status}; then its old array -> {old}; a new array -> {new}; wrong values without an "
                 "error: {silent_wrong}")


CLAIMS = tuple(_blast_claim(t, lib) for t in TEARDOWNS for lib in LIBRARIES)


def scenarios(device: int) -> list[Scenario]:
    """One scenario per teardown, every library inside it; repeated, each in a fresh process."""
    return [Scenario(f"blast-{t}", f"{__name__}:blast", (device, t), isolation=Isolation.FRESH, undefined=True,
                     timeout=CHILD_TIMEOUT + 60, env=ENV) for t in TEARDOWNS]
