"""Cases for modules's claims (see tests/claim_cases/__init__.py)."""

from ctxlab.labs.modules.claims import BIG_MIB, SEEN_SHARE
from tests.claim_cases import Case, Edit, both, change, edit, recorded_now

F = "modules.json"
LOADED = {"module_loaded_events": 1, "memory_grew_mib": 258.0}  # what a witness recorded when the module arrived
NOTHING = {"module_loaded_events": 0, "memory_grew_mib": 0.0}


def at(step: str):
    """Match the load witness of one step."""
    return lambda v: v["step"] == step


def moved(scenario: str, from_step: str, to_step: str) -> Edit:
    """Both witnesses see the module arrive at ``to_step`` instead of ``from_step``."""
    return both(edit("load witness", scenario, at(from_step), **NOTHING),
                edit("load witness", scenario, at(to_step), **LOADED))


# The least growth of memory in use that counts as the module's global arriving (the recording predates the
# array's size in each witness, so the claims take BIG_MIB).
SEEN_MIB = BIG_MIB * SEEN_SHARE


def at_threshold(scenario: str | None = None, event_missed: bool = True) -> Edit:
    """Where the global's memory arrived, the memory in use grew by exactly the least that counts as seeing it
    (and, with ``event_missed``, CUPTI's MODULE_LOADED was missed there): the memory witness still places the
    module where it did."""
    missed = {"module_loaded_events": 0} if event_missed else {}
    return change("load witness", scenario,
                  lambda v: {"memory_grew_mib": SEEN_MIB, **missed} if v["memory_grew_mib"] >= SEEN_MIB else {})


# modules.json was recorded before two-contexts recorded both functions (the claim compares them since; it reads
# the recording's own functions_differ there): two function handles, as a run records them.
FUNCTIONS = {"function_primary": 0x3E88_F0C0, "function_created": 0x3F11_2A40}


def functions_now(**fields) -> Edit:
    """two-contexts as recorded now: the probe's function in each context (``fields`` change them)."""
    return recorded_now("two contexts", "two-contexts", ("functions_differ",), **{**FUNCTIONS, **fields})


CASES: dict[str, Case] = {
    "modules.module-load-is-immediate": Case(F, holds_too=[[at_threshold()]], breaks=[
        moved("module-LAZY", "cuModuleLoadData", "cuModuleGetFunction"),  # lazy loading deferring the module
        edit("load witness", "module-EAGER", at("cuModuleLoadData"), **NOTHING),  # no witness saw it at all
        # the witnesses disagree: MODULE_LOADED at the load, the global's memory only at the launch
        both(edit("load witness", "module-EAGER", at("cuModuleLoadData"), memory_grew_mib=0.0),
             edit("load witness", "module-EAGER", at("first launch"), memory_grew_mib=258.0)),
    ]),
    "modules.library-lazy-at-first-use": Case(F, breaks=[
        moved("library-LAZY", "cuKernelGetFunction", "cuLibraryLoadData"),  # loaded at once, as if eager
        edit("load witness", "library-LAZY", at("cuKernelGetFunction in the second context"), **NOTHING),
        edit("load witness", "library-LAZY", at("second context created"), **LOADED),
    ], holds_too=[
        # one witness alone places a load: MODULE_LOADED at the first use, the memory not seen to grow there
        [edit("load witness", "library-LAZY", at("cuKernelGetFunction"), memory_grew_mib=0.0)],
        [at_threshold()],
    ]),
    "modules.library-eager-everywhere": Case(F, holds_too=[[at_threshold()]], breaks=[
        moved("library-EAGER", "cuLibraryLoadData", "cuKernelGetFunction"),  # waited for first use, as if lazy
        edit("load witness", "library-EAGER", at("second context created"), **NOTHING),
    ]),
    "modules.default-loading-mode": Case(F, holds_too=[[at_threshold("module-unset", event_missed=False)]], breaks=[
        edit("loading mode", "module-unset", _value="CU_MODULE_EAGER_LOADING"),
        moved("module-unset", "cuModuleLoadData", "first launch"),  # unset behaves unlike LAZY
    ]),
    "modules.per-context-instances": Case(F, breaks=[
        change("two contexts", "two-contexts", lambda v: {"module_created": v["module_primary"]}),  # one module
        change("two contexts", "two-contexts",
               lambda v: {"global_created": v["global_primary"], "read_primary": 222}),  # one shared global
        edit("two contexts", "two-contexts", functions_differ=False),
        functions_now(function_created=FUNCTIONS["function_primary"]),  # one function for both contexts
    ], holds_too=[[functions_now()]]),
    "modules.library-per-context": Case(F, breaks=[
        change("library in two contexts", "library-LAZY",
               lambda v: {"global_b": v["global_a"], "read_a": 77}),  # one shared global
        change("library in two contexts", "library-EAGER", lambda v: {"function_b": v["function_a"]}),  # one function
    ]),
    "modules.nvcc-registration-makes-no-context": Case(F, breaks=[
        edit("after dlopen", "nvcc", primary_active=True),
        edit("after dlopen", "nvcc", current=0x3B90B640),
        edit("stub", "nvcc", static_constructor=False),
        edit("stub", "nvcc", registration_calls=[], expands_to={}),
    ]),
}
