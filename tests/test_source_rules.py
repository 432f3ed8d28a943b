"""Rules about the source tree itself."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from policies.variables import FIELDS, VARIABLE_PREFIX

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("routectl", "policies", "native", "benchmarks", "examples")
VARIABLE_DATA = ROOT / "policies" / "variables.py"
# A family's own field table (policies/<family>_variables.py), aggregated by VARIABLE_DATA.
FAMILY_VARIABLE_DATA = tuple(sorted((ROOT / "policies").glob("*_variables.py")))


def _product_files():
    for package in PRODUCT:
        yield from sorted((ROOT / package).rglob("*.py"))


def test_no_variable_literal_outside_the_variable_data():
    offenders = []
    for path in _product_files():
        if path == VARIABLE_DATA or path in FAMILY_VARIABLE_DATA:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and VARIABLE_PREFIX in node.value
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_every_family_field_table_is_in_the_one_variable_table():
    """A family module may spell its own variables only because the project's table
    aggregates it: every field it declares is a field of `FIELDS`."""
    import importlib

    for path in FAMILY_VARIABLE_DATA:
        module = importlib.import_module(f"policies.{path.stem}")
        tables = [v for v in vars(module).values() if isinstance(v, tuple) and v]
        declared = [f for t in tables for f in t if type(f).__name__ == "Field"]
        assert declared, path
        assert all(any(f is g for g in FIELDS) for f in declared), path


def test_no_mock_patching_in_the_product():
    offenders = [
        str(p.relative_to(ROOT))
        for p in _product_files()
        if re.search(r"unittest\.mock|mock\.patch|monkeypatch", p.read_text())
    ]
    assert offenders == []


def test_no_monkeypatch_fixture_in_the_tests():
    """Tests inject what a decision reads (explicit mappings, arguments), never patch it."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.arg) and node.arg == "monkeypatch":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("patch", "setattr")
                and (isinstance(node.value, ast.Name) and node.value.id in ("mock", "monkeypatch"))
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def _reads_environ(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("environ", "getenv")
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            return True
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(a.name in ("environ", "getenv") for a in node.names)
        ):
            return True
    return False


def test_only_entry_points_read_os_environ():
    # interrupt.py: the CLI entry point's first half, run before the CLI's imports (its
    # start-up checkpoint reads the test variable there).
    allowed = {
        ROOT / "routectl" / "cli" / "__init__.py",
        ROOT / "routectl" / "engine" / "startup.py",
        ROOT / "routectl" / "runtime" / "interrupt.py",
    }
    offenders = [
        str(p.relative_to(ROOT))
        for p in _product_files()
        if p not in allowed
        and p.parent.name not in ("examples", "benchmarks")
        and _reads_environ(p)
    ]
    assert offenders == []


def test_native_never_imports_policies_and_routectl_imports_neither():
    for path in _product_files():
        tree = ast.parse(path.read_text())
        modules = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules.add(node.module)
        names = {m.split(".")[0] for m in modules}
        top = path.relative_to(ROOT).parts[0]
        if top == "native":
            assert "policies" not in names, path
            # Nor routectl's review or command line (import-linter holds the same).
            above = {".".join(m.split(".")[:2]) for m in modules} & {
                "routectl.review",
                "routectl.cli",
            }
            assert not above, path
        if top == "routectl":
            assert not names & {"policies", "native"}, path


def test_readme_variable_table_matches_the_variable_data():
    # The table moved with the policy guide from the README to docs/policy.md.
    readme = (ROOT / "docs" / "policy.md").read_text()
    rows = {}
    for line in readme.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith(VARIABLE_PREFIX):
            rows.setdefault(cells[0], []).append(tuple(cells[1:]))
    expected = {}
    from policies.variables import default_description

    for f in FIELDS:
        if f.variable:
            expected.setdefault(f.variable, []).append(
                (f.config_path.removeprefix("kernel_config."), f.kind.value, default_description(f))
            )
    assert {k: sorted(v) for k, v in rows.items()} == {k: sorted(v) for k, v in expected.items()}


def test_ci_runs_the_readme_test_command_verbatim():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", readme, flags=re.S)
    commands = [b.strip() for b in blocks if "pytest" in b and "pip install" in b]
    assert len(commands) == 1, commands
    assert "\n" not in commands[0] and commands[0].startswith("pip install torch==2.13.0")
    ci = [
        line
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    # Exactly the README's test command, the strict decision coverage, then the linters its
    # `dev` extra installs.
    assert ci[2:] == [
        commands[0],
        "python -m routectl coverage --strict",
        "ruff check .",
        "ruff format --check .",
        "mypy",
        "lint-imports",
    ]
    assert "'.[test,dev]'" in commands[0]
    main_job = [b.strip() for b in blocks if "routectl check" in b and "pip install" in b]
    assert set(main_job) == {"pip install torch==2.13.0 && pip install . && routectl check"}


TIMERS = {"monotonic", "perf_counter", "time", "process_time", "monotonic_ns", "perf_counter_ns"}


def test_no_test_asserts_on_elapsed_time():
    """Speed is measured in benchmarks/, never asserted: a busy runner must not turn CI red.
    A timeout that only guards against a hang is an argument, not an assertion."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text())
        timed = {
            target.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and any(
                isinstance(c, ast.Call)
                and isinstance(c.func, ast.Attribute)
                and c.func.attr in TIMERS
                for c in ast.walk(node.value)
            )
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assert):
                continue
            for inner in ast.walk(node.test):
                if (isinstance(inner, ast.Attribute) and inner.attr in TIMERS) or (
                    isinstance(inner, ast.Name) and inner.id in timed
                ):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
                    break
    assert offenders == []


def test_native_never_spells_a_policy_key():
    """Capability classes judge the options the policy hands them and name an option, never
    a `section.field` key: the policy qualifies what native reports."""
    keys = {f.key for f in FIELDS if f.section is not None}
    sections = {f.section for f in FIELDS if f.section is not None}
    offenders = []
    for path in sorted((ROOT / "native").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                if any(key in text for key in keys) or any(f"{s}." in text for s in sections):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text[:60]}")
    assert offenders == []


def test_native_raises_routectl_errors_not_copies():
    """The kernel classes define no exception class of their own: a layer that fails to
    load raises routectl's SelectionError, bad activations its ActivationError. (The
    reference ops' ArgumentError stays: it is the RuntimeError the engine's own op raises.)"""
    offenders = []
    for path in sorted((ROOT / "native" / "kernels").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and b.id.endswith(("Error", "Exception"))
                for b in node.bases
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}")
    assert offenders == []
