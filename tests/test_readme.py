"""The README and the docs tell the truth: every `console` block's commands, in README.md and
in docs/, run (in a copy of the project, through this checkout's routectl) and print exactly
what the page shows, counts included, after normalising only what legitimately varies (the
project's path and the copy's parent commit hash). The pre-commit snippet matches the hook
manifest, and the README stays short enough to read in ten minutes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from policies.variables import VARIABLE_PREFIX

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# The pages whose transcripts run: the README first, then the docs in path order.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
DOCS_TEXT = "\n".join(page.read_text() for page in PAGES)
# Where the README's examples pretend the clone lives, and the parent commit they show.
SHOWN_ROOT = "~/routectl"
SHOWN_PARENT = "6d68cf28c393"
README_MAX_LINES = 450


def console_blocks() -> list[str]:
    return [
        block
        for page in PAGES
        for block in re.findall(r"```console\n(.*?)```", page.read_text(), flags=re.S)
    ]


def sessions(block: str) -> list[tuple[str, str]]:
    """(command, expected output) for each `$ ` line of a block."""
    out: list[tuple[str, str]] = []
    for line in block.splitlines(keepends=True):
        if line.startswith("$ "):
            out.append((line[2:].rstrip("\n"), ""))
        else:
            command, shown = out[-1]
            out[-1] = (command, shown + line)
    return out


def project_copy(tmp_path: Path) -> Path:
    root = tmp_path / "routectl"
    root.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, root / name)
    for folder in ("routectl", "policies", "native", "snapshots"):
        shutil.copytree(
            ROOT / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__", "*.json.new")
        )
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(root)]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "copy"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    # A second commit, a pure refactor (a comment, no route moves), for `diff HEAD~1`.
    variables = root / "policies" / "variables.py"
    variables.write_text(variables.read_text() + "# (a comment: a refactor moves no route)\n")
    for args in (["commit", "-qam", "refactor"],):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return root


def parent_commit(root: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD~1"], check=True, capture_output=True, text=True
    ).stdout.strip()


def run_shown(command: str, root: Path) -> str:
    # `routectl` is the copy's own code, as an installed entry point would run it.
    if command.startswith("routectl"):
        command = f"{sys.executable} -m " + command
    env = {k: v for k, v in os.environ.items() if not k.startswith(VARIABLE_PREFIX)}
    env.update({"PYTHONPATH": str(root), "NO_COLOR": "1"})
    env.pop("CI", None)
    env.pop("COLUMNS", None)  # the README shows the views as a pipe gets them: 100 columns
    proc = subprocess.run(
        ["bash", "-c", command],
        cwd=root,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=900,
    )
    parent = parent_commit(root)
    return (
        proc.stdout.replace(str(root), SHOWN_ROOT)
        .replace(parent, SHOWN_PARENT)
        .replace(parent[:12], SHOWN_PARENT)
    )


def test_every_shown_output_is_what_the_command_prints(tmp_path):
    blocks = console_blocks()
    # The quick start's passing and failing checks, list, explain; diff against the parent
    # and the native probe (docs/commands.md).
    assert len(blocks) >= 4
    assert any("$ routectl diff --baseline-ref HEAD~1\n" in block for block in blocks)
    root = project_copy(tmp_path)
    mismatches = []
    for block in blocks:
        for command, shown in sessions(block):
            printed = run_shown(command, root)
            if printed != shown:
                mismatches.append((command, shown, printed))
    assert mismatches == []


def test_the_pre_commit_snippet_is_the_manifest_and_names_no_missing_tag():
    manifest = (ROOT / ".pre-commit-hooks.yaml").read_text()
    (snippet,) = [
        b for b in re.findall(r"```yaml\n(.*?)```", DOCS_TEXT, flags=re.S) if "routectl-check" in b
    ]
    assert "rev:" not in snippet and "repo: local" in snippet
    keys = ("id", "name", "entry", "language", "pass_filenames", "always_run", "require_serial")
    for key in keys:
        (value,) = re.findall(rf"^-? *{key}: (.*)$", manifest, flags=re.M)
        assert re.search(rf"^ +-? *{key}: {re.escape(value)}$", snippet, flags=re.M), key
    # The manifest says to install routectl the way the README's main job does.
    assert "pip install torch==2.13.0 && pip install .`" in manifest
    assert "pip install torch==2.13.0 && pip install . && routectl check" in README


def test_the_example_workflow_installs_the_cpu_torch():
    workflow = (ROOT / "examples" / "github-actions-routectl.yml").read_text()
    installs = [
        line.strip() for line in workflow.splitlines() if line.strip().startswith("pip install")
    ]
    assert installs == [
        "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu",
        "pip install .",
    ]
    recipe = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
    assert f"```sh\n{recipe}\n```" in README


def test_the_readme_is_a_ten_minute_read_that_points_to_the_rest():
    lines = README.splitlines()
    assert len(lines) <= README_MAX_LINES, len(lines)
    for section in ("## Quick start", "## Glossary", "## Reviewing a route change"):
        assert section in lines, section
    for page in ("commands", "policy", "library", "discovery", "architecture"):
        assert f"](docs/{page}.md)" in README, page


def test_the_quick_start_says_how_to_get_the_cpu_torch_beside_its_command():
    quick = README.split("## Quick start")[1].split("\n## ")[0]
    command = "```sh\npip install torch==2.13.0 && pip install . && routectl check\n```"
    assert command in quick
    note = quick.split(command)[1].split("\n\n")[1]  # the paragraph right after it
    assert note.startswith("> ") and "CUDA" in note
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in note
