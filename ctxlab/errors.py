"""Errors the API raises for a caller's mistake, kept at the bottom so that any layer can raise them."""

from __future__ import annotations


class OptionError(ValueError):
    """An option value out of range: one line naming the Python parameter (``threads``); ``cli`` is the same
    line naming the command-line option (``--threads``), which the CLI shows instead."""

    def __init__(self, message: str, cli: str | None = None):
        super().__init__(message)
        self.cli = cli or message
