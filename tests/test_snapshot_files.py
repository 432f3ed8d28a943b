"""Snapshot files: schemas, reading (every rejection is one input-error line), atomic and
deterministic writing."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from routectl.errors import InputError
from routectl.io.schemas import (
    SCHEMA_NAMES,
    SOURCE_SCHEMA_DIR,
    load_schema,
    load_schema_file,
    schema,
    schema_path,
    schema_violation,
)
from routectl.review.snapshot import (
    Snapshot,
    SnapshotError,
    build_snapshot,
    dump_json,
    parse_snapshot,
    read_snapshot,
    write_snapshot,
    write_text_atomic,
)
from routectl.rows import ROW_ID
from tests.fixtures.toy import invoke, load, make_project, ok, row, save, tree_bytes

REPO = Path(__file__).resolve().parents[1]
FREE_FORM = {"plan", "bytes", "flags"}  # the only objects that may hold keys of their own
ROW_A = "toy_model/float16/tp1/none/c1/q64"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


def _documents(project: Path) -> dict:
    return load(project / "snapshots" / "toy-a.json")


# --- the schemas ---------------------------------------------------------------------------

# routectl's published schemas, and the snapshot schema the shipped project validates with:
# the generic one with its categories' route shapes composed in (Project.snapshot_schema).
PROJECT_SNAPSHOT = "project-snapshot"
CHECKED_SCHEMAS = (*SCHEMA_NAMES, PROJECT_SNAPSHOT)


def schema_document(name: str) -> dict:
    if name == PROJECT_SNAPSHOT:
        from policies import PROJECT

        return PROJECT.snapshot_schema.data
    return schema(name)


@pytest.mark.parametrize("name", CHECKED_SCHEMAS)
def test_schemas_are_valid_self_contained_2020_12(name):
    data = schema_document(name)
    Draft202012Validator.check_schema(data)
    assert data["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    refs = []

    def walk(node):
        if isinstance(node, dict):
            if "$ref" in node:
                refs.append(node["$ref"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(data)
    assert refs and all(r.startswith("#/$defs/") for r in refs)
    # Every reference resolves inside the document.
    assert {r.removeprefix("#/$defs/") for r in refs} <= set(data["$defs"])
    if name != PROJECT_SNAPSHOT:
        assert schema_path(name) == REPO / "routectl" / "schemas" / f"{name}.schema.json"


@pytest.mark.parametrize("name", CHECKED_SCHEMAS)
def test_schemas_are_strict_every_key_required(name):
    loose = []

    def walk(node, where):
        if isinstance(node, dict):
            props = node.get("properties")
            if node.get("type") == "object" and props and where[-1] not in FREE_FORM:
                if set(node.get("required", ())) != set(props):
                    loose.append(("not all required", where))
                if node.get("additionalProperties") is not False:
                    loose.append(("open", where))
            for key, value in node.items():
                walk(value, (*where, key))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, (*where, str(i)))

    walk(schema_document(name), ("root",))
    assert loose == []


def test_schema_row_id_patterns_are_the_code_pattern():
    snap = schema("snapshot")["$defs"]["row_id"]["pattern"]
    assert snap == ROW_ID.pattern
    inner = FULL_MATCH.fullmatch(ROW_ID.pattern).group(1)
    end = inner + ")$(?!\\n)"
    assert schema("expected-changes")["$defs"]["listed_id"]["pattern"].endswith(end)
    assert schema("report")["$defs"]["qualified_id"]["pattern"].endswith(end)


# --- patterns: full-match, read alike by jsonschema and jsonschema-rs ------------------------

# `^(?:BODY)$(?!\n)`: Python's `$` (jsonschema) also matches before a final newline, ECMA-262's
# (jsonschema-rs) does not; the lookahead makes both refuse it. No \A, \Z or \z: they are not
# ECMA-262.
FULL_MATCH = re.compile(r"\^\(\?:(.*)\)\$\(\?!\\n\)")


def _patterns(node, where=()):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                yield "/".join(where), value
            yield from _patterns(value, (*where, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _patterns(value, (*where, str(i)))


# routectl's schemas and the route-shape fragments of the project's categories.
ALL_PATTERNS = [
    (f"{path.name}:{where}", pattern)
    for path in [
        *sorted(SOURCE_SCHEMA_DIR.glob("*.schema.json")),
        *sorted((REPO / "policies" / "categories").glob("*.route.schema.json")),
    ]
    for where, pattern in _patterns(json.loads(path.read_text()))
]


def test_every_schema_has_patterns_to_check():
    assert len(ALL_PATTERNS) >= 8
    assert {p.split(":")[0] for p, _ in ALL_PATTERNS} >= {
        "snapshot.schema.json",
        "report.schema.json",
        "expected-changes.schema.json",
        "startup-report.schema.json",
        "dflash2_policy.route.schema.json",
    }


@pytest.mark.parametrize(("where", "pattern"), ALL_PATTERNS, ids=[w for w, _ in ALL_PATTERNS])
def test_every_schema_pattern_is_full_match(where, pattern):
    body = FULL_MATCH.fullmatch(pattern)
    assert body is not None, f"{where}: {pattern!r} is not ^(?:...)$(?!\\n)"
    for escape in ("\\A", "\\Z", "\\z"):
        assert escape not in body.group(1), f"{where}: {escape} is not ECMA-262"


@pytest.mark.parametrize(("where", "pattern"), ALL_PATTERNS, ids=[w for w, _ in ALL_PATTERNS])
def test_both_validators_read_each_pattern_alike(where, pattern):
    import jsonschema_rs

    node = {"type": "string", "pattern": pattern}
    fast, slow = jsonschema_rs.Draft202012Validator(node), Draft202012Validator(node)
    body = FULL_MATCH.fullmatch(pattern).group(1)

    @settings(max_examples=40, deadline=None, derandomize=True)
    @given(
        st.from_regex(re.compile(body, re.ASCII), fullmatch=True).filter(
            lambda s: "\n" not in s and "\r" not in s
        )
    )
    def agree(text):
        assert fast.is_valid(text) and slow.is_valid(text), text
        for wrong in (text + "\n", "\n" + text, text + "\n\n"):
            assert not fast.is_valid(wrong), wrong
            assert not slow.is_valid(wrong), wrong

    agree()


@pytest.mark.parametrize("text", ["edge:native_missing\n", "m/kv/tp1/none/c1/q1\n"])
def test_a_row_id_with_a_trailing_newline_is_refused(project, text):
    assert not ROW_ID.match(text)
    data = _documents(project)
    data["rows"][0]["id"] = text
    assert schema_violation("snapshot", data) is not None
    with pytest.raises(InputError, match="malformed row id"):
        parse_snapshot(data, source="memory")
    assert schema_violation("expected-changes", [text]) is not None
    assert schema_violation("expected-changes", [text.rstrip()]) is None


def test_schema_version_const_is_checked(tmp_path):
    data = schema("snapshot")
    data["properties"]["schema_version"]["const"] = 2
    other = tmp_path / "snapshot.schema.json"
    other.write_text(json.dumps(data))
    with pytest.raises(InputError, match="describes schema_version 2"):
        load_schema_file(str(other))
    # The schemas are routectl's package data alone: a project folder named `schema/` beside
    # the retained snapshots is no longer looked at.
    assert schema_path("report") == SOURCE_SCHEMA_DIR / "report.schema.json"


# --- reading: negative cases through the CLI -----------------------------------------------


def _break(project: Path, change) -> Path:
    path = project / "snapshots" / "toy-a.json"
    data = load(path)
    change(data)
    save(path, data)
    return path


NEGATIVE = {
    "missing id": (lambda d: row(d, ROW_A).pop("id"), "'id' is a required property"),
    "extra key": (lambda d: row(d, ROW_A)["route"].update(surprise=1), "'surprise' was unexpected"),
    "bad id pattern": (
        lambda d: row(d, ROW_A).update(id="Toy Model/x"),
        "malformed row id 'Toy Model/x'",
    ),
    "duplicate id": (
        lambda d: d["rows"].append(copy.deepcopy(row(d, ROW_A))),
        f"duplicate row id '{ROW_A}'",
    ),
    "kernel not a string": (
        lambda d: row(d, ROW_A)["route"].update(kernel=7),
        "route.kernel: 7 is not of type 'string', 'null'",
    ),
    "dispatch without m": (
        lambda d: row(d, ROW_A)["route"]["dispatch"][0]["plan"].pop("m"),
        "'m' is a required property",
    ),
    "top-level extra": (lambda d: d.update(generated="today"), "'generated' was unexpected"),
    "newer version": (lambda d: d.update(schema_version=2), "upgrade routectl"),
    "older version": (lambda d: d.update(schema_version=0), "regenerate it"),
    "wrong category": (lambda d: d.update(category="toy-b"), "file name says 'toy-a'"),
}


@pytest.mark.parametrize("case", sorted(NEGATIVE))
def test_invalid_retained_file_is_an_input_error(project, case):
    change, message = NEGATIVE[case]
    path = _break(project, change)
    before = tree_bytes(project / "snapshots")
    result = ok(invoke(["check", "--report", project / "report.json"], cwd=project))
    assert result.code == 2
    assert result.stdout == ""
    assert len(result.lines) == 1 and result.lines[0].startswith(f"error: {path}")
    assert message in result.stderr
    assert tree_bytes(project / "snapshots") == before  # no .json.new, nothing rewritten
    assert not (project / "report.json").exists()


@pytest.mark.parametrize(
    "content,message",
    [
        (b'{"schema_version": 1,', "is not valid JSON: Expecting"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b'{"schema_version": NaN}', "NaN is not JSON"),
    ],
)
def test_unparsable_retained_file_is_one_line(project, content, message):
    (project / "snapshots" / "toy-a.json").write_bytes(content)
    result = ok(invoke(["check"], cwd=project))
    assert result.code == 2 and len(result.lines) == 1
    assert message in result.stderr
    assert sorted(p.name for p in (project / "snapshots").iterdir()) == ["toy-a.json", "toy-b.json"]


def test_unreadable_retained_file_is_one_line(project):
    path = project / "snapshots" / "toy-a.json"
    path.unlink()
    path.mkdir()  # reading it fails even as root
    result = ok(invoke(["check"], cwd=project))
    assert result.code == 2 and len(result.lines) == 1
    assert "cannot read snapshot" in result.stderr and "directory" in result.stderr


def test_unsorted_rows_read_as_the_same_snapshot(project):
    path = project / "snapshots" / "toy-a.json"
    data = load(path)
    data["rows"].reverse()
    save(path, data)
    assert read_snapshot(path, category="toy-a").rows == tuple(load(path)["rows"][::-1])
    assert ok(invoke(["check"], cwd=project)).code == 0


# --- building and writing ------------------------------------------------------------------


def test_written_files_are_canonical_and_round_trip(project):
    path = project / "snapshots" / "toy-a.json"
    text = path.read_text()
    assert text == dump_json(json.loads(text))
    assert text.endswith("}\n") and '\n  "basis": ' in text
    snap = read_snapshot(path, category="toy-a")
    assert snap.ids() == sorted(snap.ids())
    copy_path = project / "again.json"
    write_snapshot(copy_path, snap)
    assert copy_path.read_bytes() == path.read_bytes()


def test_build_snapshot_normalises_and_rejects_bad_rows(project):
    good = load(project / "snapshots" / "toy-a.json")["rows"]
    shuffled = [*good[::-1]]
    shuffled[0] = {**shuffled[0], "route": {**shuffled[0]["route"]}}
    snap = build_snapshot("toy-a", "basis text", shuffled)
    assert snap.ids() == sorted(r["id"] for r in good)
    bad = [{**good[0], "route": {"kernel": None}}]
    with pytest.raises(SnapshotError, match="invalid snapshot"):
        build_snapshot("toy-a", "basis text", bad)
    with pytest.raises(SnapshotError, match="row 'edge:x' is not JSON"):
        build_snapshot("toy-a", "basis text", [{"id": "edge:x", "route": {"kernel": object()}}])
    target = project / "made-by-hand.json"
    with pytest.raises(SnapshotError, match="refusing to write an invalid snapshot"):
        write_snapshot(target, Snapshot("toy-a", "basis text", tuple(bad)))
    assert not target.exists()


class Interrupted(Exception):
    pass


def test_failure_between_temp_write_and_rename_keeps_the_file(project):
    path = project / "snapshots" / "toy-a.json"
    before = path.read_bytes()
    snap = read_snapshot(path, category="toy-a")
    changed = build_snapshot("toy-a", "a different basis", snap.rows)
    seen = []

    def fail(temp: Path) -> None:
        seen.append(temp.read_text())  # the complete new text is there, not yet renamed
        raise Interrupted()

    with pytest.raises(Interrupted):
        write_snapshot(path, changed, before_replace=fail)
    assert path.read_bytes() == before
    assert '"a different basis"' in seen[0]
    assert sorted(p.name for p in path.parent.iterdir()) == ["toy-a.json", "toy-b.json"]
    write_text_atomic(path, "x\n")
    assert path.read_text() == "x\n"


def test_snapshot_command_rules(project, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    assert ok(invoke(["snapshot", "-c", "toy-a", "-o", out / "a.json"], cwd=project)).code == 0
    assert (out / "a.json").read_bytes() == (project / "snapshots" / "toy-a.json").read_bytes()
    for args, message in [
        (["snapshot", "--all"], "exactly one of -o FILE and --output-dir DIR"),
        (["snapshot", "-o", out / "b.json"], "-c CATEGORY or pass --all"),
        (["snapshot", "--all", "-o", out / "b.json"], "-o writes one category"),
        (["snapshot", "-c", "nope", "--output-dir", out], "unknown category 'nope'"),
    ]:
        result = ok(invoke(args, cwd=project))
        assert result.code == 2 and len(result.lines) == 1 and message in result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["a.json"]


def test_python_m_snapshot_is_byte_identical_across_hash_seeds(project, tmp_path):
    outputs = []
    for seed in ("1", "2"):
        target = tmp_path / f"seed{seed}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOY_")}
        env.update(PYTHONHASHSEED=seed, PYTHONPATH=str(REPO), TOY_FAST="0")
        proc = subprocess.run(
            [sys.executable, "-m", "routectl", "snapshot", "--all", "--output-dir", str(target)],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        outputs.append(tree_bytes(target))
    assert outputs[0] == outputs[1]
    # The caller's TOY_FAST=0 changed nothing: rows use their own overlay only.
    assert outputs[0] == tree_bytes(project / "snapshots")


def test_parse_snapshot_accepts_what_build_produces(project):
    data = _documents(project)
    snap = parse_snapshot(data, source="memory")
    assert snap.to_json() == data


# --- jsonschema-rs agrees with jsonschema ----------------------------------------------

SCALARS = st.sampled_from(
    [
        None,
        True,
        False,
        0,
        1,
        1.0,
        -1,
        2.5,
        "",
        "x",
        "edge:x",
        "m/kv/tp1/none/c1/q1",
        "not_modelled",
        [],
        {},
        ["a", "a"],
    ]
)
KEYS = st.sampled_from(
    [
        "extra",
        "id",
        "m",
        "kernel",
        "total",
        "code",
        "status",
        "error",
        "schema_version",
        "toy-a:edge:x",
    ]
)


def _mutate(document, data):
    document = copy.deepcopy(document)
    node = document
    for _ in range(data.draw(st.integers(0, 7))):
        children = list(node.values()) if isinstance(node, dict) else node
        containers = [c for c in children if isinstance(c, dict | list)]
        if not containers:
            break
        node = containers[data.draw(st.integers(0, len(containers) - 1))]
    op = data.draw(st.sampled_from(["delete", "add", "replace", "duplicate"]))
    value = data.draw(SCALARS)
    if isinstance(node, dict):
        keys = sorted(node)
        if op == "add" or not keys:
            node[data.draw(KEYS)] = value
        elif op == "delete":
            del node[data.draw(st.sampled_from(keys))]
        else:
            node[data.draw(st.sampled_from(keys))] = value
    elif node and op != "add":
        index = data.draw(st.integers(0, len(node) - 1))
        if op == "delete":
            node.pop(index)
        elif op == "duplicate":
            node.append(copy.deepcopy(node[index]))
        else:
            node[index] = value
    else:
        node.append(value)
    return document


@pytest.fixture(scope="module")
def valid_documents(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("valid"))
    snap = load(root / "snapshots" / "toy-a.json")
    snap["rows"] = [
        r
        for r in snap["rows"]
        if r["id"] in ("edge:refused", "edge:slow", "toy_na/float16/tp1/none/c1/q64")
    ]
    report = {
        "schema_version": 1,
        "ok": False,
        "stale": ["old"],
        "unknown": ["edge:x"],
        "categories": {
            "toy-a": {
                "rows": 3,
                "changed": ["toy-a:edge:slow"],
                "added": [],
                "removed": [],
                "unexpected": ["toy-a:edge:slow"],
                "missing": [],
                "diffs": {
                    "toy-a:edge:slow": [
                        {"path": "route.kernel", "kind": "changed", "old": "A", "new": None}
                    ]
                },
                "unstated": {
                    "toy-a:edge:slow": [
                        {"path": "route.kernel", "kind": "changed", "old": "A", "new": None}
                    ]
                },
                "groups": [
                    {
                        "category": "toy-a",
                        "kind": "changed",
                        "label": "",
                        "signature": [
                            {
                                "path": "route.kernel",
                                "kind": "changed",
                                "old": "A",
                                "new": None,
                                "places": [1, 1],
                            }
                        ],
                        "rows": ["toy-a:edge:slow"],
                        "patterns": ["toy-a:edge:slow"],
                        "breaks": ["kv_never_moves"],
                    }
                ],
                "invariances": [
                    {
                        "invariance": "kv_never_moves",
                        "dimensions": ["kv"],
                        "fields": ["route.kernel"],
                        "statement": "kv never changes route.kernel",
                        "rows": ["toy-a:m/float16/tp1/none/c1/q64", "toy-a:m/fp8/tp1/none/c1/q64"],
                        "change": {
                            "path": "route.kernel",
                            "kind": "changed",
                            "old": "A",
                            "new": "B",
                        },
                        "classes": 1,
                    }
                ],
            }
        },
        "missing_stated": [
            {"entry": 1, "rows": "toy-a:x/**", "field": None, "why": "matches no row"}
        ],
    }
    expected = {
        "schema_version": 2,
        "changes": [
            "toy-a:edge:slow",
            {"id": "edge:x", "reason": "why"},
            {"rows": ["edge:*", "toy-a:**"], "reason": "any"},
            {
                "rows": "toy-a:m/{a,b}/**",
                "fields": {"route.dispatch[*].plan.m": [1, None]},
                "reason": "stated",
            },
        ],
    }
    probe = {
        "schema_version": 1,
        "namespace": "routectl",
        "imports": ["native.reference"],
        "ok": False,
        "kernels": [
            {
                "name": "Qpn2NvFp4LinearKernel",
                "ok": False,
                "abi_getter": "nvfp4_qpn2_compact_scales_version_sm70",
                "abi_revision": None,
                "ops": [
                    {
                        "op": "nvfp4_qpn2_prepare_sm70",
                        "status": "missing",
                        "schema": None,
                        "expected": None,
                        "found": None,
                    }
                ],
            },
            {
                "name": "awq_moe.qpn_m1",
                "ok": True,
                "abi_getter": None,
                "abi_revision": None,
                "ops": [
                    {
                        "op": "awq_moe_qpn_m1_sm70_out",
                        "status": "present",
                        "schema": "schema match",
                        "expected": None,
                        "found": None,
                    }
                ],
            },
        ],
    }
    verdict = {
        "name": "lane.qpn_m1",
        "ok": False,
        "code": "not_admitted",
        "message": "QPN M1 not admitted at load (opt-in)",
        "not_needed": False,
    }
    observed = {
        "schema_version": 1,
        "routectl": "0.1.0",
        "project": "routectl-sm70",
        "target": {"category": "sm70-awq-moe", "row": None, "model": None},
        "workload": {
            "tp": 4,
            "pp": 1,
            "spec_method": "none",
            "spec_tokens": 0,
            "selector_top_k": 0,
            "max_num_seqs": 8,
            "max_num_batched_tokens": 8192,
            "dbo": False,
            "ubatch": 0,
            "kv_dtype": "float16",
            "model": {
                "architectures": ["A"],
                "dtype": None,
                "hidden_size": 2560,
                "num_attention_heads": None,
                "num_key_value_heads": None,
                "head_dim": None,
                "quantization": None,
                "language_model_only": None,
            },
            "batch_invariant": False,
            "reduced_precision_reduction": None,
            "fp16_accumulation": False,
        },
        "capability": 70,
        "policy_hash": "0" * 64,
        "native": {"name": "engine", "ops": ["a"], "abi": [{"getter": "g", "revision": None}]},
        "rank": 0,
        "entries": [
            {
                "layer": "model.layers.0.mlp.experts",
                "m": 1,
                "captured": True,
                "op": "a",
                "plan": {"m": 1, "metadata": "3-byte"},
                "count": 2,
            }
        ],
    }
    startup = {
        "schema_version": 1,
        "project": "routectl-sm70",
        "hardware": {"capability": 70},
        "engine": {
            "tp": 4,
            "pp": 1,
            "spec_method": "none",
            "spec_tokens": 0,
            "selector_top_k": 0,
            "max_num_seqs": 1,
            "max_num_batched_tokens": 8192,
            "dbo": False,
            "ubatch": 0,
            "kv_dtype": "float16",
            "model": None,
            "batch_invariant": False,
            "reduced_precision_reduction": None,
            "fp16_accumulation": False,
        },
        "policy": {
            "hash": "0" * 64,
            "values": [
                {"key": "sm70_awq_moe.qpn_m1", "value": False, "source": "default"},
                {"key": "disabled_kernels", "value": ["X"], "source": "alias:VAR"},
            ],
            "warnings": ["w"],
            "ignored": [{"variable": "VAR", "key": "k"}],
        },
        "token_classes": [
            {"name": "1", "low": 1, "high": 1, "samples": [1]},
            {"name": ">=128", "low": 128, "high": None, "samples": []},
        ],
        "layers": [
            {
                "name": "model.layers.0.mlp.experts",
                "family": "sm70-awq-moe",
                "kernel": "TurboMindAwqMoE",
                "status": None,
                "capability": 70,
                "candidates": [{**verdict, "name": "TurboMindAwqMoE", "stage": "ops"}],
                "fallbacks": [
                    {
                        "field": "sm70_awq_moe.compact_metadata",
                        "requested": True,
                        "effective": False,
                        "reason": "no compact prepare op",
                    }
                ],
                "flags": {"qpn_m1": False},
                "prepared_layout": "4-byte",
                "bytes": {"tensors": {"w13_weights": 1}, "total": 1, "scratch": {}},
                "namespace": {
                    "name": "engine",
                    "missing": ["awq_sm70_prepare_compact"],
                    "abi": [{"getter": "g", "revision": None}],
                },
                "prepare": [{"op": "awq_sm70_prepare", "plan": {"experts": 512, "k": 2560}}],
                "classes": [
                    {
                        "name": "1",
                        "skipped": None,
                        "samples": [
                            {
                                "m": 1,
                                "stages": ["lane.legacy_single_token"],
                                "rejected": [verdict],
                                "ops": [{"op": "awq_moe_single_token_sm70_out", "plan": {"m": 1}}],
                                "error": None,
                            }
                        ],
                    },
                    {"name": ">=128", "skipped": "above the token budget", "samples": []},
                ],
                "replay_matches_load": True,
            }
        ],
        "profile": {
            "source": "profile.json",
            "requirements": [
                {
                    "pattern": "model.layers.*",
                    "layer": "model.layers.0.mlp.experts",
                    "required": "TurboMindAwqMoE",
                    "selected": "TurboMindAwqMoE",
                    "ok": True,
                }
            ],
            "mismatches": [],
        },
    }
    return {
        "snapshot": snap,
        "report": report,
        "expected-changes": expected,
        "probe": probe,
        "startup-report": startup,
        "observed": observed,
        "profile": {"schema_version": 1, "routes": {"model.layers.*": ["K", "no fallback"]}},
        "coverage": _coverage_document(),
    }


def _coverage_document() -> dict:
    figures = {
        "declared": 2,
        "reached": 1,
        "unreachable": 0,
        "recorded_only": 0,
        "uncovered": 1,
        "undeclared": 0,
        "stale": 0,
    }
    site = {
        "site": "reason:K:k_off",
        "kind": "reason",
        "subject": "K",
        "code": "k_off",
        "state": "reached",
        "row": "edge:refused",
        "reason": None,
        "test": None,
    }
    return {
        "schema_version": 1,
        "ok": False,
        "percent": 50.0,
        "totals": figures,
        "categories": [
            {
                "name": "toy-a",
                "declares": True,
                "rows": 3,
                **figures,
                "by_kind": {"reason": {"declared": 1, "reached": 1}},
                "sites": [
                    site,
                    {
                        **site,
                        "site": "chosen:K",
                        "kind": "chosen",
                        "code": None,
                        "state": "uncovered",
                        "row": None,
                    },
                ],
            }
        ],
    }


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_jsonschema_rs_agrees_with_jsonschema(name, valid_documents):
    loaded = load_schema(name)
    assert loaded.fast.is_valid(valid_documents[name]) is True

    @settings(max_examples=150, deadline=None, derandomize=True)
    @given(st.data())
    def agree(data):
        document = _mutate(valid_documents[name], data)
        assert loaded.fast.is_valid(document) == loaded.validator.is_valid(document), document

    agree()
