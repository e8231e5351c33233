"""Collection: turns settings and workload specs into parametrized, readably-named cases.

Nothing here imports a framework unless ``--mlbench-device=auto`` needs to ask it for devices;
a framework that is not installed still appears, skipped with the extra to install. A
workload folder that breaks a rule appears as one failing case listing its problems.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_mlbench import frameworks, jobs, variants
from pytest_mlbench.options import Settings
from pytest_mlbench.parallel import GAPS, STRATEGIES, Layout
from pytest_mlbench.workloads.case import CaseId
from pytest_mlbench.workloads.catalogue import Catalogue, Problem
from pytest_mlbench.workloads.spec import Workload

DEVICE_PREFERENCE = ("gpu", "tpu", "cpu")


@dataclass(frozen=True)
class Broken:
    """A workload folder that cannot be collected; its case fails with every problem."""

    name: str
    problems: tuple[Problem, ...]

    def message(self) -> str:
        lines = "\n".join(f"  {p}" for p in self.problems)
        return f"workload folder {self.name} breaks {len(self.problems)} rule(s) of " \
               f"ADDING_WORKLOADS.md:\n{lines}"


def resolve_device(requested: str, framework: str, registry: Mapping[str, Any]) -> str:
    """``auto`` becomes the best device the framework sees; other requests are kept, and a
    device that is not present skips the case when it runs, naming what is missing."""
    if requested != "auto" or frameworks.missing_reason(framework, dict(registry)):
        return requested
    present = frameworks.load(framework, dict(registry)).devices()
    return next(kind for kind in DEVICE_PREFERENCE if kind in present or kind == "cpu")


def enumerate_cases(workloads: tuple[Workload, ...], settings: Settings,
                    registry: Mapping[str, Any]) -> Iterator[CaseId]:
    for workload in workloads:
        for shape in workload.sizes.get(settings.size, ()):  # gpu: not every workload
            for task in workload.all_tasks:
                yield from _cases(workload, shape, task, settings, registry)


def _cases(workload: Workload, shape: Any, task: Any, settings: Settings,
           registry: Mapping[str, Any]) -> Iterator[CaseId]:
    for fw in settings.frameworks:
        # the workload's variants whose compile mode the session selects (jit: jit+sdpa too),
        # in the session's order of modes
        declared = workload.implementations.get(fw, ())
        chosen = [v for m in settings.variants for v in declared if variants.mode(v) == m]
        for variant in chosen:
            device = resolve_device(settings.device, fw, registry)
            for precision in precisions_for(workload, settings):
                for workers in settings.workers:
                    for strategy in strategies(workload, task, fw, variant, workers, settings):
                        for nodes in settings.nodes if strategy else (1,):
                            # a layout these counts cannot make skips naming why (case_params)
                            yield CaseId(workload, shape, task, fw, variant, device,
                                         precision, workers, strategy, nodes)


def strategies(workload: Workload, task: Any, framework: str, variant: str, workers: int,
               settings: Settings) -> Iterator[str]:
    """One worker: the single-device case (""); more: each parallel strategy the spec
    declares for this implementation's training tasks (every optimizer), that the session
    selects and that this many workers can lay out (a 2-D mesh at four or more). A strategy
    the session names (not the default, every strategy) comes even where these workers cannot
    lay it out: its case skips saying why, rather than vanishing."""
    if workers == 1:
        yield ""
        return
    if task.kind != "train":
        return
    named = settings.strategies != tuple(STRATEGIES)
    for strategy in workload.strategies(framework, variant):
        if strategy in settings.strategies and (named or Layout(strategy, workers).unfit() is None):
            yield strategy


def precisions_for(workload: Workload, settings: Settings) -> tuple[str, ...]:
    """The precisions the user asked for; when they asked for none, the workload's own
    default (fp64 for a workload published in float64), else the session fallback."""
    if settings.precision_auto and workload.default_precisions:
        return workload.default_precisions
    return settings.precisions


def case_params(cases: list[CaseId], catalogue: Catalogue, registry: Mapping[str, Any],
                settings: Settings | None = None) -> list[Any]:
    params = []
    for cid in cases:
        gaps = GAPS.get(cid.framework, {})
        missing = (frameworks.missing_reason(cid.framework, dict(registry),
                                             variants.mode(cid.variant)) or cid.layout.unfit()
                   or gaps.get(cid.strategy) or (gaps.get("nodes") if cid.nodes > 1 else None)
                   or unfit(cid, settings))
        marks = [pytest.mark.skip(reason=missing)] if missing else []
        marks += [getattr(pytest.mark, job) for job in jobs.markers(cid)]  # -m mlbench_main
        params.append(pytest.param(cid, id=cid.name, marks=marks))
    return params + broken_params(catalogue) or nothing_here(
        catalogue, "none", no_case_reason(catalogue.workloads, settings) if settings else None)


def no_case_reason(workloads: tuple[Workload, ...], settings: Settings) -> str | None:
    """Why a session of parallel cases only (no worker count of 1) made none: no selected
    implementation declares a selected strategy; None for any other selection."""
    if 1 in settings.workers:
        return None
    declared = sorted({f"{fw}-{v}: {s}" for w in workloads for fw in settings.frameworks
                       for v in w.implementations.get(fw, ())
                       if variants.mode(v) in settings.variants for s in w.strategies(fw, v)})
    return (f"--mlbench-workers={','.join(map(str, settings.workers))} makes parallel cases "
            f"only, and no selected implementation declares {', '.join(settings.strategies)} "
            f"for a training task (declared: {'; '.join(declared) or 'none'})")


def unfit(cid: CaseId, settings: Settings | None) -> str | None:
    """Why the case's shape does not run on its device and precision (Shape.unfit), or None."""
    if settings is None:
        return None
    return cid.shape.unfit(cid.workload.name, settings.size, cid.device, cid.precision,
                           settings.force_size) or absent(cid.workload.name, cid.shape,
                                                          cid.device, settings)


def absent(workload: str, shape: Any, device: str, settings: Settings) -> str | None:
    """A shape made for a GPU asked for on a machine without one skips here, before its
    case costs the session anything (a GPT-2's data and float32 reference are minutes of
    work before a worker could say it sees no GPU); other shapes skip as their worker says."""
    if device != "gpu" or "gpu" not in shape.devices or settings.force_size or _gpus():
        return None
    return (f"{workload}'s {settings.size} size needs a gpu and this machine shows none "
            "(nvidia-smi lists no GPU); run it where one is, or here anyway with "
            "--mlbench-force-size")


@functools.cache
def _gpus() -> int:
    from pytest_mlbench.storing import machine

    return len(machine.gpu_info())


def nothing_here(catalogue: Catalogue, id_: str, why: str | None = None) -> list[Any]:
    """One skipped parameter saying why there is nothing to run: no workload folder at all
    (a suites folder that is empty, or the wrong folder), else ``why`` or nothing the
    selection keeps."""
    if not catalogue.workloads and not catalogue.problems:
        reason = (f"no workload folder under {catalogue.root} (a workload is a folder with a "
                  "spec.py: ADDING_WORKLOADS.md); set the ini value mlbench_suites to the "
                  "folder that holds them")
    else:
        reason = why or ("no case matches the selected frameworks, variants, precisions and "
                         "workers")
    return [pytest.param(None, id=id_, marks=pytest.mark.skip(reason=reason))]


def broken_params(catalogue: Catalogue) -> list[Any]:
    by_folder: dict[str, list[Problem]] = {}
    for problem in catalogue.problems:
        folder = problem.path if problem.path == catalogue.root else problem.path.parent
        by_folder.setdefault(folder.name, []).append(problem)
    return [pytest.param(Broken(name, tuple(found)), id=f"{name}-invalid")
            for name, found in by_folder.items()]


def workload_params(catalogue: Catalogue, settings: Settings) -> list[Any]:
    """Each workload's shapes of the size, for test_reference; a shape made for another
    device skips as its cases do (its reference is computed there)."""
    def marks(w: Workload, shape: Any) -> list[Any]:
        device = settings.device
        why = None if device == "auto" else shape.unfit(
            w.name, settings.size, device, forced=settings.force_size) or absent(
            w.name, shape, device, settings)
        return [pytest.mark.skip(reason=why)] if why else []

    return [pytest.param((w, shape), id=f"{w.name}-{shape.label}" if shape.label else w.name,
                         marks=marks(w, shape))
            for w in catalogue.workloads for shape in w.sizes.get(settings.size, ())] \
        + broken_params(catalogue) or nothing_here(catalogue, "none")


def single_params(name: str, settings: Settings, registry: Mapping[str, Any]) -> list[Any]:
    """For user tests that ask for ``mlbench_framework``, ``mlbench_device`` or
    ``mlbench_precision`` on their own."""
    if name == "mlbench_framework":
        return [pytest.param(fw, id=fw, marks=_missing_marks(fw, registry))
                for fw in settings.frameworks]
    if name == "mlbench_device":
        return [pytest.param(settings.device, id=settings.device)]
    return [pytest.param(p, id=p) for p in settings.precisions]


def _missing_marks(framework: str, registry: Mapping[str, Any]) -> list[Any]:
    missing = frameworks.missing_reason(framework, dict(registry))
    return [pytest.mark.skip(reason=missing)] if missing else []


def explicitly_parametrized(metafunc: pytest.Metafunc, name: str) -> bool:
    """A test's own @pytest.mark.parametrize of one of our fixture names wins over ours."""
    for mark in metafunc.definition.iter_markers("parametrize"):
        argnames = mark.args[0] if mark.args else mark.kwargs.get("argnames", "")
        if isinstance(argnames, str):
            argnames = [a.strip() for a in argnames.split(",")]
        if name in argnames:
            return True
    return False
