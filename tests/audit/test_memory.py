"""The audit's one allocation map (ctxlab.audit.model.memory): what each feeder puts in it and what its two
views (live blocks, the history) answer (CPU only)."""

from ctxlab.audit.engine import Stream
from ctxlab.audit.model.memory import Memory
from ctxlab.audit.model.one_pass import models
from tests.audit_events import CREATED, MAIN, PRIMARY, WORKER, Events

BASE = 0x7F00_0000_0000


def call(name, start, end, tid=MAIN, context=PRIMARY, domain="driver", **extra):
    return {"domain": domain, "name": name, "tid": tid, "start": start, "end": end, "context": context,
            "status": "CUDA_SUCCESS" if domain == "driver" else "cudaSuccess", **extra}


def test_the_runtimes_allocation_and_the_drivers_beneath_it_are_one_block_in_the_drivers_context():
    memory = Memory()
    runtime = call("cudaMalloc", 10, 50, context=0, domain="runtime")
    driver = call("cuMemAlloc_v2", 20, 40, context=CREATED, **{"from": "callback"})
    block = memory.allocated(BASE, 4096, runtime)
    assert memory.allocated(BASE, 4096, driver, live=False) is block
    assert block.made is runtime and block.context == CREATED
    assert memory.made == [block] and memory.blocks == [block]
    rounded = call("cuMemAlloc_v2", 60, 70, context=CREATED, **{"from": "callback"})  # the driver's size rounded up
    runtime_again = call("cudaMalloc", 55, 80, context=CREATED, domain="runtime")
    other = memory.allocated(BASE + (1 << 20), 1000, runtime_again)
    assert memory.allocated(BASE + (1 << 20), 1024, rounded, live=False) is other and len(memory.made) == 2


def test_the_same_range_allocated_by_another_call_is_another_block():
    memory = Memory()
    first = memory.allocated(BASE, 4096, call("cuMemAlloc_v2", 10, 20))
    second = memory.allocated(BASE, 4096, call("cuMemAlloc_v2", 30, 40, tid=WORKER, context=CREATED))
    assert second is not first and memory.made == [first, second]
    # fed at its start, the second has not returned: the first stays live (its free may be in flight)
    assert memory.outer(BASE) is first
    assert memory.allocation_at(BASE, 35) is first and memory.allocation_at(BASE, 40) is second
    hooks = Memory(history=False)  # the hooks feed allocations as they return: the new one replaces it
    hooks.allocated(BASE, 4096, call("cuMemAlloc_v2", 10, 20))
    assert hooks.allocated(BASE, 4096, call("cuMemAlloc_v2", 30, 40, context=CREATED)) is hooks.outer(BASE)
    assert hooks.made == []


def test_pinned_host_memory_is_in_the_history_only():
    memory = Memory()
    runtime = call("cudaMallocHost", 10, 50, domain="runtime")
    block = memory.allocated(BASE, 64, runtime, live=False)
    driver = call("cuMemAllocHost_v2", 20, 40, context=CREATED, **{"from": "callback"})
    assert memory.allocated(BASE, 64, driver, live=False) is block and block.context == CREATED
    assert memory.outer(BASE) is None and memory.allocation_at(BASE + 8, 60) is block


def test_a_pools_block_is_no_allocation_and_its_return_is_no_free():
    memory = Memory()
    outer = memory.allocated(BASE, 1 << 20, call("cudaMallocAsync", 10, 20, domain="runtime"), stream=("s", 1))
    note = {"domain": "audit", "name": "POOL_ALLOC", "tid": MAIN, "start": 30}
    inner = memory.allocated(BASE + 512, 256, note, pool=True)
    loose = memory.allocated(BASE + (4 << 20), 256, note, pool=True)  # no allocation holds it
    assert memory.made == [outer] and memory.at(BASE + 600) is inner and memory.outer(BASE + (4 << 20)) is loose
    memory.remove(inner, {"domain": "audit", "name": "POOL_FREE", "start": 40})
    assert inner.freed is None and inner.returned is not None and inner.gone is inner.returned
    free = call("cudaFreeAsync", 50, 60, domain="runtime")
    memory.remove(outer, free)
    assert outer.released is free and outer.gone is free and memory.outer(BASE) is None
    assert outer.freed is None  # the state model's replay tells its own (Model.block at the free's end)
    assert memory.allocation_at(BASE, 70) is outer


def test_an_allocation_reaching_into_a_live_one_ends_it_and_a_destroyed_context_takes_its_own():
    memory = Memory(history=False)
    below = memory.allocated(BASE, 4096, call("cuMemAlloc_v2", 10, 20))
    keep = memory.allocated(BASE + (1 << 20), 64, call("cuMemAlloc_v2", 12, 22, context=PRIMARY))
    over = memory.allocated(BASE + 2048, 4096, call("cuMemAlloc_v2", 30, 40, context=CREATED))
    assert memory.outer(BASE) is None and memory.outer(BASE + 3000) is over and below not in memory.blocks
    memory.drop_context(CREATED)
    assert memory.blocks == [keep]


def test_the_one_pass_gives_both_models_the_same_blocks():
    ev = Events()
    ev.runtime("cudaMalloc", 10, end=50, context=PRIMARY, line=5, args={"ptr": BASE, "size": 4096})
    ev.driver("cuMemAlloc_v2", 20, end=40, context=PRIMARY, line=5, args={"ptr": BASE, "size": 4096},
              **{"from": "callback"})
    both = models(Stream(ev.events))
    assert both.state.memory is both.order.memory
    (block,) = both.state.blocks
    assert both.order.memory.outer(BASE + 10) is block and block.made["name"] == "cudaMalloc"


# ---------------------------------------------------------------- the two models on one map: each its own answer

def test_an_allocation_under_way_while_another_thread_frees_the_range_is_not_the_freed_block():
    """The worker's allocation (a different size at the same address) starts before main's free of the old block
    returns: the free is the old block's, whatever the live blocks hold by then."""
    from ctxlab.audit.rules.catalogue import judge

    for size in (4096, 8192):
        ev = Events()
        ev.driver("cuMemAlloc_v2", 50, end=55, context=PRIMARY, line=5, args={"ptr": BASE, "size": 4096})
        ev.driver("cuMemAlloc_v2", 95, end=130, tid=WORKER, context=PRIMARY, line=20, args={"ptr": BASE, "size": size})
        ev.driver("cuMemFree_v2", 100, end=110, context=PRIMARY, line=6, args={"ptr": BASE})
        ev.driver("cuMemsetD32_v2", 150, tid=WORKER, context=PRIMARY, line=21, args={"ptr": BASE})
        assert judge(ev.events) == [], size
        blocks = models(Stream(ev.events)).state.blocks
        assert [b.freed is not None for b in blocks] == [True, False], size


def test_the_same_allocation_told_by_both_models_is_one_block_even_beside_a_stale_one():
    """A reset the ordering model does not follow, then the same range allocated again: one block per call in
    the history, each time the runtime's call and the driver's beneath it one."""
    ev = Events()
    for start, line in ((100, 10), (300, 30)):
        ev.runtime("cudaMalloc", start, end=start + 50, context=PRIMARY, line=line, args={"ptr": BASE, "size": 1 << 30})
        ev.driver("cuMemAlloc_v2", start + 10, end=start + 20, context=PRIMARY, args={"ptr": BASE, "size": 1 << 30},
                  **{"from": "callback"})
        if start == 100:
            ev.runtime("cudaDeviceReset", 200, end=250, context=PRIMARY, line=20)
    blocks = models(Stream(ev.events)).state.blocks
    assert [(b.made["start"], b.ready) for b in blocks] == [(100, 120), (300, 320)]


def test_a_free_that_never_returned_is_no_free_for_a_graph_replay():
    from ctxlab.audit.rules.catalogue import judge
    from tests.ordering_events import A, Calls

    c = Calls()
    c.stream(A, 1)
    c.alloc(ptr=BASE)
    c.at("cuStreamBeginCapture_v2", stream=A, mode=0)
    c.kernel(A, BASE)
    c.at("cuStreamEndCapture", stream=A, graph=0x6A)
    c.at("cuGraphInstantiateWithFlags", graph=0x6A, exec=0x6E)
    free = c.at("cuMemFree_v2", ptr=BASE, tid=WORKER, dur=1000)
    free["status"] = None  # the program ended inside it
    del free["end"]
    c.at("cuGraphLaunch", exec=0x6E, stream=A)
    assert [f.rule for f in judge(c.events) if f.rule == "graph-replays-freed"] == []
