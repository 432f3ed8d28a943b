"""Git plumbing, each call naming its repository (`git -C`) with git's location variables
removed: the repository root, a ref's commit (with the hint a shallow clone needs), a file at
a commit, and detached worktrees added and removed."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from routectl.errors import InputError
from routectl.io.jsonread import shorten
from routectl.runtime import interrupt
from routectl.suggest import did_you_mean

# Set inside git hooks (GIT_INDEX_FILE during a commit, GIT_DIR in some hooks): they would
# point our git calls at another index or repository. Every call names its repository (-C).
GIT_LOCATION_VARIABLES = frozenset(
    {
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_COMMON_DIR",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_NAMESPACE",
        "GIT_PREFIX",
    }
)
# The most of a tool's last output line an error quotes.
MAX_TAIL_CHARS = 300


def git_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The caller's environment less git's location variables (set inside git hooks)."""
    return {k: v for k, v in environ.items() if k not in GIT_LOCATION_VARIABLES}


def run_git(
    repo: Path, args: Sequence[str], environ: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    """`git -C repo ARGS`, captured; git missing from PATH is an InputError."""
    executable = shutil.which("git", path=environ.get("PATH", os.defpath))
    if executable is None:
        raise InputError(
            "git is not on PATH: routectl diff --baseline-ref needs git "
            "(--baseline PATH takes pre-built snapshots instead)"
        )
    # Git installs handlers of its own for SIGINT, SIGTERM and SIGHUP even where it inherited
    # them ignored: while this process ignores one, git runs in a process group of its own.
    return subprocess.run(
        [executable, "-C", str(repo), *args],
        env=git_environ(environ),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        process_group=interrupt.child_process_group(),
    )


def git_error(message: str, done: subprocess.CompletedProcess[str]) -> InputError:
    """Ours and git's first stderr line, as one line (the error line stays one line)."""
    detail = next((line.strip() for line in done.stderr.splitlines() if line.strip()), "")
    if len(detail) > MAX_TAIL_CHARS:
        detail = detail[:MAX_TAIL_CHARS] + "..."
    return InputError(f"{message} (git: {detail})" if detail else message)


def repository_root(start: Path, environ: Mapping[str, str]) -> Path:
    done = run_git(start, ["rev-parse", "--show-toplevel"], environ)
    if done.returncode != 0 or not done.stdout.strip():
        raise git_error(
            f"not inside a git repository: {start} (--baseline-ref needs the "
            f"project's git history; --baseline PATH takes pre-built snapshots)",
            done,
        )
    return Path(done.stdout.strip()).resolve()


def fetch_hint(ref: str) -> str:
    """How a shallow clone gets `ref`: the command to paste, the ref shell-quoted."""
    remote, slash, branch = ref.partition("/")
    wanted = branch if slash and remote == "origin" and branch else ref
    fetch = f"git fetch origin {shlex.quote(wanted)}"
    return (
        f"a shallow clone (CI checkouts are) needs the ref fetched: {fetch}, or full "
        f"history (git fetch --unshallow; actions/checkout with fetch-depth: 0)"
    )


def resolve_commit(repo: Path, ref: str, environ: Mapping[str, str]) -> str:
    """The commit `ref` names; an unknown ref is an InputError, with the hint to fetch it
    when the clone is shallow (a full clone has nothing more to fetch for it)."""
    done = run_git(
        repo, ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"], environ
    )
    commit = done.stdout.strip()
    if done.returncode == 0 and commit:
        return commit
    shallow = run_git(repo, ["rev-parse", "--is-shallow-repository"], environ)
    hint = (
        f" (this clone is shallow): {fetch_hint(ref)}" if (shallow.stdout.strip() == "true") else ""
    )
    refs = run_git(
        repo, ["for-each-ref", "--format=%(refname:short)", "refs/heads", "refs/tags"], environ
    )
    close = did_you_mean(ref, refs.stdout.split()) if refs.returncode == 0 else ""
    raise git_error(f"unknown git ref {shorten(ref)} in {repo}{close}{hint}", done)


def locate_ref(root: Path, ref: str, environ: Mapping[str, str]) -> tuple[Path, Path, str]:
    """Where the project at `root` (resolved) stands in its repository and what `ref` names
    there: (repository root, project path relative to it, commit). The baseline and its
    cache key both start from these, with the same InputErrors."""
    repository = repository_root(root, environ)
    try:
        project_path = root.relative_to(repository)
    except ValueError:
        raise InputError(f"the project {root} is not inside its repository {repository}") from None
    return repository, project_path, resolve_commit(repository, ref, environ)


def file_at(repo: Path, commit: str, path: str, environ: Mapping[str, str]) -> str | None:
    """The text of `path` at `commit`, None when it does not exist there."""
    done = run_git(repo, ["cat-file", "blob", f"{commit}:{path}"], environ)
    return done.stdout if done.returncode == 0 else None


def add_worktree(
    repo: Path, worktree: Path, commit: str, environ: Mapping[str, str], *, what: str
) -> None:
    """A detached worktree of `commit` at `worktree` (`what` names it in an error)."""
    # No hooks: a throwaway tree is no checkout the user's post-checkout hook asked for.
    done = run_git(
        repo,
        [
            "-c",
            f"core.hooksPath={os.devnull}",
            "worktree",
            "add",
            "--detach",
            "--quiet",
            str(worktree),
            commit,
        ],
        environ,
    )
    if done.returncode != 0:
        raise git_error(f"cannot check out {what} into a temporary worktree", done)


def remove_worktree(repo: Path, worktree: Path, environ: Mapping[str, str]) -> None:
    """Remove `worktree`, also one left locked or half made by an interrupted add."""
    # Twice forced: also a worktree left locked by an interrupted `worktree add`.
    done = run_git(repo, ["worktree", "remove", "--force", "--force", str(worktree)], environ)
    if done.returncode != 0:
        # Never registered, or half made: remove the files, then let git drop the entry
        # (prune only runs here, so a concurrent diff's fresh entry is never raced).
        shutil.rmtree(worktree, ignore_errors=True)
        run_git(repo, ["worktree", "prune"], environ)
