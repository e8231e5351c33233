"""pytest-mlbench's pytest wiring: options, ini values, markers, fixtures and hooks. The work
happens in the modules named in each function.

A pytest11 plugin is loaded into every session of its environment, so everything here acts on
the plugin's own cases only: tests that ask for its ``mlbench_*`` fixtures. Any other project
keeps its collected ids, outcomes, report header and pytest-benchmark JSON exactly as without
the plugin.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

# Only light modules here: this file is imported into every pytest session of the
# environment, and a guest must not slow the host's start-up (tests/sessions/test_citizen.py measures
# it). NumPy, SciPy, the engine and the reports load inside the hooks of a session that runs
# the plugin's own cases.
from pytest_mlbench import frameworks, hookspec, jobs
from pytest_mlbench.errors import SpecError, Unavailable
from pytest_mlbench.options import (
    FRAMEWORKS,
    GATE_MARKER,
    Option,
    OptionError,
    Settings,
    build_gate_settings,
    build_settings,
    gate_option_table,
    option_table,
    unused_lines,
)
from pytest_mlbench.precision import POLICIES, Policy
from pytest_mlbench.session import (
    CASE_FIXTURE,
    RunState,
    case_keywords,
    unsupported_at,
    uses_own_fixtures,
)

if TYPE_CHECKING:
    import numpy as np

    from pytest_mlbench.parametrize import Broken
    from pytest_mlbench.workloads.case import CaseId

STATE = pytest.StashKey[RunState]()
MARKER = "mlbench: a pytest-mlbench case (select them with -m mlbench)"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mlbench", "pytest-mlbench: fair benchmarks of autodiff frameworks")
    for option in (*option_table(FRAMEWORKS), *gate_option_table()):
        extra: dict[str, Any] = {"nargs": "?", "const": "yes"} if option.switch else {}
        group.addoption(option.flag, dest=option.key, default=None, **extra,
                        metavar=option.key.removeprefix("mlbench_").upper(),
                        help=f"{option.help}. Default: {option.default_text}; "
                             f"ini: {option.key}.".replace("%", "%%"))  # argparse formats help
        parser.addini(option.key, option.help, type="args", default=None)
    # default "" (read as suites/): a project that sets it explicitly is told when its workloads
    # went uncollected (session.idle_suites_line)
    parser.addini("mlbench_suites", "folder holding the workload folders (default: suites)",
                  default="")


def pytest_configure(config: pytest.Config) -> None:
    registry: dict[str, Any] = dict(frameworks.BUILTIN)
    for extra in config.hook.pytest_mlbench_adapters(config=config):
        registry.update(extra or {})
    raw = _raw(config, option_table())
    try:
        settings = build_settings(raw, option_table(tuple(registry)))
        gate_settings = build_gate_settings(_raw(config, gate_option_table()))
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    state = config.stash[STATE] = RunState(config, settings, registry)
    state.unused = unused_lines(raw, settings)  # said under the header
    config.addinivalue_line("markers", MARKER)
    for name, text in jobs.MARKERS.items():  # the named jobs (-m mlbench_main, ...)
        config.addinivalue_line("markers", f"{name}: {text}")
    config.addinivalue_line("markers", GATE_MARKER)
    if gate_settings.save or gate_settings.gate:  # --mlbench-save, --mlbench-gate
        from pytest_mlbench.judging import sessions

        sessions.register(config, gate_settings)
    if settings.ab:
        from pytest_mlbench.judging import ab

        state.ab, state.base = ab.register(config, settings.ab, gate_settings, state.root)


def _raw(config: pytest.Config, table: tuple[Option, ...]) -> dict[str, Any]:
    """Each option's raw value: the command line's when given (even empty), else the ini
    file's as an ("ini", value) pair, else None."""
    out: dict[str, Any] = {}
    for option in table:
        value = config.getoption(option.key)
        out[option.name] = value if value is not None else (
            None if config.getini(option.key) is None else ("ini", config.getini(option.key)))
    return out


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is not None:
        state.close()


# -- collection ---------------------------------------------------------------------------------

def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = metafunc.fixturenames
    if not any(n.startswith("mlbench_") for n in names):
        return  # not ours: leave the test exactly as it is
    from pytest_mlbench import parametrize

    state = metafunc.config.stash[STATE]
    if CASE_FIXTURE in names:
        cases = state.cases()
        params = parametrize.case_params(cases, state.catalogue, state.registry,
                                         state.settings) or [
            pytest.param(None, id="none", marks=pytest.mark.skip(
                reason="no case matches the selected frameworks, variants, precisions and "
                       "workers"))]
        metafunc.parametrize(CASE_FIXTURE, params, indirect=True)
    elif "mlbench_workload" in names:
        metafunc.parametrize("mlbench_workload",
                             parametrize.workload_params(state.catalogue, state.settings),
                             indirect=True)
    for name in ("mlbench_framework", "mlbench_device", "mlbench_precision"):
        if name in names and CASE_FIXTURE not in names \
                and not parametrize.explicitly_parametrized(metafunc, name):
            metafunc.parametrize(name, parametrize.single_params(name, state.settings,
                                                                 state.registry), indirect=True)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    own = [item for item in items if uses_own_fixtures(item)]
    if not own:
        return
    if not config.pluginmanager.has_plugin("benchmark"):
        raise pytest.UsageError("pytest-mlbench needs pytest-benchmark, which is disabled "
                                "(-p no:benchmark?): its cases are timed and reported through it")
    config.stash[STATE].own_items = True
    if not config.option.collectonly:
        config.stash[STATE].prepare_compile_cache()  # a folder it cannot make: a usage error
    for item in own:
        item.add_marker("mlbench")
        item.extra_keyword_matches.update(case_keywords(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    state = item.config.stash.get(STATE, None)
    ours = state if state is not None and state.own_items else None
    if ours is not None:
        ours.begin(item.session)  # a session that times nothing checks its cases meanwhile
    try:
        return (yield)
    finally:
        if ours is not None:
            ours.flush()  # the campaign's progress lines, between tests


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None],
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A case a spec declares ``unsupported`` skips at that spec's line, not at the plugin's
    line that raised the skip."""
    report = yield
    state = item.config.stash.get(STATE, None)
    if report.skipped and call.when == "call" and state is not None and state.own_items \
            and isinstance(report.longrepr, tuple):
        where = unsupported_at(item, state.catalogue, str(report.longrepr[2]))
        if where is not None:
            report.longrepr = (*where, report.longrepr[2])
    return report


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    state = config.stash.get(STATE, None)
    if state is None:
        return []
    if not state.own_items:
        idle = state.idle_suites_line()
        return [idle] if idle else []
    s = state.settings
    precision = "auto" if s.precision_auto else ",".join(s.precisions)
    kept = f" compile-cache={state.compile_cache()}"
    # a timed session: how long it should take here; --collect-only runs nothing, so none
    estimate = None if config.option.collectonly else state.estimate_line(items)
    return [f"mlbench: frameworks={','.join(s.frameworks)} variants={','.join(s.variants)} "
            f"device={s.device} precision={precision} size={s.size} seed={s.seed} "
            f"workers={','.join(map(str, s.workers))} "
            f"strategies={','.join(s.strategies)} nodes={','.join(map(str, s.nodes))} "
            f"threads={s.threads} "
            f"processes={s.processes} affinity={s.affinity}{kept}"
            + (f" hosts=external listen={s.listen}" if s.hosts == "external" else "")] + (
        [estimate] if estimate else []) + state.unused


# -- fixtures (all named mlbench_*: the plugin owns these names) ---------------------------------

@pytest.fixture(scope="session")
def mlbench_settings(pytestconfig: pytest.Config) -> Settings:
    """The parsed --mlbench-* options."""
    return pytestconfig.stash[STATE].settings


@pytest.fixture
def mlbench_framework(request: pytest.FixtureRequest) -> Any:
    """The adapter of one selected framework, in this process; skips naming the extra when
    the framework is not installed."""
    try:
        return frameworks.load(request.param, request.config.stash[STATE].registry)
    except Unavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def mlbench_device(request: pytest.FixtureRequest) -> str:
    """The selected device kind: cpu, gpu, tpu or auto."""
    return str(request.param)


@pytest.fixture
def mlbench_precision(request: pytest.FixtureRequest) -> Policy:
    """One selected precision policy."""
    return POLICIES[request.param]


@pytest.fixture
def mlbench_rng(request: pytest.FixtureRequest, mlbench_settings: Settings) -> np.random.Generator:
    """A NumPy Generator from --mlbench-seed and the test's id: same seed, same bytes."""
    from pytest_mlbench.workloads import data

    return data.generator(mlbench_settings.seed, request.node.nodeid)


class SessionCase:
    """A collected case bound to the session, run by the suites' ``test_case``."""

    def __init__(self, cid: CaseId | Broken, state: RunState, session: pytest.Session) -> None:
        self.id, self.state, self.session = cid, state, session

    def run(self, benchmark: Any) -> None:
        from pytest_mlbench.parametrize import Broken
        from pytest_mlbench.storing.benchmark_json import mark_used, record_rounds

        if isinstance(self.id, Broken):
            mark_used(benchmark)
            pytest.fail(self.id.message(), pytrace=False)
        outcome = self.state.outcome(self.id, self.session)
        if outcome.status != "passed" or outcome.record is None:
            mark_used(benchmark)
            if outcome.status == "skipped":
                pytest.skip(outcome.message)
            pytest.fail(outcome.message, pytrace=False)
        self.state.records.append(outcome.record)
        record_rounds(benchmark, outcome.rounds, outcome.record)


@pytest.fixture
def mlbench_case(request: pytest.FixtureRequest) -> SessionCase:
    """One case (workload, shape, task, framework, variant, device, precision, workers)."""
    return SessionCase(request.param, request.config.stash[STATE], request.session)


class WorkloadReference:
    """One workload at one shape, for ``test_reference``."""

    def __init__(self, param: Any, state: RunState) -> None:
        self.param, self.state = param, state

    def verify(self) -> None:
        """Every task's float64 reference agrees with finite differences of the model (and
        the two autodiff oracles agree, when both are installed)."""
        from pytest_mlbench.checking.reference import Reference
        from pytest_mlbench.parametrize import Broken
        from pytest_mlbench.workloads import data

        if isinstance(self.param, Broken):
            pytest.fail(self.param.message(), pytrace=False)
        workload, shape = self.param
        seed = self.state.settings.seed
        try:
            inputs, params = data.seeded_start(workload, shape, seed, POLICIES["fp64"])
        except SpecError as exc:  # the spec's own function: one line, no harness frames
            raise pytest.fail.Exception(str(exc), pytrace=False) from None
        device = self.state.settings.device  # where a float32 reference is computed
        ref = Reference(workload, shape, seed, str(self.state.catalogue.folder(workload.name)),
                        self.state.oracle, device="cpu" if device == "auto" else device)
        try:
            for task in workload.all_tasks:
                probe = None if task.kind == "train" else data.probe(
                    workload, shape, task, seed, 0, POLICIES["fp64"], params,
                    _outputs_shape(workload, task, params, inputs))
                ref.verify(task, inputs, params, probe)
        except Unavailable as exc:
            pytest.skip(str(exc))


def _outputs_shape(workload: Any, task: Any, params: Any, inputs: Any) -> Any:
    import numpy as np

    from pytest_mlbench.workloads import data

    if task.transform != "vjp":
        return None
    return tuple(np.shape(workload.forward(np, data.widen(params), data.widen(inputs))))


@pytest.fixture
def mlbench_workload(request: pytest.FixtureRequest) -> WorkloadReference:
    """One workload at one shape of the selected size."""
    return WorkloadReference(request.param, request.config.stash[STATE])


# -- results ------------------------------------------------------------------------------------

@pytest.hookimpl(optionalhook=True)  # pytest-benchmark may be disabled (-p no:benchmark)
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    state = config.stash.get(STATE, None)
    if state is not None and state.own_items:  # other projects' JSON stays as it was
        from pytest_mlbench.storing import machine

        machine_info["mlbench"] = machine.machine_info()
        if probe := state.host_probe():  # per run: never part of the machine's id
            machine_info["mlbench"]["host_probe"] = probe
        if spent := state.time_spent():  # per run, like the probe
            machine_info["mlbench"]["time_spent"] = spent


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if spent := (state.time_spent() if state else {}):
        from pytest_mlbench import timesheet

        terminalreporter.section("mlbench: where the time went")
        for line in timesheet.lines(spent):
            terminalreporter.write_line(line)
    records = [r for r in (state.records if state else []) if r.measure is not None]
    if records:
        from pytest_mlbench.measuring import hostspeed
        from pytest_mlbench.reporting import normalised

        terminalreporter.section("mlbench: step time normalised to the fastest")
        for line in normalised.normalised_table(records):
            terminalreporter.write_line(line)
        terminalreporter.write_line(normalised.legend())
        if probe := hostspeed.line(state.host_probe() if state else {}):
            terminalreporter.write_line(probe)
        if uncounted := normalised.uncounted_line(records):
            terminalreporter.write_line(uncounted)
        _mfu_section(terminalreporter, records)
        from pytest_mlbench.reporting import scaling

        if table := scaling.scaling_table(records):
            terminalreporter.section("mlbench: parallel strategies, scaling")
            for line in table:
                terminalreporter.write_line(line)
            terminalreporter.write_line(scaling.legend())


def _mfu_section(terminalreporter: Any, records: list[Any]) -> None:
    """Model FLOPs utilisation of the GPU cases, against this machine's first GPU."""
    if not any(r.identity.device == "gpu" for r in records):
        return
    from pytest_mlbench.reporting import mfu
    from pytest_mlbench.storing import machine

    gpus = machine.gpu_info()
    if table := mfu.mfu_table(records, gpus[0].get("name", "") if gpus else ""):
        terminalreporter.section("mlbench: model FLOPs utilisation (GPU cases)")
        for line in [*table, mfu.legend()]:
            terminalreporter.write_line(line)
