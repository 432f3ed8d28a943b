"""Scratch projects for tests: copying the project's own files into a scratch folder (the
review tests edit one file of the copy and read the review's verdict), and the environment
that runs git on a scratch repository."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What a review of the project reads: its packages, the retained snapshots, its metadata.
REVIEWED = ("routectl", "policies", "native", "snapshots", "pyproject.toml")


def copy_project(root: Path, names: tuple[str, ...] = REVIEWED) -> Path:
    """Copy `names` (folders or files of the project) into `root`, a new folder; caches and
    half-written snapshots (`*.json.new`) stay behind. Returns `root`."""
    root.mkdir()
    for name in names:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(
                source, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.json.new")
            )
        else:
            shutil.copy(source, root / name)
    return root


def git_environ() -> dict[str, str]:
    """What every git run on a scratch repository gets: PATH for git, no user or system git
    configuration (a developer's hooks or signing settings must not reach the tests)."""
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "LC_ALL": "C",
    }


# The author of every commit a test makes in a scratch repository.
GIT_IDENTITY = ("-c", "user.email=tests@routectl.invalid", "-c", "user.name=routectl tests")


def git(repo: Path, *args: str) -> str:
    """Run git in a scratch repository with `git_environ()`; its stdout (a failure fails the
    test, with git's message)."""
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        env=git_environ(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def commit_all(repo: Path, message: str) -> str:
    """Commit everything in the work tree; the new commit's hash."""
    git(repo, "add", "-A")
    git(repo, *GIT_IDENTITY, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()
