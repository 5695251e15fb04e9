"""Test-only labs for ctxlab check: one that passes, one whose scenario crashes,
one whose scenario hangs, one whose documented claim fails."""

from types import SimpleNamespace

from ctxlab.claims import Claim


def _lab(name, target, verdict="holds"):
    claim = Claim(f"{name}.claim", "A statement.", "a source", lambda obs: (verdict, f"{len(obs)} observations"))

    def run(options, progress=None):
        from ctxlab.labs.common import LabRun, Scenario

        lab = LabRun(name, options, progress)
        lab.run_all([Scenario("only", target, timeout=60)])
        return lab.finish({"device": options["device"], "gpu": "fake"}, (claim,))

    return SimpleNamespace(NAME=name, CLAIMS=(claim,), run=run)


OK = _lab("ok", "tests.fake_labs.targets:observe")
CRASH = _lab("crash", "tests.isolate_targets:crash")
HANG = _lab("hang", "tests.isolate_targets:hang")
FAILS = _lab("fails", "tests.fake_labs.targets:observe", verdict="fails")

REGISTRY = {"ok": "tests.fake_labs:OK", "crash": "tests.fake_labs:CRASH", "hang": "tests.fake_labs:HANG",
            "fails": "tests.fake_labs:FAILS"}
