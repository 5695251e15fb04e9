"""The one output writer: every command's reports go through ``write_outputs``.

- ``-`` is standard output (refused in one line when it is closed, as with ``>&-``).
- A path that exists and is not a regular file (``/dev/null``, ``/dev/full``, a FIFO), or
  that names an open file of this process (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``),
  is written in place: replacing it would destroy a device node or a pipe, or cut a shell's
  redirection. Any other regular file, under ``/dev/shm`` or ``/proc`` too, is replaced.
- A path ending in ``/`` names a directory, and a report is never written as one.
- A regular file (or a new one) is written to a temporary file beside it and renamed
  over it, so a reader never sees half a report; it keeps the mode of the file it
  replaces, and a new file gets the mode the umask gives.
- A symlink is followed: its target is replaced, the link stays.
- Errors name the path the user gave, never the temporary file.
- Several outputs are written all or none: every file is staged, then every in-place target and
  standard output written, before the first rename; a failure on the way (a full disk, standard
  output's reader gone, a signal) leaves no file renamed into place and no temporary file behind.
- One file named twice is refused: the same path, two paths to one file (a link, ``-`` and
  ``/dev/stdout``: the same st_dev and st_ino), except /dev/null, which keeps nothing to interleave.
- Standard output's reader gone (``| head``) ends the command quietly with 141 (``ctxlab.interrupts``).
- A report is text, or a function giving its text in chunks (``Text``): a large one is then written as
  it is made, never held whole (``ctxlab.report.json_stream``).
"""

from __future__ import annotations

import os
import re
import select
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from ctxlab.interrupts import deferred, reader_gone

STDOUT = "-"

Text: TypeAlias = str | Callable[[], Iterable[str]]  # a report, or what makes it chunk by chunk


def chunks(text: Text) -> Iterable[str]:
    """A report's text in the chunks it is written in (one, for a string)."""
    return (text,) if isinstance(text, str) else text()


class OutputError(OSError):
    """An output that cannot be written; the message names the user's path."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _umask_mode() -> int:
    """The mode a new file gets here (0o666 less the umask)."""
    try:  # Linux says it without changing it
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _umask_lock:  # elsewhere os.umask can only be read by setting it
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask


_umask_lock = threading.Lock()
# /dev/stdout, /dev/fd/N and /proc/self/fd/N name an open file of this process: never replace it.
_OPEN_FILE_NAME = re.compile(r"/dev/(?:std(?:in|out|err)|fd/\d+)|/proc/(?:self|thread-self|\d+)(?:/task/\d+)?/fd/\d+")


def names_open_file(path: str) -> bool:
    """True when ``path``, or a link on the way to its file, is one of the names of an open file of a
    process (``/dev/stdout``, ``/dev/fd/1``, ``/proc/self/fd/1``): a shell's redirection, not a file to replace."""
    current = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on links followed
        if _OPEN_FILE_NAME.fullmatch(current):
            return True
        try:
            target = os.readlink(current)
        except OSError:
            return False
        current = os.path.normpath(os.path.join(os.path.dirname(current), target))
    return False


def _existing_special(path: str) -> bool:
    """True for a path to write in place: it exists and is not a regular file, or it names an open file."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise OutputError(path, _reason(exc)) from None
    if stat.S_ISDIR(mode):
        raise OutputError(path, "is a directory")
    return not stat.S_ISREG(mode) or names_open_file(path)


def _stdout_open() -> None:
    if sys.stdout is None or getattr(sys.stdout, "closed", False):
        raise OutputError(STDOUT, "standard output is closed (give a file with --output)")


def check_writable(path: str) -> None:
    """Fail before a long run, not after it, when an output path cannot be written."""
    if not path:
        raise OutputError("''", "empty output path (give a file name, or - for standard output)")
    if path == STDOUT:
        _stdout_open()
        return
    if path.endswith(os.sep) or path.endswith(os.sep + "."):
        if os.path.isdir(path):
            raise OutputError(path, "is a directory")
        raise OutputError(path, "names a directory (it ends in /): give a file name")
    if _existing_special(path):
        if not os.access(path, os.W_OK):
            raise OutputError(path, "not writable")
        return
    target = os.path.realpath(path)
    parent = os.path.dirname(target) or "."
    if not os.path.isdir(parent):
        raise OutputError(path, f"directory {os.path.dirname(path) or parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise OutputError(path, f"directory {os.path.dirname(path) or parent} is not writable")


@dataclass
class _Staged:
    path: str     # as the user gave it
    target: str   # the regular file the rename replaces (symlinks resolved)
    tmp: str


def _stage(path: str, text: Text, made: list[str]) -> _Staged:
    """Write ``text`` to a temporary file beside the file ``path`` names, with the mode it will keep; the
    temporary file's name goes into ``made`` as it is created, for the caller to remove if not renamed."""
    target = os.path.realpath(path)
    directory = os.path.dirname(target) or "."
    try:
        old = os.stat(target)
    except FileNotFoundError:
        old = None
    except OSError as exc:
        raise OutputError(path, _reason(exc)) from None
    try:
        with deferred():  # a signal between creating it and noting it would leave it behind
            fd, tmp = tempfile.mkstemp(prefix=_temporary_prefix(target, directory), suffix=".tmp", dir=directory)
            made.append(tmp)
    except OSError as exc:
        raise OutputError(path, _no_file_beside(path, directory, exc)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as handle:  # a lone surrogate: U+FFFD
            for chunk in chunks(text):
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
            if old is not None:
                try:  # keep the owner too where we may (root replacing another user's file)
                    os.fchown(handle.fileno(), old.st_uid, old.st_gid)
                except OSError:
                    pass
                os.fchmod(handle.fileno(), stat.S_IMODE(old.st_mode))  # after chown, which may clear set-id bits
            else:
                os.fchmod(handle.fileno(), _umask_mode())
    except OSError as exc:
        raise OutputError(path, _reason(exc)) from None
    return _Staged(path, target, tmp)


TEMPORARY_EXTRA = len("..") + 8 + len(".tmp")  # the dots, mkstemp's 8 random characters, the suffix


def _temporary_prefix(target: str, directory: str) -> str:
    """The temporary file's prefix: its target's name, cut so that the whole name fits the directory's
    longest name (a valid output name of up to that length must not fail for the name beside it)."""
    try:
        longest = os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError):
        longest = 255
    name = os.path.basename(target)
    return f".{name[:max(1, longest - TEMPORARY_EXTRA)]}."


def _no_file_beside(path: str, directory: str, exc: OSError) -> str:
    """Why no temporary file could be made beside ``path``'s file: its directory is missing, or it exists and
    takes no new file (/proc, a read-only or full file system), in the system's words."""
    shown = os.path.dirname(path) or directory
    if isinstance(exc, FileNotFoundError) and not os.path.isdir(directory):
        return f"directory {shown} does not exist"
    return f"cannot make a file in {shown} to replace it with ({_reason(exc)})"


def _discard(tmp: str) -> None:
    with deferred():  # a second signal must not cut the cleanup of the first
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _write_in_place(path: str, text: Text) -> None:
    """Write into an existing device, FIFO or /dev/stdout without replacing it."""
    try:  # append: /dev/stdout may be a file the shell opened, with this process's output already in it
        with open(path, "a", encoding="utf-8", errors="replace") as handle:
            for chunk in chunks(text):
                handle.write(chunk)
    except BrokenPipeError:  # a FIFO's or /dev/stdout's reader went away: stop quietly, as for standard output
        raise reader_gone() from None
    except OSError as exc:
        raise OutputError(path, _reason(exc)) from None


def _write_stdout(text: Text) -> None:
    _stdout_open()
    stream = sys.stdout
    encoding = getattr(stream, "encoding", None) or "utf-8"
    binary = getattr(stream, "buffer", None)
    try:
        stream.flush()  # what was printed before goes first
        for chunk in chunks(text):
            if binary is None:
                _write_text(stream, chunk, encoding)
            else:
                try:
                    data = chunk.encode(encoding, getattr(stream, "errors", None) or "strict")
                except UnicodeEncodeError:  # what this terminal cannot show (a lone surrogate too) as ?
                    data = chunk.encode(encoding, "replace")
                _write_all(binary, data)
        (binary or stream).flush()
    except BrokenPipeError:  # the reader is gone (| head): stop quietly with 141, as every Unix tool does
        raise reader_gone(stdout_known=True) from None
    except OSError as exc:
        raise OutputError(STDOUT, _reason(exc)) from None


def _write_text(stream: object, chunk: str, encoding: str) -> None:
    try:
        stream.write(chunk)  # type: ignore[attr-defined]
    except UnicodeEncodeError:
        stream.write(chunk.encode(encoding, "replace").decode(encoding, "replace"))  # type: ignore[attr-defined]


def _write_all(binary: Any, data: bytes) -> None:
    """Every byte, even where standard output is unbuffered (PYTHONUNBUFFERED, -u): there a write to a pipe
    that a signal cuts short returns the part it wrote, and the text layer would drop the rest silently."""
    view = memoryview(data)
    while view:
        written = binary.write(view)
        if written is None:  # a non-blocking descriptor that is full: wait until it takes more
            select.select([], [binary], [])
            continue
        view = view[written:]


def file_identity(path: str) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the file ``path`` (``-``: standard output) lands in; None where there is none yet,
    it cannot be told, or it is /dev/null (which keeps nothing, so two names for it interleave nothing)."""
    try:
        info = os.fstat(sys.stdout.fileno()) if path == STDOUT else os.stat(path)
    except (OSError, ValueError, AttributeError):  # no file yet; a standard output with no descriptor
        return None
    if stat.S_ISCHR(info.st_mode) and info.st_rdev == _null_device():
        return None
    return info.st_dev, info.st_ino


def _null_device() -> int | None:
    try:
        return os.stat(os.devnull).st_rdev
    except OSError:
        return None


def _as_named(path: str) -> str:
    return "-, standard output" if path == STDOUT else path


def check_outputs(paths: list[str]) -> None:
    """``check_writable`` for each path, and no file named twice, by one path or two (one report would
    overwrite or interleave with the other)."""
    seen: dict[str, str] = {}
    files: dict[tuple[int, int], str] = {}
    for path in paths:
        check_writable(path)
        key = STDOUT if path == STDOUT else os.path.realpath(path)
        if key in seen:
            if path == STDOUT:
                raise OutputError(STDOUT, "standard output (-) named twice: one report would follow the other")
            raise OutputError(path, f"named twice (also as {seen[key]})" if seen[key] != path else "named twice")
        seen[key] = path
        identity = file_identity(path)
        if identity is not None:
            if identity in files:
                raise OutputError(path, f"named twice: the same file as {_as_named(files[identity])}, so one "
                                        "report would overwrite or interleave with the other")
            files[identity] = path


def write_outputs(outputs: Sequence[tuple[str, Text]]) -> None:
    """Write each (path, text), all or none: see the module docstring for what a path may be."""
    check_outputs([path for path, _ in outputs])
    made: list[str] = []  # temporary files not (yet) renamed into place
    try:
        staged = [_stage(path, text, made) for path, text in outputs
                  if path != STDOUT and not _existing_special(path)]
        # In-place targets and standard output cannot be taken back: written once every file is staged,
        # and before any file is renamed, so that a failure there leaves every file as it was.
        for path, text in outputs:
            if path != STDOUT and _existing_special(path):
                _write_in_place(path, text)
        for path, text in outputs:
            if path == STDOUT:
                _write_stdout(text)
        with deferred():  # every rename, or (on an error) none after it: a signal waits for the lot
            for item in staged:
                try:
                    os.replace(item.tmp, item.target)
                except OSError as exc:
                    raise OutputError(item.path, _reason(exc)) from None
                made.remove(item.tmp)
    finally:
        for tmp in made:
            _discard(tmp)


def write_output(path: str, text: Text) -> None:
    """Write one report: ``-`` to standard output, anything else as ``write_outputs`` does."""
    write_outputs([(path, text)])
