"""Terminal styling without click: ANSI colour when asked for, plain text otherwise.

Whether colour is on is decided once by the caller (`--color`, NO_COLOR, a terminal); the
library only receives the answer, so its output is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass

# Foreground colours a legend cycles through: distinct on dark and light backgrounds.
PALETTE = (32, 34, 35, 36, 33, 94, 92, 95, 96, 93)
ERROR_COLOR = 31
MUTED_COLOR = 90


@dataclass(frozen=True)
class Painter:
    """`paint(text, color=..., bold=...)`: SGR-wrapped text when `enabled`, else `text`."""

    enabled: bool = False

    def __call__(
        self, text: str, *, color: int | None = None, bold: bool = False, inverse: bool = False
    ) -> str:
        if not self.enabled or not text:
            return text
        codes = [str(c) for c in (color,) if c is not None]
        if bold:
            codes.append("1")
        if inverse:
            codes.append("7")
        return f"\x1b[{';'.join(codes)}m{text}\x1b[0m" if codes else text
