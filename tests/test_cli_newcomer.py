"""What a new user meets first: --version, help without `error:`, one-line summaries, `list`
options, `snapshot -o -`, refused missing folders, did-you-mean hints, `explain`'s policy
scope and numbers, the `native probe` hint and shell completion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.contract_literals import FIELD_VARIABLES
from tests.fixtures.toy import invoke, load, make_project, ok, tree_bytes

ROOT = Path(__file__).resolve().parents[1]
# The longest policy key the contracts name (the families' literals, tests/families/).
WIDEST_KEY = max(len(key) for key in FIELD_VARIABLES)


def test_version():
    result = ok(invoke(["--version"], cwd=ROOT))
    assert (result.code, result.stdout) == (0, "routectl 0.1.0\n")


def test_no_command_prints_help_without_error():
    for args, usage in [
        ([], "Usage: routectl [OPTIONS] COMMAND [ARGS]..."),
        (["native"], "Usage: routectl native [OPTIONS] COMMAND [ARGS]..."),
    ]:
        result = ok(invoke(args, cwd=ROOT))
        assert result.stderr.splitlines()[0] == usage
        assert "error:" not in result.stderr and "Commands:" in result.stderr


def test_help_summaries_are_whole_sentences():
    text = ok(invoke(["--help"], cwd=ROOT)).stdout
    commands = text.split("Commands:\n", 1)[1].splitlines()
    assert commands == [
        "  check     Replay every row and compare it with the retained snapshots.",
        "  config    Print a resolved policy: values, sources, warnings, hash.",
        "  coverage  Report the decision sites the rows reach.",
        "  diff      Compare the working tree's rows with another git ref's.",
        "  explain   Show why one row routes where it does.",
        "  list      List the categories, their row counts and descriptions.",
        "  matrix    Print each category as a grid of kernels, with a legend.",
        "  native    Native operator contracts.",
        "  parity    Join observation records of real runs with their snapshot rows.",
        "  report    Write the route matrices as one self-contained HTML page.",
        "  snapshot  Replay categories and write their snapshots.",
    ]
    probe = ok(invoke(["native", "--help"], cwd=ROOT)).stdout
    assert probe.split("Commands:\n", 1)[1] == (
        "  probe  Check a torch.ops namespace against the op catalogue.\n"
    )


def test_misspelled_command_category_and_row_id_suggest_the_closest(tmp_path):
    project = make_project(tmp_path)
    cases = [
        (
            ["chekc"],
            "error: no such command 'chekc'; did you mean check? (commands: check, "
            "config, coverage, diff, explain, list, matrix, native, parity, report, snapshot)",
        ),
        (
            ["native", "prob"],
            "error: no such command 'prob'; did you mean probe? (commands: probe)",
        ),
        (
            ["list", "-c", "toy-bb"],
            "error: unknown category 'toy-bb'; did you mean toy-b? (known: toy-a, toy-b)",
        ),
        (
            ["explain", "toy-a:edge:slwo"],
            "error: unknown row id 'edge:slwo' in category toy-a; did you mean edge:slow?",
        ),
        (
            ["explain", "tyo-a:edge:slow"],
            "error: unknown category 'tyo-a' in "
            "'tyo-a:edge:slow'; did you mean toy-a? "
            "(known: toy-a, toy-b)",
        ),
    ]
    for args, line in cases:
        result = ok(invoke(args, cwd=project))
        assert (result.code, result.stderr.splitlines()) == (2, [line])
    real = ok(invoke(["explain", "edge:native_mising"], cwd=ROOT))
    assert real.code == 2 and real.stderr.startswith(
        "error: unknown row id 'edge:native_mising': no category has it; did you mean "
        "edge:native_missing or "
    )


def test_list_category_json_and_descriptions(tmp_path):
    project = make_project(tmp_path)
    document = json.loads(
        ok(invoke(["list", "-c", "toy-b", "--format", "json"], cwd=project)).stdout
    )
    assert document == {
        "schema_version": 1,
        "categories": [
            {
                "name": "toy-b",
                "description": None,
                "rows": 11,
                "matrix_rows": 9,
                "probes": ["refused", "slow"],
            }
        ],
    }
    text = ok(invoke(["list", "-c", "sm75-linear"], cwd=ROOT)).stdout
    assert text == (
        "sm75-linear  457 rows (432 + 25 probes)  Turing QPN2 NVFP4 and QPN8 FP8 linears\n"
    )


def test_snapshot_to_stdout_and_missing_folders_refused(tmp_path):
    project = make_project(tmp_path)
    result = ok(invoke(["snapshot", "-c", "toy-a", "-o", "-"], cwd=project))
    assert result.code == 0
    assert json.loads(result.stdout) == load(project / "snapshots" / "toy-a.json")
    assert not (project / "-").exists()
    before = tree_bytes(project)
    missing = project / "no-such-folder"
    for args, option in [
        (["snapshot", "-c", "toy-a", "-o", missing / "a.json"], "'-o' / '--output'"),
        (["snapshot", "--all", "--output-dir", missing / "deeper"], "'--output-dir'"),
        (["check", "--report", missing / "report.json"], "'--report'"),
        (["check", "--write-expected", missing / "expected.json"], "'--write-expected'"),
    ]:
        result = ok(invoke(args, cwd=project))
        assert (result.code, result.stderr.splitlines()) == (
            2,
            [f"error: Invalid value for {option}: folder {missing} does not exist"],
        )
    assert tree_bytes(project) == before


def test_explain_shows_the_family_sections_and_formats_bytes():
    text = ok(invoke(["explain", "sm70-awq-moe:edge:qpn_m1_on"], cwd=ROOT)).stdout
    lines = text.splitlines()
    assert (
        "policy (value, source; sections sm70_turbomind, sm70_awq_moe and engine-wide; "
        "--all-policy shows every section):"
    ) in lines
    assert not any(line.startswith("  sm70_nvfp4.") for line in lines)
    assert '  linear_backend                     = "auto"  (default)' in lines
    assert "bytes: total 373,555,200" in lines
    assert "  w13 metadata: 39,321,600" in lines and "  tensor w2_weights: 104,857,600" in lines
    every = ok(
        invoke(["explain", "sm70-awq-moe:edge:qpn_m1_on", "--all-policy"], cwd=ROOT)
    ).stdout.splitlines()
    assert "policy (value, source; every section):" in every
    # Every section: the longest key of any section sets the column.
    assert "  " + "sm70_nvfp4.qpn2".ljust(WIDEST_KEY) + " = false  (default)" in every


def test_explain_says_why_there_is_no_dispatch():
    fails_closed = "the layer fails closed at load: nothing is prepared or dispatched"
    not_dispatched = "MoeWNA16 makes no call to a catalogued native op at the replayed token counts"
    cases = {
        "sm70-awq-linear:edge:native_missing": f"dispatch: none ({fails_closed})",
        "sm70-awq-moe:edge:moe_disable": f"dispatch: none ({not_dispatched})",
    }
    for row_id, line in cases.items():
        assert line in ok(invoke(["explain", row_id], cwd=ROOT)).stdout.splitlines()


def test_config_and_explain_share_one_policy_json_shape():
    config = json.loads(ok(invoke(["config", "--format", "json"], cwd=ROOT)).stdout)["policy"]
    explain = json.loads(
        ok(
            invoke(
                [
                    "explain",
                    "sm70-awq-linear:edge:native_missing",
                    "--format",
                    "json",
                    "--all-policy",
                ],
                cwd=ROOT,
            )
        ).stdout
    )["policy"]
    assert set(config) == set(explain) == {"values", "sections", "warnings", "ignored"}
    assert config["values"]["sm70_awq.enabled"] == {"value": True, "source": "default"}
    assert explain["values"]["sm70_awq.enabled"] == {"value": True, "source": "default"}


def test_native_probe_without_an_extension_says_how_to_point_it_at_one():
    result = ok(invoke(["native", "probe", "--namespace", "no_such_namespace"], cwd=ROOT))
    assert result.code == 1
    assert result.stderr.splitlines() == [
        "note: no native operators were found in torch.ops.no_such_namespace: import the "
        "engine's extension with --import MODULE and name its op namespace with --namespace "
        "NAME (e.g. --namespace routectl --import native.reference)"
    ]


def _complete(words: str, cword: int) -> list[str]:
    """What bash's completion function receives, through click's own protocol."""
    env = {
        **os.environ,
        "_ROUTECTL_COMPLETE": "bash_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(cword),
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "routectl"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_shell_completion_of_categories_and_row_ids():
    assert _complete("routectl check -c sm70-aw", 3) == [
        "plain,sm70-awq-linear",
        "plain,sm70-awq-moe",
    ]
    assert _complete("routectl explain sm70-awq-linear:edge:native_m", 2) == [
        "plain,sm70-awq-linear:edge:native_missing"
    ]
    assert _complete("routectl explain -c sm75-linear edge:qpn8_zero", 4) == [
        "plain,edge:qpn8_zero_n",
        "plain,edge:qpn8_zero_k",
    ]
