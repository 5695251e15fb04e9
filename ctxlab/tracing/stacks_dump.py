"""Python's own stacks of every thread, as ``faulthandler`` writes them: at a fatal signal in the traced child
(``faulthandler.enable``), and when the parent asks with SIGUSR2 during a hang (``faulthandler.register``).
faulthandler needs neither the GIL nor a working interpreter, so these stacks exist where nothing else does."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ctxlab.tracing.frames import is_user_file, shown

_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+)(?: \[[^\]]*\])? \(most recent call first\):")
_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (.*)$')
_FATAL = re.compile(r"^Fatal Python error: (.*)$")


@dataclass
class ThreadStack:
    """One thread's Python stack, innermost frame first."""

    ident: int  # threading.get_ident() of the thread
    current: bool  # the thread that received the signal
    frames: list[list] = field(default_factory=list)  # [file, line, function], innermost first
    tid: int | None = None  # its OS thread id, where the parent tied it to one (a thread Python did not start)

    def user_frames(self, limit: int = 8) -> list[list]:
        """The frames of the user's own code (outside ctxlab, the standard library and site-packages)."""
        return [[shown(f[0]), f[1], f[2]] for f in self.frames if is_user_file(f[0])][:limit]


@dataclass
class StacksDump:
    """What one faulthandler dump says: why (a fatal error's title) and every thread's stack."""

    reason: str
    threads: list[ThreadStack]

    def current(self) -> ThreadStack | None:
        """The thread that received the signal (the one that crashed, for a fatal signal)."""
        return next((t for t in self.threads if t.current), None)


def parse_dump(text: str) -> list[StacksDump]:
    """Every dump in a faulthandler file (one per fatal error or request), in order."""
    dumps: list[StacksDump] = []
    reason = ""
    thread: ThreadStack | None = None
    pending: list[ThreadStack] = []

    def close() -> None:
        nonlocal pending, reason
        if pending:
            dumps.append(StacksDump(reason, pending))
        pending, reason = [], ""

    for line in text.splitlines():
        fatal = _FATAL.match(line)
        if fatal:
            close()
            reason = fatal.group(1).strip()
            thread = None
            continue
        head = _THREAD.match(line)
        if head:
            current = head.group(1) == "Current thread"
            ident = int(head.group(2), 16)
            if any(t.ident == ident for t in pending):
                close()  # a thread met again: the next dump (a request has no title line)
            thread = ThreadStack(ident, current)
            pending.append(thread)
            continue
        frame = _FRAME.match(line)
        if frame and thread is not None:
            thread.frames.append([frame.group(1), int(frame.group(2)), frame.group(3).strip()])
    close()
    return dumps


def read_dumps(path: str) -> list[StacksDump]:
    """The dumps in a faulthandler file; none when it is missing or empty."""
    try:
        with open(path, errors="replace") as handle:
            return parse_dump(handle.read())
    except OSError:
        return []
