"""The Python half of tools/gpu_check.sh (standard library only: it runs before this package
is importable):

    python tools/gpu_check.py install WHEELS SITE   this package and the wheels of WHEELS whose
                                                    version is not installed, into SITE; print
                                                    SITE, or "" where the plugin is installed
    python tools/gpu_check.py probe DEVICE OUT       versions and devices, OUT/environment.json
                                                    (exit 3: a GPU asked for, none seen)
    python tools/gpu_check.py summary DEVICE OUT WORK  WORK's JUnit files and steps.tsv judged,
                                                        OUT/summary.json
    python tools/gpu_check.py merge OUT FILE...      several pytest-benchmark files as one

Each prints one clear line and exits 2 on what it cannot do; ``summary`` exits 1 when a case
failed, errored, or a session ran nothing on the device.
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import importlib.util
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import xml.etree.ElementTree as ET
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

# module -> the wheel (file name prefix) that provides it, for the pure-Python base
# dependencies; NumPy and SciPy are binary and expected on the machine
WHEELS = {"cpuinfo": "py_cpuinfo2-", "threadpoolctl": "threadpoolctl-",
          "array_api_compat": "array_api_compat-", "pytest_benchmark": "pytest_benchmark-"}
NEEDED_THERE = ("numpy", "scipy", "pytest", "torch", "jax")
FETCH = "tools/fetch_gpu_wheels.sh"
NOTHING_SELECTED = "5"  # pytest's exit status when no test was selected
NO_GPU = 3  # probe's exit status when neither torch nor JAX sees a GPU: nothing to run


class Refused(Exception):
    """What the step cannot do, in one line."""


def registered() -> bool:
    """Is the plugin installed (its pytest11 entry point visible to this interpreter)?"""
    return any(e.name == "mlbench" for e in metadata.entry_points(group="pytest11"))


def missing_modules() -> list[str]:
    return [m for m in WHEELS if importlib.util.find_spec(m) is None]


def installed(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def wheels_to_install(folder: Path) -> list[Path]:
    """This package's wheel, and each dependency's wheel whose version is not the one
    installed here (the versions this package is tested with win over the machine's)."""
    if not folder.is_dir():
        raise Refused(f"no wheels folder {folder}; fetch it beforehand with {FETCH} (on a "
                      "machine with network) and carry it along")
    found = sorted(folder.glob("*.whl"))
    ours = [w for w in found if w.name.startswith("pytest_mlbench-")]
    if not ours:
        raise Refused(f"{folder} has no pytest_mlbench-*.whl; run {FETCH} again")
    deps = [w for w in found if w not in ours
            and installed(w.name.split("-")[0]) != w.name.split("-")[1]]
    missing = [m for m in missing_modules()
               if not any(w.name.startswith(WHEELS[m]) for w in deps)]
    if missing:
        raise Refused(f"{', '.join(missing)} not importable here and no wheel for it in "
                      f"{folder}; run {FETCH} again")
    return [ours[-1], *deps]


def unpack(wheel: Path, site: Path) -> None:
    """A pure-Python wheel installed by hand (an interpreter without pip): its files and its
    .dist-info (entry points included) into ``site``."""
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            parts = name.split("/")
            if parts[0].endswith(".data"):  # purelib/platlib land in site, the rest is unused
                if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                    continue
                name_out = "/".join(parts[2:])
            else:
                name_out = name
            target = site / name_out
            if name.endswith("/"):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(name))


def install(folder: Path, site: Path) -> str:
    """Install into ``site`` what this interpreter lacks; '' when nothing was needed."""
    if registered() and not missing_modules():
        print("install: pytest-mlbench and its pure-Python dependencies are importable; "
              "no wheel installed", file=sys.stderr)
        return ""
    wheels = wheels_to_install(folder)
    site.mkdir(parents=True, exist_ok=True)
    names = ", ".join(w.name for w in wheels)
    if importlib.util.find_spec("pip") is not None:
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
               "--disable-pip-version-check", "--target", str(site), *map(str, wheels)]
        done = subprocess.run(cmd, stdout=sys.stderr, check=False)
        if done.returncode:
            raise Refused(f"pip could not install {names} (exit {done.returncode})")
        print(f"install: pip installed {names} into {site}", file=sys.stderr)
    else:
        for wheel in wheels:
            unpack(wheel, site)
        print(f"install: no pip here; unpacked {names} into {site}", file=sys.stderr)
    return str(site)


def _version(dist: str) -> str:
    return installed(dist) or "absent"


def _run(cmd: list[str]) -> str:
    if shutil.which(cmd[0]) is None:
        return f"{cmd[0]}: not found"
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    return (done.stdout + done.stderr).strip()


def torch_facts() -> dict[str, Any]:
    import torch

    facts: dict[str, Any] = {"version": torch.__version__, "cuda": torch.version.cuda,
                             "cuda_available": torch.cuda.is_available()}
    if torch.cuda.is_available():
        facts.update(devices=[torch.cuda.get_device_name(i)
                              for i in range(torch.cuda.device_count())],
                     cudnn=torch.backends.cudnn.version(),
                     nccl=".".join(map(str, torch.cuda.nccl.version())),
                     bf16=torch.cuda.is_bf16_supported())
    return facts


def jax_facts() -> dict[str, Any]:
    import jax

    facts: dict[str, Any] = {"version": jax.__version__, "default_backend": jax.default_backend()}
    for platform_ in ("cpu", "gpu"):
        try:
            facts[platform_] = [str(d.device_kind) for d in jax.devices(platform_)]
        except RuntimeError as exc:  # no backend for this platform
            facts[platform_] = f"none ({str(exc).splitlines()[0]})"
    return facts


def probe(device: str, out: Path) -> int:
    """What this machine has; exit 1 when ``device`` is gpu and torch or JAX sees none."""
    facts: dict[str, Any] = {
        "python": sys.version.split()[0], "executable": sys.executable,
        "platform": platform.platform(), "cores": len(os.sched_getaffinity(0)),
        "nvidia-smi -L": _run(["nvidia-smi", "-L"]),
        # Triton builds its CUDA launcher with a C compiler against Python.h; inductor's CPU
        # warm-up needs a C++ compiler
        "cc": shutil.which("cc") or shutil.which("gcc") or "absent",
        "c++": shutil.which("c++") or shutil.which("g++") or "absent",
        "Python.h": os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")),
        "versions": {d: _version(d) for d in ("numpy", "scipy", "pytest", "pytest-benchmark",
                                              "torch", "triton", "jax", "jaxlib", "ml_dtypes",
                                              "optax", "flax", "chex", "equinox", "py-cpuinfo",
                                              "py-cpuinfo2", "threadpoolctl", "array-api-compat",
                                              "pytest-mlbench")},
        "env": {k: os.environ.get(k) for k in ("PYTHONPATH", "CUDA_VISIBLE_DEVICES",
                                                   "XLA_PYTHON_CLIENT_PREALLOCATE", "JAX_PLATFORMS")},
    }
    spec = importlib.util.find_spec("pytest_mlbench")
    facts["pytest_mlbench"] = spec.origin if spec else "absent"
    facts["plugin registered"] = registered()
    problems = [f"{m} is not importable" for m in NEEDED_THERE if importlib.util.find_spec(m) is None]
    for name, read in (("torch", torch_facts), ("jax", jax_facts)):
        if importlib.util.find_spec(name) is not None:
            facts[name] = read()
    blind = 0
    if device == "gpu":
        if not facts.get("torch", {}).get("cuda_available"):
            problems.append("torch sees no CUDA device")
            blind += 1
        if not isinstance(facts.get("jax", {}).get("gpu"), list):
            problems.append("jax sees no gpu device")
            blind += 1
    if not facts["plugin registered"]:
        problems.append("pytest-mlbench's pytest11 entry point is not installed")
    facts["problems"] = problems
    out.mkdir(parents=True, exist_ok=True)
    (out / "environment.json").write_text(json.dumps(facts, indent=1, default=str) + "\n")
    print(json.dumps(facts, indent=1, default=str))
    for line in problems:
        print(f"probe: {line}", file=sys.stderr)
    return NO_GPU if blind == 2 else 1 if problems else 0


def session_outcomes(path: Path) -> dict[str, Any]:
    """Counts, failures and skip reasons of one JUnit file."""
    counts: Counter[str] = Counter()
    failed: list[str] = []
    skipped: Counter[str] = Counter()
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        if not name:  # pytest's placeholder in the file of an interrupted session: no case
            continue
        kids = {child.tag: child for child in case}
        if "failure" in kids or "error" in kids:
            kind = "failure" if "failure" in kids else "error"
            counts["failed" if kind == "failure" else "errors"] += 1
            message = (kids[kind].get("message") or "").strip().splitlines()
            failed.append(f"{name}: {message[0] if message else kind}"[:300])
        elif "skipped" in kids:
            counts["skipped"] += 1
            skipped[(kids["skipped"].get("message") or "").strip()[:200]] += 1
        else:
            counts["passed"] += 1
    return {"counts": dict(counts), "failed": failed,
            "skip_reasons": [f"{n} x {why}" for why, n in skipped.most_common()]}


# steps that measure rather than check: one cut by its timeout is reported as unfinished, with
# the file that keeps what it found, and does not fail the check (gpu_startup.py writes after
# every step it times)
INFORMATIVE = {"startup": "startup.json"}
CUT = ("124", "137")  # timeout's exit on its signal, and on the SIGKILL that follows it


def summary(device: str, out: Path, work: Path) -> int:
    sessions = {p.stem: session_outcomes(p) for p in sorted((work / "junit").glob("*.xml"))}
    problems, unfinished = [], []
    steps = (work / "steps.tsv").read_text().splitlines()
    for line in steps:
        name, rc, seconds = line.split("\t")
        if name in INFORMATIVE and rc in CUT:  # what it measured so far is in its file
            unfinished.append(f"step {name} did not finish in its {seconds} s (cut, exit "
                              f"{rc}): {INFORMATIVE[name]} holds the steps it finished")
        elif rc not in ("0", NOTHING_SELECTED):  # --select may leave a session nothing
            problems.append(f"step {name} exited {rc} after {seconds} s")
    for name, found in sessions.items():
        if found["failed"]:
            problems.append(f"{name}: {len(found['failed'])} case(s) failed")
        elif found["counts"] and not found["counts"].get("passed"):
            problems.append(f"{name}: no case passed on {device} (all skipped?)")
    # every group's progress line (with its cases' statuses so far): what a session cut by
    # its timeout had found, though its JUnit file holds none of it
    log = out / "gpu_check.log"
    groups = [line.strip() for line in (log.read_text(errors="replace").splitlines()
                                        if log.exists() else ())
              if line.startswith("mlbench [process")]
    result = {"device": device, "steps": steps, "sessions": sessions, "problems": problems,
              "unfinished": unfinished, "groups": groups,
              "timed_json": sorted(p.name for p in out.glob("*.json")
                                   if p.name not in ("summary.json", "environment.json"))}
    (out / "summary.json").write_text(json.dumps(result, indent=1) + "\n")
    for name, found in sessions.items():
        print(f"summary: {name}: {found['counts']}")
        for line in found["failed"]:
            print(f"summary:   FAILED {line}")
        for line in found["skip_reasons"]:
            print(f"summary:   skipped {line}")
    for line in unfinished:
        print(f"summary: unfinished {line}")
    for line in problems:
        print(f"summary: PROBLEM {line}")
    print(f"summary: {'FAILED' if problems else 'passed'} ({device}); results in {out}")
    return 1 if problems else 0


def merge(out: Path, files: list[Path]) -> int:
    """Several sessions' pytest-benchmark files as one: the first file's machine and commit
    information, every file's benchmarks in order; nothing written when there are none."""
    runs = []
    for path in files:
        try:
            runs.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:  # a session cut before it wrote its file
            print(f"gpu_check merge: {path.name} left out: {exc}", file=sys.stderr)
    if not runs:
        print("gpu_check merge: no timed session wrote its file")
        return 0
    merged = dict(runs[0])
    merged["benchmarks"] = [b for run in runs for b in run.get("benchmarks", [])]
    out.write_text(json.dumps(merged, indent=1) + "\n")
    print(f"gpu_check merge: {len(merged['benchmarks'])} timed case(s) from {len(runs)} "
          f"session(s) in {out}")
    return 0


def stacks(folder: Path) -> int:
    """Where every worker of this machine's sessions is, as a session is about to be cut:
    each is continued and sent SIGUSR2, on which it writes every thread's stack to
    FOLDER/PID.txt (MLBENCH_STACKS, child.py); printed here, the serving thread's innermost
    frames first, then the whole dump, and the files removed."""
    from pytest_mlbench.engine.child import STACKS_VAR
    from pytest_mlbench.engine.launcher import carrying, serving_stack

    asked = []
    # the workers that write to FOLDER, not what they started (which inherits the variable,
    # not the handler: SIGUSR2 would end it)
    for pid in carrying(STACKS_VAR, str(folder)):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"pytest_mlbench.engine.child" not in cmdline:
                continue
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGUSR2)
            asked.append(str(pid))
        except OSError:
            continue
    print(f"gpu_check stacks: asked {len(asked)} worker(s) where they are", flush=True)
    # until every file has stopped growing (a dump is a few hundred small writes, and a loaded
    # host can hold a continued worker back for a while), 10 s at most
    sizes: dict[str, int] = {}
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = {pid: (folder / f"{pid}.txt").stat().st_size
               if (folder / f"{pid}.txt").exists() else 0 for pid in asked}
        if now == sizes and all(now.values()):
            break
        sizes = now
    for pid in asked:
        path = folder / f"{pid}.txt"
        text = path.read_text(errors="replace") if path.exists() else ""
        path.unlink(missing_ok=True)
        lines = text.splitlines()
        print(f"gpu_check stacks: worker {pid}: {serving_stack(lines, 8) or 'wrote no stack'}")
        for line in lines:
            if line.strip():
                print(f"    {line}")
    sys.stdout.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("install")
    one.add_argument("wheels", type=Path)
    one.add_argument("site", type=Path)
    for name in ("probe", "summary"):
        one = sub.add_parser(name)
        one.add_argument("device", choices=("gpu", "cpu"))
        one.add_argument("out", type=Path)
        if name == "summary":
            one.add_argument("work", type=Path)
    one = sub.add_parser("stacks")
    one.add_argument("folder", type=Path)
    one = sub.add_parser("merge")
    one.add_argument("out", type=Path)
    one.add_argument("files", type=Path, nargs="*")
    args = parser.parse_args(argv)
    try:
        if args.command == "stacks":
            return stacks(args.folder)
        if args.command == "merge":
            return merge(args.out, [f for f in args.files if f.exists()])
        if args.command == "install":
            print(install(args.wheels, args.site))
            return 0
        if args.command == "probe":
            return probe(args.device, args.out)
        return summary(args.device, args.out, args.work)
    except Refused as exc:
        print(f"gpu_check {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
