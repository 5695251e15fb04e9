"""The audit's options for one realworld program, from examples/realworld/manifest.json: its time limits
(``audit_timeout_s``, ``audit_stall_s``) and its extra arguments (``audit_args``, e.g. --pin)."""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def args_for(program: str) -> list[str]:
    with open(os.path.join(ROOT, "examples", "realworld", "manifest.json")) as handle:
        entries = json.load(handle)
    entry = next((e for e in entries if os.path.basename(e["program"]) == os.path.basename(program)), {})
    # no corpus program needs more than a minute, nor 20 s inside one CUDA call, unless it hangs
    out = ["--timeout", str(entry.get("audit_timeout_s", 90)), "--stall", str(entry.get("audit_stall_s", 20))]
    return out + list(entry.get("audit_args", ()))


if __name__ == "__main__":
    print(" ".join(args_for(sys.argv[1])))
