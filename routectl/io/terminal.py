"""Terminal styling without click: whether colour is on (`--color`, `NO_COLOR`, a terminal)
and ANSI colour when it is, plain text otherwise; and how wide the text views may be.

Whether colour is on and the width are decided once by the caller (`use_color`,
`text_width`); the library only receives the answers (a `Painter`, a number of columns), so
its output is a function of its arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from routectl.io.jsonread import is_decimal

COLOR_CHOICES = ("auto", "always", "never")
# The width of the text views (the route matrix) in files, pipes and CI logs: the same lines
# everywhere. A terminal or COLUMNS may ask for another, never fewer than MIN_WIDTH.
DEFAULT_WIDTH = 100
MIN_WIDTH = 60
# A COLUMNS of more digits than this is no terminal's width: ignored, as text is.
MAX_COLUMNS_DIGITS = 6
# Foreground colours a legend cycles through: distinct on dark and light backgrounds.
PALETTE = (32, 34, 35, 36, 33, 94, 92, 95, 96, 93)
OK_COLOR = 32
ERROR_COLOR = 31
MUTED_COLOR = 90
BOLD = 1
INVERSE = 7


def counted(n: int, word: str, plural: str | None = None) -> str:
    """`1 row`, `2 rows`: a count with its noun in the number it takes (`plural` where adding
    an s is wrong: `categories`)."""
    return f"{n} {word}" if n == 1 else f"{n} {plural or word + 's'}"


def use_color(choice: str, environ: Mapping[str, str], isatty: bool) -> bool:
    """`always`/`never` win over everything; `auto` = a terminal and NO_COLOR empty or
    unset."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    return isatty and not environ.get("NO_COLOR")


def text_width(environ: Mapping[str, str], terminal_columns: int | None) -> int:
    """Columns for the text views: `COLUMNS` when it is a whole number (ASCII digits, at most
    MAX_COLUMNS_DIGITS), else the terminal's width when writing to one (`terminal_columns`),
    else DEFAULT_WIDTH; at least MIN_WIDTH."""
    columns = environ.get("COLUMNS", "").strip()
    if is_decimal(columns, MAX_COLUMNS_DIGITS):
        return max(int(columns), MIN_WIDTH)
    if terminal_columns is not None and terminal_columns > 0:
        return max(terminal_columns, MIN_WIDTH)
    return DEFAULT_WIDTH


@dataclass(frozen=True)
class Painter:
    """`paint(text, color=..., bold=...)`: SGR-wrapped text when `enabled`, else `text`."""

    enabled: bool = False

    def __call__(
        self, text: str, *, color: int | None = None, bold: bool = False, inverse: bool = False
    ) -> str:
        if not self.enabled or not text:
            return text
        codes = [c for c in (color, BOLD if bold else None, INVERSE if inverse else None) if c]
        # One sequence per attribute, in click.style's order (colour, bold, inverse): the
        # bytes every earlier routectl printed.
        return "".join(f"\x1b[{c}m" for c in codes) + f"{text}\x1b[0m" if codes else text
