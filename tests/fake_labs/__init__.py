"""Test-only labs for ctxlab check: one that passes, one whose scenario crashes,
one whose scenario hangs, one whose documented claim fails, one whose judge breaks,
one whose undefined-behaviour scenario crashes in one repeat of three, and labs whose
every claim is skipped for a structured reason (ctxlab.records.skips) that the run's
record bears out or contradicts."""

from ctxlab.claim import Claim, some
from ctxlab.lab import Isolation, Lab, LabOptions, Scenario
from ctxlab.records import skips


def _count(observations):
    return {"n": len(some(observations, "seen"))}


def _lab(name, target, promise=lambda facts: True, facts=_count, undefined=False, args=(), gpus=1):
    claim = Claim(f"{name}.claim", "A statement.", "a source", "promise", ("only",), facts, "{n} observations",
                  promise)
    return Lab(name, "A question?", LabOptions, (claim,),
               lambda options: [Scenario("only", target, args, timeout=60, undefined=undefined)], needs_gpu=False,
               gpus=gpus)


def _broken(observations):
    raise ZeroDivisionError("the judge divided by zero")


OK = _lab("ok", "tests.fake_labs.targets:observe")
CRASH = _lab("crash", "tests.isolate_targets:crash")
HANG = _lab("hang", "tests.isolate_targets:hang")
FAILS = _lab("fails", "tests.fake_labs.targets:observe", promise=lambda facts: False)
BROKEN_JUDGE = _lab("broken-judge", "tests.fake_labs.targets:observe", facts=_broken)
# Every claim skipped: a two-GPU lab on a machine of one (a run that judged nothing); a one-GPU lab that skips for
# want of two GPUs (no record can bear that out); a lab that skips for want of a library (CuPy), not installed.
SKIPS = _lab("skips", "tests.fake_labs.targets:skip_all", args=(skips.gpus(2, 1),), gpus=2)
SKIPS_ONE_GPU_LAB = _lab("skips-one-gpu-lab", "tests.fake_labs.targets:skip_all", args=(skips.gpus(2, 1),))
SKIPS_LIBRARY = _lab("skips-library", "tests.fake_labs.targets:skip_all",
                     args=(skips.library("cupy", ("cupy-cuda13x", "cupy-cuda12x", "cupy"), installed=False,
                                         error="No module named 'cupy' (stand-in)"),))
# A feature this machine's software lacks: the claim was asked and answered here (no level promises past it).
SKIPS_UNSUPPORTED = _lab("skips-unsupported", "tests.fake_labs.targets:skip_all",
                         args=(skips.unsupported("this driver cannot do it (stand-in)"),))
# A run that could not decide its claim (untraced): no record bears it out and nothing answered it.
SKIPS_INAPPLICABLE = _lab("skips-inapplicable", "tests.fake_labs.targets:skip_all",
                          args=(skips.inapplicable("not traced (stand-in)"),))
FLAKY = _lab("flaky", "tests.fake_labs.targets:crash_on_second_call", undefined=True)

# One scenario that needs the GPU alone and three that share it, each taking 0.3 s.
TIMED = Lab("timed", "A question?", LabOptions,
            (Claim("timed.claim", "A statement.", "a source", "promise", ("alone", "shared-1"), _count,
                   "{n} observations", lambda facts: True),),
            lambda options: [Scenario("shared-1", "tests.fake_labs.targets:nap", timeout=60),
                             Scenario("shared-2", "tests.fake_labs.targets:nap", timeout=60),
                             Scenario("shared-3", "tests.fake_labs.targets:nap", timeout=60),
                             Scenario("alone", "tests.fake_labs.targets:nap", timeout=60,
                                      isolation=Isolation.GPU_ALONE)], needs_gpu=False)



def _pids(observations):
    return {"n": len(some(observations, "seen"))}


def _shared_lab(name: str, steps: list[tuple[str, str, tuple]]) -> Lab:
    """A lab of SHARED scenarios (name, target in targets.py, args) with the stand-in clean check."""
    claim = Claim(f"{name}.claim", "Every scenario observed.", "a source", "promise",
                  tuple(n for n, _, _ in steps), _pids, "{n} observations", lambda facts: facts["n"] == len(steps))
    return Lab(name, "A question?", LabOptions, (claim,),
               lambda options: [Scenario(n, f"tests.fake_labs.targets:{t}", (n, *a), timeout=3,
                                         isolation=Isolation.SHARED) for n, t, a in steps],
               needs_gpu=False, clean_check="tests.fake_labs.targets:stand_in_check")


SHARED = _shared_lab("shared", [(f"s{i}", "observe_pid", ()) for i in range(1, 5)])
SHARED_DIRTY = _shared_lab("shared-dirty", [("s1", "observe_pid", ()),
                                            ("s2", "leave", ("a context is current (stand-in)",)),
                                            ("s3", "observe_pid", ()), ("s4", "observe_pid", ())])
SHARED_DIRTY_SLOW = _shared_lab("shared-dirty-slow", [("s1", "leave", ("a context is current (stand-in)",)),
                                                      *((f"s{i}", "slow_observe", ()) for i in range(2, 6))])
SHARED_CRASH = _shared_lab("shared-crash", [("s1", "observe_pid", ()), ("s2", "crash_in_shared", ()),
                                            ("s3", "observe_pid", ())])
SHARED_HANG = _shared_lab("shared-hang", [("s1", "observe_pid", ()), ("s2", "hang_in_shared", ()),
                                          ("s3", "observe_pid", ())])


def _seen_in(scenario: str):
    def facts(observations):
        return {"n": len(some(observations, "seen", scenario))}
    return facts


# Levels (ctxlab.levels): a node-health promise (level 1), a documented promise over an undefined-behaviour
# scenario (level 2 by its kind), an observation (the full level); each claim has a scenario of its own.
LEVELLED = Lab("levelled", "A question?", LabOptions, (
    Claim("levelled.health", "A node-health promise.", "a source", "promise", ("health",), _seen_in("health"),
          "{n} observations", lambda facts: facts["n"] == 1, level=1),
    Claim("levelled.documented", "A documented promise.", "a source", "promise", ("undefined",),
          _seen_in("undefined"), "{n} observations", lambda facts: facts["n"] >= 1),
    Claim("levelled.observed", "What happens.", "a source", "observation", ("extra",), _seen_in("extra"),
          "{n} observations")),
    lambda options: [Scenario(n, "tests.fake_labs.targets:observe_pid", (n,), timeout=60, undefined=n == "undefined")
                     for n in ("health", "undefined", "extra")], needs_gpu=False)

REGISTRY = {"ok": "tests.fake_labs:OK", "crash": "tests.fake_labs:CRASH", "hang": "tests.fake_labs:HANG",
            "fails": "tests.fake_labs:FAILS", "broken-judge": "tests.fake_labs:BROKEN_JUDGE",
            "flaky": "tests.fake_labs:FLAKY", "timed": "tests.fake_labs:TIMED", "shared": "tests.fake_labs:SHARED",
            "shared-dirty": "tests.fake_labs:SHARED_DIRTY", "shared-crash": "tests.fake_labs:SHARED_CRASH",
            "shared-hang": "tests.fake_labs:SHARED_HANG", "shared-dirty-slow": "tests.fake_labs:SHARED_DIRTY_SLOW",
            "levelled": "tests.fake_labs:LEVELLED", "skips": "tests.fake_labs:SKIPS",
            "skips-one-gpu-lab": "tests.fake_labs:SKIPS_ONE_GPU_LAB", "skips-library": "tests.fake_labs:SKIPS_LIBRARY",
            "skips-unsupported": "tests.fake_labs:SKIPS_UNSUPPORTED",
            "skips-inapplicable": "tests.fake_labs:SKIPS_INAPPLICABLE"}
