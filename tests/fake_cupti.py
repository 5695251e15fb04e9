"""CUPTI-shaped callback data for driving ctxlab's C callback without CUPTI or a GPU (the CPU tests and the
flight-cost benchmark call it as the driver would)."""

import ctypes


class CallbackData(ctypes.Structure):
    """CUpti_CallbackData's layout (cupti_callbacks.h)."""

    _fields_ = [("site", ctypes.c_uint32), ("function_name", ctypes.c_void_p), ("params", ctypes.c_void_p),
                ("return_value", ctypes.c_void_p), ("symbol", ctypes.c_void_p), ("context", ctypes.c_uint64),
                ("context_uid", ctypes.c_uint32), ("correlation_data", ctypes.c_void_p),
                ("correlation", ctypes.c_uint32)]


class Call:
    """The enter and exit data of one fake driver call, kept alive while the C side reads them."""

    def __init__(self, correlation: int, context: int = 0x1000, status: int = 0, params: bytes = b"\0" * 64):
        self.params = ctypes.create_string_buffer(params, 64)
        self.status = ctypes.c_int(status)
        self.enter = CallbackData(0, None, ctypes.addressof(self.params), None, None, context, 7, None, correlation)
        self.exit = CallbackData(1, None, ctypes.addressof(self.params), ctypes.addressof(self.status), None,
                                 context, 7, None, correlation)


def open_recording(folder: str, names: dict, records: int, stacks: int = 1 << 8, size: int = 1 << 20,
                   failure_stacks: bool = False):
    """ctxlab's C callback set up without CUPTI (its own clock), recording into a new flight file in ``folder``
    whose names file is ``names``; left switched off (``ctxlab_set_active(1)`` starts it). (lib, FlightFiles)."""
    from ctxlab.tracing import native
    from ctxlab.tracing.recorder import NAMES, RECORDS, FlightFiles, write_json

    lib = native.load()
    lib.ctxlab_set_active(0)
    lib.ctxlab_reset()
    lib.ctxlab_init(0, 0, 0, *native.python_api(), 50)
    lib.ctxlab_set_failure_stacks(1 if failure_stacks else 0)
    lib.ctxlab_set_names(*native.naming_api(), 0)
    files = FlightFiles(str(folder))
    failed = lib.ctxlab_flight_open(files.path(RECORDS).encode(), records, stacks, size)
    if failed:
        raise OSError(failed, f"cannot map the flight recording in {folder}")
    write_json(files.path(NAMES), names)
    return lib, files
