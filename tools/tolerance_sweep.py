"""How far an implementation's gradient falls from float64, over seeds and along training:

    python tools/tolerance_sweep.py suites/cnn --impl torch-eager,tensorflow-xla \
        --size default --seeds 0-29 --steps 400 --every 20

For each implementation and seed it builds the case as a worker does (the suite's seeded
start, the framework's own kernels at the case's precision), trains it with its own steps, and
every ``--every`` steps compares its gradient with the float64 reference at its parameters
there, as the suite's checks do (checks.py): step 0 as the start's check (scale:
the tensor's own norm), later steps as the check where training has taken the parameters
(scale: the start's). It prints, per seed, the largest error over tolerance of each
evaluation (1.0 = the limit), then how many evaluations fail, the quantiles, and the worst.
The exit status is 1 when an evaluation fails (the candidate's verdict when one is given).

Why: a model with kinks (ReLU, max-pooling) has pre-activations and pooling pairs that the
working precision's rounding can put on the other side of the kink from float64's, which
moves one term of the gradient. How often depends on the seed and the point, so a handful of
seeds that pass says little. A tolerance override (ADDING_WORKLOADS.md, section 6) should
come with a sweep that stays well under 1.0, and a real bug (a dropped bias) well above it.

Nothing here is timed; frameworks share this process, the float64 oracle has its own.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_mlbench import catalogue, frameworks  # noqa: E402
from pytest_mlbench.checks import tolerances  # noqa: E402
from pytest_mlbench.engine.server import CaseServer  # noqa: E402
from pytest_mlbench.errors import Unavailable  # noqa: E402
from pytest_mlbench.reference import OracleService, Reference  # noqa: E402
from pytest_mlbench.workload import Tolerance  # noqa: E402


def seeds_of(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    try:
        return list(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise SystemExit(f"--seeds {text!r}: give a seed (7) or a range (0-29)") from None


Point = dict[str, tuple[float, float, float]]  # tensor -> (error, ||expected||, scale)


def over(point: Point, tol: Tolerance) -> tuple[str, float]:
    """The tensor whose error is furthest over what checks.assert_close allows, and by how
    much (1.0: at the limit)."""
    ratios = {k: err / (tol.rtol * norm + tol.atol * scale) for k, (err, norm, scale)
              in point.items()}
    worst = max(ratios, key=ratios.__getitem__)
    return worst, ratios[worst]


def sweep(folder: Path, spec: Any, impl: str, size: str, precision: str, seed: int,
          steps: int, every: int, oracle: OracleService) -> list[tuple[int, Point]]:
    """(step, each tensor's error, norm and scale) at every evaluation point of one seed."""
    framework, variant = impl.split("-", 1)
    shape = spec.sizes[size][0]
    task = next(t for t in spec.all_tasks if t.kind == "train")
    adapter = frameworks.load(framework, frameworks.BUILTIN)
    server = CaseServer(adapter, {
        "root": str(folder.parent), "workload": spec.name, "size": size, "shape": shape.label,
        "task": task.label, "framework": framework, "variant": variant, "device": "cpu",
        "precision": precision, "workers": 1, "seed": seed,
        "name": f"{spec.name}-{impl}-cpu-{precision}"})
    reference = Reference(spec, shape, seed, str(folder), oracle)
    inputs = {k: np.asarray(adapter.to_numpy(v)) for k, v in server.case.data.items()}
    runner = server.runner
    start: dict[str, float] = {}
    out = []
    for step in range(steps + 1):
        if step % every == 0:
            found = runner.evaluate(None)["grads"]
            _, exact = reference.loss_and_grad(runner.params(), inputs)
            norms = {k: float(np.linalg.norm(v)) for k, v in exact.items()}
            start = start or norms
            out.append((step, {k: (float(np.linalg.norm(np.asarray(found[k], np.float64)
                                                        - exact[k])),
                                   norms[k], norms[k] if step == 0 else start[k])
                               for k in exact}))
        if step < steps:
            runner.call(None)
    return out


def summary(points: list[tuple[str, int, int, Point]], tol: Tolerance, label: str) -> int:
    """Quantiles of the worst error over ``tol`` per evaluation; the failing ones listed."""
    judged = [(impl, seed, step, *over(point, tol)) for impl, seed, step, point in points]
    values = sorted(j[-1] for j in judged)
    failing = sorted((j for j in judged if j[-1] > 1), key=lambda j: -j[-1])
    q = lambda f: values[min(len(values) - 1, int(f * len(values)))]  # noqa: E731
    print(f"{label} (rtol {tol.rtol:g}, atol {tol.atol:g}): {len(values)} evaluations, "
          f"{len(failing)} over; median {statistics.median(values):.3g}, 95% {q(0.95):.3g}, "
          f"99% {q(0.99):.3g}, max {values[-1]:.3g}")
    for impl, seed, step, key, r in failing[:10]:
        print(f"  {impl} seed {seed} step {step}: {key} at {r:.3g} x the tolerance")
    return len(failing)


def tolerance_of(text: str) -> Tolerance:
    try:
        rtol, atol = (float(v) for v in text.split(","))
    except ValueError:
        raise SystemExit(f"--tolerance {text!r}: give RTOL,ATOL, e.g. 3e-3,3e-3") from None
    return Tolerance(rtol, atol)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a workload folder, e.g. suites/cnn")
    parser.add_argument("--impl", default="", help="framework-variant list, e.g. "
                        "torch-eager,jax-jit (default: every one the spec has)")
    parser.add_argument("--size", default="default", help="size profile (its first shape)")
    parser.add_argument("--precision", default="fp32", choices=("fp32", "fp64"))
    parser.add_argument("--seeds", default="0-9", help="a seed or a range, e.g. 0-29")
    parser.add_argument("--steps", type=int, default=200, help="training steps a seed")
    parser.add_argument("--every", type=int, default=20, help="steps between evaluations")
    parser.add_argument("--tolerance", default="", help="RTOL,ATOL: judge the same errors "
                        "against a candidate tolerance too (the override you consider)")
    args = parser.parse_args(argv)
    try:
        spec = catalogue.load_workload(args.folder.resolve())
    except catalogue.CatalogueError as exc:
        raise SystemExit(f"{args.folder}: {exc}") from None
    if not any(t.kind == "train" for t in spec.all_tasks):
        raise SystemExit(f"{args.folder}: the sweep needs a training task")
    if args.size not in spec.sizes:
        raise SystemExit(f"--size {args.size!r}: choose from {', '.join(spec.sizes)}")
    offered = [f"{f}-{v}" for f, vs in spec.implementations.items() for v in vs]
    impls = args.impl.split(",") if args.impl else offered
    unknown = [i for i in impls if i not in offered]
    if unknown:
        raise SystemExit(f"--impl {','.join(unknown)}: {spec.name} offers {', '.join(offered)}")
    if args.every < 1 or args.steps < 0:
        raise SystemExit("--every must be 1 or more and --steps 0 or more")
    tol = tolerances(args.precision, spec.tolerances).grad
    candidate = tolerance_of(args.tolerance) if args.tolerance else None
    seeds = seeds_of(args.seeds)
    print(f"{spec.name} {args.size} {args.precision}: gradient tolerance rtol {tol.rtol:g}, "
          f"atol {tol.atol:g}; per evaluation, the largest error over tolerance")
    oracle = OracleService()
    points: list[tuple[str, int, int, Point]] = []
    try:
        for impl in impls:
            for seed in seeds:
                try:
                    row = sweep(args.folder.resolve(), spec, impl, args.size, args.precision,
                                seed, args.steps, args.every, oracle)
                except Unavailable as exc:
                    print(f"{impl}: skipped, {exc}")
                    break
                points += [(impl, seed, step, point) for step, point in row]
                print(f"{impl} seed {seed:3d}: " + " ".join(f"{over(point, tol)[1]:.2g}"
                                                           for _, point in row), flush=True)
    finally:
        oracle.close()
    if not points:
        raise SystemExit("nothing was evaluated: no implementation could run here")
    failing = summary(points, tol, "the spec's tolerance")
    if candidate is not None:
        failing = summary(points, candidate, "the candidate")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
