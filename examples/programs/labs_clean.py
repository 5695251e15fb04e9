"""ctxlab's own lab scenarios that intend no hazard, run in this process so that ``ctxlab audit`` sees
them (the labs run each scenario in a forkserver child, which the audit does not follow).

lifecycle's first-context (cudaSetDevice, cudaMalloc, CuPy's first kernel), modules' module loading
(cuModuleLoadData and a launch in the primary context) and two-contexts (one module per context),
and migrate's verified relays: handoff-primary, handoff-created and handoff-green (each context popped
on one thread before the next pushes it). Each scenario ran in a process of its own in the labs; here
CuPy's memory pool is emptied between them, as a new process would have it, so that one scenario's
block is not handed to the next scenario's context.

    ctxlab audit -- examples/programs/labs_clean.py [--rounds N]
"""

import argparse
import gc

from ctxlab.labs.migrate.claims import final_values_right


def fresh_pool() -> None:
    """Free CuPy's cached blocks: the next scenario allocates in its own context, as in a new process."""
    import cupy

    gc.collect()
    cupy.get_default_memory_pool().free_all_blocks()


def summary(output: dict) -> str:
    """The relay's verdict, or how many observations a scenario made."""
    for obs in output["observations"]:
        if obs.what == "handoffs verified":
            v = obs.value
            return (f"{v['verified']} of {v['handoffs']} handoffs verified, final values right: "
                    f"{final_values_right(v)}")
        if obs.what == "skipped":
            return f"skipped: {obs.value}"
    return f"{len(output['observations'])} observations"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="rounds of each relay (2 threads)")
    parser.add_argument("--device", type=int, default=0)
    args = parser.parse_args()
    from ctxlab.labs import lifecycle, migrate, modules

    runs = [("lifecycle first-context", lambda: lifecycle.first_context(args.device)),
            ("modules module-unset", lambda: modules.module_loading(args.device, None)),
            ("modules two-contexts", lambda: modules.two_contexts(args.device))]
    runs += [(f"migrate handoff-{kind}",
              lambda kind=kind: migrate.handoff(args.device, kind, 2, args.rounds, timeout=120, bare=False))
             for kind in ("primary", "created", migrate.GREEN)]
    for name, run in runs:
        print(f"{name}: {summary(run())}", flush=True)
        fresh_pool()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
