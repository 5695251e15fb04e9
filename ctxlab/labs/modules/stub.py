"""Read what nvcc put into a host stub (``*.cudafe1.stub.c`` from ``nvcc --keep``).

The stub registers the fatbinary and each kernel and ``__device__`` variable
through macros of ``crt/host_runtime.h`` (``__cudaRegisterBinary`` ->
``__cudaRegisterFatBinary``, ``__cudaRegisterEntry`` -> ``__cudaRegisterFunction``,
``__cudaRegisterVariable`` -> ``__cudaRegisterVar``) from a static constructor,
and launches through a device stub. Pure text: tested on a committed stub.
"""

from __future__ import annotations

import re

MACROS = {
    "__cudaRegisterBinary": "__cudaRegisterFatBinary",
    "__cudaRegisterEntry": "__cudaRegisterFunction",
    "__cudaRegisterVariable": "__cudaRegisterVar",
    "__cudaRegisterGlobalTexture": "__cudaRegisterTexture",
    "__cudaRegisterGlobalSurface": "__cudaRegisterSurface",
}


def parse_stub(text: str) -> dict:
    """What a host stub registers (kernels, variables, the registration calls and what they expand to), whether
    a static constructor runs them, and the calls a launch goes through."""
    kernels = re.findall(r"__cudaRegisterEntry\(\s*__T\w*\s*,.*?\)\)\s*([\w:]+)\s*\)\s*,\s*(\w+)\s*,", text)
    if not kernels:
        kernels = [(m, m) for m in re.findall(r"__cudaRegisterFunction\([^;]*?\"(\w+)\"", text)]
    variables = re.findall(r"__cudaRegisterVariable\(\s*__T\w*\s*,\s*__shadow_var\(\s*(\w+)", text)
    if not variables:
        variables = re.findall(r"__cudaRegisterVar\([^;]*?\"(\w+)\"", text)
    registrations = sorted({name for name in (*MACROS, *MACROS.values(), "__cudaRegisterLinkedBinary")
                            if re.search(rf"\b{name}\s*\(", text)})
    constructor = bool(re.search(r"__sti____cudaRegisterAll|__attribute__\s*\(\(\s*__constructor__", text))
    launch = sorted(set(re.findall(r"\b(__cudaLaunch|cudaLaunchKernel|__cudaLaunchPrologue|"
                                   r"__cudaPushCallConfiguration|__cudaPopCallConfiguration)\b", text)))
    return {
        "kernels": [{"name": name.split("::")[-1], "mangled": mangled} for name, mangled in kernels],
        "variables": variables,
        "registration_calls": registrations,
        "expands_to": {m: MACROS[m] for m in registrations if m in MACROS},
        "static_constructor": constructor,
        "launch_through": launch,
    }
