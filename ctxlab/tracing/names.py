"""How the tracer names what CUPTI numbers: a runtime function's public name."""

from __future__ import annotations

import re

_VERSION_SUFFIX = re.compile(r"_v\d{4,}$")
CONTEXT_PREFIXES = ("cuCtx", "cuDevicePrimaryCtx", "cuModule", "cuLibrary", "cuKernel", "cuGreenCtx")
CALL_DOMAINS = ("driver", "runtime")  # events of other domains (resource, audit) are not calls
# kernel launches by base name (no version or per-thread suffix): what the fold reads runs of, and the audit's
# ordering model enqueues as kernels
KERNEL_LAUNCHES = frozenset({"cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "cudaLaunchKernel",
                             "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel"})



def api_name(domain: str, name: str) -> str:
    """A runtime function's public name (cupti names its callback ids ``cudaMalloc_v3020``)."""
    return _VERSION_SUFFIX.sub("", name) if domain == "runtime" else name
