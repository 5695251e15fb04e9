"""Rewrite the machine paths in recorded logs: the repository's own as paths relative to it, the rest as
placeholders (<out>, <site-packages>, <python>, <tmp>), so a committed log names no path of the machine.

    python3 scripts/repo_relative.py [--out DIR] [--map OLD=NEW ...] FILE...

The repository is this script's parent folder; site-packages, the standard library and the temporary folder
are this interpreter's. ``--map`` adds a rewrite (a path of another machine, a scratch folder). Files are
rewritten in place; a path that is a prefix of another is replaced after the longer one. In an ``.xml`` file
the placeholders are escaped, so that it stays XML.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import sysconfig
import tempfile
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent


def rewrites(out: str | None, extra: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(path, replacement) pairs, longest path first."""
    pairs = [*extra, (str(ROOT), "."), (sysconfig.get_paths()["purelib"], "<site-packages>"),
             (sysconfig.get_paths()["stdlib"], "<python>"), (tempfile.gettempdir(), "<tmp>")]
    if out:
        pairs.append((os.path.abspath(out), "<out>"))
    return sorted({p.rstrip("/"): r for p, r in pairs if p and p != "/"}.items(), key=lambda pr: -len(pr[0]))


def relative(text: str, pairs: list[tuple[str, str]]) -> str:
    """``text`` with every path of ``pairs`` rewritten, with any ``../`` that climbed to it; below the
    repository (replacement ".") a path loses the prefix: ``ROOT/ctxlab/cli/__init__.py`` reads
    ``ctxlab/cli/__init__.py``."""
    for path, new in pairs:
        climbed = r"(?:(?:\.\./)+" + re.escape(path[1:]) + "|" + re.escape(path) + ")"  # ../../opt/x is /opt/x
        if new == ".":
            text = re.sub(climbed + "/", "", text)
        text = re.sub(climbed + r"(?![\w.-])", new, text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="the run's output folder, named <out>")
    parser.add_argument("--map", action="append", default=[], metavar="OLD=NEW", help="one more rewrite")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    extra = []
    for item in args.map:
        old, sep, new = item.partition("=")
        if not sep or not old.startswith("/"):
            parser.error(f"--map {item!r}: give an absolute path, '=', and its replacement")
        extra.append((old, new))
    pairs = rewrites(args.out, extra)
    for name in args.files:
        path = Path(name)
        try:
            text = path.read_text(errors="surrogateescape")
        except OSError as exc:
            print(f"repo_relative: {name}: {exc.strerror}", file=sys.stderr)
            return 2
        # In XML (a JUnit report) a placeholder's angle brackets are markup: they are written as entities.
        ours = [(p, escape(r)) for p, r in pairs] if path.suffix.lower() == ".xml" else pairs
        path.write_text(relative(text, ours), errors="surrogateescape")
    return 0


if __name__ == "__main__":
    sys.exit(main())
