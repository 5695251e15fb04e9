"""The audit's allocator and library hooks in the traced child: what a library's pool does without a CUDA call,
noted for the ordering model (``ctxlab.audit.model.ordering``) with the user's stack.

- CuPy: the allocator (``cupy.cuda.set_allocator``'s, the memory pool's ``malloc`` by default) is wrapped, so
  each block handed out is noted (``POOL_ALLOC``: pointer, size, the current stream the pool files it under)
  and, when the array's last reference goes, handed back (``POOL_FREE``, from the memory's owner). The block
  the array holds is the pool's own: the wrapper hands out an ``UnownedMemory`` over it whose owner keeps it.
- PyTorch: the caching allocator's trace (``torch._C._activate_gpu_trace``, the callbacks of
  ``torch.cuda._gpu_trace``, as ``torch.cuda._sanitizer`` uses them) notes each block handed out (with the
  current stream) and back; ``Tensor.record_stream`` is noted (``RECORD_STREAM``: the block's reuse waits for
  that stream); ``torch.cuda.Event.wait`` on an event never recorded, which makes no CUDA call at all, is
  noted (``LIBRARY_EVENT_WAIT``) with where the event was made.
- JAX: a ``jax.Array`` read on the host (its ``_value``: ``float()``, ``np.asarray``, ``.item()``) waits for the
  copy to the host it queued without a CUDA call of its own (XLA enqueues host functions and the host waits on
  what they signal): noted once it returned (``LIBRARY_READY``: the array's buffer, when the read began), so
  the ordering model knows that copy finished.

A hook that cannot be installed (a library version whose internals differ) leaves the library as it is and
notes why (``LIBRARY_NOT_WATCHED``: the library, the part, the error), so the report says what it could not
judge instead of reading clean. A hook only notes and calls through; noting never changes what the library's
call does or returns. A free noted while this thread is already inside a note (a garbage collection run inside
it) waits in a queue that the next note flushes, with its own time.
"""

from __future__ import annotations

import collections
import functools
import importlib
import inspect
import os
import threading
from collections.abc import Callable

from ctxlab.audit.child.import_watch import ImportWatch
from ctxlab.audit.events import LIBRARY_NOT_WATCHED, LIBRARY_READY, LIBRARY_WAIT, POOL_ALLOC, POOL_FREE, RECORD_STREAM
from ctxlab.tracing.frames import user_stack

LIBRARY_EVENT_CREATED = "LIBRARY_EVENT_CREATED"
WATCHED = ("cupy", "torch", "jax")


class Notes:
    """Makes the hooks' notes: time, thread, user stack; safe to call from a finaliser."""

    def __init__(self, note: Callable[[dict], None], timestamp: Callable[[], int]) -> None:
        self._note, self._timestamp = note, timestamp
        self._inside = threading.local()
        self._queued: collections.deque[dict] = collections.deque()
        self.count = 0

    def make(self, name: str, **fields) -> dict:
        """A note of this thread, now, with the user's stack (library and ctxlab frames are not the user's)."""
        thread = threading.current_thread()
        return {"domain": "audit", "name": name, "tid": threading.get_native_id(), "thread": thread.name,
                "start": self._timestamp(), "stack": user_stack(skip=1), **fields}

    def now(self) -> int:
        """The tracer's clock now."""
        return self._timestamp()

    def silence(self) -> None:
        """Send nothing from now on (the program has returned; a library's callbacks may still fire)."""
        self._note = lambda note: None

    def send(self, note: dict) -> None:
        """Hand a note to the tracer (queued where this thread is inside a note already)."""
        if getattr(self._inside, "on", False):
            self._queued.append(note)
            return
        self._inside.on = True
        try:
            while self._queued:
                self._note(self._queued.popleft())
                self.count += 1
            self._note(note)
            self.count += 1
        except Exception:  # the tracer is gone (the interpreter is ending): the note is lost, the program is not
            pass
        finally:
            self._inside.on = False

    def flush(self) -> None:
        """What waits in the queue."""
        while self._queued and not getattr(self._inside, "on", False):
            self.send(self._queued.popleft())


class _HandBack:
    """The owner of a CuPy block handed out through the wrapper: when the array's memory goes, notes the block
    handed back, then lets go of the pool's memory (the pool takes it back)."""

    __slots__ = ("pooled", "ptr", "notes")

    def __init__(self, pooled, ptr: int, notes: Notes) -> None:
        self.pooled, self.ptr, self.notes = pooled, ptr, notes

    def __del__(self) -> None:
        try:
            self.notes.send(self.notes.make(POOL_FREE, ptr=self.ptr, library="CuPy", call="CuPy's pool free"))
        except Exception:  # a finaliser never raises into the program
            pass


class AllocatorHooks:
    """Installs the hooks as the libraries are imported; ``close`` puts everything back."""

    def __init__(self, note: Callable[[dict], None], timestamp: Callable[[], int]) -> None:
        self.notes = Notes(note, timestamp)
        self._undo: list[Callable[[], None]] = []  # what puts each library back, in the order it was hooked
        self._torch_callbacks: list[Callable] = []  # kept alive while the trace may call them
        self._watch = ImportWatch(WATCHED, self._wrap_module)

    def install(self) -> None:
        """Hook the libraries imported already, and each one imported from now on."""
        self._watch.install()

    def close(self) -> None:
        """Put the libraries' functions back, stop watching imports, send what waits."""
        self._watch.close()
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        self.notes.flush()

    def _replace(self, owner, attr: str, new) -> None:
        """Set ``owner.attr``; ``close`` puts back what the class or module itself held (or nothing)."""
        own = vars(owner)
        if attr in own:
            held = own[attr]
            self._undo.append(lambda: setattr(owner, attr, held))
        else:
            self._undo.append(lambda: delattr(owner, attr))
        setattr(owner, attr, new)

    def _wrap_module(self, module) -> None:
        name = getattr(module, "__name__", "")
        if name == "cupy":
            self._part("CuPy", "memory pool", self.hook_cupy, module)
        elif name == "torch":
            self.hook_torch(module)
        elif name == "jax":
            self._part("JAX", "jax.Array host reads", self.hook_jax, module)

    def _part(self, library: str, part: str, hook: Callable, module) -> None:
        """Install one hook; where the library's internals differ, leave it as it is and note what is not
        watched (the program runs on)."""
        try:
            hook(module)
        except Exception as error:
            try:
                self.notes.send(self.notes.make(LIBRARY_NOT_WATCHED, library=library, part=part,
                                                error=f"{type(error).__name__}: {error}"))
            except Exception:
                pass

    # ---------------------------------------------------------------- CuPy

    def hook_cupy(self, cupy) -> None:
        """Wrap CuPy's current allocator, and each one the program sets later."""
        memory = cupy.cuda.memory
        setter, original = memory.set_allocator, memory.get_allocator()

        @functools.wraps(setter)
        def set_allocator(allocator=None):
            return setter(self.cupy_allocator(cupy, allocator) if allocator is not None else None)

        setter(self.cupy_allocator(cupy, original))
        self._undo.append(lambda: setter(original))
        for owner in (memory, cupy.cuda):
            if getattr(owner, "set_allocator", None) is setter:
                self._replace(owner, "set_allocator", set_allocator)

    def cupy_allocator(self, cupy, malloc):
        """An allocator that hands out what ``malloc`` does, noting each block out and back."""
        if getattr(malloc, "__ctxlab_pool__", False):
            return malloc
        notes, memory = self.notes, cupy.cuda.memory

        def allocate(size: int):
            pooled = malloc(size)
            ptr = int(getattr(pooled, "ptr", 0) or 0)
            if not ptr:
                return pooled
            notes.send(notes.make(POOL_ALLOC, ptr=ptr, size=int(size), stream=cupy.cuda.get_current_stream().ptr,
                                  library="CuPy", call="CuPy's pool malloc"))
            owned = memory.UnownedMemory(ptr, int(size), _HandBack(pooled, ptr, notes), pooled.device_id)
            return memory.MemoryPointer(owned, 0)

        allocate.__ctxlab_pool__ = True  # type: ignore[attr-defined]
        return allocate

    # ---------------------------------------------------------------- PyTorch

    def hook_torch(self, torch) -> None:
        """The caching allocator's trace, record_stream and Event.wait, each on its own."""
        self._part("PyTorch", "caching allocator", self._hook_torch_trace, torch)
        self._part("PyTorch", "Tensor.record_stream", self._hook_record_stream, torch)
        self._part("PyTorch", "torch.cuda.Event", self._hook_events, torch)

    def _hook_torch_trace(self, torch) -> None:
        # a submodule `import torch` does not import: imported by name, as torch.cuda._sanitizer does
        trace = importlib.import_module("torch.cuda._gpu_trace")
        notes = self.notes
        # PyTorch 2.1 renamed them from ..._cuda_memory_...
        on_alloc = (getattr(trace, "register_callback_for_memory_allocation", None)
                    or trace.register_callback_for_cuda_memory_allocation)
        on_free = (getattr(trace, "register_callback_for_memory_deallocation", None)
                   or trace.register_callback_for_cuda_memory_deallocation)

        def allocated(ptr: int) -> None:
            notes.send(notes.make(POOL_ALLOC, ptr=int(ptr), size=0, library="PyTorch",
                                  stream=torch.cuda.current_stream().cuda_stream,
                                  call="PyTorch's caching allocator malloc"))

        def freed(ptr: int) -> None:
            notes.send(notes.make(POOL_FREE, ptr=int(ptr), library="PyTorch",
                                  call="PyTorch's caching allocator free"))

        self._torch_callbacks += [allocated, freed]
        on_alloc(allocated)
        on_free(freed)
        self._serialise_stream_pools(torch)
        torch._C._activate_gpu_trace()  # stays on: PyTorch has no way to turn it off; the callbacks go quiet
        self._undo.append(self.notes.silence)

    def _serialise_stream_pools(self, torch) -> None:
        # With the trace on, PyTorch runs Python (the stream-creation callbacks) inside the c10::call_once that
        # fills a device's stream pool on the first torch.cuda.Stream(). Python may hand the GIL to another thread
        # there; if that thread then makes a torch.cuda.Stream() it waits on the call_once holding the GIL, and
        # neither moves (seen on the H100: worker threads that each make a stream, 2 runs of 3 hung). One
        # stream made at a time, the lock's wait releasing the GIL, keeps the trace from hanging the program.
        stream_class, lock = torch.cuda.Stream, [threading.RLock()]
        original = stream_class.__new__
        # a child forked while another thread held it starts with a lock of its own (that thread is not there)
        os.register_at_fork(after_in_child=lambda: lock.__setitem__(0, threading.RLock()))

        def new(cls, *args, **kwargs):
            with lock[0]:
                return original(cls, *args, **kwargs)

        self._replace(stream_class, "__new__", staticmethod(functools.wraps(original)(new)))

    def _hook_record_stream(self, torch) -> None:
        notes, original = self.notes, torch.Tensor.record_stream

        @functools.wraps(original)
        def record_stream(tensor, stream):
            try:
                notes.send(notes.make(RECORD_STREAM, ptr=tensor.untyped_storage().data_ptr(),
                                      stream=int(stream.cuda_stream), library="PyTorch",
                                      call="Tensor.record_stream"))
            except Exception:
                pass
            return original(tensor, stream)

        self._replace(torch.Tensor, "record_stream", record_stream)

    def _hook_events(self, torch) -> None:
        notes, event_class = self.notes, torch.cuda.Event
        new, wait = event_class.__new__, event_class.wait

        def made(cls, *args, **kwargs):
            event = new(cls, *args, **kwargs)
            try:
                event._ctxlab_made = notes.make(LIBRARY_EVENT_CREATED, library="PyTorch", call="torch.cuda.Event()")
            except Exception:
                pass
            return event

        @functools.wraps(wait)
        def waited(event, stream=None):
            try:
                if not event.cuda_event:  # never recorded: PyTorch has not even created its CUDA event
                    notes.send(notes.make(LIBRARY_WAIT, library="PyTorch", call="torch.cuda.Event.wait",
                                          made=getattr(event, "_ctxlab_made", None)))
            except Exception:
                pass
            return wait(event, stream)

        self._replace(event_class, "__new__", staticmethod(made))
        self._replace(event_class, "wait", waited)

    # ---------------------------------------------------------------- JAX

    def hook_jax(self, jax) -> None:
        """``jax.Array``'s host read (the ``_value`` property), noted once it returned with the array's buffer and
        when it began: a read that copied (not one served from the array's cached host copy) of an array on one
        device (a sharded read reads only some shards)."""
        array_class = importlib.import_module("jax._src.array").ArrayImpl
        notes = self.notes
        value = inspect.getattr_static(array_class, "_value")
        if not isinstance(value, property) or value.fget is None:
            raise TypeError(f"jax.Array._value is a {type(value).__name__}, not a property")
        read_value = value.fget

        def host_read(array):
            cached = getattr(array, "_npy_value", None) is not None
            began = notes.now()
            out = read_value(array)
            if not cached:
                try:
                    notes.send(notes.make(LIBRARY_READY, ptrs=[int(array.unsafe_buffer_pointer())], began=began,
                                          library="JAX", call="jax.Array read on the host"))
                except Exception:  # several devices (no one pointer), a deleted array: nothing noted
                    pass
            return out

        self._replace(array_class, "_value", property(functools.wraps(read_value)(host_read), doc=value.__doc__))
