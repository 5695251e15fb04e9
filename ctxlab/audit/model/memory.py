"""The audit's memory: every allocation the program made while traced, each owned by its context, and the blocks
a library pool handed out inside them; one map for the state model (``state.Model.block``: which allocation,
live or freed, held an address at a time) and the ordering model (``ordering.Ordering``: the live blocks and who
used them, on which timeline), fed once in the one pass (``one_pass``); and the guard's hooks' map of live
allocations (``hooks.AuditHooks``, no history).

A block is a driver allocation (``cuMemAlloc*``, ``cudaMalloc``, a stream-ordered allocation, pinned host memory),
or a block a library pool handed out inside one (CuPy's and PyTorch's, noted by the audit's allocator hooks,
``ctxlab.audit.child.allocators``). A pool block whose size the pool did not say (PyTorch's trace gives only the
pointer) reaches the next block handed out in the same allocation, or the allocation's end. A runtime allocation
and the driver's allocation beneath it are one block: the runtime's call made it, the driver's names its context.
Pinned host memory is in the history only: the ordering model follows device memory.

Which blocks an operation touches: a copy its destination (written) and source (read), a memset its
destination, a kernel every live block one of its 8-byte argument words points into (the C callback keeps
each argument by ``cuFuncGetParamInfo``'s sizes). Whether a kernel writes a block is not recorded; it is taken
to write a block that nothing touched since it was handed out, and the block when it is the only one it
touches (a kernel that writes nothing is pointless); else it reads it. A kernel that writes a block another
kernel also uses is thus not always seen: the model errs towards no finding. In a driver allocation no pool hook
divided, two uses conflict only where they point at the same address: a library the audit has no hook for (XLA,
RMM, a workspace) may hand out arrays inside it, and different arrays are different memory.
"""

from __future__ import annotations

import bisect
import functools
import struct
from dataclasses import dataclass, field

from ctxlab.audit.engine import end_of

Timeline = tuple
Clock = dict
_U64 = struct.Struct("<Q")
WORDS_KEPT = 4096  # distinct argument blobs whose words are remembered
MIN_ADDRESS = 1 << 16  # smaller words are counts, flags and sizes: no allocation lies there


def allocation_size(args: dict) -> int:
    """An allocation's size from its call's kept parameters (cuMemAllocPitch: pitch times height)."""
    return args.get("pitch", 0) * args.get("height", 0) if "pitch" in args else args.get("size", 0)


def arguments(blob: bytes) -> list[tuple[int, bytes]]:
    """A launch's kept arguments: (parameter index, its bytes); index -1 is the packed ``extra`` buffer."""
    out, at = [], 0
    while at + 8 <= len(blob):
        index, size = struct.unpack_from("<II", blob, at)
        raw = blob[at + 8:at + 8 + size]
        out.append((-1 if index == 0xFFFFFFFF else index, raw))
        at += 8 + size
    return out


@functools.lru_cache(maxsize=WORDS_KEPT)  # a loop launches the same arguments many times
def pointer_words(blob: bytes) -> tuple[tuple[int, int, int], ...]:
    """The 8-byte words of a launch's kept arguments that may be addresses: (parameter index, byte offset in it,
    the word), each aligned word of each argument (a pointer inside a struct argument, as CuPy passes arrays,
    is one)."""
    out = []
    for index, raw in arguments(blob):
        for offset in range(0, len(raw) - 7, 8):
            word = _U64.unpack_from(raw, offset)[0]
            if word >= MIN_ADDRESS:
                out.append((index, offset, word))
    return tuple(out)


@dataclass
class Use:
    """One operation's use of a block: on which timeline, at which tick, by which call, written or read."""

    timeline: Timeline
    tick: int
    event: dict
    write: bool
    gated: bool = False  # queued behind a wait on a value: ordered by a write the model cannot see
    address: int | None = None  # where in the block it pointed (None: anywhere, a graph replay's use)

    def same_memory(self, block: Block, address: int | None) -> bool:
        """Whether this use and one at ``address`` may touch the same bytes of ``block``: in a block a pool
        hook told (a library's array) any two do; in a driver allocation only two that point at the same
        address (a library may suballocate it for arrays the audit has no hook for: XLA, RMM, a workspace)."""
        return block.made.get("domain") == "audit" or address is None or self.address is None \
            or self.address == address

    def ordered_before(self, clock: Clock) -> bool:
        """Whether this use happens before a point whose clock is ``clock``."""
        return clock.get(self.timeline, 0) >= self.tick


@dataclass(eq=False)
class Block:
    """A range of memory with a life of its own: the call that made it, its context, the call that freed it, its
    latest uses."""

    base: int
    end: int
    made: dict
    context: int = 0  # the context it was allocated in (0: not known)
    stream: Timeline | None = None  # a pool's or a stream-ordered allocation's stream: its free is ordered there
    sized: bool = True  # the size was told (else it reaches the next block)
    ready: int = 0  # when the first call that made it returned (a runtime allocation's driver call beneath it)
    freed: dict | None = None  # the call that freed it, as the state model's replay tells (``Model.block``)
    released: dict | None = None  # the free that took it out of the live blocks (the ordering model's)
    returned: dict | None = None  # the pool hook's note that it went back to its pool (the memory stays allocated)
    fresh: bool = True  # nothing touched it since it was handed out
    uses: dict[Timeline, Use] = field(default_factory=dict)  # the latest use per timeline
    writer: Use | None = None  # the latest write
    waits_for: list[Timeline] = field(default_factory=list)  # record_stream: its free waits for these too
    inner: list[Block] = field(default_factory=list)  # the pool's blocks inside a driver allocation
    private: object = None  # the capture whose graph-private pool it came from (PyTorch): its memory stays

    @property
    def size(self) -> int:
        """Its size in bytes."""
        return self.end - self.base

    def __post_init__(self) -> None:
        self.ready = self.ready or end_of(self.made)

    @property
    def gone(self) -> dict | None:
        """What ended its use for the ordering model: the free that took it out of the live blocks, or its
        return to a pool."""
        return self.released or self.returned

    def holds(self, address: int) -> bool:
        """Whether ``address`` lies in the block."""
        return self.base <= address < self.end

    def all_uses(self) -> list[Use]:
        """Its uses and those of the pool blocks inside it."""
        return list(self.uses.values()) + [u for b in self.inner for u in b.uses.values()]


def _beneath(inner: dict, outer: dict) -> bool:
    """Whether call ``inner`` ran inside call ``outer`` on its thread (the driver's allocation beneath the
    runtime's)."""
    return inner.get("tid") == outer.get("tid") and outer.get("start", 0) <= inner.get("start", 0) \
        and end_of(inner) <= end_of(outer)


def _end(block: Block, e: dict) -> None:
    if e.get("domain") == "audit":  # a pool's hook: back in the pool, still allocated
        block.returned = e
    else:
        block.released = e


class Memory:
    """The live blocks by base (device memory), and with ``history`` every allocation ever made, freed ones and
    pinned host memory too, for questions about a past time (``allocation_at``)."""

    def __init__(self, history: bool = True) -> None:
        self.blocks: list[Block] = []  # live outermost blocks, by base
        self._bases: list[int] = []
        self._history = history
        self.made: list[Block] = []  # every allocation, in the order made (with ``history``)
        self._made_bases: list[int] = []  # their bases, sorted (allocation_at bisects them)
        self._made_by_base: dict[int, list[Block]] = {}
        self.count = 0  # allocations seen

    def outer(self, address: int) -> Block | None:
        """The outermost live block holding ``address``."""
        i = bisect.bisect_right(self._bases, address)
        return self.blocks[i - 1] if i and self.blocks[i - 1].holds(address) else None

    def at(self, address: int) -> Block | None:
        """The innermost live block holding ``address``: a pool's block, else the allocation."""
        outer = self.outer(address) if address else None
        if outer is None:
            return None
        return next((b for b in outer.inner if b.holds(address)), outer)

    def allocated(self, base: int, size: int, e: dict, stream: Timeline | None = None, pool: bool = False,
                  live: bool = True) -> Block | None:
        """A block handed out by call ``e`` in its context: a driver allocation, or (``pool``) a pool's block,
        inside an allocation where one holds it. ``size`` 0: not told. ``live`` False: memory the ordering
        does not follow (pinned host memory), kept in the history only. The block (None: no base)."""
        if not base:
            return None
        sized = size > 0
        end = base + max(size, 1)
        outer = self.outer(base)
        if pool and outer is not None:
            if not sized:
                later = [b.base for b in outer.inner if b.base > base]
                end = min(later) if later else outer.end
            for b in outer.inner:  # an unsized block before it ends where this one begins (it is not gone)
                if not b.sized and b.base < base < b.end:
                    b.end = base
            outer.inner = [b for b in outer.inner if b.end <= base or b.base >= end]
            block = Block(base, end, e, context=int(e.get("context") or 0), stream=stream, sized=sized)
            outer.inner.append(block)
            return block
        same = outer if outer is not None and outer.base == base else None
        # the same allocation told twice (the ordering model and the state model's replay, or the runtime's call
        # and the driver's beneath it): the block already made, live or in the history only
        for known in (same, *reversed(self._made_by_base.get(base, ())[-4:])):
            if known is None:
                continue
            if known.made is e or _beneath(known.made, e):
                return known
            if _beneath(e, known.made):  # the driver's allocation beneath the runtime's: its context is exact
                known.context = int(e.get("context") or 0) or known.context
                known.ready = min(known.ready, end_of(e))
                return known
        # Fed at their start (the one pass), a call that has not returned does not yet replace a live block of the
        # same range: that block's free may be in flight on another thread. The hooks feed allocations as they
        # return (no history): there it replaces it.
        keep = same is not None and same.end == end and self._history
        block = Block(base, end, e, context=int(e.get("context") or 0), stream=stream, sized=sized)
        self.count += 1
        if self._history and not pool:  # a pool's block where no allocation held it is no allocation
            self.made.append(block)
            if base not in self._made_by_base:
                bisect.insort(self._made_bases, base)
            self._made_by_base.setdefault(base, []).append(block)
        if live and not keep:
            i = bisect.bisect_left(self._bases, base)
            if i and self.blocks[i - 1].end > base:  # one that began below it and reaches into it is gone too
                i -= 1
            while i < len(self.blocks) and self.blocks[i].base < end:  # what it overlaps is gone
                self.blocks.pop(i)
                self._bases.pop(i)
            self.blocks.insert(i, block)
            self._bases.insert(i, base)
        return block

    def allocation_at(self, address: int, at: int) -> Block | None:
        """The allocation (live or freed before ``at``) that held ``address`` last before ``at``: made by a call
        that had returned by then."""
        found = None
        i = bisect.bisect_right(self._made_bases, address)
        for base in self._made_bases[max(0, i - 16):i][::-1]:  # the nearest bases below the address
            for b in self._made_by_base[base]:
                if b.base <= address < b.end and b.ready <= at and (found is None or b.ready > found.ready):
                    found = b
        return found

    def drop_context(self, context: int) -> None:
        """Every live allocation of ``context``: it was destroyed, and its memory with it."""
        kept = [b for b in self.blocks if b.context != context]
        if len(kept) != len(self.blocks):
            self.blocks = kept
            self._bases = [b.base for b in kept]

    def remove(self, block: Block, e: dict) -> None:
        """A block freed (or, by a pool hook's note, returned to its pool): gone from the live blocks, with the
        pool blocks inside it. A block of a graph-private pool leaves them but is not freed: the pool keeps its
        memory for the graph's replays."""
        if block.private is None:
            _end(block, e)
        outer = self.outer(block.base)
        if outer is block:
            i = self.blocks.index(block)
            self.blocks.pop(i)
            self._bases.pop(i)
            for inner in block.inner:
                _end(inner, e)
        elif outer is not None and block in outer.inner:
            outer.inner.remove(block)

    def foreign(self, blob: bytes, context: int) -> list[tuple[int, int, int, Block]]:
        """A launch's kept arguments read against the live allocations: (parameter index, byte offset, the word,
        the allocation) for each 8-byte word that points into memory of a context other than ``context`` (one of
        unknown context is not judged). The one pass and the guard's hooks both ask this."""
        out = []
        for index, offset, word in pointer_words(blob):
            block = self.outer(word)
            if block is not None and block.context and block.context != context:
                out.append((index, offset, word, block))
        return out

    def kernel_touches(self, e: dict) -> list[tuple[Block, bool, int]]:
        """The blocks a kernel launch's arguments point into, each with whether it is taken to write it and the
        address it points at."""
        raw = e.get("arguments")
        if not isinstance(raw, bytes):
            return []
        found: dict[int, tuple[Block, int]] = {}
        for _index, _offset, word in pointer_words(raw):
            block = self.at(word)
            if block is not None and id(block) not in found:
                found[id(block)] = (block, word)
        return [(b, b.fresh or len(found) == 1, word) for b, word in found.values()]

    def copy_touches(self, args: dict) -> list[tuple[Block, bool, int]]:
        """A copy's destination (written) and source (read) blocks, where they are device memory."""
        out = []
        for role, write in (("ptr", True), ("src", False)):
            address = int(args.get(role) or 0)
            block = self.at(address)
            if block is not None:
                out.append((block, write, address))
        return out
