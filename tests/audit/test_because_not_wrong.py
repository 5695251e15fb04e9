"""Plausible but wrong explanations the audit must not give (issue 47 item 1): a launch of a function whose
module another thread unloaded is not blamed on the handle's context; a launch in the wrong context because two
asyncio tasks interleave their pushes on one thread is not blamed on a library's kernel cache (CPU only)."""

from ctxlab.audit import judge
from tests.audit_events import CREATED, MAIN, OTHER, WORKER, Events

INVALID_HANDLE = "CUDA_ERROR_INVALID_HANDLE"
FN, FN2, MOD, MOD2 = 0xF00D00, 0xF00E00, 0x0D0D00, 0x0D0E00


def frames(file: str, line: int, function: str, outer: int = 20) -> list:
    return [[file, line, function], [file, outer, "<module>"]]


def unload_stream(unload: bool = True) -> Events:
    ev = Events()
    ev.driver("cuCtxCreate_v4", 10, end=20, context=CREATED, line=3, args={"ctx": CREATED})
    ev.driver("cuModuleLoadData", 30, context=CREATED, line=5, args={"module": MOD})
    ev.driver("cuModuleGetFunction", 40, context=CREATED, line=6, args={"function": FN, "module": MOD})
    # another context with a module of its own: what the kernel-cache explanation would point at
    ev.driver("cuCtxCreate_v4", 50, end=60, tid=WORKER, context=OTHER, line=30, args={"ctx": OTHER})
    ev.driver("cuModuleLoadData", 70, tid=WORKER, context=OTHER, line=31, args={"module": MOD2})
    if unload:
        ev.driver("cuModuleUnload", 80, tid=WORKER, context=OTHER, line=40, args={"module": MOD})
    ev.driver("cuLaunchKernel", 100, context=CREATED, line=44, args={"function": FN, "stream": 0},
              status=INVALID_HANDLE)
    return ev


def test_a_module_unloaded_on_another_thread_is_the_because_not_the_handles_context():
    findings = judge(unload_stream().events)
    assert not [f for f in findings if f.rule == "cross-context-handle"], [f.message for f in findings]
    (f,) = [f for f in findings if f.rule == "handle-destroyed"]
    assert f.location is not None and f.location.line == 44 and f.thread == "MainThread"
    assert f.because.call.startswith("cuModuleUnload") and f.because.thread == "worker"
    assert f.because.location is not None and f.because.location.line == 40
    assert "unloaded module" in f.because.what and "kernel cache" not in f.message


def test_without_the_unload_a_function_of_its_own_context_is_not_called_cross_context():
    findings = judge(unload_stream(unload=False).events)
    assert not [f for f in findings if f.rule in ("cross-context-handle", "handle-destroyed")]


ASYNC_SOURCE = """import asyncio


async def worker(ctx, module):
    push(ctx)
    function = get_function(module)
    await asyncio.sleep(0)
    launch(function)
    pop()
"""
SYNC_SOURCE = """def worker(contexts, module):
    for ctx in contexts:
        push(ctx)
    function = get_function(module)
    pass
    launch(function)
    pop()
"""


def interleaved(tmp_path, source: str, push: int, lookup: int, launch: int) -> tuple[Events, str]:
    """Two activations of worker on one thread: the first pushes CREATED and looks up its function, the second
    pushes OTHER over it, then the first launches its function under OTHER."""
    app = tmp_path / "tasks.py"
    app.write_text(source)
    file = str(app)
    ev = Events()
    ev.driver("cuCtxPushCurrent_v2", 100, context=CREATED, args={"ctx": CREATED}, stack=frames(file, push, "worker"))
    ev.driver("cuModuleGetFunction", 110, context=CREATED, args={"function": FN, "module": MOD},
              stack=frames(file, lookup, "worker"))
    ev.driver("cuCtxPushCurrent_v2", 200, context=OTHER, args={"ctx": OTHER}, stack=frames(file, push, "worker"))
    ev.driver("cuModuleGetFunction", 210, context=OTHER, args={"function": FN2, "module": MOD2},
              stack=frames(file, lookup, "worker"))
    ev.driver("cuLaunchKernel", 300, context=OTHER, args={"function": FN, "stream": 0}, status=INVALID_HANDLE,
              stack=frames(file, launch, "worker"))
    return ev, file


def test_two_asyncio_tasks_interleaving_pushes_are_the_because_not_the_kernel_cache(tmp_path):
    ev, file = interleaved(tmp_path, ASYNC_SOURCE, push=5, lookup=6, launch=8)
    (f,) = [f for f in judge(ev.events) if f.rule == "cross-context-handle"]
    assert f.location is not None and (f.location.file, f.location.line) == (file, 8)
    assert "kernel cache" not in f.message and "another activation of worker" in f.message
    assert "line 7 (await)" in f.message
    assert f.because.call.startswith("cuCtxPushCurrent_v2") and f.because.thread == "MainThread"
    # the other task's push: the second push at line 5, not this task's own
    assert f.because.location is not None and f.because.location.line == 5
    assert f"context {OTHER:#x}" in f.because.what and "line 7 (await)" in f.because.what


def test_without_an_await_between_the_push_is_named_but_no_task_is_blamed(tmp_path):
    ev, file = interleaved(tmp_path, SYNC_SOURCE, push=3, lookup=4, launch=6)
    (f,) = [f for f in judge(ev.events) if f.rule == "cross-context-handle"]
    assert "another activation" not in f.message and "await" not in f.because.what
    assert f.because.call.startswith("cuCtxPushCurrent_v2") and f.because.location is not None
    assert f.because.location.line == 3 and f"pushed context {OTHER:#x} over context {CREATED:#x}" in f.because.what
    assert MAIN != WORKER
