"""GPU checks that need a fresh process (they change the primary context or threads' state)."""


def helpers_roundtrip():
    import cupy

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.kernels import ProbeModule

    out = {"before": drv.current().handle, "state_before": drv.primary_state(0).active}
    primary = drv.primary_retain(0)
    drv.push(primary)
    out["pushed_is_primary"] = drv.current().handle == primary
    out["id"] = drv.context_id(primary)
    a = cupy.arange(10)
    out["pointer_context_is_primary"] = drv.pointer_context(a.data.ptr) == primary
    out["pointer_device"] = drv.pointer_device(a.data.ptr)
    probe = ProbeModule.load()
    probe.write_global(41)
    probe.add_to_global(1)
    drv.synchronize()
    out["global"] = probe.read_global()
    stream = drv.stream_create()
    out["stream_context_is_primary"] = drv.stream_context(stream) == primary
    out["popped_is_primary"] = drv.pop() == primary
    out["after_pop"] = drv.current().handle
    created = drv.create_context(0)
    out["created_is_current"] = drv.current().handle == created
    out["created_id_differs"] = drv.context_id(created) != out["id"]
    drv.destroy_context(created)
    drv.primary_release(0)
    out["state_after"] = drv.primary_state(0).active  # CuPy's runtime still holds one reference
    return out


def green_roundtrip():
    """ctxlab.cuda.green against the real driver: make, push, use, pop, destroy; the primary context's state."""
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda import green as greens
    from ctxlab.cuda.kernels import ProbeModule

    out: dict = {"before": drv.primary_state(0).active}
    green = greens.create(0)
    out.update(green.info())
    out["primary_active_after_create"] = drv.primary_state(0).active  # cuGreenCtxCreate retains it
    out["resource_sms"] = greens.resource_sms(green)
    drv.push(green.handle)
    out["current_is_green"] = drv.current().handle == green.handle
    out["id"] = drv.context_id(green.handle)
    probe = ProbeModule.load()
    probe.write_global(41)
    probe.add_to_global(1)
    drv.synchronize()
    out["global"] = probe.read_global()
    out["green_stream_context"] = drv.stream_context(greens.stream_create(green))
    out["popped_is_green"] = drv.pop() == green.handle
    greens.destroy(green)
    out["primary_active_after_destroy"] = drv.primary_state(0).active
    return out
