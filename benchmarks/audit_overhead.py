"""What ``ctxlab audit`` costs a whole program: the bare program against the audited one, alternating.

    python benchmarks/audit_overhead.py [--repeats R] [--json FILE] [PROGRAM ...]

PROGRAM defaults to the PyTorch training step (examples/programs/torch_train_step.py) and a launch
loop (5,000 small CuPy launches, the workload of benchmarks/trace_overhead.py). Each round runs the
bare program (``python PROGRAM``) and the audited one (``python -m ctxlab audit -o /dev/null --
PROGRAM``) as fresh processes, in alternating order, and reports the medians of the wall times
(interpreter start and imports included) and their ratio; the issue asks for at most 2x. A program
that fails bare is reported and skipped. Without a GPU: one line, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCH_LOOP = ("import cupy, time\n"
               "a = cupy.zeros(1024, dtype=cupy.float32)\n"
               "for _ in range(200): a += 1\n"
               "cupy.cuda.Device().synchronize()\n"
               "t = time.perf_counter()\n"
               "for _ in range(5000): a += 1\n"
               "cupy.cuda.Device().synchronize()\n"
               "print(f'loop {(time.perf_counter() - t) / 5000 * 1e6:.2f} us/launch')\n")
DEFAULT = ("examples/programs/torch_train_step.py", "launch-loop")


def command(program: str, audited: bool) -> list[str]:
    target = ["-c", LAUNCH_LOOP] if program == "launch-loop" else ["--", os.path.join(ROOT, program)]
    if audited:
        return [sys.executable, "-m", "ctxlab", "audit", "-o", os.devnull, *target]
    return [sys.executable, *(target[1:] if target[0] == "--" else target)]


def timed(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    return time.perf_counter() - t, done


def measure(program: str, repeats: int) -> dict:
    bare: list[float] = []
    audited: list[float] = []
    lines: list[str] = []
    for i in range(repeats):
        for is_audited in ((False, True) if i % 2 == 0 else (True, False)):
            seconds, done = timed(command(program, is_audited))
            if not is_audited and done.returncode != 0:
                return {"program": program, "error": f"exit {done.returncode}: {done.stderr.strip()[-500:]}"}
            (audited if is_audited else bare).append(seconds)
            if is_audited:
                lines = [x for x in done.stderr.splitlines() if x.startswith("ctxlab audit:")]
    b, a = statistics.median(bare), statistics.median(audited)
    return {"program": program, "repeats": repeats, "bare_seconds": bare, "audited_seconds": audited,
            "bare_median": round(b, 3), "audited_median": round(a, 3), "ratio": round(a / b, 3),
            "audit_line": lines[-1] if lines else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*", default=list(DEFAULT),
                        help="scripts relative to the repository, or launch-loop")
    parser.add_argument("--repeats", type=int, default=5, help="bare and audited runs of each program")
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args()
    from ctxlab.cuda.environment import BadDevice, NoGpu, capture, require_device

    try:
        require_device(0)
    except (NoGpu, BadDevice) as exc:
        print(f"audit_overhead: cannot measure here: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    report = {"environment": capture(0), "programs": [measure(p, max(args.repeats, 1)) for p in args.programs]}
    for entry in report["programs"]:
        if "error" in entry:
            print(f"{entry['program']}: not measured ({entry['error']})")
        else:
            print(f"{entry['program']}: bare {entry['bare_median']:.2f} s, audited {entry['audited_median']:.2f} s: "
                  f"{entry['ratio']:.2f}x ({entry['audit_line']})")
    if args.json:
        from ctxlab.output import write_output

        write_output(args.json, json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
