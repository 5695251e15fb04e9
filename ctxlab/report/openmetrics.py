"""The runs as OpenMetrics text: what node_exporter's textfile collector reads and Prometheus scrapes.

Every family is a gauge (the one type both the OpenMetrics parser and node_exporter's classic text parser
take), no sample carries a timestamp (the textfile collector refuses them: the run's time is the gauge
``ctxlab_run_timestamp_seconds``), and the text ends in ``# EOF``. Label values come from result files,
which are data from other machines: each is written out with ``escape.shown`` (no control character
survives), cut to ``LABEL_LIMIT`` characters, and escaped as OpenMetrics asks (backslash, quote,
newline). The hostname is left to the scraper (its ``instance`` label).

Families (``docs/fleet.md`` has the queries):

- ``ctxlab_up``: 1 when check ran its labs, 0 for a node that could not run;
- ``ctxlab_environment_error{reason}``: one sample per reason, 1 for the node's;
- ``ctxlab_environment_info{device, gpu, gpu_uuid, compute_capability, driver, runtime, runtime_cuda_bindings,
  cupy, cuda_bindings, python, ctxlab_version}``: 1 per device;
- ``ctxlab_failed`` (an empty or short run, which judged fewer claims than its level promises, counts),
  ``ctxlab_claims_judged``, ``ctxlab_claims_promised`` (``ctxlab.records.promise``),
  ``ctxlab_run_timestamp_seconds``, ``ctxlab_run_duration_seconds``;
- per lab and device: ``ctxlab_lab_duration_seconds``, ``ctxlab_lab_claims{verdict}``, ``ctxlab_lab_errors``,
  ``ctxlab_lab_flags``, ``ctxlab_lab_failed``;
- per claim: ``ctxlab_claim_verdict{lab, claim, kind, device, verdict}``, one sample per verdict, 1 for the
  claim's.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping

from ctxlab.records.environment_error import REASONS, is_environment_error
from ctxlab.records.model import LabResult
from ctxlab.records.promise import Declared, promise_of, unkept
from ctxlab.records.schema import NOT_JUDGED, VERDICTS
from ctxlab.report.escape import shown

LABEL_LIMIT = 200
CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
HELP = {
    "ctxlab_up": "1 when ctxlab check ran its labs on this node, 0 when the node could not run at all.",
    "ctxlab_environment_error": "Why the node could not run (1 for its reason, 0 for the others).",
    "ctxlab_environment_info": "The environment each device ran in (always 1; the labels carry it).",
    "ctxlab_failed": "1 when a documented claim fails, a claim errs, a scenario broke, the node could not run, or "
                     "fewer claims were judged than the level promises here (none at all, or a promised one not).",
    "ctxlab_claims_judged": "How many claims the run judged (not skipped, not left unjudged by its level).",
    "ctxlab_claims_promised": "How many claims the run's level promises on this node (those at or below it, less "
                              "skips its environment record bears out).",
    "ctxlab_run_timestamp_seconds": "When the run started (Unix time).",
    "ctxlab_run_duration_seconds": "From the first lab's start to the last lab's end.",
    "ctxlab_lab_duration_seconds": "How long each lab took on each device.",
    "ctxlab_lab_claims": "How many of the lab's claims have each verdict.",
    "ctxlab_lab_errors": "Scenarios of the lab that crashed, timed out or raised.",
    "ctxlab_lab_flags": "Outcomes of the lab to look at whatever the verdicts (silent wrong results).",
    "ctxlab_lab_failed": "1 when the lab's run failed (a claim fails or errs, or a scenario broke).",
    "ctxlab_claim_verdict": "Each claim's verdict: 1 for the verdict it has, 0 for the others.",
}


def label_value(value: object) -> str:
    """A value from a result file as an OpenMetrics label value: inert, one line, bounded, escaped."""
    text = shown("" if value is None else value)
    if len(text) > LABEL_LIMIT:
        text = text[: LABEL_LIMIT - 1] + "…"
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def version_text(value: object) -> str:
    """A CUDA version integer (13020) as people write it (13.2); "none" when not recorded."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return f"{value // 1000}.{value % 1000 // 10}"
    return "none"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 2**53 else repr(float(value))


def _timestamp(started: str) -> float | None:
    try:
        moment = datetime.datetime.fromisoformat(started)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


class _Family:
    """One gauge family's samples; a repeated label set (two runs of one lab and device in one file) gets a
    ``copy`` label instead of a duplicate series."""

    def __init__(self, name: str):
        self.name = name
        self.samples: list[tuple[tuple[tuple[str, str], ...], float]] = []
        self.seen: set[tuple[tuple[str, str], ...]] = set()

    def add(self, labels: dict[str, object], value: float) -> None:
        items = tuple((k, label_value(v)) for k, v in labels.items())
        copy = 1
        key = items
        while key in self.seen:
            copy += 1
            key = (*items, ("copy", str(copy)))
        self.seen.add(key)
        self.samples.append((key, value))

    def lines(self) -> Iterable[str]:
        yield f"# HELP {self.name} {HELP[self.name]}"
        yield f"# TYPE {self.name} gauge"
        for labels, value in self.samples:
            text = ",".join(f'{k}="{v}"' for k, v in labels)
            yield f"{self.name}{{{text}}} {_number(value)}" if text else f"{self.name} {_number(value)}"


def _device(run: LabResult) -> object:
    device = run.environment.get("device", run.options.get("device"))
    return "none" if device is None else device


def _environment_labels(run: LabResult) -> dict[str, object]:
    env = run.environment
    found = env.get("runtime_versions")
    runtimes: dict = found if isinstance(found, dict) else {}
    return {"device": _device(run), "gpu": env.get("gpu") or "none", "gpu_uuid": env.get("gpu_uuid") or "none",
            "compute_capability": env.get("compute_capability") or "none",
            "driver": version_text(env.get("driver_version")), "runtime": version_text(env.get("runtime_version")),
            "runtime_cuda_bindings": version_text(runtimes.get("cuda_bindings")),
            "cupy": env.get("cupy") or "none", "cuda_bindings": env.get("cuda_bindings") or "none",
            "python": env.get("python") or "none", "ctxlab_version": env.get("ctxlab") or "not recorded"}


def render_openmetrics(runs: list[LabResult], declared: Mapping[tuple[str, object], Declared] | None = None) -> str:
    """The runs (a check's, or any recorded result) as OpenMetrics text ending in ``# EOF``; their promise held
    to what the catalogue ``declared`` of the labs a check selected (None: what each run recorded)."""
    families = {name: _Family(name) for name in HELP}
    unable = [run for run in runs if is_environment_error(run)]
    ran = [run for run in runs if not is_environment_error(run)]
    families["ctxlab_up"].add({}, 1 if ran and not unable else 0)
    reasons = {str(run.environment_error.get("reason")) for run in unable}
    for reason in (*REASONS, *sorted(reasons - set(REASONS))):
        families["ctxlab_environment_error"].add({"reason": reason}, 1 if reason in reasons else 0)
    seen_devices: set[str] = set()
    for run in runs:
        labels = _environment_labels(run)
        if label_value(labels["device"]) not in seen_devices:
            seen_devices.add(label_value(labels["device"]))
            families["ctxlab_environment_info"].add(labels, 1)
    short = unkept(runs, declared) is not None
    families["ctxlab_failed"].add({}, 1 if not runs or short or any(run.failed for run in runs) else 0)
    families["ctxlab_claims_judged"].add({}, sum(1 for run in ran for c in run.claims if c.verdict not in NOT_JUDGED))
    families["ctxlab_claims_promised"].add({}, promise_of(ran, declared).promised)
    starts = [(t, run.seconds) for run in runs if (t := _timestamp(run.started)) is not None]
    if starts:
        first = min(t for t, _ in starts)
        families["ctxlab_run_timestamp_seconds"].add({}, first)
        families["ctxlab_run_duration_seconds"].add({}, max(t + s for t, s in starts) - first)
    for run in ran:
        where = {"lab": run.lab, "device": _device(run)}
        families["ctxlab_lab_duration_seconds"].add(where, run.seconds)
        for verdict in VERDICTS:
            families["ctxlab_lab_claims"].add({**where, "verdict": verdict},
                                              sum(1 for c in run.claims if c.verdict == verdict))
        families["ctxlab_lab_errors"].add(where, len(run.errors))
        families["ctxlab_lab_flags"].add(where, len(run.flags))
        families["ctxlab_lab_failed"].add(where, 1 if run.failed else 0)
        for claim in run.claims:
            for verdict in VERDICTS:
                families["ctxlab_claim_verdict"].add(
                    {"lab": run.lab, "claim": claim.id, "kind": claim.kind, "device": where["device"],
                     "verdict": verdict}, 1 if claim.verdict == verdict else 0)
    lines = [line for family in families.values() if family.samples for line in family.lines()]
    return "\n".join([*lines, "# EOF"]) + "\n"
