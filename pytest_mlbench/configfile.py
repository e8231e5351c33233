"""A project's pytest configuration file, found as pytest finds it, and one setting added to
it with every other line and comment kept (``pytest-mlbench init``).

pytest reads the first file that configures it, walking up from the folder of the tests it
runs, in this order within a folder (_pytest/config/findpaths.py): pytest.toml and
.pytest.toml (its ``[pytest]`` table; always, even empty), pytest.ini and .pytest.ini (always,
even without a ``[pytest]`` section), pyproject.toml (only with ``[tool.pytest]`` or
``[tool.pytest.ini_options]``), tox.ini (only with ``[pytest]``) and setup.cfg (only with
``[tool:pytest]``). ``locate`` follows that order. ``ConfigFile.with_setting`` puts one line
under the file's section header, or the section at the end when the file has none, and reads
the result back with the parser pytest uses (iniconfig, tomllib): an edit that would not read
back as exactly the file's settings plus the new one is refused, never written.
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import iniconfig

# (file name, TOML?), in pytest's order within one folder
NAMES = (("pytest.toml", True), (".pytest.toml", True), ("pytest.ini", False),
         (".pytest.ini", False), ("pyproject.toml", True), ("tox.ini", False),
         ("setup.cfg", False))
ALWAYS = {"pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini"}  # even without a section


class ConfigError(ValueError):
    """The configuration cannot be read or edited safely: the reason, in one line."""


@dataclass(frozen=True)
class ConfigFile:
    path: Path
    text: str
    toml: bool
    section: str  # where pytest reads settings: pytest, tool:pytest, tool.pytest(.ini_options)
    settings: dict[str, Any]  # what pytest reads from it now ({} when the section is absent)
    has_section: bool

    def with_setting(self, key: str, value: str) -> str:
        """The file's text with ``key = value`` added to its pytest section; ConfigError when
        the result would not read back as the same settings plus this one."""
        newline = "\r\n" if "\r\n" in self.text else "\n"
        line = f"{key} = {json.dumps(value) if self.toml else value}{newline}"
        if self.has_section:
            lines = self.text.splitlines(keepends=True)
            at = self._header_line(lines)
            if not lines[at].endswith(("\n", "\r")):
                lines[at] += newline
            text = "".join([*lines[:at + 1], line, *lines[at + 1:]])
        else:
            gap = newline if self.text.strip() else ""
            tail = "" if not self.text or self.text.endswith("\n") else newline
            text = f"{self.text}{tail}{gap}[{self.section}]{newline}{line}"
        if _parsed(self.path, text, self.toml) != self._expected(key, value):
            raise ConfigError(f"{self.path}: adding '{key} = {value}' under [{self.section}] would "
                              "change what pytest reads from the file; add that line to the "
                              "section yourself")
        return text

    def _header_line(self, lines: list[str]) -> int:
        """The index of the section's header line."""
        if not self.toml:
            found = iniconfig.IniConfig(str(self.path), data=self.text).lineof(self.section)
            assert found is not None  # has_section: the parser saw it
            return found - 1
        dotted = r"\s*\.\s*".join(re.escape(part) for part in self.section.split("."))
        header = re.compile(rf"\s*\[\s*{dotted}\s*\]\s*(#.*)?")
        for i, text in enumerate(lines):
            if header.fullmatch(text.rstrip("\r\n")):
                return i
        raise ConfigError(f"{self.path}: its [{self.section}] table has no header line of its "
                          "own (dotted keys or an inline table); add the setting to it yourself")

    def _expected(self, key: str, value: str) -> Any:
        expected = copy.deepcopy(_parsed(self.path, self.text, self.toml))
        table = expected
        for part in (self.section.split(".") if self.toml else [self.section]):
            table = table.setdefault(part, {})
        table[key] = value
        return expected


def _parsed(path: Path, text: str, toml: bool) -> Any:
    """The whole file as pytest's parser reads it: TOML's document, or {section: {key: value}}."""
    try:
        if toml:
            return tomllib.loads(text)
        ini = iniconfig.IniConfig(str(path), data=text)
    except (tomllib.TOMLDecodeError, iniconfig.ParseError) as exc:
        raise ConfigError(f"{path}: pytest cannot read it ({exc}); fix the file first") from None
    return {name: dict(ini[name].items()) for name in ini.sections}


def read(path: Path) -> ConfigFile | None:
    """``path`` as pytest reads it, or None when it does not configure pytest."""
    toml = dict(NAMES).get(path.name)
    if toml is None or not path.is_file():
        return None
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text, as pytest reads it; fix the file first") \
            from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror})") from None
    doc = _parsed(path, text, toml)
    section = _section(path, doc)
    if section is None:
        return None
    table = doc
    for part in section.split(".") if toml else [section]:
        table = table.get(part) if isinstance(table, dict) else None
    has = isinstance(table, dict)
    return ConfigFile(path, text, toml, section, dict(table) if has else {}, has)


def _section(path: Path, doc: dict[str, Any]) -> str | None:
    """Where pytest reads its settings in this file, None when it reads none there."""
    name = path.name
    if name in ALWAYS:
        return "pytest"
    if name == "tox.ini":
        return "pytest" if "pytest" in doc else None
    if name == "setup.cfg":
        return "tool:pytest" if "tool:pytest" in doc else None
    tool = doc.get("tool", {}).get("pytest", {}) if isinstance(doc.get("tool"), dict) else {}
    if not isinstance(tool, dict) or not tool:
        return None
    if set(tool) - {"ini_options"} and "ini_options" in tool:
        raise ConfigError(f"{path}: sets both [tool.pytest] and [tool.pytest.ini_options], "
                          "which pytest refuses; keep one of them first")
    return "tool.pytest.ini_options" if "ini_options" in tool else "tool.pytest"


def folders(start: Path) -> Iterator[Path]:
    yield start
    yield from start.parents


def locate(start: Path) -> ConfigFile | None:
    """The file pytest reads for tests under ``start`` (which need not exist yet), or None
    when nothing configures pytest there."""
    for folder in folders(start):
        for name, _ in NAMES:
            found = read(folder / name)
            if found is not None:
                return found
    return None
