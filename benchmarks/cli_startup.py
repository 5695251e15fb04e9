"""How long ``ctxlab --help`` and ``import ctxlab`` take in a new interpreter (goal: --help under 0.1 s).

    python benchmarks/cli_startup.py [--runs N] [--json FILE]

The package is measured as ``pip install`` leaves it, its bytecode compiled:
ctxlab's modules are compiled first (``compileall``, into their ``__pycache__``),
so that a checkout run with PYTHONDONTWRITEBYTECODE set, which would compile
ctxlab's sources again in every interpreter, is not what is timed. Beside the
figures: ``python -S -c pass``, the interpreter without ``site`` (the ``.pth``
files of what is installed), and whether bytecode writing was off.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time


def seconds(argv: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        out.append(time.perf_counter() - t)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="interpreters started per figure (1 to 1000)")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    if not 1 <= args.runs <= 1000:
        parser.error("--runs must be between 1 and 1000")
    import compileall
    import os

    import ctxlab

    compileall.compile_dir(os.path.dirname(ctxlab.__file__), quiet=1)
    figures = {
        "python -S -c pass": seconds([sys.executable, "-S", "-c", "pass"], args.runs),
        "python -c pass": seconds([sys.executable, "-c", "pass"], args.runs),
        "import ctxlab": seconds([sys.executable, "-c", "import ctxlab"], args.runs),
        "ctxlab --help": seconds([sys.executable, "-m", "ctxlab", "--help"], args.runs),
    }
    report = {"environment": {"python": platform.python_version(), "machine": platform.machine(),
                              "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE")},
              "runs": args.runs,
              "median_seconds": {k: round(statistics.median(v), 4) for k, v in figures.items()},
              "max_seconds": {k: round(max(v), 4) for k, v in figures.items()}}
    for name, median in report["median_seconds"].items():
        print(f"{name:17} median {median * 1000:6.1f} ms  max {report['max_seconds'][name] * 1000:6.1f} ms")
    if args.json:  # ctxlab's one writer: replaced atomically, never half-written
        from ctxlab.output import write_outputs

        write_outputs([(args.json, json.dumps(report, indent=2) + "\n")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
