"""The README's review walkthrough is the program's real output: its commands run on a copy
of this project with `sm70_nvfp4.prefill_min_m` changed from 1024 to 512, and their output
(stdout and stderr as a terminal shows them) must equal the README's blocks."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from policies.variables import VARIABLE_PREFIX
from tests.project_files import copy_project

ROOT = Path(__file__).resolve().parents[1]
# The field's declaration, however the formatter lays it out: section, name, type, default.
DEFAULT = re.compile(r'(section="sm70_nvfp4",\s*name="prefill_min_m",\s*type=int,\s*default=)1024,')
TODO = '"TODO: say why route.dispatch[*].plan.prefill_min_m moves"'
REASON = '"QPN2 prefill dequantizes from 512 tokens (measured faster on V100)"'
BLOCK = re.compile(r"<!-- review: (\w+) -->\n```\w+\n(.*?)```\n", re.DOTALL)


def readme_blocks() -> dict[str, str]:
    return dict(BLOCK.findall((ROOT / "README.md").read_text()))


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_project(tmp_path_factory.mktemp("review") / "project")
    variables = root / "policies" / "variables.py"
    text = variables.read_text()
    changed, count = DEFAULT.subn(r"\g<1>512,", text)
    assert count == 1
    variables.write_text(changed)
    return root


def run(copy: Path, command_line: str) -> tuple[int, str]:
    """A README command line (`routectl ...`) run in the copy: exit code and the output as
    a terminal interleaves it, paths shown relative to the project."""
    args = shlex.split(command_line)
    assert args[0] == "routectl"
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(VARIABLE_PREFIX) and k not in ("CI", "NO_COLOR")
    }
    done = subprocess.run(
        [sys.executable, "-u", "-m", "routectl", *args[1:]],
        cwd=copy,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    return done.returncode, done.stdout.replace(f"{copy}/", "")


def command_and_output(block: str) -> tuple[str, str]:
    first, _, rest = block.partition("\n")
    assert first.startswith("$ ")
    return first[2:], rest


def test_the_walkthrough_shows_the_real_output(copy):
    blocks = readme_blocks()
    assert sorted(blocks) == ["failing", "file", "passing", "write"]

    command, shown = command_and_output(blocks["failing"])
    code, output = run(copy, command)
    assert code == 1
    assert output == shown
    # The whole failing check is short, and it names every changed row (by pattern).
    assert len(output.splitlines()) <= 16  # a line per category (nine) and the summary
    assert "43 changed" in output

    command, shown = command_and_output(blocks["write"])
    code, output = run(copy, command)
    assert (code, output) == (1, shown)
    written = (copy / "route-changes.json").read_text()
    assert written == blocks["file"]

    assert written.count(TODO) == 1
    (copy / "route-changes.json").write_text(written.replace(TODO, REASON))
    command, shown = command_and_output(blocks["passing"])
    code, output = run(copy, command)
    assert (code, output) == (0, shown)
