"""ctxlab's verified relay against the native one, at 32 threads, in pairs that alternate.

    python benchmarks/relay_vs_native.py [--threads N] [--handoffs N] [--pairs N] [--json FILE]

For the device's primary context and for a context made with cuCtxCreate, each pair runs migrate's relay (in a
process of its own, as ``ctxlab migrate`` runs it: threads on one core, every handoff verified) and the C++ relay
of ``native_relay.cu`` (the same verification) in each of its hand-overs; a pair's ratio is ctxlab's verified
handoffs per second over the fastest native hand-over's, and over the native floor (one thread making the same
verified handoffs with no hand-over: no relay of this verification beats it). The pairs alternate which runs
first. Prints each pair and the median ratios per context; ``--json`` records them with the environment. Needs a
GPU and nvcc.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from common import positive, refuse_without_gpu
from native_build import NATIVE_MODES, build_native, native_rate

from ctxlab.labs.migrate.claims import relay_lost

KINDS = ("primary", "created")


def relay_child(kind: str, threads: int, rounds: int) -> None:
    """In the child: migrate's relay once, without its bare handoffs; one line of JSON."""
    from ctxlab.labs.migrate import handoff

    output = handoff(0, kind, threads, rounds, 60.0, bare=False)
    summary = next(o.value for o in output["observations"] if o.what == "handoffs verified")
    print(json.dumps({"verified_per_s": output["metrics"][f"{kind}: verified handoffs/s"], **summary}))


def ctxlab_rate(kind: str, threads: int, rounds: int) -> dict:
    """migrate's relay in a fresh process: its rate and its verification summary."""
    done = subprocess.run([sys.executable, __file__, "--child", kind, "--threads", str(threads),
                           "--handoffs", str(threads * rounds)], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"ctxlab relay ({kind}) exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=positive, default=32, help="host threads in the relay (>= 1)")
    parser.add_argument("--handoffs", type=positive, default=32000, help="handoffs per run (>= 1)")
    parser.add_argument("--pairs", type=positive, default=3, help="alternating pairs per context (>= 1)")
    parser.add_argument("--json", default=None, help="also write the figures here")
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    rounds = max(1, args.handoffs // args.threads)
    if args.child:
        relay_child(args.child, args.threads, rounds)
        return 0
    if refuse_without_gpu("relay_vs_native"):
        return 2
    binary, how = build_native()
    if not binary:
        print(f"relay_vs_native: needs the native relay: {how}", file=sys.stderr)
        return 2
    report: dict = {"threads": args.threads, "handoffs": args.threads * rounds, "native": how, "contexts": {}}
    for kind in KINDS:
        pairs = []
        for pair in range(args.pairs):
            def native(kind: str = kind) -> dict:
                return {mode: native_rate(binary, args.threads, rounds, mode, kind) for mode in NATIVE_MODES}

            if pair % 2:  # alternate which of the two runs first
                natives, ours = native(), ctxlab_rate(kind, args.threads, rounds)
            else:
                ours, natives = ctxlab_rate(kind, args.threads, rounds), native()
            fastest = max(natives, key=lambda mode: natives[mode]["verified_per_s"])
            # The floor: the same verified handoffs made by one thread with no hand-over at all (each native run
            # measures it first). No relay of this verification, however it hands over, beats it.
            floor_us = min(r["alone_us"] for r in natives.values())
            row = {"ctxlab_verified_per_s": ours["verified_per_s"],
                   "ctxlab_checks_ok": not relay_lost(ours),
                   "ctxlab_core": ours["core"], "native_verified_per_s": natives[fastest]["verified_per_s"],
                   "native_mode": fastest,
                   "native_by_mode": {mode: natives[mode]["verified_per_s"] for mode in natives},
                   "native_checks_ok": all(r["mismatches"] == 0 and r["final_ok"] for r in natives.values()),
                   "native_floor_us": floor_us, "native_floor_per_s": 1e6 / floor_us,
                   "ctxlab_first": pair % 2 == 0}
            row["ratio"] = row["ctxlab_verified_per_s"] / row["native_verified_per_s"]
            row["ratio_to_floor"] = row["ctxlab_verified_per_s"] / row["native_floor_per_s"]
            pairs.append(row)
            print(f"{kind:<8} pair {pair + 1}: ctxlab {row['ctxlab_verified_per_s']:8.0f} verified/s, native "
                  f"{row['native_verified_per_s']:8.0f} ({fastest}; "
                  + ", ".join(f"{m} {r:.0f}" for m, r in row["native_by_mode"].items())
                  + f"; one thread, no hand-over {row['native_floor_per_s']:.0f})  ratio {row['ratio']:.3f}, "
                  f"to that floor {row['ratio_to_floor']:.3f}", flush=True)
        median = statistics.median(p["ratio"] for p in pairs)
        report["contexts"][kind] = {"pairs": pairs, "median_ratio": median,
                                    "median_ratio_to_floor": statistics.median(p["ratio_to_floor"] for p in pairs),
                                    "all_checks_ok": all(p["ctxlab_checks_ok"] and p["native_checks_ok"]
                                                         for p in pairs)}
        print(f"{kind:<8} median ratio {median:.3f}", flush=True)
    from ctxlab.cuda.environment import capture

    report = {"environment": capture(0), **report}
    if args.json:  # ctxlab's one writer: replaced atomically, never half-written
        from ctxlab.output import write_outputs

        write_outputs([(args.json, json.dumps(report, indent=2) + "\n")])
    ok = all(c["all_checks_ok"] for c in report["contexts"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
