"""What the benchmarks share: the one-line refusal where there is no GPU, and comma-separated counts.

The benchmarks run as scripts (``python benchmarks/NAME.py``), so this folder is on their path.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable


def refuse_without_gpu(benchmark: str, device: int = 0) -> bool:
    """True, after one line on standard error, when GPU ``device`` is not here (the caller exits 2)."""
    from ctxlab.cuda.environment import BadDevice, NoGpu, require_device

    try:
        require_device(device)
    except (NoGpu, BadDevice) as exc:
        print(f"{benchmark}: needs a GPU: {exc}", file=sys.stderr)
        return True
    return False


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive count")
    return value


def counts(high: int) -> Callable[[str], list[int]]:
    """An argparse type: counts such as 1,2,8, each between 1 and ``high``."""
    def parse(text: str) -> list[int]:
        try:
            values = [int(part) for part in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: give counts such as 1,2,8") from None
        if not values or any(not 1 <= v <= high for v in values):
            raise argparse.ArgumentTypeError(f"{text!r}: each count must be between 1 and {high}")
        return values

    return parse


def recorded_source(path: str) -> dict:
    """A recorded result as its JSON document, after ctxlab has read it as a result (``ResultFileError``, in
    its one line, for anything else)."""
    import json

    from ctxlab.records.files import load_runs

    load_runs(path)
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def write_profile(path: str, run: Callable[[], object], sort: str = "tottime", lines: int = 25) -> None:
    """Profile ``run()`` and write pstats' table of it to ``path``, its paths made relative to the repository
    (scripts/repo_relative.py's rewrite: a committed profile names no path of the machine)."""
    import cProfile
    import importlib.util
    import io
    import os
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    run()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats(sort).print_stats(lines)
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts", "repo_relative.py")
    spec = importlib.util.spec_from_file_location("repo_relative", script)
    assert spec is not None and spec.loader is not None
    rewrite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rewrite)
    with open(path, "w") as handle:
        handle.write(rewrite.relative(out.getvalue(), rewrite.rewrites(None, [])))
