"""Drift's normal form and its version comparison (ctxlab.records.evidence) where the hand-mutant pass
(docs/testing.md, "Hand mutants") found them untested: a short hexadecimal id is decided, not a handle; a
three-part version stays wherever it stands; a patch-level version change is named as a version change;
distributions of different totals are left as written; and a class seen in fewer repeats than the run made
never reads as all of them (CPU only)."""

from __future__ import annotations

import dataclasses

import pytest

import ctxlab
from ctxlab.records.evidence import normalize, version_changes
from ctxlab.suite import changes
from tests.conftest import RESULTS


@pytest.mark.parametrize("text", ["event 0xbeef", "id 0x1a2b", "status 0x0"])
def test_an_id_of_four_hex_digits_or_fewer_is_kept(text):
    assert normalize(text) == text


def test_an_address_of_five_hex_digits_or_more_is_blanked():
    assert normalize("event 0x1a2b3") == "event 0x…"


def test_a_three_part_version_is_kept_where_no_name_precedes_it_and_a_rate_beside_it_is_blanked():
    assert normalize("built against 12.4.1 at 3.5 GB/s") == "built against 12.4.1 at #.# GB/s"


def test_a_patch_level_version_change_is_a_version_change():
    assert version_changes("driver 580.95.05", "driver 580.95.06") == [("driver 580.95.05", "driver 580.95.06")]
    assert version_changes("driver 580.95.05", "driver 580.95.05") == []


def test_drift_names_a_patch_level_driver_change_as_a_version():
    base = ctxlab.load(RESULTS / "check.json")
    run = base[0]
    observed = next(c for c in run.claims if c.verdict == "observed")

    def on_driver(patch: str):
        claims = tuple(dataclasses.replace(c, evidence=f"{c.evidence}; driver 580.95.{patch}") if c is observed
                       else c for c in run.claims)
        return [dataclasses.replace(run, claims=claims), *base[1:]]

    drift = changes(on_driver("05"), on_driver("06"), scenarios=False)
    assert [(d["item"], d["change"], d["was"], d["now"]) for d in drift] == [
        (observed.id, "version", "driver 580.95.05", "driver 580.95.06")]


def test_distributions_of_different_totals_are_left_as_written():
    text = "CUDA_ERROR_X in 1 of 3, CUDA_ERROR_Y in 2 of 4"
    assert normalize(text) == text


def test_a_class_seen_in_fewer_repeats_than_the_run_made_never_reads_as_all_of_them():
    two_of_three = "CUDA_ERROR_X (handle 0x7f0000aaaa) in 1 of 3, CUDA_ERROR_X (handle 0x7f0000bbbb) in 1 of 3"
    every = "CUDA_ERROR_X (handle 0x7f0000aaaa) in 1 of 3, CUDA_ERROR_X (handle 0x7f0000bbbb) in 2 of 3"
    assert normalize(two_of_three) == "CUDA_ERROR_X (handle 0x…) in 2 of 3"
    assert normalize(every) == "CUDA_ERROR_X (handle 0x…) (all 3)"
