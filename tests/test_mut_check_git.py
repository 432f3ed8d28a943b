"""`routectl.review.git`, called directly on throwaway repositories in tmp_path: what each
plumbing call returns and the one-line InputError each failure becomes.

Pins the contract `routectl diff --baseline-ref` relies on (the module's docstring and
docs/architecture.md): git's location variables never reach git, a missing git is an input
error, git's first stderr line is quoted and shortened, the shallow-clone hint names the
branch to fetch shell-quoted, a ref resolves to its commit (never a tag object), a worktree is
added detached without running the user's hooks and removed also when half made. The CLI
tests (test_diff_baseline) cover these through a module-scoped repository, which mutmut's
per-test call map credits to one test only; these run each call on its own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from routectl.errors import InputError
from routectl.review import git as rgit
from tests.project_files import GIT_IDENTITY, commit_all, git, git_environ

# The three signals routectl's cleanup guards (routectl.runtime.interrupt.SIGNALS).
ROOT = Path(__file__).resolve().parents[1]
GUARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with one commit: `sub/file.txt` and a branch `feature-branch`."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "sub").mkdir()
    (root / "sub" / "file.txt").write_text("first\n")
    commit_all(root, "first")
    git(root, "branch", "feature-branch")
    return root.resolve()


@pytest.fixture
def default_signals() -> Iterator[None]:
    """The guarded signals at their default disposition, restored after."""
    saved = {s: signal.signal(s, signal.SIG_DFL) for s in GUARDED}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


# --- environment and running git ----------------------------------------------------------


def test_git_environ_drops_exactly_the_location_variables() -> None:
    # The variables git documents as relocating the repository, the index or the objects
    # (git(1), "The Git Repository"); set inside hooks, they would redirect our calls.
    location = {
        "GIT_DIR": "a",
        "GIT_WORK_TREE": "b",
        "GIT_INDEX_FILE": "c",
        "GIT_COMMON_DIR": "d",
        "GIT_OBJECT_DIRECTORY": "e",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": "f",
        "GIT_NAMESPACE": "g",
        "GIT_PREFIX": "h",
    }
    kept = {"PATH": "/bin", "GIT_CONFIG_GLOBAL": "/x", "HOME": "/h", "GIT_DIRX": "kept"}
    assert rgit.git_environ({**location, **kept}) == kept
    assert rgit.GIT_LOCATION_VARIABLES == frozenset(location)


def test_a_hooks_git_dir_does_not_redirect_the_call(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    environ = {**git_environ(), "GIT_DIR": str(other / ".git"), "GIT_WORK_TREE": str(other)}
    assert rgit.repository_root(repo / "sub", environ) == repo


def test_run_git_captures_text_and_the_exit_status(repo: Path) -> None:
    done = rgit.run_git(repo, ["rev-parse", "--abbrev-ref", "HEAD"], git_environ())
    assert (done.returncode, done.stdout, done.stderr) == (0, "main\n", "")
    bad = rgit.run_git(repo, ["rev-parse", "--verify", "nope"], git_environ())
    assert bad.returncode != 0 and bad.stdout == "" and bad.stderr.startswith("fatal: ")


def test_git_missing_from_path_is_an_input_error(repo: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    with pytest.raises(InputError) as caught:
        rgit.run_git(repo, ["status"], {**git_environ(), "PATH": str(empty)})
    assert str(caught.value) == (
        "git is not on PATH: routectl diff --baseline-ref needs git "
        "(--baseline PATH takes pre-built snapshots instead)"
    )


def process_group_of_git(repo: Path) -> int:
    # A shell alias runs a child of git that prints its process group.
    show = f"!{sys.executable} -c 'import os; print(os.getpgrp())'"
    done = rgit.run_git(repo, ["-c", f"alias.pg={show}", "pg"], git_environ())
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


@pytest.mark.usefixtures("default_signals")
def test_git_shares_our_group_while_no_guarded_signal_is_ignored(repo: Path) -> None:
    assert process_group_of_git(repo) == os.getpgrp()


@pytest.mark.usefixtures("default_signals")
def test_git_gets_a_group_of_its_own_while_sigint_is_ignored(repo: Path) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # restored by the fixture
    assert process_group_of_git(repo) != os.getpgrp()


def test_the_mappings_git_configuration_reaches_git(repo: Path) -> None:
    # git's environment is the mapping given (less the location variables), not this
    # process's: an alias defined only there works.
    environ = {
        **git_environ(),
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "alias.where",
        "GIT_CONFIG_VALUE_0": "rev-parse --abbrev-ref HEAD",
    }
    assert rgit.run_git(repo, ["where"], environ).stdout == "main\n"


# Runs run_git in a child process whose own PATH has no git and whose stdin holds text:
# what the child prints is git's stdout (or the InputError).
CHILD = """
import json
import sys
from pathlib import Path
from routectl.errors import InputError
from routectl.review.git import run_git
environ = json.loads(sys.argv[2])
try:
    print(run_git(Path(sys.argv[1]), sys.argv[3:], environ).stdout, end="")
except InputError as exc:
    print("InputError:", exc)
"""


def in_child(repo: Path, environ: dict[str, str], args: list[str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(repo), json.dumps(environ), *args],
        env={**os.environ, "PATH": str(repo / "no-git-here")},
        cwd=ROOT,
        input="text on stdin\n",
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_git_is_found_on_the_default_path_not_this_processs(repo: Path) -> None:
    # A mapping without PATH means os.defpath (git is in /usr/bin here), whatever this
    # process's own PATH says.
    environ = {k: v for k, v in git_environ().items() if k != "PATH"}
    assert in_child(repo, environ, ["rev-parse", "--abbrev-ref", "HEAD"]) == "main\n"


def test_git_reads_no_stdin(repo: Path) -> None:
    # stdin is /dev/null: a git that reads it (here `cat` in an alias) gets nothing of ours.
    assert in_child(repo, git_environ(), ["-c", "alias.eat=!cat", "eat"]) == ""


# --- error lines ----------------------------------------------------------------------------


def completed(stderr: str) -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(["git"], 1, "", stderr)


def test_git_error_quotes_the_first_non_blank_stderr_line_stripped() -> None:
    error = rgit.git_error("ours", completed("\n   \n  fatal: first  \nsecond\n"))
    assert str(error) == "ours (git: fatal: first)"


def test_git_error_without_stderr_is_our_message_alone() -> None:
    assert str(rgit.git_error("ours", completed(" \n\t\n"))) == "ours"


def test_git_error_shortens_past_the_limit_only() -> None:
    at_limit = "x" * rgit.MAX_TAIL_CHARS
    assert str(rgit.git_error("m", completed(at_limit))) == f"m (git: {at_limit})"
    over = at_limit + "yz"
    assert str(rgit.git_error("m", completed(over))) == f"m (git: {at_limit}...)"
    assert rgit.MAX_TAIL_CHARS == 300


# --- repository, refs, files ----------------------------------------------------------------


def test_repository_root_from_a_subfolder_is_resolved(repo: Path) -> None:
    assert rgit.repository_root(repo / "sub", git_environ()) == repo


def test_outside_a_repository_is_an_input_error_with_gits_words(tmp_path: Path) -> None:
    alone = tmp_path / "alone"
    alone.mkdir()
    environ = {**git_environ(), "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    with pytest.raises(InputError) as caught:
        rgit.repository_root(alone, environ)
    assert str(caught.value).startswith(
        f"not inside a git repository: {alone} (--baseline-ref needs the project's git "
        "history; --baseline PATH takes pre-built snapshots) (git: fatal: not a git repository"
    )


@pytest.mark.parametrize(
    "ref,fetched",
    [
        ("origin/feature", "feature"),  # a remote-tracking ref: fetch its branch
        ("origin/a/b", "a/b"),
        ("upstream/feature", "upstream/feature"),  # another remote: the ref as given
        ("origin/", "origin/"),  # no branch after the slash
        ("feature", "feature"),
        ("x;rm -rf ~", "'x;rm -rf ~'"),  # shell-quoted, ready to paste
        ("origin/it's", "'it'\"'\"'s'"),
    ],
)
def test_fetch_hint_names_the_branch_to_fetch(ref: str, fetched: str) -> None:
    assert rgit.fetch_hint(ref) == (
        f"a shallow clone (CI checkouts are) needs the ref fetched: git fetch origin "
        f"{fetched}, or full history (git fetch --unshallow; actions/checkout with "
        f"fetch-depth: 0)"
    )


def test_resolve_commit_of_a_branch_and_of_an_annotated_tag(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, *GIT_IDENTITY, "tag", "-a", "-m", "annotated", "v1")
    # The tag object differs from the commit; ^{commit} peels it.
    assert git(repo, "rev-parse", "v1").strip() != head
    assert rgit.resolve_commit(repo, "v1", git_environ()) == head
    assert rgit.resolve_commit(repo, "feature-branch", git_environ()) == head


def test_a_ref_naming_no_commit_is_unknown(repo: Path) -> None:
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    with pytest.raises(InputError) as caught:
        rgit.resolve_commit(repo, tree, git_environ())
    # git's own reason follows ours.
    assert str(caught.value).startswith(f"unknown git ref {tree!r} in {repo} (git: error: ")


def test_an_option_shaped_ref_is_a_ref_not_an_option(repo: Path) -> None:
    # `--end-of-options`: "--all" names no commit; it lists nothing and is no flag.
    with pytest.raises(InputError) as caught:
        rgit.resolve_commit(repo, "--all", git_environ())
    assert str(caught.value) == f"unknown git ref '--all' in {repo}"


def test_an_unknown_ref_in_a_full_clone_suggests_a_close_branch_and_no_fetch(repo: Path) -> None:
    with pytest.raises(InputError) as caught:
        rgit.resolve_commit(repo, "feature-brnch", git_environ())
    # The branch's short name (not `refs/heads/...`), and no fetch hint: a full clone.
    assert str(caught.value) == (
        f"unknown git ref 'feature-brnch' in {repo}; did you mean feature-branch?"
    )


def test_an_unknown_ref_close_to_a_tag_suggests_the_tag(repo: Path) -> None:
    git(repo, "tag", "release-candidate")
    with pytest.raises(InputError) as caught:
        rgit.resolve_commit(repo, "release-candidat", git_environ())
    assert str(caught.value) == (
        f"unknown git ref 'release-candidat' in {repo}; did you mean release-candidate?"
    )


def test_a_ref_whose_name_starts_with_a_dash_resolves(repo: Path) -> None:
    # `git branch` refuses such names but `update-ref` makes one; `--end-of-options` keeps
    # rev-parse from reading it as an option.
    git(repo, "update-ref", "refs/heads/-dash", "HEAD")
    head = git(repo, "rev-parse", "HEAD").strip()
    assert rgit.resolve_commit(repo, "-dash", git_environ()) == head


def test_an_unknown_ref_in_a_shallow_clone_hints_the_fetch(repo: Path, tmp_path: Path) -> None:
    (repo / "sub" / "file.txt").write_text("second\n")
    commit_all(repo, "second")
    clone = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(clone))
    with pytest.raises(InputError) as caught:
        rgit.resolve_commit(clone, "origin/feature-x", git_environ())
    assert str(caught.value) == (
        f"unknown git ref 'origin/feature-x' in {clone} (this clone is shallow): "
        + rgit.fetch_hint("origin/feature-x")
    )


def test_locate_ref_gives_the_repository_the_project_path_and_the_commit(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    assert rgit.locate_ref(repo / "sub", "main", git_environ()) == (repo, Path("sub"), head)
    assert rgit.locate_ref(repo, "main", git_environ()) == (repo, Path("."), head)


def test_a_project_outside_the_repositorys_work_tree(tmp_path: Path) -> None:
    # core.worktree puts the work tree elsewhere: git's top level is not above the project.
    project = tmp_path / "project"
    elsewhere = tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    git(project, "init", "-q")
    git(project, "config", "core.worktree", str(elsewhere))
    with pytest.raises(InputError) as caught:
        rgit.locate_ref(project.resolve(), "HEAD", git_environ())
    assert str(caught.value) == (
        f"the project {project.resolve()} is not inside its repository {elsewhere.resolve()}"
    )


def test_file_at_a_commit_or_none(repo: Path) -> None:
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "sub" / "file.txt").write_text("second\n")
    commit_all(repo, "second")
    assert rgit.file_at(repo, first, "sub/file.txt", git_environ()) == "first\n"
    assert rgit.file_at(repo, "HEAD", "sub/file.txt", git_environ()) == "second\n"
    assert rgit.file_at(repo, first, "sub/missing.txt", git_environ()) is None


# --- worktrees -------------------------------------------------------------------------------


def worktrees(repo: Path) -> list[str]:
    return [
        line.removeprefix("worktree ")
        for line in git(repo, "worktree", "list", "--porcelain").splitlines()
        if line.startswith("worktree ")
    ]


def test_a_worktree_is_detached_at_the_commit_and_runs_no_hook(repo: Path, tmp_path: Path) -> None:
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "sub" / "file.txt").write_text("second\n")
    commit_all(repo, "second")
    # A post-checkout hook that would leave a mark: the throwaway tree must not run it.
    hook = repo / ".git" / "hooks" / "post-checkout"
    mark = tmp_path / "hook-ran"
    hook.write_text(f"#!/bin/sh\ntouch {mark}\n")
    hook.chmod(0o755)
    tree = tmp_path / "wt"
    rgit.add_worktree(repo, tree, first, git_environ(), what="the ref")
    assert (tree / "sub" / "file.txt").read_text() == "first\n"
    assert git(tree, "rev-parse", "HEAD").strip() == first
    assert git(tree, "rev-parse", "--abbrev-ref", "HEAD").strip() == "HEAD"  # detached
    assert not mark.exists()
    assert str(tree.resolve()) in worktrees(repo)
    rgit.remove_worktree(repo, tree, git_environ())
    assert not tree.exists() and worktrees(repo) == [str(repo)]


def test_a_worktree_that_cannot_be_added_names_what(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        rgit.add_worktree(repo, tmp_path / "wt", "0" * 40, git_environ(), what="REF-X")
    assert str(caught.value).startswith(
        "cannot check out REF-X into a temporary worktree (git: fatal: "
    )
    assert worktrees(repo) == [str(repo)]


def test_removing_a_locked_worktree(repo: Path, tmp_path: Path) -> None:
    tree = tmp_path / "wt"
    rgit.add_worktree(repo, tree, "HEAD", git_environ(), what="x")
    git(repo, "worktree", "lock", str(tree))  # as an interrupted `worktree add` leaves it
    rgit.remove_worktree(repo, tree, git_environ())
    assert not tree.exists() and worktrees(repo) == [str(repo)]


def test_removing_a_half_made_worktree_prunes_its_entry(repo: Path, tmp_path: Path) -> None:
    tree = tmp_path / "wt"
    rgit.add_worktree(repo, tree, "HEAD", git_environ(), what="x")
    (tree / ".git").unlink()  # no longer a worktree git can remove
    rgit.remove_worktree(repo, tree, git_environ())
    assert not tree.exists() and worktrees(repo) == [str(repo)]


def test_removing_a_worktree_never_made(repo: Path, tmp_path: Path) -> None:
    # An interrupt before `worktree add` made anything: nothing to remove, no error.
    rgit.remove_worktree(repo, tmp_path / "never", git_environ())
    assert worktrees(repo) == [str(repo)]


def test_a_clean_removal_prunes_no_other_entry(repo: Path, tmp_path: Path) -> None:
    # Prune runs only after a failed removal: another entry whose folder is gone (a
    # concurrent diff's, say) is left to its owner.
    other = tmp_path / "other"
    rgit.add_worktree(repo, other, "HEAD", git_environ(), what="x")
    shutil.rmtree(other)
    tree = tmp_path / "wt"
    rgit.add_worktree(repo, tree, "HEAD", git_environ(), what="x")
    rgit.remove_worktree(repo, tree, git_environ())
    assert worktrees(repo) == [str(repo), str(other.resolve())]


def test_removing_a_folder_git_never_registered(repo: Path, tmp_path: Path) -> None:
    tree = tmp_path / "wt"
    (tree / "deep").mkdir(parents=True)
    (tree / "deep" / "f").write_text("x")
    rgit.remove_worktree(repo, tree, git_environ())
    assert not tree.exists() and worktrees(repo) == [str(repo)]
