"""Every call that returns anything but success is a finding unless evidence says a library handled it: one
definition of a failing call (``engine.failed``, which the state model's ``failing`` is), the documented
answers only for the calls that document them (NOT_READY for the queries, PEER_ACCESS_ALREADY_ENABLED for
enabling peer access, NOT_FOUND for lookups by name), and a failing settings call never a probe."""

import pytest

from ctxlab.audit import judge
from ctxlab.audit.engine import ANSWERS, Stream, answered, failed
from ctxlab.audit.model.one_pass import model
from ctxlab.audit.model.state import failing
from ctxlab.audit.rules.failures import probes
from ctxlab.audit.rules.probes import SETTINGS, is_probe
from tests.audit_events import PRIMARY, Events


def rules(found):
    return [f.rule for f in found]


def test_the_state_model_and_the_engine_share_one_definition():
    assert failing is failed
    from ctxlab.audit.model import state

    assert state.ANSWERS is ANSWERS


@pytest.mark.parametrize("name,status", [
    ("cuEventQuery", "CUDA_ERROR_NOT_READY"), ("cuStreamQuery", "CUDA_ERROR_NOT_READY"),
    ("cuStreamQuery_ptsz", "CUDA_ERROR_NOT_READY"), ("cudaEventQuery", "cudaErrorNotReady"),
    ("cudaStreamQuery", "cudaErrorNotReady"), ("cudaStreamQuery_ptsz", "cudaErrorNotReady"),
    ("cuCtxEnablePeerAccess", "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"),
    ("cudaDeviceEnablePeerAccess", "cudaErrorPeerAccessAlreadyEnabled"),
    ("cuModuleGetGlobal_v2", "CUDA_ERROR_NOT_FOUND"), ("cuGetProcAddress_v2", "CUDA_ERROR_NOT_FOUND")])
def test_a_documented_answer_of_its_own_call_is_not_a_failure(name, status):
    event = {"domain": "runtime" if name.startswith("cuda") else "driver", "name": name, "status": status}
    assert answered(event) and not failed(event)
    ev = Events()
    ev.call(event["domain"], name, 60, context=PRIMARY, status=status, line=6)
    assert not judge(ev.events)


@pytest.mark.parametrize("name,status", [
    ("cudaEventElapsedTime", "cudaErrorNotReady"), ("cuEventElapsedTime_v2", "CUDA_ERROR_NOT_READY"),
    ("cuEventSynchronize", "CUDA_ERROR_NOT_READY"), ("cudaMemcpyAsync", "cudaErrorNotReady"),
    ("cuCtxDisablePeerAccess", "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED"),
    ("cudaDeviceDisablePeerAccess", "cudaErrorPeerAccessNotEnabled"),
    ("cuCtxEnablePeerAccess", "CUDA_ERROR_NOT_READY"), ("cuModuleGetFunction", "CUDA_ERROR_NOT_FOUND"),
    ("cuStreamQuery", "CUDA_ERROR_INVALID_HANDLE")])
def test_the_same_status_from_another_call_is_a_failure_and_a_finding(name, status):
    domain = "runtime" if name.startswith("cuda") else "driver"
    assert failed({"domain": domain, "name": name, "status": status})
    ev = Events()
    ev.call(domain, name, 60, context=PRIMARY, status=status, line=6)
    (f,) = judge(ev.events)
    assert f.rule == "failed-call" and f.location.line == 6 and status in f.message


def test_elapsed_time_not_ready_under_its_runtime_call_is_one_finding_at_the_programs_line():
    """cudaEventElapsedTime on an end event not complete: the runtime call and cuEventElapsedTime beneath it
    fail together, one failure at the user's line."""
    ev = Events()
    ev.runtime("cudaEventRecord", 40, context=PRIMARY, line=4, args={"event": 0xE2})
    ev.runtime("cudaEventElapsedTime", 60, end=80, context=PRIMARY, status="cudaErrorNotReady", line=7)
    ev.driver("cuEventElapsedTime_v2", 62, end=70, context=PRIMARY, status="CUDA_ERROR_NOT_READY", line=7,
              **{"from": "callback"})
    (f,) = judge(ev.events)
    assert f.rule == "failed-call" and f.location.line == 7
    assert "cudaEventElapsedTime" in f.message and "cuEventElapsedTime_v2 beneath it" in f.message


def test_a_query_answering_not_ready_beneath_a_successful_call_is_nothing_at_all():
    ev = Events()
    ev.runtime("cudaStreamSynchronize", 60, end=90, context=PRIMARY, line=7)
    ev.driver("cuStreamQuery", 62, end=64, context=PRIMARY, status="CUDA_ERROR_NOT_READY", **{"from": "callback"})
    stream = Stream(ev.events)
    assert not judge(ev.events) and not probes(stream)


@pytest.mark.parametrize("outer,inner,status", [
    ("cudaDeviceSetLimit", "cuCtxSetLimit", "CUDA_ERROR_UNSUPPORTED_LIMIT"),
    ("cudaSetDeviceFlags", "cuDevicePrimaryCtxSetFlags_v2", "CUDA_ERROR_INVALID_VALUE"),
    ("cudaDeviceSetCacheConfig", "cuCtxSetCacheConfig", "CUDA_ERROR_INVALID_VALUE"),
    ("cudaFuncSetAttribute", "cuFuncSetAttribute", "CUDA_ERROR_INVALID_VALUE"),
    ("cudaDeviceSetSharedMemConfig", "cuCtxSetSharedMemConfig", "CUDA_ERROR_INVALID_VALUE"),
    ("cudaMemPoolSetAttribute", "cuMemPoolSetAttribute", "CUDA_ERROR_INVALID_VALUE")])
def test_a_failing_settings_call_beneath_a_successful_call_is_still_a_finding(outer, inner, status):
    """The runtime went on, but without the setting: never a handled probe."""
    ev = Events()
    ev.runtime(outer, 60, end=90, context=PRIMARY, line=7)  # the runtime's call returned success
    ev.driver(inner, 62, end=64, context=PRIMARY, status=status, **{"from": "callback"})
    stream = Stream(ev.events)
    state = model(stream).states[id(ev.events[1])]
    assert state.handled_by is not None and not is_probe(state)
    (f,) = judge(ev.events)
    assert f.rule == "failed-call" and inner in f.message and f.location.line == 7 and f.location_from == "nearby"
    assert not probes(Stream(ev.events))


def test_a_failing_settings_call_the_program_makes_is_one_finding():
    ev = Events()
    ev.runtime("cudaDeviceSetLimit", 60, end=90, context=PRIMARY, status="cudaErrorUnsupportedLimit", line=7)
    ev.driver("cuCtxSetLimit", 62, end=64, context=PRIMARY, status="CUDA_ERROR_UNSUPPORTED_LIMIT", line=7,
              **{"from": "callback"})
    (f,) = judge(ev.events)
    assert f.rule == "failed-call" and "cudaDeviceSetLimit" in f.message and f.location.line == 7


def test_a_probe_handled_beneath_a_successful_runtime_call_is_still_info_not_a_finding():
    ev = Events()
    ev.runtime("cudaGetDeviceCount", 60, end=90, context=PRIMARY, line=7)
    ev.driver("cuDeviceGetAttribute", 62, end=64, context=PRIMARY, status="CUDA_ERROR_INVALID_VALUE",
              **{"from": "callback"})
    assert not judge(ev.events)
    (probe,) = probes(Stream(ev.events))
    assert probe["call"] == "cuDeviceGetAttribute" and "which succeeded" in probe["why"]


def test_every_settings_call_named_by_the_issue_is_known():
    for name in ("cudaDeviceSetLimit", "cuCtxSetLimit", "cudaSetDeviceFlags", "cuDevicePrimaryCtxSetFlags",
                 "cudaDeviceSetCacheConfig", "cuCtxSetCacheConfig", "cudaFuncSetAttribute", "cuFuncSetAttribute",
                 "cudaDeviceSetSharedMemConfig", "cuMemPoolSetAttribute"):
        assert name.startswith(SETTINGS), name
