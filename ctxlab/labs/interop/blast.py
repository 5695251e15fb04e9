"""interop's blast-radius scenarios (area 5): a teardown of the primary context in a separate interpreter while
every library holds data, each outcome reported as it is known."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from ctxlab.cuda import driver as drv
from ctxlab.cuda.environment import init_driver
from ctxlab.cuda.outcome import attempt, checked, status_name
from ctxlab.harness.recorder import Recorder
from ctxlab.lab import Isolation, Scenario
from ctxlab.labs.common import scenario_output, skipped_output
from ctxlab.labs.interop import libs
from ctxlab.labs.interop.blast_claims import CHILD_TIMEOUT, LINE, RELEASES, TEARDOWNS
from ctxlab.labs.interop.libs import SUM, Missing, make, owner_of, primary_of, version_of
from ctxlab.labs.interop.names import ENV, LIBRARIES
from ctxlab.records import skips

# ---------------------------------------------------------------- in the separate interpreter

def _emit(value: dict) -> None:
    sys.stdout.write(LINE + json.dumps(value) + "\n")
    sys.stdout.flush()


def _teardown(teardown: str, device: int, created: int | None) -> dict:
    """Do the teardown; what the call(s) returned."""
    if teardown == "reset-runtime":
        from cuda.bindings import runtime

        set_status = runtime.cudaSetDevice(device)[0]
        return {"status": runtime.cudaDeviceReset()[0].name, "set_device": set_status.name}
    if teardown == "reset-cupy":
        import cupy

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
    init_driver()
    created = drv.create_context(device) if teardown == "destroy" else None
    created_id = drv.context_id(created) if created else None
    made = {}
    for lib in LIBRARIES:
        try:
            libs.require(lib)
            m = make(lib, device)
        except Missing as why:
            _emit({"step": "made", "library": lib, "present": False, "reason": str(why), "skip": why.skip})
            continue
        except Exception as exc:
            _emit({"step": "made", "library": lib, "present": True, "version": version_of(lib),
                   "made": status_name(exc)[:300]})
            continue
        made[lib] = m
        _emit({"step": "made", "library": lib, "present": True, "version": version_of(lib), "made": "ok",
               "before": checked(m.read, SUM)})
    _, primary_id = primary_of(device)
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

    os._exit(0)  # the libraries' exit handlers would meet the torn-down context: their outcome is not the question


# ---------------------------------------------------------------- the scenario

def _run_child(device: int, teardown: str) -> tuple[list[dict], str, str]:
    """The separate interpreter's report lines, how it ended, and the tail of its standard error."""
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
    if code >= 0:
        return f"exit status {code}"
    try:
        return f"ended by {signal.Signals(-code).name}"
    except ValueError:
        return f"ended by signal {-code}"


def blast(device: int, teardown: str) -> dict:
    """One teardown against every library's live data (see the module docstring)."""
    scenario = f"blast-{teardown}"
    if teardown == "reset-cupy":
        try:
            cupy = libs.require("cupy")
        except Missing as why:
            return skipped_output(scenario, why.skip)
        if not hasattr(cupy.cuda.runtime, "deviceReset"):
            return skipped_output(scenario, skips.unsupported(f"cupy.cuda.runtime has no deviceReset (CuPy "
                                                              f"{cupy.__version__})"))
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
                               "present": v.get("present", True), "reason": v.get("reason"), "skip": v.get("skip"),
                               "version": v.get("version"), "made": v.get("made", silent),
                               "owner": owners.get(lib, "unknown"), "before": v.get("before", unread),
                               "old": v.get("old", unread), "new": v.get("new", unread)}, context=(None, None))
    return scenario_output(rec)


def area_scenarios(device: int) -> list[Scenario]:
    """One scenario per teardown, every library inside it; repeated, each in a fresh process."""
    return [Scenario(f"blast-{t}", blast, (device, t), isolation=Isolation.FRESH, undefined=True,
                     timeout=CHILD_TIMEOUT + 60, env=ENV) for t in TEARDOWNS]
