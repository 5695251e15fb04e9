"""The allocator and library hooks on stand-ins with CuPy's and PyTorch's shapes (real CuPy needs a GPU even
to make a MemoryPointer; tests/gpu runs the real ones): each block out and back is noted with the user's line,
what the library returns is its own, and close puts every function back."""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time
import types

import pytest

from ctxlab.audit.child.allocators import AllocatorHooks, Notes
from ctxlab.audit.events import LIBRARY_NOT_WATCHED, LIBRARY_READY, LIBRARY_WAIT, POOL_ALLOC, POOL_FREE, RECORD_STREAM
from ctxlab.audit.rules.catalogue import RULES_BY_ID, judge


class Recorder:
    def __init__(self) -> None:
        self.notes: list[dict] = []
        self.t = 0

    def note(self, e: dict) -> None:
        self.notes.append(e)

    def timestamp(self) -> int:
        self.t += 1
        return self.t


def fake_cupy():
    """CuPy's allocator API: set_allocator/get_allocator, UnownedMemory(ptr, size, owner, device_id),
    MemoryPointer(mem, offset), get_current_stream().ptr; its pool hands out 0x7f00... blocks."""
    state = {"allocator": None, "next": 0x7F0000000000, "returned": []}

    class Pooled:
        def __init__(self, ptr, size):
            self.ptr, self.size, self.device_id = ptr, size, 0

        def __del__(self):
            state["returned"].append(self.ptr)

    class UnownedMemory:
        def __init__(self, ptr, size, owner, device_id):
            self.ptr, self.size, self.owner, self.device_id = ptr, size, owner, device_id

    class MemoryPointer:
        def __init__(self, mem, offset):
            self.mem, self.ptr, self.device_id = mem, mem.ptr + offset, mem.device_id

    def pool_malloc(size):
        state["next"] += 1 << 20
        return Pooled(state["next"], size)

    def set_allocator(allocator=None):
        state["allocator"] = allocator

    memory = types.SimpleNamespace(set_allocator=set_allocator, get_allocator=lambda: state["allocator"],
                                   UnownedMemory=UnownedMemory, MemoryPointer=MemoryPointer)
    stream = types.SimpleNamespace(ptr=0xA1)
    cuda = types.SimpleNamespace(memory=memory, set_allocator=set_allocator, get_current_stream=lambda: stream)
    set_allocator(pool_malloc)
    return types.SimpleNamespace(__name__="cupy", cuda=cuda), state


def test_cupy_blocks_are_noted_out_and_back_with_the_users_line():
    cupy, state = fake_cupy()
    rec = Recorder()
    hooks = AllocatorHooks(rec.note, rec.timestamp)
    hooks.hook_cupy(cupy)
    array = cupy.cuda.memory.get_allocator()(4096)  # the line the note names
    ptr = array.ptr
    assert [n["name"] for n in rec.notes] == [POOL_ALLOC] and state["returned"] == []
    out = rec.notes[0]
    assert (out["ptr"], out["size"], out["stream"], out["library"]) == (ptr, 4096, 0xA1, "CuPy")
    assert out["stack"][0][0].endswith("test_allocators.py")
    del array
    gc.collect()
    assert [n["name"] for n in rec.notes] == [POOL_ALLOC, POOL_FREE] and rec.notes[1]["ptr"] == ptr
    assert state["returned"] == [ptr]  # the pool got its block back after the note
    assert rec.notes[1]["start"] > out["start"]


def test_an_allocator_the_program_sets_later_is_wrapped_and_close_puts_the_original_back():
    cupy, state = fake_cupy()
    original = cupy.cuda.memory.get_allocator()
    rec = Recorder()
    hooks = AllocatorHooks(rec.note, rec.timestamp)
    hooks.hook_cupy(cupy)
    mine = cupy.cuda.memory.get_allocator()
    cupy.cuda.set_allocator(original)  # the program sets its own: wrapped again
    assert getattr(cupy.cuda.memory.get_allocator(), "__ctxlab_pool__", False)
    cupy.cuda.set_allocator(mine)  # a wrapped one is not wrapped twice
    assert cupy.cuda.memory.get_allocator() is mine
    cupy.cuda.set_allocator(None)
    assert cupy.cuda.memory.get_allocator() is None
    hooks.close()
    assert cupy.cuda.memory.get_allocator() is original and not hasattr(cupy.cuda.set_allocator, "__wrapped__")


def fake_torch(recorded: bool = False, monkeypatch: pytest.MonkeyPatch | None = None):
    """PyTorch's trace registries, Tensor.record_stream, torch.cuda.Event (.cuda_event 0 until recorded). As in
    PyTorch, ``import torch`` leaves ``torch.cuda._gpu_trace`` unimported: with ``monkeypatch`` it is put in
    sys.modules (imported by name), without it there is none."""
    callbacks: dict[str, list] = {"alloc": [], "free": []}
    trace = types.SimpleNamespace(register_callback_for_memory_allocation=callbacks["alloc"].append,
                                  register_callback_for_memory_deallocation=callbacks["free"].append)
    active = []

    class Tensor:
        def __init__(self, ptr):
            self.ptr = ptr

        def untyped_storage(self):
            return types.SimpleNamespace(data_ptr=lambda: self.ptr)

        def record_stream(self, stream):
            return ("recorded", stream.cuda_stream)

    class Event:
        def __new__(cls, enable_timing=False):
            return super().__new__(cls)

        def __init__(self, enable_timing=False):
            self.cuda_event = 0xE1 if recorded else 0

        def wait(self, stream=None):
            return "waited"

    class Stream:  # the first one on a device fills the pool: the trace's callbacks run in the middle of it
        inside: list[int] = []
        most = 0

        def __new__(cls, priority=0):
            cls.inside.append(1)
            cls.most = max(cls.most, len(cls.inside))
            time.sleep(0.002)  # Python may hand the GIL over here
            cls.inside.pop()
            return super().__new__(cls)

    stream = types.SimpleNamespace(cuda_stream=0xB2)
    cuda = types.SimpleNamespace(Event=Event, Stream=Stream, current_stream=lambda: stream)
    if monkeypatch is not None:
        monkeypatch.setitem(sys.modules, "torch.cuda._gpu_trace", trace)
    torch = types.SimpleNamespace(__name__="torch", cuda=cuda, Tensor=Tensor,
                                  _C=types.SimpleNamespace(_activate_gpu_trace=lambda: active.append(True)))
    return torch, callbacks, active, stream


def test_torch_blocks_record_stream_and_a_wait_on_an_event_never_recorded_are_noted(monkeypatch):
    torch, callbacks, active, stream = fake_torch(monkeypatch=monkeypatch)
    rec = Recorder()
    hooks = AllocatorHooks(rec.note, rec.timestamp)
    hooks.hook_torch(torch)
    assert active == [True]
    callbacks["alloc"][0](0x7F0000100000)
    tensor = torch.Tensor(0x7F0000100000)
    assert tensor.record_stream(stream) == ("recorded", 0xB2)  # the library's own answer
    event = torch.cuda.Event()  # made here
    assert event.wait() == "waited"
    callbacks["free"][0](0x7F0000100000)
    assert [n["name"] for n in rec.notes] == [POOL_ALLOC, RECORD_STREAM, LIBRARY_WAIT, POOL_FREE]
    alloc, record, wait, _free = rec.notes
    assert alloc["stream"] == 0xB2 and alloc["size"] == 0 and record["stream"] == 0xB2
    assert wait["made"]["stack"][0][1] == wait["stack"][0][1] - 1  # the Event() line, the one before the wait
    hooks.close()
    assert "record_stream" in vars(torch.Tensor) and torch.Tensor.record_stream(tensor, stream) == ("recorded", 0xB2)
    assert torch.cuda.Event.wait.__name__ == "wait" and "ctxlab" not in repr(vars(torch.cuda.Event)["__new__"])
    callbacks["free"][0](0x7F0000100000)  # the trace stays on in PyTorch: after close it notes nothing
    assert len(rec.notes) == 4


def test_with_the_trace_on_streams_are_made_one_at_a_time_and_close_puts_the_class_back(monkeypatch):
    torch, _, active, _ = fake_torch(monkeypatch=monkeypatch)
    stream_class, own_new = torch.cuda.Stream, vars(torch.cuda.Stream)["__new__"]
    hooks = AllocatorHooks(Recorder().note, Recorder().timestamp)

    def make_streams() -> list:
        made: list = []
        threads = [threading.Thread(target=lambda: made.append(stream_class(priority=-1))) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return made

    assert len(make_streams()) == 16 and stream_class.most > 1  # unhooked, the fake's streams overlap
    stream_class.most = 0
    hooks.hook_torch(torch)
    assert active == [True]
    made = make_streams()
    assert stream_class.most == 1 and all(type(s) is stream_class for s in made)
    hooks.close()
    assert vars(stream_class)["__new__"] is own_new


def test_a_child_forked_while_a_stream_was_being_made_makes_its_own(monkeypatch):
    torch, _, _, _ = fake_torch(monkeypatch=monkeypatch)
    stream_class, parent = torch.cuda.Stream, os.getpid()
    inside, leave = threading.Event(), threading.Event()
    own_new = vars(stream_class)["__new__"]

    def held_new(cls, priority=0):  # in the parent the first stream holds the hook's lock until told
        if os.getpid() == parent:
            inside.set()
            leave.wait(10)
        return own_new(cls, priority)

    stream_class.__new__ = held_new
    AllocatorHooks(Recorder().note, Recorder().timestamp).hook_torch(torch)
    maker = threading.Thread(target=stream_class)
    maker.start()
    assert inside.wait(10)
    pid = os.fork()
    if pid == 0:  # the child: the thread holding the lock is not here; its stream must not wait for it
        signal.alarm(5)
        try:
            stream_class()
        finally:
            os._exit(0)
    leave.set()
    maker.join(10)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0  # SIGALRM (-14) had it waited


def test_a_torch_without_streams_keeps_the_trace_off():
    torch, _, active, _ = fake_torch()
    del torch.cuda.Stream  # nothing to serialise: the trace would risk a hang, so it stays off
    rec = Recorder()
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "torch.cuda._gpu_trace", types.SimpleNamespace(
            register_callback_for_memory_allocation=print, register_callback_for_memory_deallocation=print))
        AllocatorHooks(rec.note, rec.timestamp).hook_torch(torch)
    assert active == [] and [n["part"] for n in rec.notes] == ["caching allocator"]


def test_a_wait_on_a_recorded_event_notes_nothing(monkeypatch):
    torch, _, _, _ = fake_torch(recorded=True, monkeypatch=monkeypatch)
    rec = Recorder()
    AllocatorHooks(rec.note, rec.timestamp).hook_torch(torch)
    torch.cuda.Event().wait()
    assert rec.notes == []


def test_a_note_made_inside_a_note_waits_and_is_sent_next():
    sent: list[dict] = []
    notes: Notes

    def note(e: dict) -> None:
        if e["name"] == "outer":  # a finaliser running inside the tracer's note (a garbage collection)
            notes.send(notes.make("inner"))
        sent.append(e)

    notes = Notes(note, iter(range(100)).__next__)
    notes.send(notes.make("outer"))
    assert [e["name"] for e in sent] == ["outer"]
    notes.send(notes.make("next"))
    assert [e["name"] for e in sent] == ["outer", "inner", "next"]
    assert sent[1]["start"] < sent[2]["start"]  # the queued note keeps its own time


def test_a_library_whose_internals_differ_is_left_alone_and_the_report_says_what_is_not_judged():
    rec = Recorder()
    hooks = AllocatorHooks(rec.note, rec.timestamp)
    hooks._wrap_module(types.SimpleNamespace(__name__="torch", cuda=None))  # nothing a hook needs: no error
    hooks._wrap_module(types.SimpleNamespace(__name__="cupy"))
    hooks.close()
    assert [(n["name"], n["library"], n["part"]) for n in rec.notes] == [
        (LIBRARY_NOT_WATCHED, "PyTorch", "caching allocator"),
        (LIBRARY_NOT_WATCHED, "PyTorch", "Tensor.record_stream"),
        (LIBRARY_NOT_WATCHED, "PyTorch", "torch.cuda.Event"),
        (LIBRARY_NOT_WATCHED, "CuPy", "memory pool")]
    assert all(n["stack"] and n["error"].split(":")[0].endswith("Error") for n in rec.notes)
    found = judge(rec.notes, rules=[RULES_BY_ID["library-not-watched"]])
    assert [f.severity for f in found] == ["info"] * 4
    assert "PyTorch's the caching allocator" not in found[0].message  # the part reads as a phrase
    assert "not judged" in found[0].message and rec.notes[0]["error"] in found[0].message


def test_a_torch_whose_trace_module_is_missing_keeps_its_other_hooks():
    torch, _, active, _ = fake_torch()  # no torch.cuda._gpu_trace to import
    rec = Recorder()
    AllocatorHooks(rec.note, rec.timestamp).hook_torch(torch)
    assert active == [] and [n["part"] for n in rec.notes] == ["caching allocator"]
    torch.cuda.Event().wait()  # the event hook still notes the wait on an event never recorded
    assert [n["name"] for n in rec.notes] == [LIBRARY_NOT_WATCHED, LIBRARY_WAIT]


def fake_jax(monkeypatch: pytest.MonkeyPatch):
    """``jax._src.array.ArrayImpl`` as JAX has it: ``_value`` a property (the host copy kept in ``_npy_value``);
    one array on one device (``unsafe_buffer_pointer``) or sharded."""

    class ArrayImpl:
        _npy_value = None

        def __init__(self, *pointers: int) -> None:
            self.pointers = pointers

        @property
        def _value(self):
            """The array on the host."""
            return ("host copy", self.pointers)

        def unsafe_buffer_pointer(self) -> int:
            if len(self.pointers) != 1:
                raise ValueError("unsafe_buffer_pointer() is supported only for unsharded arrays")
            return self.pointers[0]

    monkeypatch.setitem(sys.modules, "jax._src.array", types.SimpleNamespace(ArrayImpl=ArrayImpl))
    return types.SimpleNamespace(__name__="jax"), ArrayImpl


def test_a_jax_array_read_on_the_host_is_noted_after_it_returned(monkeypatch):
    jax, array_class = fake_jax(monkeypatch)
    rec = Recorder()
    hooks = AllocatorHooks(rec.note, rec.timestamp)
    hooks._wrap_module(jax)
    one, sharded = array_class(0x7F0000200000), array_class(0x7F0000300000, 0x7F0000400000)
    assert one._value == ("host copy", (0x7F0000200000,))  # the library's own answer
    [read] = rec.notes
    assert (read["name"], read["ptrs"], read["library"]) == (LIBRARY_READY, [0x7F0000200000], "JAX")
    assert read["began"] < read["start"] and read["stack"][0][0].endswith("test_allocators.py")
    one._npy_value = read  # JAX keeps the host copy: the next read copies nothing
    assert one._value and sharded._value and len(rec.notes) == 1  # a sharded read reads only some shards
    assert array_class.__dict__["_value"].__doc__ == "The array on the host."
    hooks.close()
    del one._npy_value
    assert one._value and len(rec.notes) == 1  # put back: nothing noted


def test_a_jax_whose_array_differs_is_left_alone_and_said_so(monkeypatch):
    jax, array_class = fake_jax(monkeypatch)
    array_class._value = lambda self: "a method, not a property"
    rec = Recorder()
    AllocatorHooks(rec.note, rec.timestamp)._wrap_module(jax)
    assert [(n["name"], n["library"]) for n in rec.notes] == [(LIBRARY_NOT_WATCHED, "JAX")]
    assert array_class(1)._value() == "a method, not a property"
