"""Whether a tracer can start here, asked without touching CUDA: ``check`` drops ``--trace`` from a lab's
options where it cannot (its traced claims then read skipped, naming what is missing) instead of breaking
every scenario."""

from __future__ import annotations

from ctxlab.tracing import native


def trace_missing() -> str | None:
    """Why no tracer can start here, found without touching CUDA (cupti-python missing, or no C compiler for
    its callback and none built before); None when one can try."""
    import importlib.util

    if importlib.util.find_spec("cupti") is None:
        return "CUPTI is not available: cupti-python is not installed; install ctxlab with the extra cu13 or cu12"
    try:
        native.build()  # a file in ctxlab's cache after the first time: nothing is loaded into this process
    except native.NativeUnavailable as exc:
        return str(exc)
    return None
