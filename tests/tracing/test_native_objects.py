"""Naming the shared object a native return address lies in (ctxlab/tracing/native/objects.py)."""

import ctypes
import struct

from hypothesis import given
from hypothesis import strategies as st

from ctxlab.tracing.native import CALLERS_ITEM, objects


def item(addresses: list[int]) -> bytes:
    return struct.pack("<II", CALLERS_ITEM, 8 * len(addresses)) + b"".join(struct.pack("<Q", a) for a in addresses)


def test_an_address_in_a_loaded_library_names_that_library():
    strlen = ctypes.cast(ctypes.CDLL(None).strlen, ctypes.c_void_p).value
    path = objects.object_of(strlen)
    assert path is not None and "libc.so" in path and objects.passing(path)


def test_an_address_nothing_is_loaded_at_names_nothing():
    assert objects.object_of(0) is None and objects.object_of(8) is None
    assert objects.callers(item([0, 8])) == []


def test_callers_skip_the_c_library_and_keep_each_object_once():
    strlen = ctypes.cast(ctypes.CDLL(None).strlen, ctypes.c_void_p).value
    ffi = ctypes.cast(ctypes.pythonapi.Py_IncRef, ctypes.c_void_p).value  # the interpreter itself
    found = objects.callers(item([strlen, ffi, ffi, strlen]))
    assert len(found) == 1 and "libc.so" not in found[0]


@given(st.lists(st.integers(0, 2**64 - 1), max_size=40))
def test_addresses_read_back_what_was_kept(addresses):
    assert objects.addresses(item(addresses)) == addresses


@given(st.binary(max_size=64))
def test_a_short_or_torn_item_reads_as_what_it_holds_without_raising(raw):
    assert all(isinstance(a, int) for a in objects.addresses(raw))


def test_library_names_are_paths_below_site_packages():
    assert objects.library_name("/x/lib/python3.12/site-packages/nvidia/cuda_runtime/lib/libcudart.so.13") \
        == "nvidia/cuda_runtime/lib/libcudart.so.13"
    assert objects.library_name("/usr/lib/x86_64-linux-gnu/libcudart.so.12") == "libcudart.so.12"
    assert objects.library_name("/venv/lib/python3.12/dist-packages/cupy/cuda/cub.so") == "cupy/cuda/cub.so"
