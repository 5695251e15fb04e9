"""The ordering model's memory (``ctxlab.audit.model.ordering``): the live blocks and who used them, on which timeline.

A block is a driver allocation (``cuMemAlloc*``, ``cudaMalloc``, a stream-ordered allocation), or a block a
library pool handed out inside one (CuPy's and PyTorch's, noted by the audit's allocator hooks,
``ctxlab.audit.child.allocators``). A pool block whose size the pool did not say (PyTorch's trace gives only the
pointer) reaches the next block handed out in the same allocation, or the allocation's end.

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
import struct
from dataclasses import dataclass, field

from ctxlab.audit.model.hooks import MIN_ADDRESS, arguments

Timeline = tuple
Clock = dict
_U64 = struct.Struct("<Q")
WORDS_KEPT = 4096  # distinct argument blobs whose words are remembered


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
    """A range of memory with a life of its own, and its latest uses."""

    base: int
    end: int
    made: dict
    stream: Timeline | None = None  # a pool's or a stream-ordered allocation's stream: its free is ordered there
    sized: bool = True  # the size was told (else it reaches the next block)
    freed: dict | None = None
    fresh: bool = True  # nothing touched it since it was handed out
    uses: dict[Timeline, Use] = field(default_factory=dict)  # the latest use per timeline
    writer: Use | None = None  # the latest write
    waits_for: list[Timeline] = field(default_factory=list)  # record_stream: its free waits for these too
    inner: list[Block] = field(default_factory=list)  # the pool's blocks inside a driver allocation
    private: object = None  # the capture whose graph-private pool it came from (PyTorch): its memory stays

    def holds(self, address: int) -> bool:
        """Whether ``address`` lies in the block."""
        return self.base <= address < self.end

    def all_uses(self) -> list[Use]:
        """Its uses and those of the pool blocks inside it."""
        return list(self.uses.values()) + [u for b in self.inner for u in b.uses.values()]


class Memory:
    """The live blocks, by base."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []  # outermost blocks, by base
        self._bases: list[int] = []
        self._words: dict[bytes, tuple[int, ...]] = {}

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

    def allocated(self, base: int, size: int, e: dict, stream: Timeline | None = None, pool: bool = False) -> None:
        """A block handed out: a driver allocation, or (``pool``) a pool's block, inside an allocation where one
        holds it. ``size`` 0: not told."""
        if not base:
            return
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
            outer.inner.append(Block(base, end, e, stream=stream, sized=sized))
            return
        if outer is not None and outer.base == base and outer.end == end:
            return  # the runtime's cudaMalloc and the driver's allocation beneath it
        i = bisect.bisect_left(self._bases, base)
        while i < len(self.blocks) and self.blocks[i].base < end:  # what it overlaps is gone
            self.blocks.pop(i)
            self._bases.pop(i)
        self.blocks.insert(i, Block(base, end, e, stream=stream, sized=sized))
        self._bases.insert(i, base)

    def remove(self, block: Block, e: dict) -> None:
        """A block freed: gone from the model, with the pool blocks inside it. A block of a graph-private pool
        leaves the model but is not freed: the pool keeps its memory for the graph's replays."""
        if block.private is None:
            block.freed = e
        outer = self.outer(block.base)
        if outer is block:
            i = self.blocks.index(block)
            self.blocks.pop(i)
            self._bases.pop(i)
            for inner in block.inner:
                inner.freed = e
        elif outer is not None and block in outer.inner:
            outer.inner.remove(block)

    def words(self, raw: bytes) -> tuple[int, ...]:
        """The 8-byte words of a kept argument blob that may be addresses (remembered per distinct blob)."""
        known = self._words.get(raw)
        if known is None:
            found = []
            for _index, value in arguments(raw):
                for offset in range(0, len(value) - 7, 8):
                    word = _U64.unpack_from(value, offset)[0]
                    if word >= MIN_ADDRESS:
                        found.append(word)
            known = tuple(found)
            if len(self._words) >= WORDS_KEPT:
                self._words.clear()
            self._words[raw] = known
        return known

    def kernel_touches(self, e: dict) -> list[tuple[Block, bool, int]]:
        """The blocks a kernel launch's arguments point into, each with whether it is taken to write it and the
        address it points at."""
        raw = e.get("arguments")
        if not isinstance(raw, bytes):
            return []
        found: dict[int, tuple[Block, int]] = {}
        for word in self.words(raw):
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
