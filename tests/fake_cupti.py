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
