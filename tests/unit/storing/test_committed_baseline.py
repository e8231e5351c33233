"""The baseline committed in baselines/ (issue 49): a fresh clone has a run to compare with.
It must read with this version's record schema, and cover every case of this version's main
job (every installed framework's plain modes at each workload's headline shape and task);
re-record it (README: "A baseline out of the box") when either changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_mlbench import frameworks, jobs, variants
from pytest_mlbench.options import build_settings, option_table
from pytest_mlbench.parametrize import enumerate_cases
from pytest_mlbench.storing import runs
from pytest_mlbench.workloads import catalogue

ROOT = Path(__file__).resolve().parents[3]
BASELINES = ROOT / "baselines"


def committed() -> list[Path]:
    return sorted(p for p in BASELINES.glob("*/*_main.json"))


def main_job_cases() -> set[str]:
    """The main job's case names at the default size on the CPU, as `tox -e bench` selects,
    less those its specs declare unsupported (they skip, and a run records nothing of them)
    and those of a mode installed by a job of its own (torch's xla: tox -e bench-xla)."""
    found = catalogue.discover(ROOT / "suites", tuple(frameworks.BUILTIN))
    settings = build_settings({"size": "default", "device": "cpu"}, option_table())
    return {c.name for c in enumerate_cases(found.workloads, settings, frameworks.BUILTIN)
            if jobs.MAIN in jobs.markers(c) and not own_job(c.framework, c.variant)
            and not c.workload.unsupported_reason(c.framework, c.variant, c.device,
                                                  c.precision, c.task.label)}


def own_job(framework: str, variant: str) -> bool:
    needs = getattr(frameworks.adapter_class(framework, frameworks.BUILTIN), "modes_need", {})
    return variants.mode(variant) in needs


def test_a_main_job_baseline_is_committed_and_reads() -> None:
    files = committed()
    assert files, f"no baseline of the main job under {BASELINES}/<machine>/NNNN_main.json"
    run = runs.load_run(files[-1])
    assert run.cases and not run.partial
    info = run.machine_info.get("mlbench") or {}
    assert info.get("cpu") and info.get("host_probe"), sorted(info)  # fingerprint and probe
    assert all(record.measure is not None for _, record in run.cases)


def test_the_committed_baseline_covers_this_versions_main_job() -> None:
    files = committed()
    if not files:
        pytest.fail("no committed baseline (see the test above)")
    recorded = {record.name for _, record in runs.load_run(files[-1]).cases}
    missing = sorted(main_job_cases() - recorded)
    assert not missing, (f"{files[-1].name} lacks {len(missing)} main-job case(s), "
                         f"{missing[:5]}...: re-record it (README)")


def test_report_finds_a_committed_baseline_from_any_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """README's `report --machines amd-epyc-2c/main ...` outside a clone: a <machine-id>/<name>
    the --baselines folder lacks is the shipped one (tests/sessions/test_wheel.py: from the
    installed wheel); a name the folder lacks and nothing ships is the folder's own error."""
    from pytest_mlbench import cli
    from pytest_mlbench.storing import baselines

    monkeypatch.chdir(tmp_path)  # no baselines/ here
    machine = committed()[-1].parent.name
    assert baselines.shipped_root() == BASELINES
    assert cli.main(["report", f"{machine}/main"]) == 0
    assert capsys.readouterr().out.startswith(str(committed()[-1]))
    assert cli.main(["report", f"{machine}/nope"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path}/baselines/{machine}: no baseline named 'nope'" in err
