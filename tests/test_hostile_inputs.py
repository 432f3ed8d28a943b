"""A corpus of hostile inputs: every JSON reader, the project table, the options and the
commands. Each case asserts the documented exit code, exactly one `error:` line on stderr and
no traceback, and that the retained snapshots are byte for byte what they were.

Most cases run in-process (CliRunner isolation through `invoke`): a non-regular file is
refused before a byte is read, and sizes are capped, so they are safe there. The cases that
prove bounded memory run as real processes under an address-space limit.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.toy import Result, invoke, make_project, tree_bytes

ROOT = Path(__file__).resolve().parents[1]
ROW = "toy_model/float16/tp1/none/c1/q64"
# The address-space limit of the bounded-memory cases: torch and the interpreter fit in it;
# reading /dev/zero or a 10 GiB file whole would not.
MEMORY_LIMIT = 4 * 1024**3
MEGA_STRING = "x" * 1_000_000


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("hostile"))


@pytest.fixture
def project(template: Path, tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(template, root)
    return root


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def retained(project: Path) -> Path:
    return project / "snapshots" / "toy-a.json"


def pyproject(project: Path, table: str) -> None:
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "toyproj"\nversion = "0"\n\n{table}\n'
    )


@dataclass(frozen=True)
class Case:
    """`setup(project)` prepares the input and returns the command line (and environment);
    `message` is a fragment the error line holds."""

    setup: Callable[[Path], list[str] | tuple[list[str], dict[str, str]]]
    code: int
    message: str


def write(
    path_of: Callable[[Path], Path],
    content: bytes | str,
    args: Callable[[Path], list[str]],
    env: dict[str, str] | None = None,
) -> Callable[[Path], list[str] | tuple[list[str], dict[str, str]]]:
    def setup(project: Path) -> list[str] | tuple[list[str], dict[str, str]]:
        path = path_of(project)
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            path.write_bytes(content)
        return (args(project), env) if env is not None else args(project)

    return setup


def fifo(path_of: Callable[[Path], Path], args: Callable[[Path], list[str]]):
    def setup(project: Path) -> list[str]:
        path = path_of(project)
        path.unlink(missing_ok=True)
        os.mkfifo(path)
        return args(project)

    return setup


def symlink(path_of: Callable[[Path], Path], target: str, args: Callable[[Path], list[str]]):
    def setup(project: Path) -> list[str]:
        path = path_of(project)
        path.unlink(missing_ok=True)
        path.symlink_to(target)
        return args(project)

    return setup


def directory(path_of: Callable[[Path], Path], args: Callable[[Path], list[str]]):
    def setup(project: Path) -> list[str]:
        path = path_of(project)
        path.unlink(missing_ok=True)
        path.mkdir()
        return args(project)

    return setup


def plain(args: list[str], env: dict[str, str] | None = None):
    def setup(project: Path) -> list[str] | tuple[list[str], dict[str, str]]:
        return (list(args), env) if env is not None else list(args)

    return setup


def expected_file(project: Path) -> Path:
    return project / "expected.json"


def kernel_file(project: Path) -> Path:
    return project / "kc.json"


def baseline_file(project: Path) -> Path:
    return project / "baseline.json"


def check(_: Path) -> list[str]:
    return ["check"]


def check_expected(project: Path) -> list[str]:
    return ["check", "--expected-changes", str(expected_file(project))]


def diff_expected(project: Path) -> list[str]:
    return [
        "diff",
        "--baseline",
        str(project / "snapshots"),
        "--expected-changes",
        str(expected_file(project)),
    ]


def config_file(project: Path) -> list[str]:
    return ["config", "--kernel-config", f"@{kernel_file(project)}"]


def diff_baseline(project: Path) -> list[str]:
    return ["diff", "--baseline", str(baseline_file(project))]


def with_table(table: str, args: list[str] | None = None):
    def setup(project: Path) -> list[str]:
        pyproject(project, table)
        return list(args or ["config"])

    return setup


def with_module(name: str, source: str, args: list[str] | None = None):
    """The project is module `name` (unique per case: a module imported by one case stays
    imported in this process)."""

    def setup(project: Path) -> list[str]:
        (project / f"{name}.py").write_text(source)
        pyproject(project, f'[tool.routectl]\nproject = "{name}:PROJECT"')
        return list(args or ["config"])

    return setup


def snapshot_with(**changes: object) -> str:
    document = {"schema_version": 1, "category": "toy-a", "basis": "b", "rows": []}
    document.update(changes)
    return json.dumps(document)


BIG_INT = "1" * 5000
NOT_UTF8 = b'{"schema_version": 1, "category": "toy-\xff"}'
CAP_ENV = {"ROUTECTL_MAX_INPUT_BYTES": "500"}

CASES: dict[str, Case] = {
    # --- retained snapshots (check) --------------------------------------------------------
    "snapshot-deep": Case(write(retained, deep(100_000), check), 2, "nested deeper than 64"),
    "snapshot-deep-objects": Case(
        write(retained, '{"a":' * 5000 + "1" + "}" * 5000, check), 2, "nested deeper than 64"
    ),
    "snapshot-big-int": Case(
        write(retained, f'{{"schema_version": {BIG_INT}}}', check),
        2,
        "(5,000 characters) does not fit in 64 bits",
    ),
    "snapshot-int-65-bits": Case(
        write(retained, '{"schema_version": 18446744073709551616}', check),
        2,
        "does not fit in 64 bits",
    ),
    "snapshot-negative-int": Case(
        write(retained, "[-9223372036854775809]", check), 2, "does not fit in 64 bits"
    ),
    "snapshot-infinite-float": Case(
        write(retained, '{"schema_version": 1e400}', check),
        2,
        "'1e400' is out of range for a 64-bit float",
    ),
    "snapshot-not-utf8": Case(write(retained, NOT_UTF8, check), 2, "not UTF-8"),
    "snapshot-bom": Case(write(retained, b"\xef\xbb\xbf{}", check), 2, "byte order mark"),
    "snapshot-empty": Case(write(retained, b"", check), 2, "it is empty"),
    "snapshot-nan": Case(write(retained, '{"schema_version": NaN}', check), 2, "NaN is not JSON"),
    "snapshot-lone-surrogate": Case(write(retained, '{"basis": "\\ud800"}', check), 2, "surrogate"),
    "snapshot-trailing-garbage": Case(write(retained, '{"a": 1} {', check), 2, "is not valid JSON"),
    "snapshot-a-list": Case(write(retained, "[1, 2]", check), 2, "is not of type 'object'"),
    "snapshot-newer-version": Case(
        write(retained, snapshot_with(schema_version=99), check), 2, "newer routectl"
    ),
    "snapshot-huge-row-id": Case(
        write(retained, snapshot_with(rows=[{"id": MEGA_STRING}]), check),
        2,
        "(1,000,000 characters)",
    ),
    "snapshot-huge-category": Case(
        write(retained, snapshot_with(category=MEGA_STRING), check), 2, "toy-a.json"
    ),
    "snapshot-directory": Case(directory(retained, check), 2, "it is a directory"),
    "snapshot-fifo": Case(fifo(retained, check), 2, "a FIFO (named pipe), not a regular file"),
    "snapshot-dev-zero": Case(
        symlink(retained, "/dev/zero", check), 2, "a character device, not a regular file"
    ),
    "snapshot-dangling-link": Case(
        symlink(retained, "/nonexistent/x.json", check), 2, "No such file or directory"
    ),
    "snapshot-over-cap": Case(
        plain(["check"], CAP_ENV),
        2,
        "over the 500-byte limit on input files (set "
        "ROUTECTL_MAX_INPUT_BYTES to a larger number of bytes",
    ),
    "cap-not-a-number": Case(
        plain(["check"], {"ROUTECTL_MAX_INPUT_BYTES": "lots"}),
        2,
        "ROUTECTL_MAX_INPUT_BYTES must be a positive number of bytes, got 'lots'",
    ),
    "cap-zero": Case(
        plain(["list"], {"ROUTECTL_MAX_INPUT_BYTES": "0"}), 2, "must be a positive number"
    ),
    "cap-negative": Case(
        plain(["config"], {"ROUTECTL_MAX_INPUT_BYTES": "-5"}), 2, "must be a positive number"
    ),
    # --- expected changes (check, diff) -----------------------------------------------------
    "expected-deep": Case(
        write(expected_file, deep(5000), check_expected), 2, "nested deeper than 64"
    ),
    # Version 2 files are objects ({"schema_version", "changes"}): the schema names the key.
    "expected-object": Case(
        write(expected_file, '{"id": "x"}', check_expected), 2, "('id' was unexpected)"
    ),
    "expected-huge-id": Case(
        write(expected_file, json.dumps([MEGA_STRING]), check_expected), 2, "(1,000,000 characters)"
    ),
    "expected-unknown-category": Case(
        write(expected_file, json.dumps([f"nope:{ROW}"]), check_expected),
        2,
        "unknown category 'nope'",
    ),
    "expected-twice": Case(
        write(expected_file, json.dumps([f"toy-a:{ROW}", f"toy-a:{ROW}"]), check_expected),
        2,
        "is listed twice",
    ),
    "expected-reason-not-text": Case(
        write(expected_file, json.dumps([{"id": ROW, "reason": 5}]), check_expected),
        2,
        "expected.json",
    ),
    "expected-big-int": Case(
        write(expected_file, f"[{BIG_INT}]", check_expected), 2, "does not fit in 64 bits"
    ),
    "expected-not-utf8": Case(write(expected_file, b'["\xfe"]', check_expected), 2, "not UTF-8"),
    "expected-fifo": Case(fifo(expected_file, check_expected), 2, "not a regular file"),
    "expected-dev-zero": Case(
        symlink(expected_file, "/dev/zero", check_expected), 2, "not a regular file"
    ),
    "expected-missing": Case(
        plain(["check", "--expected-changes", "/nonexistent/e.json"]),
        2,
        "No such file or directory",
    ),
    "expected-diff-deep": Case(
        write(expected_file, deep(5000), diff_expected), 2, "nested deeper than 64"
    ),
    "expected-diff-dev-zero": Case(
        symlink(expected_file, "/dev/zero", diff_expected), 2, "not a regular file"
    ),
    # --- --kernel-config -------------------------------------------------------------------
    "kc-inline-deep": Case(
        plain(["config", "--kernel-config", deep(10_000)]), 2, "nested deeper than 64"
    ),
    "kc-inline-big-int": Case(
        plain(["config", "--kernel-config", f'{{"toy": {{"fast": {BIG_INT}}}}}']),
        2,
        "does not fit in 64 bits",
    ),
    "kc-inline-not-json": Case(
        plain(["config", "--kernel-config", "{toy"]), 2, "kernel config is not valid JSON"
    ),
    "kc-inline-nan": Case(
        plain(["config", "--kernel-config", '{"toy": NaN}']), 2, "NaN is not JSON"
    ),
    "kc-inline-infinite": Case(
        plain(["config", "--kernel-config", '{"toy": -1e999}']),
        2,
        "out of range for a 64-bit float",
    ),
    "kc-inline-huge-value": Case(
        plain(["config", "--kernel-config", json.dumps({"toy": {"fast": "y" * 100_000}})]),
        2,
        "(100,000 characters)",
    ),
    "kc-inline-many-keys": Case(
        plain(["config", "--kernel-config", json.dumps({f"k{i}": 1 for i in range(5000)})]),
        2,
        "and 4997 more",
    ),
    "kc-file-not-utf8": Case(write(kernel_file, b'{"toy": "\xff"}', config_file), 2, "not UTF-8"),
    "kc-file-deep": Case(write(kernel_file, deep(3000), config_file), 2, "nested deeper than 64"),
    "kc-file-fifo": Case(fifo(kernel_file, config_file), 2, "not a regular file"),
    "kc-file-dev-zero": Case(
        plain(["config", "--kernel-config", "@/dev/zero"]),
        2,
        "a character device, not a regular file",
    ),
    "kc-file-directory": Case(directory(kernel_file, config_file), 2, "it is a directory"),
    "kc-file-missing": Case(
        plain(["config", "--kernel-config", "@/nonexistent/kc.json"]),
        2,
        "No such file or directory",
    ),
    "kc-file-no-name": Case(plain(["config", "--kernel-config", "@"]), 2, "names no file"),
    "kc-file-over-cap": Case(
        write(kernel_file, json.dumps({"toy": {"fast": True}}) + " " * 600, config_file, CAP_ENV),
        2,
        "over the 500-byte limit",
    ),
    # --- pre-built baselines (diff --baseline) -------------------------------------------
    "baseline-deep": Case(
        write(baseline_file, deep(5000), diff_baseline), 2, "nested deeper than 64"
    ),
    "baseline-big-int": Case(
        write(baseline_file, f'{{"schema_version": {BIG_INT}}}', diff_baseline),
        2,
        "does not fit in 64 bits",
    ),
    "baseline-not-utf8": Case(write(baseline_file, NOT_UTF8, diff_baseline), 2, "not UTF-8"),
    "baseline-dev-zero": Case(plain(["diff", "--baseline", "/dev/zero"]), 2, "not a regular file"),
    "baseline-fifo": Case(fifo(baseline_file, diff_baseline), 2, "not a regular file"),
    "baseline-dir-with-fifo": Case(
        fifo(
            lambda p: p / "snapshots" / "toy-a.json",
            lambda p: ["diff", "--baseline", str(p / "snapshots")],
        ),
        2,
        "not a regular file",
    ),
    "baseline-missing": Case(
        plain(["diff", "--baseline", "/nonexistent/base"]), 2, "does not exist"
    ),
    # --- [tool.routectl] --------------------------------------------------------------------
    "table-missing-module": Case(
        with_table('[tool.routectl]\nproject = "nosuchmod:PROJECT"'),
        2,
        "cannot import nosuchmod: ModuleNotFoundError",
    ),
    "table-missing-attribute": Case(
        with_table('[tool.routectl]\nproject = "toyproj:NOPE"'),
        2,
        "module toyproj has no attribute 'NOPE'",
    ),
    "table-empty-module": Case(
        with_table('[tool.routectl]\nproject = ":PROJECT"'), 2, "must be 'module:attribute'"
    ),
    "table-relative-module": Case(
        with_table('[tool.routectl]\nproject = ".toyproj:PROJECT"'), 2, "must be an absolute name"
    ),
    "table-project-not-string": Case(
        with_table("[tool.routectl]\nproject = 5"),
        2,
        "[tool.routectl] project must be a string 'module:attribute', got 5",
    ),
    "table-project-missing": Case(
        with_table('[tool.routectl]\nsnapshots = "snapshots"'),
        2,
        "[tool.routectl] project is missing",
    ),
    "table-not-a-table": Case(
        with_table("[tool]\nroutectl = 5"), 2, "[tool.routectl] must be a table, got 5"
    ),
    "table-unknown-key": Case(
        with_table('[tool.routectl]\nproject = "toyproj:PROJECT"\ncategories = ["a"]'),
        2,
        "unknown key 'categories' (known: project, snapshots)",
    ),
    "table-misspelt-key": Case(
        with_table('[tool.routectl]\nproject = "toyproj:PROJECT"\nsnapshot = "snapshots"'),
        2,
        "did you mean 'snapshots'?",
    ),
    "table-snapshots-not-string": Case(
        with_table('[tool.routectl]\nproject = "toyproj:PROJECT"\nsnapshots = 5'),
        2,
        "snapshots must be a folder name",
    ),
    "table-invalid-toml": Case(
        with_table('[tool.routectl\nproject = "toyproj:PROJECT"'), 2, "cannot read"
    ),
    "table-not-utf8": Case(
        write(
            lambda p: p / "pyproject.toml",
            b'[tool.routectl]\nproject = "toyproj:PROJECT"\n# \xff\n',
            lambda p: ["config"],
        ),
        2,
        "not UTF-8",
    ),
    "table-syntax-error": Case(
        with_module("hostile_syntax", "x = 1\ndef broken(:\n"),
        2,
        "cannot import hostile_syntax: SyntaxError: invalid syntax (",
    ),
    "table-raises-on-import": Case(
        with_module("hostile_raises", "import os\nraise ValueError('half-built')\n"),
        2,
        "ValueError: half-built (",
    ),
    "table-not-a-project": Case(
        with_module("hostile_five", "PROJECT = 5\n"),
        2,
        "names an object of type int, not a routectl Project",
    ),
    # --- options ---------------------------------------------------------------------------
    "capability-negative": Case(
        plain(["config", "--capability", "-7"]),
        2,
        "'-7' is not a compute capability NVIDIA has shipped",
    ),
    "capability-unshipped": Case(
        plain(["config", "--capability", "999"]),
        2,
        "'999' is not a compute capability NVIDIA has shipped",
    ),
    "capability-huge": Case(
        plain(["config", "--capability", "9" * 100_000]), 2, "(100,000 characters)"
    ),
    "kv-bogus": Case(plain(["config", "--kv", "bogus"]), 2, "'bogus' is not one of 'auto'"),
    "spec-tokens-without-method": Case(
        plain(["config", "--spec-tokens", "3", "--spec", "none"]),
        2,
        "--spec-tokens only applies with a speculative method",
    ),
    "selector-without-method": Case(
        plain(["config", "--selector-top-k", "2"]), 2, "--selector-top-k only applies"
    ),
    "tp-not-a-number": Case(plain(["config", "--tp", "many"]), 2, "'many' is not a valid"),
    "probe-import-empty": Case(
        plain(["native", "probe", "--import", ""]), 2, "needs a module name"
    ),
    "probe-import-relative": Case(
        plain(["native", "probe", "--import", ".x"]),
        2,
        "takes an absolute module name, not the relative '.x'",
    ),
    "probe-import-missing": Case(
        plain(["native", "probe", "--import", "no_such_mod_xyz"]),
        2,
        "cannot import no_such_mod_xyz: ModuleNotFoundError",
    ),
    "probe-import-syntax-error": Case(
        with_module("hostile_probe", "def f(:\n", ["native", "probe", "--import", "hostile_probe"]),
        2,
        "SyntaxError",
    ),
    "probe-unknown-kernel": Case(
        plain(["native", "probe", "--kernel", MEGA_STRING[:5000]]), 2, "unknown kernel or stage"
    ),
    # --- commands --------------------------------------------------------------------------
    "explain-huge-id": Case(plain(["explain", "m" * 200_000]), 2, "(200,000 characters)"),
    "check-unknown-category": Case(plain(["check", "-c", "c" * 50_000]), 2, "(50,000 characters)"),
    "check-accept-all-alone": Case(plain(["check", "--accept-all"]), 2, "--accept-all only"),
    "update-in-ci": Case(plain(["check", "--update"], {"CI": "true"}), 2, "refuses to write"),
    "snapshot-no-target": Case(plain(["snapshot", "--all"]), 2, "give exactly one of"),
    "diff-no-baseline": Case(plain(["diff"]), 2, "give exactly one of"),
    "diff-not-a-repository": Case(
        plain(["diff", "--baseline-ref", "HEAD"]), 2, "not inside a git repository"
    ),
    "unknown-command": Case(plain(["chek"]), 2, "no such command 'chek'; did you mean check?"),
    "size-limit-superscript-digit": Case(
        plain(["check"], {"ROUTECTL_MAX_INPUT_BYTES": "\u00b2"}),
        2,
        "ROUTECTL_MAX_INPUT_BYTES must be a positive number of bytes, got '\u00b2'",
    ),
    "size-limit-arabic-indic-digits": Case(
        plain(["list"], {"ROUTECTL_MAX_INPUT_BYTES": "\u0661\u0662"}), 2, "must be a positive"
    ),
    "glob-of-1.2-MB": Case(
        write(
            expected_file,
            json.dumps(
                {"schema_version": 2, "changes": [{"rows": "*" * 1_200_000, "reason": "x"}]}
            ),
            check_expected,
        ),
        2,
        "row pattern too large: 1,200,000 characters (the limit is 10,000)",
    ),
    "id-of-1.2-MB": Case(
        write(expected_file, json.dumps([{"id": "a" * 1_200_000, "reason": "x"}]), check_expected),
        2,
        "row pattern too large: 1,200,000 characters (the limit is 10,000)",
    ),
    "debug-after-command": Case(
        write(retained, deep(1000), lambda p: ["check", "--debug"]), 2, "nested deeper than 64"
    ),
}


def prepare(project: Path, case: Case) -> tuple[list[str], dict[str, str]]:
    prepared = case.setup(project)
    args, env = prepared if isinstance(prepared, tuple) else (prepared, {})
    environ = {
        "PATH": os.environ.get("PATH", os.defpath),
        # diff-not-a-repository: no repository above the copy is found.
        "GIT_CEILING_DIRECTORIES": str(project.parent),
        **env,
    }
    return args, environ


def assert_one_error_line(result: Result, code: int, message: str) -> None:
    errors = [line for line in result.lines if line.startswith("error:")]
    assert result.code == code, result.stderr[:2000]
    assert len(errors) == 1, result.stderr[:2000]
    assert "Traceback" not in result.stderr
    assert message in errors[0], errors[0][:2000]
    assert len(errors[0]) < 2200  # whatever it quotes, the line stays readable


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 60


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_input(project: Path, name: str) -> None:
    case = CASES[name]
    args, environ = prepare(project, case)
    # After the setup: a case may put its hostile file among the retained ones.
    before = tree_bytes(project / "snapshots")
    result = invoke(args, cwd=project, environ=environ)
    assert_one_error_line(result, case.code, case.message)
    assert tree_bytes(project / "snapshots") == before
    assert not list((project / "snapshots").glob("*.new"))
    assert not list(project.rglob("*.tmp"))


def test_debug_after_the_command_gives_the_import_traceback(project: Path) -> None:
    with_module("hostile_debug", "raise ValueError('half-built')\n")(project)
    plain_result = invoke(["config"], cwd=project)
    debug = invoke(["config", "--debug"], cwd=project)
    assert plain_result.code == debug.code == 2
    assert "Traceback" not in plain_result.stderr
    assert debug.stderr.startswith("Traceback (most recent call last):")
    assert "ValueError: half-built" in debug.stderr
    assert debug.lines[-1] == plain_result.lines[0]


def test_just_under_the_depth_limit_is_read(project: Path) -> None:
    nested = "[" * 63 + "]" * 63
    path = project / "expected.json"
    path.write_text(nested)
    result = invoke(["check", "--expected-changes", path], cwd=project)
    # Parsed (no depth error); the schema refuses the nested list as an id.
    assert result.code == 2 and "nested deeper" not in result.stderr


# --- bounded memory: real processes under an address-space limit ----------------------------


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_limited(
    project: Path, args: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {"PATH": os.environ.get("PATH", os.defpath), "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "routectl", *args],
        cwd=project,
        env=environ,
        capture_output=True,
        text=True,
        preexec_fn=limited,
        timeout=300,
        check=False,
    )


def sparse(path: Path, size: int) -> None:
    with open(path, "wb") as handle:
        handle.truncate(size)  # no disk blocks: a 10 GiB file costs nothing to make


@pytest.mark.parametrize(
    "setup,args,message",
    [
        (
            lambda p: sparse(retained(p), 10 * 1024**3),
            ["check", "-j", "1"],
            "is 10,737,418,240 bytes, over the 536,870,912-byte limit",
        ),
        (
            lambda p: sparse(p / "kc.json", 10 * 1024**3),
            ["config", "--kernel-config", "@kc.json"],
            "over the 536,870,912-byte limit",
        ),
        (
            lambda p: sparse(p / "expected.json", 10 * 1024**3),
            ["check", "--expected-changes", "expected.json"],
            "over the 536,870,912-byte limit",
        ),
        (lambda p: None, ["config", "--kernel-config", "@/dev/zero"], "not a regular file"),
        (
            lambda p: (retained(p).unlink(), retained(p).symlink_to("/dev/urandom")),
            ["check", "-j", "1"],
            "not a regular file",
        ),
        (
            lambda p: sparse(p / "pyproject.toml", 10 * 1024**3),
            ["list"],
            "over the 536,870,912-byte limit",
        ),
    ],
    ids=[
        "sparse-snapshot",
        "sparse-kernel-config",
        "sparse-expected",
        "dev-zero-config",
        "dev-urandom-snapshot",
        "sparse-pyproject",
    ],
)
def test_bounded_memory(project: Path, setup, args, message) -> None:
    other = (project / "snapshots" / "toy-b.json").read_bytes()
    setup(project)
    done = run_limited(project, args)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(errors) == 1 and message in errors[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert (project / "snapshots" / "toy-b.json").read_bytes() == other


@pytest.mark.parametrize("columns", ["\u00b2", "\u0661\u0662\u0660", "9" * 5_000, "1" * 7])
def test_columns_of_odd_digits_is_no_width(project: Path, columns: str) -> None:
    """COLUMNS that `str.isdigit` accepts but is no terminal's width (a superscript, other
    scripts' digits, thousands of digits) is ignored, as text is: the default width."""
    odd = invoke(["matrix", "-c", "toy-a"], cwd=project, environ={"COLUMNS": columns})
    plain_run = invoke(["matrix", "-c", "toy-a"], cwd=project, environ={})
    assert odd.code == 0, odd.stderr
    assert odd.stdout == plain_run.stdout and odd.stderr == ""


@pytest.mark.parametrize(
    ("rows", "cols", "laid"),
    [
        ("kv,model", None, (("kv", "model", "tp", "spec"), ("c", "q"))),
        ("q", None, (("q", "model", "tp", "spec"), ("kv", "c"))),
        (None, "model", (("tp", "spec", "kv", "c", "q"), ("model",))),
        ("tp", "kv", (("tp", "model", "spec", "c", "q"), ("kv",))),
    ],
)
def test_the_side_not_given_leaves_out_the_dimensions_the_other_names(rows, cols, laid) -> None:
    from routectl.review.matrix import layout

    assert layout(rows, cols) == laid


def test_matrix_rows_named_from_the_default_columns(project: Path) -> None:
    result = invoke(["matrix", "-c", "toy-a", "--rows", "kv,model"], cwd=project)
    assert result.code == 0, result.stderr
    assert result.stdout.splitlines()[2].split()[:2] == ["kv", "model"]
    both = invoke(["matrix", "--rows", "kv,model", "--cols", "kv"], cwd=project)
    assert_one_error_line(both, 2, "matrix dimension 'kv' is named for both rows and columns")
    every = invoke(["matrix", "--rows", "model,kv,tp,spec,c,q"], cwd=project)
    assert_one_error_line(every, 2, "leave one for --cols")


# What an error or warning quotes of a user's value: 80 characters a value, 20 names a list.
QUOTED_BOUND = 400


@pytest.mark.parametrize(
    "rows",
    [
        "*" * 10_000,  # bare: matches rows of both categories
        "{" + ",".join(["a"] * 3_000) + "}",  # wcmatch refuses its expansions
        "nosuch" + "x" * 5_000 + ":*",
    ],
)
def test_an_error_quoting_a_long_pattern_stays_short(project: Path, rows: str) -> None:
    expected_file(project).write_text(
        json.dumps({"schema_version": 2, "changes": [{"rows": rows, "reason": "x"}]})
    )
    result = invoke(check_expected(project), cwd=project)
    assert result.code == 2, result.stderr
    (line,) = result.lines
    assert line.startswith("error: ") and len(line) < QUOTED_BOUND, line


def test_unknown_variables_are_listed_twenty_then_counted() -> None:
    environ = {f"VLLM_SM70_TYPO_{n:04}": "1" for n in range(5_000)}
    environ["VLLM_SM70_A" + "X" * 100_000] = "1"
    result = invoke(["config"], cwd=ROOT, environ=environ)  # this project's VLLM_SM70_*
    assert result.code == 0, result.stderr[:2000]
    (warning,) = [line for line in result.lines if "unknown VLLM_SM70_*" in line]
    names = warning.split("(typos?): ", 1)[1]
    shown, more = names.rsplit(" and ", 1)
    assert more == "4,981 more"
    listed = shown.split(", ")
    assert len(listed) == 20
    assert listed[0] == "VLLM_SM70_A" + "X" * 69 + "... (100,011 characters)"
    assert listed[1:] == [f"VLLM_SM70_TYPO_{n:04}" for n in range(19)]
    assert len(result.stderr) < 2_000


MARKUP_CATEGORY = """
import dataclasses
from toyproj import PROJECT as TOY, ToyCategory

PROJECT = dataclasses.replace(
    TOY, categories=(*TOY.categories, ToyCategory("<b>bold</b>", "toy_model", 70))
)
"""


@pytest.mark.parametrize(
    "args",
    [["check"], ["matrix"], ["list"], ["report", "--html", "-"], ["snapshot", "--all", "-o", "-"]],
)
def test_a_category_name_holding_markup_is_a_bad_project(project: Path, args: list[str]) -> None:
    name = f"markup_category_{len(args)}_{args[0]}"
    with_module(name, MARKUP_CATEGORY)(project)
    result = invoke(args, cwd=project)
    assert_one_error_line(result, 2, "the project's category name '<b>bold</b>' must match")
    assert result.stdout == ""
