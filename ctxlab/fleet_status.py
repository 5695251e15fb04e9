"""Deprecated: ``python3 -m ctxlab.fleet_status RESULT.json ...`` is ``ctxlab status RESULT.json ...`` now (the
one CLI); this path says so on standard error and runs that command with the same arguments. The status and
its line: ``ctxlab.report.status``."""

from __future__ import annotations

import os
import sys

from ctxlab.report.status import OK, PROBLEM, UNKNOWN, clean, status_line

__all__ = ["OK", "PROBLEM", "UNKNOWN", "clean", "main", "status_line"]


def main(argv: list[str] | None = None) -> None:
    """Run ``ctxlab status`` with these arguments in place of this process (its line, its exit status)."""
    args = sys.argv[1:] if argv is None else argv
    print("ctxlab.fleet_status is deprecated: use python3 -m ctxlab status", file=sys.stderr)
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, "-m", "ctxlab", "status", *args])


if __name__ == "__main__":
    main()
