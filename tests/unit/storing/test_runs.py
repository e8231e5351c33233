"""Reading saved runs: every file that cannot be trusted is one line naming it, in every
``pytest-mlbench report`` mode (exit 2). The same table runs through the gate in
test_sessions.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_mlbench import cli
from pytest_mlbench.storing import runs
from pytest_mlbench.storing.runs import BaselineError
from tests.synthetic import bench, record, run_json


def good() -> dict[str, Any]:
    return run_json(bench(record("jax-jit")), bench(record("numpy-eager", 2e-3)))


def edit(change: Any) -> str:
    run = good()
    change(run)
    return json.dumps(run)


def _measure(run: dict[str, Any]) -> dict[str, Any]:
    return run["benchmarks"][0]["extra_info"]["mlbench"]["measure"]


def _set(d: dict[str, Any], key: str, value: Any) -> None:
    d[key] = value


GOOD = json.dumps(good())
#: name: (file content, what the one line must say)
BAD: dict[str, tuple[str | bytes, str]] = {
    "empty": ("", r"empty file \(0 bytes; a save killed before it wrote anything\?\)"),
    "blank": ("\n  \n", r"empty file"),
    "truncated": (GOOD[: len(GOOD) // 2], r"not a complete pytest-benchmark JSON file"),
    "binary": (b"\xff\xfe\x00garbage", r"not a complete pytest-benchmark JSON file"),
    "not-json": ("<html>502 Bad Gateway</html>", r"not a complete pytest-benchmark JSON file"),
    "deep": ("[" * 100_000 + "]" * 100_000, r"nested too deeply"),
    "deep-object": ('{"benchmarks": [], "machine_info": {"a": ' + "[" * 100 + "]" * 100 + "}}",
                    r"nested deeper than 64 levels"),
    "list": ("[1, 2]", r"the JSON is not an object"),
    "no-benchmarks": ('{"machine_info": {}}', r"no 'benchmarks' list"),
    "machine-info-list": (edit(lambda r: _set(r, "machine_info", [1])),
                          r"'machine_info' is a list, not an object"),
    "machine-mlbench-text": (edit(lambda r: _set(r["machine_info"], "mlbench", "x")),
                             r"'machine_info.mlbench' is not an object"),
    "partial-text": (edit(lambda r: _set(r, "mlbench", {"partial": "yes"})),
                     r"'mlbench.partial' must be true or false"),
    "bench-not-object": (edit(lambda r: r["benchmarks"].append(3)), r"benchmark #2 is not an object"),
    "no-fullname": (edit(lambda r: r["benchmarks"][0].pop("fullname")), r"benchmark #0 has no 'fullname'"),
    "stats-missing": (edit(lambda r: r["benchmarks"][0].pop("stats")), r"'stats' is missing"),
    "stats-data-text": (edit(lambda r: _set(r["benchmarks"][0]["stats"], "data", ["1", None])),
                        r"'stats.data' must list finite, positive seconds"),
    "stats-data-zero": (edit(lambda r: _set(r["benchmarks"][0]["stats"], "data", [1e-3, 0.0])),
                        r"'stats.data' must list finite, positive seconds, one per round"),
    "extra-info-null": (edit(lambda r: _set(r["benchmarks"][0], "extra_info", None)),
                        r"'extra_info' is null, not an object"),
    "listed-twice": (edit(lambda r: r["benchmarks"].append(r["benchmarks"][0])),
                     r"benchmark '.*jax-jit.*' is listed twice"),
    "nan-round": (GOOD.replace(str(_measure(good())["passes"][0][0]), "NaN", 1),
                  r"process 0 round 0 must be positive finite seconds \(got nan\)"),
    "infinite-round": (GOOD.replace(str(_measure(good())["passes"][0][0]), "Infinity", 1),
                       r"must be positive finite seconds \(got inf\)"),
    "negative-round": (edit(lambda r: _set(_measure(r)["passes"], 0, [-1.0, 1.0])),
                       r"process 0 round 0 must be positive finite seconds \(got -1.0\)"),
    "zero-round": (edit(lambda r: _set(_measure(r)["passes"], 0, [0, 1.0])), r"\(got 0\)"),
    "bool-round": (edit(lambda r: _set(_measure(r)["passes"], 0, [True, 1.0])), r"\(got True\)"),
    "no-rounds": (edit(lambda r: _set(_measure(r), "passes", [[], []])), r"holds no timed round"),
    "steps-text": (edit(lambda r: _set(_measure(r), "steps_per_call", "ten")),
                   r"'steps_per_call' must be a positive integer \(got 'ten'\)"),
    "steps-zero": (edit(lambda r: _set(_measure(r), "steps_per_call", 0)), r"positive integer"),
    "cycles-text": (edit(lambda r: _set(_measure(r), "cycles", [["a"]] * 5)),
                    r"'cycles'"),
    "faults-text": (edit(lambda r: _set(_measure(r), "faults_per_step", ["many"] * 3)),
                    r"'faults_per_step' must list, per process, a non-negative number"),
    "faults-falsy": (edit(lambda r: _set(_measure(r), "faults_per_step", 0)),
                     r"'faults_per_step' must list, per process, a non-negative number"),
    "faults-count": (edit(lambda r: _set(_measure(r), "faults_per_step", [0.0])),
                     r"'faults_per_step' must list, per process"),
    "faults-negative": (edit(lambda r: _set(_measure(r), "faults_per_step",
                                            [-1.0] * len(_measure(r)["passes"]))),
                        r"'faults_per_step' must list, per process, a non-negative number"),
    "identity-missing": (edit(lambda r: r["benchmarks"][0]["extra_info"]["mlbench"].pop(
        "identity")), r"'identity' is not an object"),
    "dims-text": (edit(lambda r: _set(r["benchmarks"][0]["extra_info"]["mlbench"]["identity"],
                                      "dims", "big")), r"'dims' must map names to integers"),
    "schema-9": (edit(lambda r: _set(r["benchmarks"][0]["extra_info"]["mlbench"], "schema", 9)),
                 r"record schema 9 is not 2"),
    "v1-steps-text": (json.dumps(run_json({**bench(None, "t.py::t"), "extra_info": {
        "framework": "jax", "variant": "jit", "workload": "mlp", "precision": "fp32",
        "steps_per_call": "ten"}})), r"'steps_per_call' must be a positive integer"),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_runs_are_one_line_naming_the_file(tmp_path: Path, kind: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    content, message = BAD[kind]
    path = tmp_path / f"{kind}.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(BaselineError, match=message) as caught:
        runs.load_run(path)
    assert str(caught.value).startswith(f"{path}: ") and "\n" not in str(caught.value)
    other = tmp_path / "other.json"
    other.write_text(GOOD)
    for args in (["report", str(path)], ["report", "--machines", str(path), str(other)],
                 ["report", "--compare", str(path), str(other)],
                 ["report", "--compare", str(other), str(path)]):
        assert cli.main(args) == 2, args
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith(f"pytest-mlbench: error: {path}: "), err


def test_a_good_run_reads_with_its_records_and_plain_entries(tmp_path: Path) -> None:
    path = tmp_path / "good.json"
    path.write_text(json.dumps(run_json(bench(record()), bench(None, "t.py::plain"))))
    run = runs.load_run(path)
    assert [e.record is not None for e in run.entries] == [True, False]
    assert [rec.identity.impl for _, rec in run.cases] == ["jax-jit"]
    assert not run.partial and run.where == str(path)


def test_a_schema_1_run_still_reads() -> None:
    """Schema 1 (pytest-mlbench 0.1) files are migrated, not refused: a run that version saved
    (tests/data/schema1_run.json, once the committed baseline), and every committed baseline."""
    found = [Path(__file__).parents[2] / "data" / "schema1_run.json",
             *sorted(Path(__file__).parents[3].glob("baselines/*/*.json"))]
    for path in found:
        run = runs.load_run(path)
        assert run.cases and all(rec.measure for _, rec in run.cases)
