"""Did-you-mean hints for misspelled names (commands, categories, row ids), by difflib."""

from __future__ import annotations

from collections.abc import Iterable

# difflib's default: close enough to be a plausible typo, far enough to say nothing rather
# than something unrelated.
CUTOFF = 0.6


def closest(word: str, known: Iterable[str], n: int = 1) -> list[str]:
    # Imported here: hints are for errors, and `import routectl` (the engine's start-up
    # import) should not pay for difflib.
    import difflib

    return difflib.get_close_matches(word, list(known), n=n, cutoff=CUTOFF)


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`; did you mean X?` for the closest known name, or "" when none is close."""
    close = closest(word, known)
    return f"; did you mean {close[0]}?" if close else ""
