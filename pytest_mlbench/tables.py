"""Plain-text tables whose columns are as wide as their widest cell, so long case names and
long implementation labels never push a row out of line."""

from __future__ import annotations

from collections.abc import Sequence


def render(header: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 1,
           note: bool = False, indent: str = "") -> list[str]:
    """Header and rows: the first ``left`` columns left-aligned, the others right-aligned.
    With ``note`` the last column is free text (a verdict, a flag), left-aligned, unpadded."""
    cells = [list(header), *[list(row) for row in rows]]
    fixed = len(header) - 1 if note else len(header)
    widths = [max(len(row[i]) for row in cells) for i in range(fixed)]
    lines = []
    for row in cells:
        parts = [c.ljust(w) if i < left else c.rjust(w)
                 for i, (c, w) in enumerate(zip(row[:fixed], widths, strict=True))]
        if note:
            parts.append(row[-1])
        lines.append((indent + "  ".join(parts)).rstrip())
    return lines


WIDEST = 12  # characters a number may take in a fixed format before it is shown in three figures


def number(value: float, fmt: str) -> str:
    """``value`` in ``fmt`` (".4f", "+.1%"), or in three significant figures where the fixed
    format would run long: the bounds of a busy host's interval reached 1e137 and printed
    140 digits."""
    text = f"{value:{fmt}}"
    if len(text) <= WIDEST:
        return text
    sign = "+" if fmt.startswith("+") else ""
    if fmt.endswith("%"):
        return f"{value * 100:{sign}.3g}%"
    return f"{value:{sign}.3g}"


def interval(low: float, high: float, fmt: str) -> str:
    """``[0.98, 1.03]`` in the given number format (see ``number``)."""
    return f"[{number(low, fmt)}, {number(high, fmt)}]"
