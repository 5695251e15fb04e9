"""The Python API's fixes of issue 26: claims(lab=), errors that name the Python parameter, load's limit,
and a clean dir(ctxlab)."""

from __future__ import annotations

import pytest

import ctxlab
from ctxlab.lab import OptionError
from ctxlab.labs import UnknownLab
from ctxlab.records.model import ResultFileError
from tests.conftest import RESULTS


def test_claims_takes_a_lab_by_name_or_several():
    assert {c.id.split(".")[0] for c in ctxlab.claims(lab="migrate")} == {"migrate"}
    assert len(ctxlab.claims(lab=["migrate", "peer"])) == len(ctxlab.claims("migrate")) + len(ctxlab.claims("peer"))
    assert ctxlab.claims(names=["peer"]) == ctxlab.claims(lab="peer")  # the older name still works
    with pytest.raises(UnknownLab):
        ctxlab.claims(lab="nosuch")


def test_api_errors_name_the_python_parameter_and_the_cli_the_option():
    from ctxlab.labs import get_lab

    with pytest.raises(OptionError) as caught:
        get_lab("migrate").make_options(threads=0)
    assert str(caught.value).startswith("threads: ") and caught.value.cli.startswith("--threads: ")
    with pytest.raises(OptionError, match=r"^threads x rounds"):
        get_lab("migrate").make_options(threads=1024, rounds=1_000_000)
    with pytest.raises(OptionError, match=r"^jobs: "):
        ctxlab.check(["migrate"], [0], jobs=0)


def test_the_size_limit_is_named_as_the_api_names_it():
    with pytest.raises(ResultFileError, match=r"max_bytes raises it") as caught:
        ctxlab.load(RESULTS / "check.json", max_bytes=1024)
    assert "--max-size" not in str(caught.value)


def test_dir_shows_the_api_not_the_modules_own_names():
    names = dir(ctxlab)
    assert {"run", "check", "load", "claims", "labs", "__version__"} <= set(names)
    assert "Any" not in names and "annotations" not in names
