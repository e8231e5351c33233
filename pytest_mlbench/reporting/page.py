"""``pytest-mlbench report --html DIR``: a folder that shows a history of saved runs with no
network, from the file system or any static host (GitHub Pages).

The folder holds ``index.html``, the page's own script and style (``assets/`` beside this
module), the charting library vendored with its licence (uPlot, assets/uplot.*: why it, in
docs/USAGE.md), and ``data.js``: one script that sets ``window.MLBENCH`` (a page opened from a
file may not fetch a JSON file). Its size grows with the data: per machine the latest run's
tables (the normalised table's own cells, normalised.normalised_blocks), per case and run
the figure, its interval, the normalised figure and each process's median, and the steps
found (steps.py). Nothing is copied from a run beyond that.

A folder is written only when it is new, empty, or a page this module wrote before (it holds
``MARKER``); then only the page's own files are replaced, each whole (written aside, then
renamed)."""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlbench import stats
from pytest_mlbench.measuring import hostspeed
from pytest_mlbench.reporting import history_cache, machines, mfu, normalised, scaling
from pytest_mlbench.reporting.history import History, Series, layout
from pytest_mlbench.reporting.steps import Found
from pytest_mlbench.storing.baselines import BaselineError
from pytest_mlbench.storing.record import Record
from pytest_mlbench.storing.runs import Run, load_run

MARKER = ".mlbench-page"
ASSETS = ("index.html", "page.js", "page.css", "uplot.iife.min.js", "uplot.min.css",
          "uplot.LICENSE.txt")
DATA = "data.js"
FORMAT = 1  # data.js's layout; page.js reads this one
DIGITS = 5  # significant digits kept of every figure (intervals are wider than the rest)


MARKED = ("written by pytest-mlbench report --html: " + " ".join(
    (*ASSETS, DATA, history_cache.NAME)) + "\n").encode()


class PageError(BaselineError):
    """A folder the page cannot be written to; the message names it and says what to do."""


def check_folder(folder: Path) -> None:
    """Refuse, before any run is read, a folder that is a file or holds what this module
    did not write (never deleted or overwritten), or that cannot be made."""
    if folder.exists() and not folder.is_dir():
        raise PageError(f"--html {folder}: not a folder; give a new or empty folder for the "
                        "page")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / MARKER).is_file():
        raise PageError(f"--html {folder}: the folder holds files pytest-mlbench did not "
                        "write; give a new or empty folder (a page's own folder is rewritten)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _replace(folder / MARKER, MARKED)  # the folder is the page's from now on
    except OSError as exc:
        raise PageError(f"--html {folder}: cannot make the folder ({exc.strerror}); give a "
                        "folder you can write") from None


def write(folder: Path, found: History, result: Found, reference: str | None = None) -> Path:
    """The page of ``found`` with its steps ``result`` into ``folder``; its index.html."""
    check_folder(folder)
    payload = "window.MLBENCH = " + json.dumps(data(found, result, reference),
                                               separators=(",", ":")) + ";\n"
    assets = resources.files("pytest_mlbench.reporting") / "assets"
    for name in ASSETS:
        _replace(folder / name, (assets / name).read_bytes())
    _replace(folder / DATA, payload.encode())
    return folder / "index.html"


def _replace(path: Path, payload: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".mlbench-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        os.chmod(tmp, 0o644)  # a page is served and committed: readable by all
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# -- what data.js holds -----------------------------------------------------------------------

def data(found: History, result: Found, reference: str | None = None) -> dict[str, Any]:
    names = sorted({info.machine for info in found.runs})
    index = {name: i for i, name in enumerate(names)}
    return {
        "format": FORMAT, "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "alpha": result.alpha, "threshold": result.threshold, "tested": result.tested,
        "level": stats.PREDICTION, "header": list(normalised.HEADER),
        "runs": [{"m": index[r.machine], "c": r.commit, "t": r.commit_time, "s": r.saved,
                  "f": Path(r.path).name, "b": r.branch, "d": r.dirty} for r in found.runs],
        "machines": [machine(found, name, reference) for name in names],
        "series": [series(s, index[s.machine]) for s in found.series],
        "steps": [{"s": st.series, "at": found.series[st.series].runs[st.at],
                   "before": found.series[st.series].runs[st.at - 1], "size": st.size,
                   "p": st.p} for st in result.steps],
    }


def series(s: Series, machine_index: int) -> dict[str, Any]:
    """One case on one machine: the figures in ms, normalised, each process's median in ms."""
    ident = s.ident
    points = s.points
    return {"m": machine_index, "label": s.label, "workload": ident.workload,
            "framework": ident.framework, "precision": ident.precision, "layout": s.layout,
            "group": ident.group, "impl": ident.impl, "r": s.runs,
            "v": _rounded([p.figure * 1e3 for p in points]),
            "lo": _rounded([p.low * 1e3 for p in points]),
            "hi": _rounded([p.high * 1e3 for p in points]),
            "n": _rounded([p.normalised for p in points]),
            "p": _split(_rounded([x * 1e3 for p in points for x in p.processes]),
                        [len(p.processes) for p in points])}


def _split(values: list[float], counts: list[int]) -> list[list[float]]:
    """``values`` cut into consecutive lists of ``counts`` (each run's processes)."""
    out, start = [], 0
    for n in counts:
        out.append(values[start:start + n])
        start += n
    return out


def machine(found: History, name: str, reference: str | None) -> dict[str, Any]:
    """A machine's latest run as the terminal's one-run report shows it: the normalised
    table's cells per group, then its other lines (control, host probe, MFU, scaling)."""
    latest = found.latest()[name]
    run = load_run(found.runs[latest].path)
    records = [rec for _, rec in run.cases]
    idents = {r.identity.group: r.identity for r in records}
    groups = [{"group": group, "workload": idents[group].workload,
               "precision": idents[group].precision, "layout": layout(idents[group]),
               "rows": rows} for group, rows in normalised.normalised_blocks(records, reference)]
    few = any(normalised.shows_spread(row) for g in groups for row in g["rows"])
    return {"id": name, "latest": latest, "groups": groups, "notes": notes(run, records, few)}


def notes(run: Run, records: list[Record], few: bool) -> list[str]:
    """The lines the terminal prints under the tables, in its order."""
    lines = [normalised.legend()]
    if few:
        lines.append(normalised.few_processes_line())
    if uncounted := normalised.uncounted_line(records):
        lines.append(uncounted)
    ctl = machines.control(run)
    lines.append(f"control matmul: {ctl.gflops:.1f} GFLOP/s" if ctl else "control matmul: absent")
    if probe := hostspeed.line(hostspeed.of_run(run.machine_info)):
        lines.append(probe)
    if table := mfu.mfu_table(records, mfu.gpu_name(run.machine_info)):
        lines += ["", "model FLOPs utilisation (GPU cases):", *table, mfu.legend()]
    if table := scaling.scaling_table(records):
        lines += ["", "parallel strategies, scaling:", *table, scaling.legend()]
    return lines


def _rounded(values: list[float]) -> list[float]:
    """``values`` to DIGITS significant digits each (a history holds millions of them:
    numpy's rounding, not a string a value)."""
    if not values:
        return []
    arr = np.asarray(values, dtype=np.float64)
    scale = 10.0 ** (DIGITS - 1 - np.floor(np.log10(np.abs(np.where(arr == 0, 1.0, arr)))))
    return (np.round(arr * scale) / scale).tolist()
