"""Change groups and clusters at their edges (the survivors of the issue-28 mutation run of
`routectl.review.groups`, benchmarks/MUTATION.md): a quoted key beside a list place, the old
value in a signature, the category and label of added and removed groups, and clusters that
never merge field changes of other values and keep each field's places and concrete path."""

from __future__ import annotations

import copy
from typing import Any

from routectl.review.compare import compare_rows
from routectl.review.groups import cluster_groups, group_changes


def rid(tp: int = 2, c: int = 1) -> str:
    return f"m/float16/tp{tp}/none/c{c}/q4096"


def row(row_id: str, *, ms: tuple[int, ...] = (1, 8), split: int = 4, **route: Any) -> dict:
    dispatch = [{"op": "mm", "plan": {"m": m, "split_k": split, "sp ace": 0}} for m in ms]
    return {"id": row_id, "route": {"kernel": "K", "dispatch": dispatch, **route}}


def groups_of(old: list[dict], new: list[dict]) -> Any:
    by_id = {r["id"]: r for r in new}, {r["id"]: r for r in old}
    return group_changes("cat", compare_rows(old, new), *by_id)


def test_a_quoted_key_inside_a_list_item_is_generalised_at_the_list_place_only() -> None:
    old = [row(rid(2), ms=(1,)), row(rid(4), ms=(8,))]
    new = copy.deepcopy(old)
    for r in new:
        r["route"]["dispatch"][0]["plan"]["sp ace"] = 1
    (group,) = groups_of(old, new)
    assert group.row_ids == (rid(2), rid(4))
    assert [f.path for f in group.fields] == ['route.dispatch[*].plan["sp ace"]']


def test_the_old_value_is_part_of_a_change() -> None:
    # Both rows end at split_k 8, from 4 and from 2: two changes, two groups.
    old = [row(rid(2), split=4), row(rid(4), split=2)]
    new = [row(rid(2), split=8), row(rid(4), split=8)]
    groups = groups_of(old, new)
    assert sorted(g.row_ids for g in groups) == [(rid(2),), (rid(4),)]
    assert sorted(g.fields[0].old for g in groups) == [2, 4]


def test_added_and_removed_groups_carry_their_category_and_label() -> None:
    old = [
        row(rid(2)),
        {"id": rid(4), "route": {"kernel": None, "error": {"code": "e1"}}},
        {"id": rid(2, 4), "route": "not a mapping"},
        {"id": rid(4, 4), "route": {"kernel": None, "status": {"message": "no code"}}},
    ]
    new = [{"id": rid(2, 8), "route": {"kernel": None, "status": {"code": "s1"}}}]
    groups = groups_of(old, new)
    assert [(g.category, g.kind, g.label, g.row_ids) for g in groups] == [
        ("cat", "added", "status s1", (rid(2, 8),)),
        ("cat", "removed", "kernel K", (rid(2),)),
        ("cat", "removed", "no route", (rid(2, 4),)),
        ("cat", "removed", "error e1", (rid(4),)),
        ("cat", "removed", "no kernel", (rid(4, 4),)),
    ]
    assert {g.to_json()["category"] for g in groups} == {"cat"}
    assert all(q.startswith("cat:") for g in groups for q in g.qualified_ids)


def test_to_json_of_a_group_whose_rows_have_no_pattern() -> None:
    # Ids outside the row grammar have no pattern: the rows stand for themselves.
    old = [{"id": name, "route": {"kernel": "K"}} for name in ("alpha", "beta")]
    new = [{"id": name, "route": {"kernel": "L"}} for name in ("alpha", "beta")]
    (group,) = groups_of(old, new)
    assert group.patterns is None
    shown = group.to_json()
    assert (shown["rows"], shown["patterns"]) == (["cat:alpha", "cat:beta"], None)


def _cluster_rows() -> tuple[list[dict], list[dict]]:
    ids = [rid(2), rid(4), rid(2, 4), rid(4, 4)]
    old = [row(i, ms=(1, 8, 64)) for i in ids]
    new = copy.deepcopy(old)
    for r in new:  # shared by all: kernel K -> K2
        r["route"]["kernel"] = "K2"
    # split_k 4 -> 8 at one place in two rows, at two places in a third: three places.
    new[0]["route"]["dispatch"][0]["plan"]["split_k"] = 8
    new[1]["route"]["dispatch"][1]["plan"]["split_k"] = 8
    new[2]["route"]["dispatch"][0]["plan"]["split_k"] = 8
    new[2]["route"]["dispatch"][2]["plan"]["split_k"] = 8
    # The fourth ends at 8 too, from another old value: not the same change.
    old[3]["route"]["dispatch"][0]["plan"]["split_k"] = 2
    new[3]["route"]["dispatch"][0]["plan"]["split_k"] = 8
    return old, new


def test_clusters_share_only_equal_changes_and_merge_their_places() -> None:
    old, new = _cluster_rows()
    clusters = cluster_groups(groups_of(old, new))
    (top,) = clusters
    assert [(f.path, f.kind, f.old, f.new, f.places, f.concrete) for f in top.fields] == [
        ("route.kernel", "changed", "K", "K2", (1, 1), "route.kernel")
    ]
    shared, other = top.children
    assert other.row_ids == (rid(4, 4),)
    assert [(f.old, f.new) for f in other.fields] == [(2, 8)]
    # The rows changing split_k 4 -> 8 share it, over one or two places per row.
    assert [(f.path, f.old, f.new, f.places, f.concrete) for f in shared.fields] == [
        ("route.dispatch[*].plan.split_k", 4, 8, (1, 2), None)
    ]
    assert sorted(shared.row_ids) == sorted([rid(2), rid(4), rid(2, 4)])


def test_a_concrete_path_is_kept_only_when_every_group_has_the_same() -> None:
    ids = [rid(2), rid(4), rid(2, 4)]
    old = [row(i) for i in ids]
    new = copy.deepcopy(old)
    for r in new:
        r["route"]["dispatch"][0]["plan"]["split_k"] = 8  # M = 1 everywhere
    new[1]["route"]["kernel"] = "K2"  # another group, same split_k change at the same place
    new[2]["route"]["kernel"] = "K3"
    (top,) = cluster_groups(groups_of(old, new))
    assert [(f.path, f.places, f.concrete) for f in top.fields] == [
        ("route.dispatch[*].plan.split_k", (1, 1), "route.dispatch[M=1,0].plan.split_k")
    ]
    assert sorted((f.path, f.new) for c in top.children for f in c.fields) == [
        ("route.kernel", "K2"),
        ("route.kernel", "K3"),
    ]


def test_without_a_common_change_the_most_shared_one_leads_and_ties_go_to_the_first() -> None:
    # Three groups: A has {x}, B has {x, y}, C has {y}: x and y are each in two groups; x is
    # met first, so A and B cluster on x and C stands apart.
    ids = [rid(2), rid(4), rid(2, 4)]
    old = [row(i, flags={"x": 0, "y": 0}) for i in ids]
    new = copy.deepcopy(old)
    new[0]["route"]["flags"]["x"] = 1
    new[1]["route"]["flags"].update(x=1, y=1)
    new[2]["route"]["flags"]["y"] = 1
    first, second = cluster_groups(groups_of(old, new))
    assert sorted(first.row_ids) == sorted([rid(2), rid(4)])
    assert [f.path for f in first.fields] == ["route.flags.x"]
    assert second.row_ids == (rid(2, 4),)
    assert [f.path for f in second.fields] == ["route.flags.y"]


def test_general_path_keeps_every_quoted_key_and_generalises_between_them() -> None:
    from routectl.review.groups import general_path

    path = 'route.flags["a b"].x[3]["c[4]"].y[M=8,0]'
    assert general_path(path) == 'route.flags["a b"].x[*]["c[4]"].y[*]'


def test_equal_values_in_another_key_order_are_one_change() -> None:
    # A value read back from a snapshot may hold its keys in another order than a fresh one.
    old = [row(rid(2)), row(rid(4))]
    new = [row(rid(2), extra={"a": 1, "b": 2}), row(rid(4), extra={"b": 2, "a": 1})]
    (group,) = groups_of(old, new)
    assert group.row_ids == (rid(2), rid(4))
    assert [(f.path, f.kind) for f in group.fields] == [("route.extra", "added")]


def test_a_shared_field_spans_the_places_of_every_group() -> None:
    ids = [rid(2), rid(4), rid(2, 4)]
    old = [row(i, ms=(1, 8, 64)) for i in ids]
    new = copy.deepcopy(old)
    for r, places, kernel in zip(new, (1, 2, 3), ("K2", "K2", "K3"), strict=True):
        r["route"]["kernel"] = kernel
        for item in r["route"]["dispatch"][:places]:
            item["plan"]["split_k"] = 8
    groups = groups_of(old, new)
    assert sorted(g.row_ids for g in groups) == [(rid(2), rid(4)), (rid(2, 4),)]
    (top,) = cluster_groups(groups)
    assert [(f.path, f.places) for f in top.fields] == [("route.dispatch[*].plan.split_k", (1, 3))]


def test_a_shared_field_at_different_places_shows_no_concrete_path() -> None:
    ids = [rid(2), rid(4)]
    old = [row(i) for i in ids]
    new = copy.deepcopy(old)
    new[0]["route"]["dispatch"][0]["plan"]["split_k"] = 8  # at M = 1
    new[1]["route"]["dispatch"][1]["plan"]["split_k"] = 8  # at M = 8
    new[0]["route"]["kernel"], new[1]["route"]["kernel"] = "K2", "K3"
    (top,) = cluster_groups(groups_of(old, new))
    assert [(f.path, f.concrete, f.shown_path) for f in top.fields] == [
        ("route.dispatch[*].plan.split_k", None, "route.dispatch[*].plan.split_k")
    ]


def test_a_lone_group_first_does_not_end_the_clusters() -> None:
    ids = [rid(2), rid(4), rid(2, 4), rid(4, 4)]
    old = [row(i, flags={"x": 0, "y": 0}) for i in ids]
    new = copy.deepcopy(old)
    for r in new[:2]:  # the largest group, alone in its component
        r["route"]["flags"]["x"] = 1
    new[2]["route"]["flags"]["y"] = 1
    new[3]["route"]["flags"].update(y=1, z=1)
    clusters = cluster_groups(groups_of(old, new))
    assert [sorted(c.row_ids) for c in clusters] == [
        sorted([rid(2), rid(4)]),
        sorted([rid(2, 4), rid(4, 4)]),
    ]
    assert [f.path for f in clusters[1].fields] == ["route.flags.y"]


def test_a_component_without_a_common_change_does_not_end_the_clusters() -> None:
    ids = [rid(2), rid(2, 4), rid(4), rid(4, 4)]  # in group order
    old = [row(i, flags={"x": 0, "y": 0, "z": 0}) for i in ids]
    new = copy.deepcopy(old)
    new[0]["route"]["flags"]["x"] = 1
    new[1]["route"]["flags"].update(x=1, y=1)
    new[2]["route"]["flags"]["y"] = 1
    new[3]["route"]["flags"]["z"] = 1  # its own component, after the linked one
    clusters = cluster_groups(groups_of(old, new))
    assert [c.row_ids for c in clusters][-1] == (rid(4, 4),)
    assert sorted(i for c in clusters for i in c.row_ids) == sorted(ids)
