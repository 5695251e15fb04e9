"""Escapers, one per output format: result files come from other machines, so every text
field is escaped for where it lands before it is shown.

- ``terminal``: terminal escape sequences and control characters removed (the human table);
  the table also hands text to rich as ``Text``, so ``[bold]`` in data is never markup.
- ``markdown``: HTML special characters as entities (many Markdown viewers render HTML)
  and Markdown's inline control characters backslash-escaped; one line.
- ``html``: HTML special characters as entities, control characters removed.
- ``xml``: characters XML 1.0 cannot hold removed (the XML writer escapes ``<&>`` itself).
- ``shown``: for error lines that quote what the user typed (a file name): every control character
  and escape introducer written out as ``\\xNN`` instead of sent to the terminal.

Every escaper also replaces lone surrogates (``"\\ud800"`` in a JSON string decodes to one) with
U+FFFD: no encoder can write them, so they would end a report in a ``UnicodeEncodeError``.
"""

from __future__ import annotations

import html as _html
import re

# ESC or 8-bit C1 introducers: CSI (ESC [ or 0x9b), OSC, DCS, SOS, PM, APC (to their terminator), or any other ESC pair.
_TERMINAL_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -~]?")
# Other C0 and C1 controls, DEL, and bidirectional overrides that reorder what is shown.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# Everything ``shown`` writes out: C0 and C1 controls (ESC and the 8-bit introducers among them), DEL, the
# bidirectional controls, and lone surrogates (a file name that is not UTF-8 arrives with them).
_UNSHOWN = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_LINE_BREAKS = re.compile(r"[\t\n]+")
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# Inline specials only: a cell never starts a line, and with [ ] escaped no ( ) can form a link.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~$])")


def terminal(text: object) -> str:
    """Text safe to print on a terminal: no escape sequences, no control characters but tab and newline."""
    return _CONTROL.sub("", _TERMINAL_SEQUENCE.sub("", _SURROGATE.sub("\ufffd", str(text))))


def one_line(text: object) -> str:
    """Terminal-safe text on one line (newlines and tabs as spaces)."""
    return " ".join(terminal(text).split())


def markdown(text: object) -> str:
    """Text for a Markdown table cell or line: one line, HTML specials as entities, Markdown specials escaped."""
    # Backslashes first, entities second: an entity's "#" must not be escaped.
    return _html.escape(_MARKDOWN_SPECIAL.sub(r"\\\1", one_line(text)), quote=False)


def html(text: object) -> str:
    """Text for HTML content or a quoted attribute."""
    return _html.escape(terminal(text), quote=True)


def xml(text: object) -> str:
    """Text an XML 1.0 document can hold (terminal sequences dropped too, since JUnit is read on terminals)."""
    return _NOT_XML.sub("", terminal(text))


def _written_out(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: object) -> str:
    """One line a terminal shows as written: tabs and newlines as spaces (other spacing kept), every other
    control character, escape introducer, bidirectional control or lone surrogate written out (``\\x1b``),
    so a file name holding an escape sequence is shown, not obeyed."""
    return _UNSHOWN.sub(_written_out, _LINE_BREAKS.sub(" ", str(text)).strip())
