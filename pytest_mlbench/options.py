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
        Option("precision", "fp32",
               "comma list of precision policies: all, "
               + ", ".join(f"{p.name} ({p.summary})" for p in POLICIES.values()),
               lambda v: parse_list(v, POLICIES)),
        Option("size", "default", "size profile: smoke (seconds, for tests), default, paper "
               "(the seed articles' full sizes)", lambda v: parse_one(v, SIZES)),
        Option("seed", "0", "seed of the NumPy Generator that makes every input and weight",
               parse_seed),
    )


def build_settings(raw: Mapping[str, str], table: tuple[Option, ...]) -> Settings:
    """Parse raw strings (command line or ini) into Settings; OptionError names the option."""
    values: dict[str, Any] = {}
    for option in table:
        try:
            values[option.name] = option.parse(raw.get(option.name, option.default))
        except OptionError as exc:
            raise OptionError(f"--mlbench-{option.name}: {exc}") from None
    values["precisions"] = values.pop("precision")
    return Settings(**values)
