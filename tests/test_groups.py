"""Change groups (signatures, places, added and removed rows), row-id pattern synthesis and
glob matching."""

from __future__ import annotations

import copy
import random
from itertools import product

from routectl.review.compare import compare_rows
from routectl.review.groups import cluster_groups, group_changes
from routectl.review.patterns import MAX_PATTERNS, describe, matching

KVS = ("float16", "fp8_e4m3", "fp8_e5m2")


def rid(model="m", kv="float16", tp=2, spec="none", c=1, q=4096) -> str:
    return f"{model}/{kv}/tp{tp}/{spec}/c{c}/q{q}"


def route_row(row_id: str, *, kernel="K", ms=(1, 8), split_k=4) -> dict:
    return {
        "id": row_id,
        "route": {
            "kernel": kernel,
            "flags": {"gated": False},
            "status": None,
            "dispatch": [{"op": "mm", "plan": {"m": m, "split_k": split_k}} for m in ms],
        },
    }


def groups_of(old, new):
    comparison = compare_rows(old, new)
    return group_changes("cat", comparison, {r["id"]: r for r in new}, {r["id"]: r for r in old})


def test_rows_with_the_same_change_form_one_group_with_places_per_row():
    ids = [rid(tp=2), rid(tp=4), rid(c=4)]
    old = [route_row(i) for i in ids]
    new = [route_row(i, split_k=8) for i in ids]
    new[2] = route_row(ids[2], split_k=16)  # another new value: another group
    groups = groups_of(old, new)
    assert [(g.kind, g.row_ids) for g in groups] == [
        ("changed", (rid(tp=2), rid(tp=4))),
        ("changed", (rid(c=4),)),
    ]
    field = groups[0].fields[0]
    assert (field.path, field.kind, field.old, field.new, field.places, field.concrete) == (
        "route.dispatch[*].plan.split_k",
        "changed",
        4,
        8,
        (2, 2),
        None,
    )
    assert groups[0].patterns == ("cat:m/float16/tp{2,4}/none/c1/q4096",)
    assert groups[1].to_json() == {
        "category": "cat",
        "kind": "changed",
        "label": "",
        "signature": [
            {
                "path": "route.dispatch[*].plan.split_k",
                "kind": "changed",
                "old": 4,
                "new": 16,
                "places": [2, 2],
            }
        ],
        "rows": ["cat:m/float16/tp2/none/c4/q4096"],
        "patterns": ["cat:m/float16/tp2/none/c4/q4096"],
        "breaks": [],
    }


def test_places_may_differ_between_rows_of_one_group():
    old = [route_row(rid(tp=2), ms=(1,)), route_row(rid(tp=4), ms=(1, 8, 32))]
    new = [route_row(rid(tp=2), ms=(1,), split_k=8), route_row(rid(tp=4), ms=(1, 8, 32), split_k=8)]
    (group,) = groups_of(old, new)
    assert group.fields[0].places == (1, 3)


def test_added_and_removed_fields_and_list_length_changes():
    old = [route_row(rid(c=1)), route_row(rid(c=4)), route_row(rid(c=8))]
    new = copy.deepcopy(old)
    for row in new[:2]:
        row["route"]["flags"]["compact"] = True  # added key
        del row["route"]["flags"]["gated"]  # removed key
    new[2]["route"]["dispatch"].append({"op": "mm", "plan": {"m": 32, "split_k": 4}})
    groups = groups_of(old, new)
    assert [[(f.path, f.kind, f.old, f.new) for f in g.fields] for g in groups] == [
        [
            ("route.flags.compact", "added", None, True),
            ("route.flags.gated", "removed", False, None),
        ],
        [("route.dispatch[*]", "added", None, {"op": "mm", "plan": {"m": 32, "split_k": 4}})],
    ]
    assert groups[1].fields[0].concrete == "route.dispatch[M=32,0]"
    assert groups[0].patterns == ("cat:m/float16/tp2/none/c{1,4}/q4096",)


def test_added_and_removed_rows_group_by_kernel_or_status():
    kept = route_row(rid())
    status_row = {
        "id": "edge:gone",
        "route": {"kernel": None, "status": {"code": "not_modelled", "message": "m"}},
    }
    old = [kept, route_row(rid(tp=4), kernel="A"), status_row]
    new = [
        kept,
        route_row(rid(c=4), kernel="A"),
        route_row(rid(c=8), kernel="A"),
        route_row(rid(q=8192), kernel="B"),
    ]
    groups = groups_of(old, new)
    assert [(g.kind, g.label, g.row_ids) for g in groups] == [
        ("added", "kernel A", (rid(c=4), rid(c=8))),
        ("added", "kernel B", (rid(q=8192),)),
        ("removed", "status not_modelled", ("edge:gone",)),  # equal sizes: by first id
        ("removed", "kernel A", (rid(tp=4),)),
    ]
    assert groups[0].fields == ()


# --- patterns ------------------------------------------------------------------------------


def expand(pattern: str, universe) -> set[str]:
    return set(matching(pattern, universe))


UNIVERSE = [
    rid("27b", kv, tp, spec, c, q)
    for kv in KVS
    for tp in (2, 4)
    for spec in ("none", "dflash")
    for c in (1, 4, 8)
    for q in (4096, 8192)
]


def test_an_exact_cross_product_is_one_pattern():
    ids = [
        rid("27b", kv, tp, "dflash", c, q)
        for kv, tp, c, q in product(KVS, (2, 4), (1, 4, 8), (4096, 8192))
    ]
    edges = ["edge:b_probe", "edge:a_probe"]
    found = describe([*ids, *edges])
    assert found.patterns == (
        "27b/{float16,fp8_e4m3,fp8_e5m2}/tp{2,4}/dflash/c{1,4,8}/q{4096,8192}",
        "edge:{a_probe,b_probe}",
    )
    assert describe(["edge:only"]).patterns == ("edge:only",)


def test_a_union_is_an_exact_greedy_cover_and_always_the_same():
    ids = [i for i in UNIVERSE if "/dflash/" in i and not i.endswith("c8/q8192")]
    found = describe(ids)
    assert found.patterns == (
        "27b/{float16,fp8_e4m3,fp8_e5m2}/tp{2,4}/dflash/c{1,4}/q{4096,8192}",
        "27b/{float16,fp8_e4m3,fp8_e5m2}/tp{2,4}/dflash/c{1,4,8}/q4096",
    )
    covered = set().union(*(expand(p, UNIVERSE) for p in found.patterns))
    assert covered == set(ids)  # exact: no row outside the set
    shuffled = list(ids)
    random.Random(7).shuffle(shuffled)
    assert describe(shuffled) == found


def test_scattered_rows_fall_back_to_their_ids():
    ids = [rid(f"m{i}", tp=i) for i in range(MAX_PATTERNS + 1)]
    found = describe(ids)
    assert found.patterns is None and not found.exact
    assert found.ids == tuple(sorted(ids))
    assert describe(ids[:MAX_PATTERNS]).patterns == tuple(sorted(ids[:MAX_PATTERNS]))


def test_globs_star_within_a_segment_globstar_across_and_braces():
    assert expand("27b/*/tp2/none/c1/q4096", UNIVERSE) == {
        rid("27b", kv, 2, "none", 1, 4096) for kv in KVS
    }
    assert expand("27b/**/q8192", UNIVERSE) == {i for i in UNIVERSE if i.endswith("q8192")}
    assert expand("27b/fp8_*/tp{2,4}/dflash/c8/q4096", UNIVERSE) == {
        rid("27b", kv, tp, "dflash", 8, 4096) for kv in KVS[1:] for tp in (2, 4)
    }
    assert expand("*/c1", UNIVERSE) == set()  # `*` never crosses a `/`
    assert expand("edge:*", ["edge:a", "edge:b", rid()]) == {"edge:a", "edge:b"}
    assert len(expand("**", [*UNIVERSE, "edge:a"])) == len(UNIVERSE) + 1


def test_the_readme_groups_example_prints_what_it_shows(capsys):
    import re
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[1] / "docs" / "library.md").read_text()
    example, shown = re.search(
        r"Change groups and row patterns.*?```python\n(.*?)```\n\n"
        r"prints\n\n```text\n(.*?)```",
        guide,
        flags=re.S,
    ).groups()
    exec(compile(example, "docs/library.md", "exec"), {})
    assert capsys.readouterr().out == shown


def test_groups_sharing_changes_cluster_and_each_keeps_only_what_it_adds():
    ids = [rid(c=1), rid(c=4), rid(c=8), rid(tp=4), rid(q=8192)]
    old = [route_row(i) for i in ids]
    new = copy.deepcopy(old)
    for row in new[:4]:  # one cause: every row's kernel
        row["route"]["kernel"] = "K2"
    for row in new[1:3]:  # and beside it, two ways of a second change
        row["route"]["flags"]["gated"] = True
    new[2]["route"]["status"] = "slow"
    new[3]["route"]["status"] = "fast"
    new[4]["route"]["flags"]["gated"] = True  # linked to the second change only
    groups = groups_of(old, new)
    clusters = cluster_groups(groups)
    assert sorted(i for c in clusters for i in c.row_ids) == sorted(ids)

    def fields(c):
        return [(f.path, f.new) for f in c.fields]

    # No change is common to all five: the kernel, which four groups share, is one cluster;
    # the group linked to it only through gated stands apart.
    kernel, apart = clusters
    assert fields(kernel) == [("route.kernel", "K2")]
    assert apart.group is not None and apart.row_ids == (rid(q=8192),)
    assert fields(apart) == [("route.flags.gated", True)]
    below = {c.row_ids: c for c in kernel.children}
    assert fields(below[(rid(c=1),)]) == []
    assert fields(below[(rid(tp=4),)]) == [("route.status", "fast")]
    gated = below[(rid(c=4), rid(c=8))]
    assert fields(gated) == [("route.flags.gated", True)]
    assert sorted(fields(c) for c in gated.children) == [[], [("route.status", "slow")]]
