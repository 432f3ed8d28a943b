"""Did-you-mean hints for misspelled names (commands, categories, row ids, KernelConfig keys,
kernels, git refs, field paths): the one helper every place a name is typed uses."""

from __future__ import annotations

from collections.abc import Iterable

# difflib's default: close enough to be a plausible typo, far enough to say nothing rather
# than something unrelated.
CUTOFF = 0.6
# Row ids share their structure (`edge:`, `/tp4/none/`): only a closer one is a likely typo.
ID_CUTOFF = 0.8
# A prefix or a part of a name is a hint only from this many characters: `a` is in everything.
MIN_PART = 3


def closest(word: str, known: Iterable[str], n: int = 1, cutoff: float = CUTOFF) -> list[str]:
    """The known names closest to `word`, best first: the same name in another case, then
    difflib's close matches, then names that start with it (shortest first), then names that
    contain it (`Qpn2` for `Qpn2NvFp4LinearKernel`)."""
    # Imported here: hints are for errors, and `import routectl` (the engine's start-up
    # import) should not pay for difflib.
    import difflib

    names = [k for k in dict.fromkeys(known) if k != word]
    lower = word.lower()
    found = [k for k in names if k.lower() == lower]
    found += difflib.get_close_matches(word, names, n=n, cutoff=cutoff)
    if len(word) >= MIN_PART:
        found += sorted((k for k in names if k.lower().startswith(lower)), key=len)
        found += sorted((k for k in names if lower in k.lower()), key=len)
    return list(dict.fromkeys(found))[:n]


def did_you_mean(word: str, known: Iterable[str], cutoff: float = CUTOFF) -> str:
    """`; did you mean X?` for the closest known name, or "" when none is close."""
    close = closest(word, known, cutoff=cutoff)
    return f"; did you mean {close[0]}?" if close else ""
