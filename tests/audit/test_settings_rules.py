"""Settings are state too (issue 47 item 6): who set each limit, flag and pool attribute, and a setting changed
by one library or thread under another is a finding at the change, with the other's setting as its because and
the call that then behaved differently beside it (CPU only, synthetic streams)."""

from ctxlab.audit import RULES_BY_ID, judge
from ctxlab.audit.engine import Stream
from ctxlab.audit.rules.settings import settings
from ctxlab.tracing.fields import FIELDS, RUNTIME_FIELDS, named_args
from tests.audit_events import MAIN, PRIMARY, WORKER, Events

HEAP, STACK = 2, 0
MIB = 1 << 20
POOL = 0xB00B00


def heap_stream(second_value: int = 8 * MIB, second_library: str | None = None, tid: int = WORKER,
                fail: bool = True) -> Events:
    ev = Events()
    ev.primary_runtime()
    ev.runtime("cudaDeviceSetLimit", 100, context=PRIMARY, line=10, library="cupy",
               args={"limit": HEAP, "value": 256 * MIB})
    ev.runtime("cudaLaunchKernel", 150, context=PRIMARY, line=12, library="cupy")
    ev.runtime("cudaDeviceSetLimit", 200, tid=tid, context=PRIMARY, line=20, library=second_library,
               args={"limit": HEAP, "value": second_value})
    ev.runtime("cudaLaunchKernel", 300, context=PRIMARY, line=30, library="cupy",
               status="cudaErrorLaunchFailure" if fail else None)
    return ev


def test_the_kept_parameters_name_the_limit_and_its_value():
    assert named_args("cuCtxSetLimit", (2, 8 * MIB)) == {"limit": 2, "value": 8 * MIB}
    assert named_args("cudaDeviceSetLimit_v3020", (0, 4096), runtime=True) == {"limit": 0, "value": 4096}
    assert [f[0] for f in FIELDS["cuMemPoolSetAttribute"]] == ["pool", "attr", "value"]
    assert RUNTIME_FIELDS["cudaSetDeviceFlags_v3020"][0][:3] == ("flags", 0, 0)


def test_the_model_knows_who_set_each_setting_and_when():
    model = settings(Stream(heap_stream().events))
    (history,) = model.history.values()
    assert [(h.value, h.owner) for h in history] == [(256 * MIB, ("cupy", "MainThread")),
                                                     (8 * MIB, ("the program", "worker"))]
    assert model.before(("limit", HEAP, PRIMARY), 250).value == 8 * MIB
    assert model.before(("limit", HEAP, PRIMARY), 150).value == 256 * MIB


def test_a_limit_another_library_set_changed_under_it_is_a_warning_at_the_change():
    findings = judge(heap_stream().events)
    (f,) = [f for f in findings if f.rule == "setting-changed-under"]
    assert f.severity == "warning" and f.thread == "worker" and f.location is not None and f.location.line == 20
    assert "malloc heap size" in f.message and "256 MiB" in f.message and "8 MiB" in f.message
    assert f.because.call.startswith("cudaDeviceSetLimit") and f.because.thread == "MainThread"
    assert f.because.location is not None and f.because.location.line == 10 and "cupy" in f.because.what
    assert [(what, loc.line) for what, loc in f.related] == [("behaved differently after it at", 30)]


def test_the_same_value_or_the_same_owner_is_quiet():
    assert not [f for f in judge(heap_stream(second_value=256 * MIB).events) if f.rule == "setting-changed-under"]
    same = heap_stream(second_library="cupy", tid=MAIN)
    assert not [f for f in judge(same.events) if f.rule == "setting-changed-under"]


def reliance_stream(fail: bool) -> Events:
    ev = Events()
    ev.primary_runtime()
    ev.runtime("cudaLaunchKernel", 100, context=PRIMARY, line=5, library="torch")
    ev.driver("cuCtxSetLimit", 200, context=PRIMARY, line=20, args={"limit": STACK, "value": 256})
    ev.runtime("cudaLaunchKernel", 300, context=PRIMARY, line=30, library="torch",
               status="cudaErrorLaunchOutOfResources" if fail else None)
    return ev


def test_a_limit_lowered_under_a_library_that_relied_on_it_is_found_when_its_call_then_fails():
    (f,) = [f for f in judge(reliance_stream(fail=True).events) if f.rule == "setting-changed-under"]
    assert f.location is not None and f.location.line == 20 and "stack size" in f.message
    assert f.because.call.startswith("cudaLaunchKernel") and f.because.location.line == 5
    assert "torch" in f.because.what and "cudaErrorLaunchOutOfResources" in f.message


def test_a_limit_set_once_before_others_relied_on_it_and_nothing_failed_is_quiet():
    assert not [f for f in judge(reliance_stream(fail=False).events) if f.rule == "setting-changed-under"]


def test_a_pool_release_threshold_changed_by_another_library():
    ev = Events()
    ev.primary_runtime()
    ev.driver("cuMemPoolSetAttribute", 100, context=PRIMARY, line=8, library="cupy",
              args={"pool": POOL, "attr": 4, "value": (1 << 64) - 1})
    ev.driver("cuMemAllocAsync", 150, context=PRIMARY, line=9, library="cupy", args={"ptr": 0x7000, "size": 64})
    ev.driver("cuMemPoolSetAttribute", 200, tid=WORKER, context=PRIMARY, line=22, library="rmm",
              args={"pool": POOL, "attr": 4, "value": 0})
    ev.driver("cuMemAllocAsync", 250, context=PRIMARY, line=30, library="cupy", args={"ptr": 0x8000, "size": 64})
    (f,) = [f for f in judge(ev.events) if f.rule == "setting-changed-under"]
    assert "release threshold" in f.message and f.location.line == 22 and f.thread == "worker"
    assert f.because.location.line == 8 and f.because.thread == "MainThread"
    assert [loc.line for _, loc in f.related] == [30]


def test_a_failing_dependent_call_is_explained_by_the_change_under_it():
    ev = heap_stream()
    ev.events[-1]["status"] = "cudaErrorInvalidValue"  # not sticky: a failed-call finding of its own
    (f,) = [f for f in judge(ev.events) if f.rule == "failed-call"]
    assert f.because.call.startswith("cudaDeviceSetLimit") and f.because.thread == "worker"
    assert f.because.location.line == 20 and "under cupy" in f.because.what


def test_device_flags_refused_on_an_active_context_name_the_context_made_before():
    ev = Events()
    ev.primary_runtime(line=5)
    ev.runtime("cudaSetDeviceFlags", 200, context=PRIMARY, line=40, args={"flags": 4},
               status="cudaErrorSetOnActiveProcess")
    (f,) = [f for f in judge(ev.events) if f.rule == "failed-call"]
    assert f.because.location is not None and f.because.location.line == 5 and "already active" in f.because.what


def test_the_rule_is_declared_as_a_warning():
    rule = RULES_BY_ID["setting-changed-under"]
    assert rule.severity == "warning" and "CUDA_VISIBLE_DEVICES" in rule.cannot_see
