"""A guest that costs nothing: the plugin is imported into every pytest session of its
environment, so importing it, and running another project's session with it, must not load
NumPy, SciPy, matplotlib or any framework (1.0 s of SciPy at every start-up, before this test).
What is checked is which modules are loaded (deterministic), not a time."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("numpy", "scipy", "matplotlib", "torch", "jax", "tensorflow", "numba", "autograd",
         "cpuinfo", "threadpoolctl", "pytest_mlbench.measuring.campaign", "pytest_mlbench.stats")


def _loaded_after(code: str) -> list[str]:
    probe = (f"{code}\nimport json, sys\n"
             f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_plugin_or_the_package_loads_nothing_heavy() -> None:
    assert _loaded_after("import pytest_mlbench.plugin") == []
    assert _loaded_after("import pytest_mlbench") == []


def test_the_public_surface_still_resolves_every_name_on_first_use() -> None:
    import pytest_mlbench

    for name in pytest_mlbench.__all__:
        assert getattr(pytest_mlbench, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pytest_mlbench.nope  # noqa: B018


def test_another_projects_session_loads_nothing_heavy(pytester: pytest.Pytester) -> None:
    """A one-test project run with the plugin installed: after its whole session (configure,
    collection, the test, the terminal summary) none of the heavy modules is loaded."""
    pytester.makepyfile(test_one="def test_one():\n    assert True\n")
    pytester.makeconftest(f"""
import json, sys

def pytest_unconfigure(config):
    found = [m for m in {HEAVY!r} if m in sys.modules]
    open("loaded.json", "w").write(json.dumps(found))
""")
    result = pytester.runpytest_subprocess("-p", "mlbench", "-q")
    result.assert_outcomes(passed=1)
    loaded = json.loads((pytester.path / "loaded.json").read_text())
    assert loaded == [], f"another project's session loaded {loaded}"


def test_every_public_name_is_in_all_and_has_a_home() -> None:
    import pytest_mlbench

    assert set(pytest_mlbench.__all__) - {"__version__"} == set(pytest_mlbench._HOME)
