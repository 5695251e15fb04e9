"""``ctxlab doctor``'s table: each component found or missing, the GPUs, and what is missing, fitted to the
screen (``screen.Screen``) like every other human report."""

from __future__ import annotations

from typing import Any

from ctxlab.report.escape import terminal
from ctxlab.report.screen import Cell, Screen, grid_or_stacked, natural_widths, wrap

PARTS = ("driver", "cupy", "cuda_bindings", "nvrtc", "cupti")


def once(line: str) -> str:
    """'cupti: cupti: X' as 'cupti: X': the probe's message may already name its part."""
    part, _, problem = line.partition(": ")
    return f"{part}: {problem.removeprefix(part + ': ')}" if problem else line


def _details(key: str, part: dict[str, Any]) -> str:
    if part.get("problem"):
        return once(f"{key}: {part['problem']}").removeprefix(f"{key}: ")
    return ", ".join(f"{k} {v}" for k, v in part.items() if k not in ("ok", "problem", "devices"))


def render_doctor(report: dict[str, Any], screen: Screen, version: str = "") -> str:
    """The doctor's findings as text for ``screen``: components, then GPUs, then every missing piece."""
    title = f"ctxlab {report.get('ctxlab') or version} on {report['hostname']} (Python {report['python']})"
    lines = [screen.paint(line, "bold") for line in wrap(terminal(title), screen.width)]
    rows = [[Cell("component", "dim"), Cell("status", "dim"), Cell("details", "dim")]]
    for key in PARTS:
        part = report[key]
        ok = bool(part.get("ok"))
        rows.append([Cell(key), Cell("ok" if ok else "missing", "holds" if ok else "error"),
                     Cell(terminal(_details(key, part)))])
    rows.append([Cell("CUDA_MODULE_LOADING"), Cell(""), Cell(terminal(report.get("CUDA_MODULE_LOADING") or "(unset)"))])
    lines += grid_or_stacked(rows, natural_widths(rows, cap=screen.width), screen, floor=12)
    driver = report["driver"]
    if driver.get("ok") and driver.get("devices"):
        lines += ["", screen.paint("GPUs", "bold")]
        gpus = [[Cell(h, "dim") for h in ("index", "name", "compute capability", "memory", "primary context")]]
        for dev in driver["devices"]:
            gpus.append([Cell(str(dev["index"])), Cell(terminal(dev["name"])),
                         Cell(terminal(dev["compute_capability"])),
                         Cell(f"{dev['memory_bytes'] / 2**30:.1f} GiB"),
                         Cell("active" if dev["primary_context_active"] else "inactive")])
        lines += grid_or_stacked(gpus, natural_widths(gpus), screen)
    for line in report["missing"]:
        first, *more = wrap(terminal(once(line)), max(1, screen.width - 8))
        lines.append(f"{screen.paint('missing', 'error')} {first}")
        lines += [f"        {rest}" for rest in more]
    return "\n".join(lines) + "\n"
