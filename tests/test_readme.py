"""The README tells the truth: every `console` block's commands run (in a copy of the
project, through this checkout's routectl) and print exactly what the README shows, after
normalising only what legitimately varies (the project's path). The pre-commit snippet
matches the hook manifest."""

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
# Where the README's examples pretend the clone lives.
SHOWN_ROOT = "~/routectl"


def console_blocks() -> list[str]:
    return re.findall(r"```console\n(.*?)```", README, flags=re.S)


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
    return root


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
    return proc.stdout.replace(str(root), SHOWN_ROOT)


def test_every_shown_output_is_what_the_command_prints(tmp_path):
    blocks = console_blocks()
    assert len(blocks) >= 2  # the quick start's passing and failing checks, list, explain
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
        b for b in re.findall(r"```yaml\n(.*?)```", README, flags=re.S) if "routectl-check" in b
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
