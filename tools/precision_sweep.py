"""The float32-precision statistic of honest implementations, over seeds and training points:

    python tools/precision_sweep.py suites/mlp suites/linreg --size smoke,default \
        --seeds 0-19 --steps 300 --every 100 [--impl autograd-eager,torch-eager]

For each workload, implementation (every fp32 one the spec offers, or ``--impl``), size and
seed it builds the case as a worker does and reads what checking/arithmetic.py judges: for a
training task, the gradient at the seeded start and every ``--every`` steps along its own
training; for inference, the first ``--probes`` probes' results. Each result's error against
the float64 reference, in float32's unit roundoff, is set against the least error float32
arithmetic leaves (``ideal``: the spec's NumPy function with every operation correctly rounded
once, arithmetic.ideal_result) and against the harness's own plain float32 computation.

It prints the ratio error / ideal per point, then its quantiles and the points under
arithmetic.PRECISE (where "too precise" would fail: judged at the start and the first probe
only), and the exact fractions against arithmetic.EXACT. Exit status 1 when a point judged
by the suite (step 0, probe 0) falls under PRECISE or over EXACT. docs/MEASURING.md quotes
its output.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_mlbench import frameworks  # noqa: E402
from pytest_mlbench.checking import arithmetic  # noqa: E402
from pytest_mlbench.checking.oracle_client import OracleService  # noqa: E402
from pytest_mlbench.checking.reference import Reference  # noqa: E402
from pytest_mlbench.engine.protocol import CaseSpec  # noqa: E402
from pytest_mlbench.engine.server import CaseServer  # noqa: E402
from pytest_mlbench.errors import Unavailable  # noqa: E402
from pytest_mlbench.precision import POLICIES  # noqa: E402
from pytest_mlbench.workloads import catalogue, data  # noqa: E402
from pytest_mlbench.workloads.case import CaseId  # noqa: E402

Row = tuple[str, str, int, str, float, float, float]  # impl, size, seed, point, ratio, exact, harness ratio


def points(folder: Path, spec: Any, task: Any, impl: str, size: str, seed: int, steps: int,
           every: int, probes: int, oracle: OracleService) -> list[Row]:
    framework, variant = impl.split("-", 1)
    shape = spec.sizes[size][0]
    cid = CaseId(spec, shape, task, framework, variant, "cpu", "fp32")
    server = CaseServer(frameworks.load(framework, frameworks.BUILTIN),
                        CaseSpec.of(cid, str(folder.parent), size, seed))
    inputs, params = data.seeded_start(spec, shape, seed, POLICIES["fp32"])
    reference = Reference(spec, shape, seed, str(folder), oracle)
    rows: list[Row] = []
    if task.kind == "train":
        for key in range(1, probes):  # the start's gradient on public batches 1..probes-1
            batch = data.batch(spec, shape, inputs, key)
            _, expected = reference.loss_and_grad(params, batch)
            found = server.evaluate(key).grads
            row = judge(impl, size, seed, f"batch {key}", spec, task, params, batch, None,
                        found, expected)
            rows += [row] if row is not None else []
        server.evaluate(0)  # the seeded data fed again: the steps below train on them
        for step in range(steps + 1):
            if step % every == 0:
                here = server.runner.params()
                _, expected = reference.loss_and_grad(here, inputs)
                found = server.runner.evaluate(None)["grads"]
                row = judge(impl, size, seed, f"step {step}", spec, task, here, inputs, None,
                            found, expected)
                rows += [row] if row is not None else []
            if step < steps:
                server.runner.call(None)
        return rows
    for index in range(probes):
        probe = server._probe(index)
        expected = reference.expected(task, params, inputs, probe)
        found = server.evaluate(index).found
        row = judge(impl, size, seed, f"probe {index}", spec, task, params, inputs, probe,
                    found, expected)
        rows += [row] if row is not None else []
    return rows


def judge(impl: str, size: str, seed: int, point: str, spec: Any, task: Any, params: Any,
          inputs: Any, probe: Any, found: Any, expected: Any) -> Row | None:
    """The point's ratios, or None where the suite does not judge "too precise" there
    (too few elements, or the harness's own float32 computation nearly exact)."""
    stat = arithmetic.measure(found, expected, "float32")
    ideal = arithmetic.measure(arithmetic.ideal_result(spec, task, params, inputs, probe),
                               expected, "float32")
    plain = arithmetic.honest_result(spec, task, params, inputs, probe)
    harness = arithmetic.measure(plain, expected, "float32") if plain is not None else None
    if (stat.elements < arithmetic.MIN_ELEMENTS or ideal.elements < arithmetic.MIN_ELEMENTS
            or (harness is not None and harness.exact >= arithmetic.HONEST_EXACT)):
        return None
    return (impl, size, seed, point, stat.error / ideal.error, stat.exact,
            stat.error / harness.error if harness else float("nan"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", type=Path, nargs="+", help="workload folders")
    parser.add_argument("--impl", default="", help="framework-variant list (default: all)")
    parser.add_argument("--size", default="smoke", help="size profiles, comma-separated")
    parser.add_argument("--seeds", default="0-4", help="a seed range, e.g. 0-19")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--probes", type=int, default=3)
    args = parser.parse_args(argv)
    lo, _, hi = args.seeds.partition("-")
    seeds = range(int(lo), int(hi or lo) + 1)
    oracle = OracleService()
    rows: list[Row] = []
    try:
        for folder in args.folders:
            spec = catalogue.load_workload(folder.resolve())
            offered = [f"{f}-{v}" for f, vs in spec.implementations.items() for v in vs
                       if "+" not in v]
            impls = [i for i in args.impl.split(",") if i in offered] if args.impl else offered
            for task in [t for t in spec.all_tasks if t.kind in ("train", "infer")]:
                for size in [s for s in args.size.split(",") if s in spec.sizes]:
                    for impl in impls:
                        for seed in seeds:
                            try:
                                found = points(folder.resolve(), spec, task, impl, size, seed,
                                               args.steps, args.every, args.probes, oracle)
                            except Unavailable as exc:
                                print(f"{spec.name} {impl}: skipped, {exc}")
                                break
                            except Exception as exc:  # noqa: BLE001  a sweep reports and goes on
                                print(f"{spec.name} {task.label} {impl} {size} seed {seed}: "
                                      f"{type(exc).__name__}: {str(exc)[:200]}")
                                break
                            rows += [(f"{spec.name}/{task.label}/{r[0]}", *r[1:]) for r in found]
                            print(f"{spec.name} {task.label} {impl} {size} seed {seed}: "
                                  + (" ".join(f"{r[3]}={r[4]:.2f}" for r in found)
                                     or "not judged"), flush=True)
    finally:
        oracle.close()
    return summary(rows)


def start_means(rows: list[Row]) -> list[tuple[str, float]]:
    """Per implementation, size and seed: the geometric mean of error / ideal over the
    points at the seeded start (step 0 and the public batches, or the probes)."""
    groups: dict[str, list[float]] = {}
    for r in rows:
        if r[3] == "step 0" or r[3].startswith(("batch ", "probe ")):
            groups.setdefault(f"{r[0]} {r[1]} seed {r[2]}", []).append(r[4])
    return [(k, float(np.exp(np.mean(np.log(v))))) for k, v in groups.items()]


def summary(rows: list[Row]) -> int:
    means = start_means(rows)
    if means:
        values = np.array([m for _, m in means])
        print(f"start means: {len(values)}; min {values.min():.2f}, 1% "
              f"{np.quantile(values, 0.01):.2f}, median {np.median(values):.2f}, max "
              f"{values.max():.2f}; under PRECISE {arithmetic.PRECISE:g}: "
              f"{int((values < arithmetic.PRECISE).sum())}")
        for k, m in sorted(means, key=lambda x: x[1])[:3]:
            print(f"  lowest mean: {k}: {m:.2f}")
    judged = [r for r in rows if r[3] in ("step 0", "probe 0")]
    for title, some in (("judged points (step 0, probe 0)", judged), ("every point", rows)):
        ratios = np.array([r[4] for r in some])
        exact = np.array([r[5] for r in some])
        if not len(ratios):
            continue
        print(f"{title}: {len(ratios)}; error / ideal min {ratios.min():.2f}, 1% "
              f"{np.quantile(ratios, 0.01):.2f}, median {np.median(ratios):.2f}; under "
              f"PRECISE {arithmetic.PRECISE:g}: {int((ratios < arithmetic.PRECISE).sum())}; "
              f"exact max {exact.max():.3f} (EXACT {arithmetic.EXACT:g})")
        for r in sorted(some, key=lambda r: r[4])[:5]:
            print(f"  lowest: {r[0]} {r[1]} seed {r[2]} {r[3]}: {r[4]:.2f} (harness {r[6]:.2f})")
    bad = [r for r in judged if r[4] < arithmetic.PRECISE or r[5] >= arithmetic.EXACT]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
