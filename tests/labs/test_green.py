"""ctxlab.cuda.green over a fake driver module (no GPU here): the calls in order with the arguments cuda.bindings
takes, the SM counts kept, a refusal read as "no green context here", and green scenarios that record why they
could not run. What the driver really does is the GPU tests' job (tests/gpu/test_labs.py)."""

from __future__ import annotations

import enum
from types import SimpleNamespace

import pytest

from ctxlab.cuda import green as greens
from ctxlab.cuda.errors import CudaError


class Status(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_NOT_SUPPORTED = 801


def resource(sms: int) -> SimpleNamespace:
    return SimpleNamespace(sm=SimpleNamespace(smCount=sms))


class FakeDriver:
    """The cuda.bindings driver calls green.py makes, returning what cuda-bindings 13.x returns."""

    CUdevResourceType = SimpleNamespace(CU_DEV_RESOURCE_TYPE_SM="SM")
    CUgreenCtxCreate_flags = SimpleNamespace(CU_GREEN_CTX_DEFAULT_STREAM=Status(1))
    CUstream_flags = SimpleNamespace(CU_STREAM_NON_BLOCKING=Status(1))

    class CUdevice(int):
        pass

    class CUcontext(int):
        pass

    def __init__(self, version: int = 13000, sms: int = 132, refuse: str | None = None, made: int = 1):
        self.version, self.sms, self.refuse, self.made = version, sms, refuse, made
        self.calls: list[tuple] = []

    def _ok(self, name: str, *values):
        self.calls.append((name, *values))
        if self.refuse == name:
            return (Status.CUDA_ERROR_NOT_SUPPORTED,)
        return (Status.CUDA_SUCCESS, *values)

    def cuDriverGetVersion(self):
        return (Status.CUDA_SUCCESS, self.version)

    def cuDeviceGetDevResource(self, dev, kind):
        assert kind == "SM" and isinstance(dev, self.CUdevice)
        return self._ok("cuDeviceGetDevResource", resource(self.sms))

    def cuDevSmResourceSplitByCount(self, groups, input_, flags, min_count):
        assert (groups, flags) == (1, 0) and input_.sm.smCount == self.sms
        self.calls.append(("split", min_count))
        return (Status.CUDA_SUCCESS, [resource(min_count)] * groups, self.made, resource(self.sms - min_count))

    def cuDevResourceGenerateDesc(self, resources, count):
        assert count == len(resources) == 1
        return self._ok("cuDevResourceGenerateDesc", "desc")

    def cuGreenCtxCreate(self, desc, dev, flags):
        assert desc == "desc" and flags == 1 and type(flags) is int
        return self._ok("cuGreenCtxCreate", "green")

    def cuCtxFromGreenCtx(self, green):
        return self._ok("cuCtxFromGreenCtx", 0x5A5A)

    def cuGreenCtxDestroy(self, green):
        return self._ok("cuGreenCtxDestroy")

    def cuGreenCtxGetDevResource(self, green, kind):
        return self._ok("cuGreenCtxGetDevResource", resource(16))

    def cuGreenCtxStreamCreate(self, green, flags, priority):
        assert (flags, priority) == (1, 0)
        return self._ok("cuGreenCtxStreamCreate", 0x57)


@pytest.fixture
def fake(monkeypatch):
    def install(**kwargs) -> FakeDriver:
        driver = FakeDriver(**kwargs)
        monkeypatch.setattr(greens, "_driver", lambda: driver)
        monkeypatch.setattr("ctxlab.cuda.driver._driver", lambda: driver)
        return driver
    return install


def test_a_green_context_is_made_in_the_documented_four_steps_and_keeps_the_sm_counts(fake):
    driver = fake()
    green = greens.create(0)
    assert [c[0] for c in driver.calls] == ["cuDeviceGetDevResource", "split", "cuDevResourceGenerateDesc",
                                            "cuGreenCtxCreate", "cuCtxFromGreenCtx"]
    assert (green.handle, green.device_sms, green.group_sms, green.remainder_sms, green.asked) == \
        (0x5A5A, 132, 16, 116, 16)
    assert green.info()["handle"] == 0x5A5A
    assert greens.resource_sms(green) == 16 and greens.stream_create(green) == 0x57
    greens.destroy(green)
    assert driver.calls[-1][0] == "cuGreenCtxDestroy"


def test_a_small_device_asks_for_half_its_sms(fake):
    fake(sms=20)
    assert greens.create(0).asked == 10


def test_an_old_driver_or_a_refusal_is_a_reason_not_an_error(fake):
    fake(version=12030)
    assert greens.make_or_reason(0) == (None, "the driver supports CUDA 12.3; green contexts need CUDA 12.4")
    fake(refuse="cuGreenCtxCreate")
    assert greens.make_or_reason(0) == (None, "cuGreenCtxCreate returned CUDA_ERROR_NOT_SUPPORTED")
    fake(made=0)
    green, why = greens.make_or_reason(0)
    assert green is None and "made no group" in why


def test_bindings_without_the_calls_are_a_reason(fake, monkeypatch):
    driver = fake()
    monkeypatch.delattr(FakeDriver, "cuGreenCtxGetDevResource")
    assert "has no cuGreenCtxGetDevResource" in greens.unavailable()
    assert driver.calls == []


def test_any_other_failure_is_the_experiment_breaking(fake, monkeypatch):
    driver = fake()
    monkeypatch.setattr(driver, "cuDevResourceGenerateDesc", lambda r, n: (Status.CUDA_ERROR_INVALID_VALUE,))
    with pytest.raises(CudaError) as caught:
        greens.create(0)
    assert caught.value.name == "CUDA_ERROR_INVALID_VALUE"


def test_green_scenarios_that_cannot_make_one_record_why(monkeypatch):
    from ctxlab.labs import lifecycle, migrate

    monkeypatch.setattr(greens, "make_or_reason", lambda device: (None, "cuGreenCtxCreate returned X"))
    outputs = [migrate.handoff(0, "green", 2, 1, 5.0), migrate.concurrent_green(0), migrate.green_sm(0),
               migrate.green_memory(0), migrate.green_cupy(0), lifecycle.green_runtime(0)]
    for out, scenario in zip(outputs, ("handoff-green", "concurrent-green", "green-sm", "green-memory",
                                       "green-cupy", "green-runtime"), strict=True):
        (o,) = out["observations"]
        why = {"kind": "unsupported", "why": "cuGreenCtxCreate returned X"}  # a structured reason, ctxlab.records.skips
        assert (o.what, o.value, o.scenario) == ("skipped", why, scenario)
