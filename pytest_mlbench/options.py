"""The plugin's options: one table, one parse function per option, one Settings result.

Every option has an ini-file twin of the same name with dashes turned to underscores
(``--mlbench-size`` and ``mlbench_size``); the command line wins over the ini file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_mlbench.precision import POLICIES

FRAMEWORKS = ("numpy", "numba", "autograd", "jax", "torch", "tensorflow")
FRAMEWORK_ALIASES = {"np": "numpy", "pytorch": "torch", "tf": "tensorflow"}
VARIANTS = ("eager", "jit", "xla")
VARIANT_ALIASES = {"compiled": "jit"}
DEVICES = ("cpu", "gpu", "tpu", "auto")
SIZES = ("smoke", "default", "paper")
AUTO = ("auto",)  # --mlbench-precision left unset: a workload's default_precisions apply
FALLBACK_PRECISION = "fp32"  # for workloads that declare no default precision


class OptionError(ValueError):
    """A bad option value; the message names the option, the value and what is accepted."""


@dataclass(frozen=True)
class Settings:
    frameworks: tuple[str, ...]
    variants: tuple[str, ...]
    device: str
    precisions: tuple[str, ...]
    size: str
    seed: int
    # True when no precision was given (option and ini left at ``auto``): each workload's
    # ``default_precisions`` then apply, and ``precisions`` holds the fallback for the rest.
    precision_auto: bool = False
    workers: tuple[int, ...] = (1, 2)  # data-parallel worker counts (suites/dp)


def parse_list(
    value: str, choices: Iterable[str], aliases: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """Parse a comma list against ``choices``; ``all`` means every choice, order is kept."""
    choices = tuple(choices)
    aliases = aliases or {}
    items = [item.strip().lower() for item in value.split(",") if item.strip()]
    if not items:
        raise OptionError(f"empty value; choose from: all, {', '.join(choices)}")
    if items == ["all"]:
        return choices
    out: list[str] = []
    for item in items:
        name = aliases.get(item, item)
        if name not in choices:
            raise OptionError(f"unknown value {item!r}; choose from: all, {', '.join(choices)}")
        if name not in out:
            out.append(name)
    return tuple(out)


def parse_one(value: str, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    item = value.strip().lower()
    if item not in choices:
        raise OptionError(f"unknown value {value!r}; choose from: {', '.join(choices)}")
    return item


def parse_precisions(value: str) -> tuple[str, ...]:
    """A comma list of policies, or ``auto`` alone: let each workload say (see build_settings)."""
    if value.strip().lower() == "auto":
        return AUTO
    return parse_list(value, POLICIES)


MAX_WORKERS = 1024


def parse_workers(value: str) -> tuple[int, ...]:
    """A comma list of data-parallel worker counts (``1,2,4``), order kept, repeats dropped."""
    out: list[int] = []
    for item in (part.strip() for part in value.split(",")):
        if not item.isdigit() or not 1 <= int(item) <= MAX_WORKERS:
            raise OptionError(f"{item!r} is not a worker count; give a comma list of integers "
                              f"from 1 to {MAX_WORKERS}, such as 1,2,4")
        if int(item) not in out:
            out.append(int(item))
    return tuple(out)


def parse_seed(value: str) -> int:
    try:
        seed = int(value)
    except ValueError:
        raise OptionError(f"{value!r} is not an integer; give a seed from 0 to 2**32-1") from None
    if not 0 <= seed < 2**32:
        raise OptionError(f"{seed} is out of range; give a seed from 0 to 2**32-1")
    return seed


@dataclass(frozen=True)
class Option:
    name: str
    default: str
    help: str
    parse: Callable[[str], Any]

    @property
    def key(self) -> str:
        """The dest and ini name: ``--mlbench-gate-threshold`` is ``mlbench_gate_threshold``."""
        return "mlbench_" + self.name.replace("-", "_")


def option_table(frameworks: tuple[str, ...] = FRAMEWORKS) -> tuple[Option, ...]:
    """The options, in help order; ``frameworks`` includes any added through the adapters hook."""
    return (
        Option("frameworks", "all",
               f"comma list of frameworks to run: all, {', '.join(frameworks)}",
               lambda v: parse_list(v, frameworks, FRAMEWORK_ALIASES)),
        Option("variants", "all",
               "comma list of variants: all, eager, jit (alias compiled: jax.jit, torch.compile, "
               "tf.function, numba.njit), xla (tf.function with jit_compile=True)",
               lambda v: parse_list(v, VARIANTS, VARIANT_ALIASES)),
        Option("device", "cpu", "device to run on: cpu, gpu, tpu, auto (the best one present)",
               lambda v: parse_one(v, DEVICES)),
        Option("precision", "auto",
               "comma list of precision policies: auto (each workload's declared default, "
               f"else {FALLBACK_PRECISION}), all, "
               + ", ".join(f"{p.name} ({p.summary})" for p in POLICIES.values()),
               parse_precisions),
        Option("size", "default", "size profile: smoke (seconds, for tests), default, paper "
               "(the seed articles' full sizes)", lambda v: parse_one(v, SIZES)),
        Option("seed", "0", "seed of the NumPy Generator that makes every input and weight",
               parse_seed),
        Option("workers", "1,2",
               "comma list of worker counts (devices or processes) for the data-parallel cases "
               "in suites/dp; scaling efficiency is relative to 1", parse_workers),
    )


def build_settings(raw: Mapping[str, str], table: tuple[Option, ...]) -> Settings:
    """Parse raw strings (command line or ini) into Settings; OptionError names the option."""
    values: dict[str, Any] = {}
    for option in table:
        try:
            values[option.name] = option.parse(raw.get(option.name, option.default))
        except OptionError as exc:
            raise OptionError(f"--mlbench-{option.name}: {exc}") from None
    precisions = values.pop("precision")
    values["precision_auto"] = precisions == AUTO
    values["precisions"] = (FALLBACK_PRECISION,) if precisions == AUTO else precisions
    return Settings(**values)


# -- baselines and the regression gate (pytest_mlbench.baseline, pytest_mlbench.gate) --------

SAVE_MODES = ("new", "overwrite")


@dataclass(frozen=True)
class GateSettings:
    baselines: str  # folder holding <machine-id>/NNNN_<name>.json
    save: str  # "" = do not save
    save_mode: str
    gate: str  # "" = no gate; a file path, <name> or <machine-id>/<name>
    threshold: float  # fraction: 0.10 fails medians more than 10% slower
    alpha: float


def parse_name(value: str) -> str:
    """A baseline name (letters, digits, '.', '_', '-') or empty for off."""
    name = value.strip()
    if name and not all(c.isalnum() or c in "._-" for c in name):
        raise OptionError(f"{value!r}: use letters, digits, '.', '_' and '-'")
    return name


def parse_percent(value: str) -> float:
    """``10%`` or ``10`` (percent) -> 0.10; accepted: more than 0 and at most 1000."""
    text = value.strip().removesuffix("%")
    try:
        pct = float(text)
    except ValueError:
        raise OptionError(f"{value!r} is not a percentage; give e.g. 10%") from None
    if not 0 < pct <= 1000:
        raise OptionError(f"{value!r} is out of range; give a percentage above 0% up to 1000%")
    return pct / 100


def parse_alpha(value: str) -> float:
    try:
        alpha = float(value)
    except ValueError:
        raise OptionError(f"{value!r} is not a number; give a p-value between 0 and 1") from None
    if not 0 < alpha < 1:
        raise OptionError(f"{value!r} is out of range; give a p-value between 0 and 1")
    return alpha


def gate_option_table() -> tuple[Option, ...]:
    return (
        Option("baselines", "baselines",
               "folder of saved runs, one subfolder per machine id", lambda v: v.strip()),
        Option("save", "",
               "save this run with its raw rounds as <baselines>/<machine-id>/NNNN_<NAME>.json",
               parse_name),
        Option("save-mode", "new",
               "new (refuse to replace an existing baseline of that name) or overwrite",
               lambda v: parse_one(v, SAVE_MODES)),
        Option("gate", "",
               "fail the session on slowdowns against a baseline: a .json path, <name> or "
               "<machine-id>/<name>", lambda v: v.strip()),
        Option("gate-threshold", "10%",
               "smallest median slowdown that fails the gate (per benchmark: "
               "@pytest.mark.mlbench_gate(threshold='25%'))", parse_percent),
        Option("gate-alpha", "0.01",
               "significance level of the one-sided Mann-Whitney U test", parse_alpha),
    )


def build_gate_settings(raw: Mapping[str, str]) -> GateSettings:
    values: dict[str, Any] = {}
    for option in gate_option_table():
        try:
            values[option.name.replace("-", "_")] = option.parse(
                raw.get(option.name) or option.default)
        except OptionError as exc:
            raise OptionError(f"--mlbench-{option.name}: {exc}") from None
    values["threshold"] = values.pop("gate_threshold")
    values["alpha"] = values.pop("gate_alpha")
    return GateSettings(**values)
