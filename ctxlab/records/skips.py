"""Why a claim was not judged, as a structure the run's own record can check (issue 49: nothing reads healthy
that is not, and the text of a reason is not trusted).

A scenario that cannot run here records a ``skipped`` observation whose value is a skip: an object with the
sentence the evidence shows (``why``), the ``kind`` of reason, and that kind's fields:

- ``hardware``: this machine lacks what the lab needs: ``resource`` ``"gpus"`` with the ``required`` and ``found``
  counts, or ``"peer-access"`` (two GPUs that cannot reach each other's memory);
- ``library``: a library the scenario needs: ``library``, the ``distributions`` looked for, ``installed`` (by
  package metadata, as the environment records it) and ``error`` (its import error, or what it said when started);
- ``unsupported``: the driver, the runtime, cuda-bindings, a library's version or the toolchain here cannot do what
  the scenario needs (no ``cudaInitDevice``, no ``deviceReset``, no nvcc, no green contexts).

The judge adds its own: ``inapplicable`` (the run cannot decide the claim: untraced, an outcome not recorded),
``precondition`` (a promise's precondition did not hold), ``not-selected`` (none of its scenarios ran) and
``level`` (the verdict ``unjudged``: the claim's lowest level ``required``, the run's level ``found``).

A claim's result keeps the structure without the sentence (``ClaimResult.skip``; the evidence holds the
sentence). ``contradiction`` checks it against the run's environment record and the GPUs the lab declares: a
one-GPU lab cannot skip for want of two GPUs, a run whose environment records the GPUs a lab needs cannot skip
for want of them, a library whose version the environment records cannot be "not installed", and an installed
one must name its import error. ``confirmed`` makes such a claim ``error``: the experiment or its judge broke.
``borne_out`` is the stricter question a check's promise asks (``ctxlab.records.promise``): does the record show
the lack?
Older recordings hold the sentence alone (a string): their claims carry no structure and read as before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ctxlab.records.model import ClaimResult
from ctxlab.records.schema import NOT_JUDGED

Skip = dict[str, Any]

KINDS = ("hardware", "library", "unsupported", "inapplicable", "precondition", "not-selected", "level")
# Libraries the environment records at its top level (ctxlab.cuda.environment.capture), by distribution; the
# others (torch, jax, numba-cuda, cuda-core, ...) under "libraries".
TOP_LEVEL = {"cupy": "cupy", "cuda-bindings": "cuda_bindings", "cupti-python": "cupti_python"}


def _skip(kind: str, why: str, **fields: Any) -> Skip:
    return {"kind": kind, "why": why, **fields}


def gpus(required: int, found: int) -> Skip:
    """Too few GPUs: the lab needs ``required``, the driver shows ``found``."""
    return _skip("hardware", f"needs {required} GPUs, this machine has {found}", resource="gpus", required=required,
                 found=found)


def peer_access(why: str) -> Skip:
    """Two GPUs that cannot access each other's memory (cuDeviceCanAccessPeer said so)."""
    return _skip("hardware", why, resource="peer-access")


def library(name: str, distributions: Sequence[str], installed: bool, error: str | None = None,
            why: str | None = None) -> Skip:
    """A library the scenario needs: not ``installed`` (by package metadata), or installed and failing with
    ``error`` (its import error, or what it said when started); ``why`` where the sentence is not the usual one."""
    text = why or (f"{name} could not be imported: {error}" if installed else f"{name} is not installed")
    return _skip("library", text, library=name, distributions=list(distributions), installed=installed,
                 error=error)


def unsupported(why: str) -> Skip:
    """The driver, runtime, bindings, a library's version or the toolchain here cannot do what is needed."""
    return _skip("unsupported", why)


def inapplicable(why: str) -> Skip:
    """The run cannot decide the claim (untraced, an outcome not recorded)."""
    return _skip("inapplicable", why)


def precondition(why: str) -> Skip:
    """A promise's precondition did not hold."""
    return _skip("precondition", why)


def not_selected(scenarios: Sequence[str]) -> Skip:
    """None of the claim's scenarios was selected by the run's options."""
    return _skip("not-selected", f"not run: none of its scenarios ({', '.join(scenarios)}) was selected",
                 scenarios=list(scenarios))


def level(required: int, found: int, why: str) -> Skip:
    """Above the run's check level (the verdict ``unjudged``): the claim's lowest level, the run's."""
    return _skip("level", why, required=required, found=found)


def text_of(value: Any) -> str:
    """The sentence of a ``skipped`` observation's value: a skip's ``why``, or an older recording's text."""
    if isinstance(value, Mapping) and isinstance(value.get("why"), str):
        return value["why"]
    return str(value)


def structure_of(value: Any) -> Skip | None:
    """A skip without its sentence (what ``ClaimResult.skip`` keeps); None for an older recording's text."""
    if isinstance(value, Mapping) and isinstance(value.get("kind"), str):
        return {key: item for key, item in value.items() if key != "why"}
    return None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def recorded_versions(environment: Mapping[str, Any], distributions: Iterable[str]) -> dict[str, str | None]:
    """The versions the environment records for those of ``distributions`` it records at all (None: recorded as
    not installed); a distribution it does not record is left out."""
    libraries = environment.get("libraries")
    out: dict[str, str | None] = {}
    for name in distributions:
        if isinstance(libraries, Mapping) and name in libraries:
            out[name] = libraries[name]
        elif name in TOP_LEVEL and TOP_LEVEL[name] in environment:
            out[name] = environment[TOP_LEVEL[name]]
    return out


def _hardware(skip: Mapping[str, Any], environment: Mapping[str, Any], lab_gpus: int) -> str | None:
    if skip.get("resource") != "gpus":
        return None
    required, found, recorded = _count(skip.get("required")), _count(skip.get("found")), \
        _count(environment.get("gpu_count"))
    if required is None or found is None:
        return "a skip for want of GPUs must give the count required and the count found"
    if required != lab_gpus:
        return f"the lab needs {lab_gpus} GPU(s), so it cannot skip for want of {required}"
    if found >= required:
        return f"it found {found} GPU(s), the {required} it needs"
    if recorded is not None and recorded != found:
        return f"it found {found} GPU(s) where the run's environment records {recorded}"
    return None


def _library(skip: Mapping[str, Any], environment: Mapping[str, Any]) -> str | None:
    name = str(skip.get("library"))
    distributions = [str(d) for d in skip.get("distributions") or (name,)]
    versions = recorded_versions(environment, distributions)
    if skip.get("installed") is False:
        present = [f"{d} {v}" for d, v in versions.items() if v]
        if present:
            return f"it says {name} is not installed, but the run's environment records {', '.join(present)}"
        return None
    if skip.get("installed") is not True:
        return f"a library skip must say whether {name} is installed"
    if not skip.get("error"):
        return f"it names no import error for {name}, which is installed"
    if len(versions) == len(distributions) and not any(versions.values()):
        return (f"it says {name} is installed, but the run's environment records none of "
                f"{', '.join(distributions)}")
    return None


def contradiction(skip: Mapping[str, Any], environment: Mapping[str, Any], lab_gpus: int = 1,
                  run_level: int | None = None) -> str | None:
    """Why ``skip`` cannot be true of a run whose environment record is ``environment``, of a lab that needs
    ``lab_gpus`` GPUs, made at ``run_level`` (None: not known); None where nothing contradicts it. An environment
    that does not record a figure (older files, one that could not be read) contradicts nothing of it."""
    kind = skip.get("kind")
    if kind not in KINDS:
        return f"its kind {kind!r} is not one of {', '.join(KINDS)}"
    if kind == "hardware":
        return _hardware(skip, environment, lab_gpus)
    if kind == "library":
        return _library(skip, environment)
    if kind == "level" and run_level is not None:
        required, found = _count(skip.get("required")), _count(skip.get("found"))
        if found != run_level or required is None or required <= run_level:
            return f"the run was made at level {run_level}, which judges a claim of level {required}"
    return None


def borne_out(skip: Mapping[str, Any], environment: Mapping[str, Any], lab_gpus: int = 1) -> bool:
    """Whether the run's own environment record shows that the machine lacks what ``skip`` says it lacks, so that
    no check level promises the claim there (``ctxlab.records.promise``): fewer GPUs than the lab needs by the GPU
    count it records, or a library it records as not installed, or as installed, whose import error the skip names.
    Every other reason (a feature unsupported here, a precondition, an untraced run, GPUs without peer access) is
    the run's word alone, which the record cannot bear out; so is a figure the record lacks."""
    if contradiction(skip, environment, lab_gpus) is not None:
        return False
    if skip.get("kind") == "hardware":
        recorded = _count(environment.get("gpu_count"))
        return skip.get("resource") == "gpus" and recorded is not None and recorded < lab_gpus
    if skip.get("kind") != "library" or not str(skip.get("error") or "").strip():
        return False
    versions = recorded_versions(environment, [str(d) for d in skip.get("distributions") or (skip.get("library"),)])
    if skip.get("installed") is False:
        return bool(versions) and not any(versions.values())
    return any(versions.values())


def confirmed(claims: Iterable[ClaimResult], environment: Mapping[str, Any], lab_gpus: int = 1,
              run_level: int | None = None) -> tuple[ClaimResult, ...]:
    """The claims, each skipped or unjudged one whose structured reason the run's own record contradicts made
    ``error`` (its evidence says what contradicts what; the reason is kept in ``skip``)."""
    out = []
    for claim in claims:
        why = (contradiction(claim.skip, environment, lab_gpus, run_level)
               if claim.skip is not None and claim.verdict in NOT_JUDGED else None)
        out.append(claim if why is None else dataclasses.replace(
            claim, verdict="error", evidence=f"{claim.verdict} for a reason the run's own record contradicts: {why} "
                                             f"(the reason: {claim.evidence})"))
    return tuple(out)
