"""The suite's own rules: property tests are judged on their values, never on their speed."""

import ast
from pathlib import Path

from hypothesis import HealthCheck, settings

TESTS = Path(__file__).resolve().parent


def test_property_tests_have_no_deadline_and_no_slowness_check():
    assert settings.default.deadline is None
    assert HealthCheck.too_slow in settings.default.suppress_health_check


def test_no_test_sets_its_own_deadline_or_health_checks():
    """A test's @settings adds to the project's profile (conftest.py); one that set a deadline
    or its own health checks would take the profile's back."""
    found = []
    for path in sorted(TESTS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "settings":
                found += [f"{path.name}:{node.lineno} {k.arg}" for k in node.keywords
                          if k.arg in ("deadline", "suppress_health_check")]
    assert found == []
