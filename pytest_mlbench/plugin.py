"""pytest-mlbench's pytest wiring: options, ini values, markers, fixtures and hooks. The work
happens in the modules named in each function."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_mlbench import (
    catalogue,
    data,
    frameworks,
    gate,
    hookspec,
    machine,
    parametrize,
    report,
)
from pytest_mlbench.case import CaseId
from pytest_mlbench.harness import Env, run_case, skip_unavailable
from pytest_mlbench.options import (
    FRAMEWORKS,
    OptionError,
    Settings,
    build_gate_settings,
    build_settings,
    gate_option_table,
    option_table,
)
from pytest_mlbench.precision import POLICIES, Policy
from pytest_mlbench.timing import Result

SETTINGS = pytest.StashKey[Settings]()
REGISTRY = pytest.StashKey[dict[str, Any]]()
RESULTS = pytest.StashKey[list[Result]]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mlbench", "pytest-mlbench: fair benchmarks of autodiff frameworks")
    for option in (*option_table(FRAMEWORKS), *gate_option_table()):
        group.addoption(f"--mlbench-{option.name}", dest=option.key, default=None,
                        metavar=option.key.removeprefix("mlbench_").upper(),
                        help=f"{option.help}. Default: {option.default or '(off)'}; "
                             f"ini: {option.key}.".replace("%", "%%"))  # argparse formats help
        parser.addini(option.key, option.help, default=option.default)
    parser.addini("mlbench_suites", "folder holding the workload folders (default: suites)",
                  default="suites")


def pytest_configure(config: pytest.Config) -> None:
    registry: dict[str, Any] = dict(frameworks.BUILTIN)
    for extra in config.hook.pytest_mlbench_adapters(config=config):
        registry.update(extra or {})
    try:
        config.stash[SETTINGS] = build_settings(_raw(config, option_table()),
                                                option_table(tuple(registry)))
        gate_settings = build_gate_settings(_raw(config, gate_option_table()))
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[REGISTRY] = registry
    config.stash[RESULTS] = []
    config.addinivalue_line("markers", "mlbench: a pytest-mlbench benchmark case")
    config.addinivalue_line("markers", gate.MARKER)
    gate.register(config, gate_settings)  # --mlbench-save and --mlbench-gate sessions


def _raw(config: pytest.Config, table: Any) -> dict[str, str]:
    """Each option's string: the command line's when given, else the ini file's (or default)."""
    return {o.name: config.getoption(o.key) or config.getini(o.key) for o in table}


def pytest_report_header(config: pytest.Config) -> str:
    s = config.stash[SETTINGS]
    precision = "auto" if s.precision_auto else ",".join(s.precisions)
    return (f"mlbench: frameworks={','.join(s.frameworks)} variants={','.join(s.variants)} "
            f"device={s.device} precision={precision} size={s.size} seed={s.seed} "
            f"workers={','.join(map(str, s.workers))}")


def _suites_root(config: pytest.Config) -> Path:
    return config.rootpath / str(config.getini("mlbench_suites"))


def _workloads(config: pytest.Config) -> Any:
    try:
        return catalogue.discover(_suites_root(config))
    except catalogue.CatalogueError as exc:
        pytest.fail(str(exc), pytrace=False)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config, names = metafunc.config, metafunc.fixturenames
    settings, registry = config.stash[SETTINGS], config.stash[REGISTRY]
    if "mlbench_case" in names:
        cases = list(parametrize.enumerate_cases(_workloads(config), settings, registry))
        config.hook.pytest_mlbench_modify_cases(config=config, cases=cases)
        metafunc.parametrize("mlbench_case", parametrize.case_params(cases, registry),
                             indirect=True)
    elif "mlbench_workload" in names:
        metafunc.parametrize("mlbench_workload",
                             parametrize.workload_params(_workloads(config), settings))
    for name in ("framework", "device", "precision"):
        if name in names and "mlbench_case" not in names \
                and not parametrize.explicitly_parametrized(metafunc, name):
            metafunc.parametrize(name, parametrize.single_params(name, settings, registry),
                                 indirect=True)


@pytest.fixture(scope="session")
def mlbench_settings(pytestconfig: pytest.Config) -> Settings:
    """The parsed --mlbench-* options."""
    return pytestconfig.stash[SETTINGS]


@pytest.fixture
def framework(request: pytest.FixtureRequest) -> Any:
    """The adapter of one selected framework; skips, naming the extra, when not installed."""
    with skip_unavailable():
        return frameworks.load(request.param, request.config.stash[REGISTRY])


@pytest.fixture
def device(request: pytest.FixtureRequest) -> str:
    """The selected device kind: cpu, gpu, tpu or auto."""
    return str(request.param)


@pytest.fixture
def precision(request: pytest.FixtureRequest) -> Policy:
    """One selected precision policy."""
    return POLICIES[request.param]


@pytest.fixture
def mlbench_rng(request: pytest.FixtureRequest, mlbench_settings: Settings) -> np.random.Generator:
    """A NumPy Generator from --mlbench-seed and the test's id: same seed, same bytes."""
    return data.generator(mlbench_settings.seed, request.node.nodeid)


class CaseRun:
    """A collected case bound to the session, run by ``test_train_step``."""

    def __init__(self, cid: CaseId, env: Env) -> None:
        self.id, self.env = cid, env

    def run(self, benchmark: Any) -> None:
        run_case(self.id, benchmark, self.env)


@pytest.fixture
def mlbench_case(request: pytest.FixtureRequest) -> CaseRun:
    """One (workload, shape, framework, variant, device, precision) case, ready to run."""
    config = request.config
    registry: dict[str, Any] = config.stash[REGISTRY]
    env = Env(_suites_root(config), config.stash[SETTINGS].seed, registry, config.stash[RESULTS])
    return CaseRun(request.param, env)


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    machine_info["mlbench"] = machine.machine_info()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    results = config.stash.get(RESULTS, [])
    if results:
        terminalreporter.section("mlbench: step time normalised to the fastest")
        for line in report.normalised_table(results):
            terminalreporter.write_line(line)
