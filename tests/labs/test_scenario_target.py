"""``Scenario`` takes the function itself (issue 24): it keeps it as the ``module:function`` the child imports."""

import dataclasses
import pickle

import pytest

from ctxlab.lab import Scenario
from ctxlab.labs.common import capture_environment


def test_a_function_is_kept_as_module_and_name():
    scenario = Scenario("environment", capture_environment, args=(0,))
    assert scenario.target == "ctxlab.labs.common:capture_environment"
    assert Scenario("environment", "ctxlab.labs.common:capture_environment", args=(0,)) == scenario
    assert dataclasses.replace(scenario, name="other").target == scenario.target
    assert pickle.loads(pickle.dumps(scenario)) == scenario
    assert dataclasses.asdict(scenario)["target"] == scenario.target


def test_a_function_a_child_cannot_import_by_name_is_refused():
    def nested() -> None:
        pass

    for function in (nested, lambda: None):
        with pytest.raises(ValueError, match="not a module's top-level function"):
            Scenario("nested", function)


def test_the_target_is_required_and_frozen():
    with pytest.raises(TypeError):
        Scenario("nothing")  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Scenario("environment", capture_environment).target = "elsewhere:f"  # type: ignore[misc]
