"""Row-id patterns: describing a set of row ids compactly, and matching ids against globs.

A matrix id `model/kv/tpN/spec/cN/qN` has six dimensions. A pattern gives each dimension one
value or `{a,b,...}` alternatives (`tp{2,4}`: the numeric segments keep their prefix outside
the braces) and denotes the cross product. `describe` finds a small exact set of patterns for
a set of ids: one pattern when the ids are exactly the cross product of their values, else a
deterministic greedy cover by boxes that lie inside the set; edge probes become one
`edge:{a,b,...}`. The same ids always give the same patterns, in the same order.

`compile_glob` matches ids with the expected-changes file's globs: `*` within one id
segment, `**` across segments, `{a,b}` alternatives (wcmatch's glob syntax, with `/` as the
segment separator).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from itertools import product

from routectl.errors import InputError
from routectl.io.jsonread import shorten

EDGE_PREFIX = "edge:"
DIMENSIONS = 6
# Segments whose values are a fixed prefix and a number: `tp{2,4}` reads better than
# `{tp2,tp4}`, and the numbers sort as numbers.
NUMBERED = {2: "tp", 4: "c", 5: "q"}
# More patterns than this describe a group less clearly than its ids.
MAX_PATTERNS = 6
# Greedy cover: boxes are grown from at most this many uncovered seeds per step, which bounds
# the work on large scattered sets (the result is still exact, only perhaps less compact).
MAX_SEEDS = 32
GLOB_CHARS = re.compile(r"[*?\[\]{}]")


def _segment_key(position: int, value: str) -> tuple[int, str]:
    prefix = NUMBERED.get(position)
    if prefix is not None and value.startswith(prefix) and value[len(prefix) :].isdigit():
        return int(value[len(prefix) :]), ""
    return -1, value


def _alternatives(position: int, values: Iterable[str]) -> str:
    ordered = sorted(set(values), key=lambda v: _segment_key(position, v))
    if len(ordered) == 1:
        return ordered[0]
    prefix = NUMBERED.get(position)
    if prefix is not None and all(_segment_key(position, v)[0] >= 0 for v in ordered):
        return prefix + "{" + ",".join(v[len(prefix) :] for v in ordered) + "}"
    return "{" + ",".join(ordered) + "}"


Box = tuple[frozenset[str], ...]


def _box_text(box: Box) -> str:
    return "/".join(_alternatives(i, values) for i, values in enumerate(box))


def _box_size(box: Box) -> int:
    size = 1
    for values in box:
        size *= len(values)
    return size


def _grow(
    seed: tuple[str, ...], rows: frozenset[tuple[str, ...]], values: Sequence[Sequence[str]]
) -> Box:
    """A maximal box inside `rows` containing `seed`: each dimension in turn takes every
    value (in order) whose slab keeps the box inside the set. Growing one dimension only
    makes the others harder to grow, so one pass gives a maximal box."""
    box: list[list[str]] = [[v] for v in seed]
    for dim in range(DIMENSIONS):
        for value in values[dim]:
            if value in box[dim]:
                continue
            slab = [*box[:dim], [value], *box[dim + 1 :]]
            if all(cell in rows for cell in product(*slab)):
                box[dim].append(value)
    return tuple(frozenset(v) for v in box)


def _cover(rows: frozenset[tuple[str, ...]], limit: int) -> list[Box] | None:
    """An exact cover of `rows` by boxes inside it, greedy by the number of rows a box adds
    (ties: the earlier seed); None when more than `limit` boxes would be needed."""
    values = [
        sorted({r[d] for r in rows}, key=functools.partial(_segment_key, d))
        for d in range(DIMENSIONS)
    ]
    full = tuple(frozenset(v) for v in values)
    if _box_size(full) == len(rows):
        # One box is still one more than a budget of none (the edge pattern may have taken
        # the only place): the limit holds here as in the loop below.
        return [full] if limit >= 1 else None
    uncovered = sorted(rows)
    boxes: list[Box] = []
    while uncovered:
        if len(boxes) == limit:
            return None
        best: Box | None = None
        best_gain = 0
        for seed in uncovered[:MAX_SEEDS]:
            box = _grow(seed, rows, values)
            gain = sum(1 for cell in uncovered if all(cell[d] in box[d] for d in range(DIMENSIONS)))
            if gain > best_gain:
                best, best_gain = box, gain
        assert best is not None  # a seed's own box holds the seed
        boxes.append(best)
        uncovered = [
            cell for cell in uncovered if not all(cell[d] in best[d] for d in range(DIMENSIONS))
        ]
    return boxes


def edge_pattern(names: Iterable[str]) -> str:
    ordered = sorted(set(names))
    return EDGE_PREFIX + (ordered[0] if len(ordered) == 1 else "{" + ",".join(ordered) + "}")


@dataclass(frozen=True)
class Description:
    """A set of row ids as patterns (exact: they denote those ids and no other), or None when
    more than MAX_PATTERNS would be needed (the ids then stand for themselves)."""

    ids: tuple[str, ...]
    patterns: tuple[str, ...] | None

    @property
    def exact(self) -> bool:
        return self.patterns is not None


def describe(ids: Collection[str], *, max_patterns: int = MAX_PATTERNS) -> Description:
    """Patterns that denote exactly `ids` (bare row ids of one category)."""
    ordered = tuple(sorted(ids))
    edges = [i[len(EDGE_PREFIX) :] for i in ordered if i.startswith(EDGE_PREFIX)]
    matrix = frozenset(tuple(i.split("/")) for i in ordered if not i.startswith(EDGE_PREFIX))
    if any(len(cells) != DIMENSIONS for cells in matrix):
        return Description(ordered, None)  # not matrix ids: nothing to factor
    budget = max_patterns - (1 if edges else 0)
    boxes = _cover(matrix, budget) if matrix else []
    if boxes is None or budget < 0:
        return Description(ordered, None)
    patterns = [_box_text(b) for b in sorted(boxes, key=lambda b: min(product(*b)))]
    if edges:
        patterns.append(edge_pattern(edges))
    return Description(ordered, tuple(patterns))


# --- globs ---------------------------------------------------------------------------------


def is_glob(text: str) -> bool:
    return GLOB_CHARS.search(text) is not None


Matcher = Callable[[str], bool]


# The longest row pattern read: a row id is well under 200 characters, and a pattern of
# megabytes only exhausts the schema's and wcmatch's regular-expression engines.
MAX_PATTERN_CHARS = 10_000


def check_pattern_size(pattern: str) -> None:
    """A pattern longer than MAX_PATTERN_CHARS is an InputError saying so (with the limit)."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InputError(
            f"row pattern too large: {len(pattern):,} characters (the limit is "
            f"{MAX_PATTERN_CHARS:,}): {shorten(pattern)}"
        )


# Each pattern compiled once per process: an expected-changes file may repeat one pattern in
# thousands of entries, and its entries are compiled when read and again when matched.
@functools.lru_cache(maxsize=1 << 16)
def compile_glob(pattern: str) -> Matcher:
    """A matcher of bare row ids for one glob; a pattern wcmatch refuses (e.g. too many
    brace expansions) or one over MAX_PATTERN_CHARS is an InputError."""
    check_pattern_size(pattern)
    # Imported here: a check with no stated changes and nothing to group compiles no glob,
    # and wcmatch is a noticeable part of the CLI's start-up.
    from wcmatch import glob

    try:
        compiled = glob.compile(pattern, flags=glob.GLOBSTAR | glob.BRACE | glob.FORCEUNIX)
    except Exception as exc:  # noqa: BLE001 - wcmatch's limit error is not public API
        raise InputError(f"invalid row pattern {shorten(pattern)}: {exc}") from None
    return compiled.match


def matching(pattern: str, ids: Iterable[str]) -> frozenset[str]:
    match = compile_glob(pattern)
    return frozenset(i for i in ids if match(i))
