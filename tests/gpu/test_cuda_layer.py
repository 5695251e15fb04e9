import pytest

from ctxlab.harness.isolate import run_isolated

pytestmark = pytest.mark.gpu


def test_check_turns_a_real_driver_error_into_a_named_cuda_error():
    from ctxlab.cuda.environment import init_driver
    from ctxlab.cuda.errors import CudaError, check

    driver = init_driver()
    with pytest.raises(CudaError) as info:
        check(driver.cuDeviceGet(10_000), "cuDeviceGet")
    assert info.value.name == "CUDA_ERROR_INVALID_DEVICE" and info.value.code == 101
    assert info.value.explanation  # NVIDIA's sentence, from the real driver


def test_a_driver_call_on_a_thread_without_context_is_invalid_context():
    import threading

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.errors import CudaError

    seen = {}

    def body():
        seen["current"] = drv.current().handle
        try:
            drv.synchronize()
        except CudaError as exc:
            seen["error"] = exc.name

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == {"current": 0, "error": "CUDA_ERROR_INVALID_CONTEXT"}


def test_helpers_against_the_real_driver():
    out = run_isolated("tests.gpu.gpu_targets:helpers_roundtrip", timeout=120)
    assert out["before"] == 0 and out["after_pop"] == 0
    assert out["pushed_is_primary"] and out["pointer_context_is_primary"] and out["stream_context_is_primary"]
    assert out["popped_is_primary"] and out["created_is_current"] and out["created_id_differs"]
    assert out["pointer_device"] == 0
    assert out["global"] == 42
    assert out["state_after"] is True


def test_the_captured_environment_names_the_driver_variables_of_the_run(monkeypatch):
    from ctxlab.cuda.environment import capture

    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "8")  # read by the driver at context creation, not here
    env = capture(0)
    assert env["driver_variables"]["CUDA_DEVICE_MAX_CONNECTIONS"] == "8"
    assert env["gpu"].startswith("NVIDIA")


def test_doctor_on_a_real_gpu():
    from ctxlab.cuda.environment import doctor

    report = doctor()
    assert report["missing"] == []
    assert report["driver"]["version"] >= 12000
    dev = report["driver"]["devices"][0]
    assert dev["name"] and dev["compute_capability"].count(".") == 1 and dev["memory_bytes"] > 2**30
    assert report["driver"]["module_loading_mode"].startswith("CU_MODULE_")
    assert report["cupy"]["runtime_version"] >= 12000 and report["cuda_bindings"]["runtime_version"] >= 12000


def test_a_device_that_does_not_exist_is_a_usage_error():
    from click.testing import CliRunner

    from ctxlab.cli import cli
    from ctxlab.cuda.environment import device_count

    missing = device_count()
    result = CliRunner().invoke(cli, ["migrate", "--device", str(missing)], catch_exceptions=False)
    assert result.exit_code == 2
    assert f"device {missing} does not exist" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(cli, ["check", "--devices", f"0,{missing}"], catch_exceptions=False)
    assert result.exit_code == 2 and "does not exist" in result.output


def test_green_context_helpers_against_the_real_driver():
    """ctxlab.cuda.green alone, before the labs use it: a failure here is the helper's, not a lab's."""
    out = run_isolated("tests.gpu.gpu_targets:green_roundtrip", timeout=120)
    assert out["before"] is False and out["primary_active_after_create"] is True, out
    assert 0 < out["group_sms"] <= out["resource_sms"] < out["device_sms"], out
    assert out["group_sms"] + out["remainder_sms"] <= out["device_sms"], out
    assert out["current_is_green"] and out["popped_is_green"] and out["global"] == 42, out
    assert out["primary_active_after_destroy"] is False, out  # the green context's reference was the only one
