"""How long ``ctxlab --help``, each lab's ``--help`` and ``import ctxlab`` take in a new interpreter (goal: 0.1 s).

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


def seconds(commands: dict[str, list[str]], runs: int) -> dict[str, list[float]]:
    """Each command's wall times, ``runs`` of each, taken in turns (one of each per round) so that what else
    the machine is doing meanwhile weighs on every figure alike."""
    out: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            t = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True)
            out[name].append(time.perf_counter() - t)
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
    from ctxlab.labs import LABS

    commands = {
        "python -S -c pass": [sys.executable, "-S", "-c", "pass"],
        "python -c pass": [sys.executable, "-c", "pass"],
        "import ctxlab": [sys.executable, "-c", "import ctxlab"],
        "ctxlab --help": [sys.executable, "-m", "ctxlab", "--help"],
        # a lab's command loads its claims and options (not its scenarios) for its help
        **{f"ctxlab {lab} --help": [sys.executable, "-m", "ctxlab", lab, "--help"] for lab in LABS},
    }
    figures = seconds(commands, args.runs)
    report = {"environment": {"python": platform.python_version(), "machine": platform.machine(),
                              "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE")},
              "runs": args.runs,
              "median_seconds": {k: round(statistics.median(v), 4) for k, v in figures.items()},
              "max_seconds": {k: round(max(v), 4) for k, v in figures.items()}}
    for name, median in report["median_seconds"].items():
        print(f"{name:24} median {median * 1000:6.1f} ms  max {report['max_seconds'][name] * 1000:6.1f} ms")
    if args.json:  # ctxlab's one writer: replaced atomically, never half-written
        from ctxlab.output import write_outputs

        write_outputs([(args.json, json.dumps(report, indent=2) + "\n")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
