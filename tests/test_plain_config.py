"""A KernelConfig given as a plain dict is read without building the typed config
(`routectl.policy.fields.plain_typed_values`): what it reads must be what the typed config
holds, and anything the strict typed config would refuse or convert goes to it instead."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import PROJECT
from routectl.errors import InputError
from routectl.policy.configmodel import typed_values
from routectl.policy.fields import plain_typed_values

ROOT = Path(__file__).resolve().parents[1]
FIELDS = PROJECT.fields


def typed(config: Any) -> dict[str, Any] | None:
    try:
        return typed_values(PROJECT.load_config(config), FIELDS)
    except InputError:
        return None


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 5000),
    st.sampled_from(["auto", "marlin", "x"]),
    st.lists(st.sampled_from(["a", "b"]), max_size=2),
    st.tuples(st.just("a")),
    st.floats(0, 2),
)
KEYS = st.sampled_from(
    [(f.section, f.name) for f in FIELDS] + [("sm70_awq", "nope"), ("nosuch", "x")]
)


@st.composite
def configs(draw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for section, name in draw(st.lists(KEYS, max_size=4)):
        value = draw(VALUES)
        if section is None:
            out[name] = value
        else:
            out.setdefault(section, {})[name] = value
    return out


@settings(max_examples=300, deadline=None)
@given(configs())
def test_a_plain_dict_reads_as_the_typed_config_holds_it_or_goes_to_it(config: dict[str, Any]):
    plain = plain_typed_values(FIELDS, config)
    if plain is not None:  # taken as it is: exactly what the typed config holds
        assert plain == typed(config)


@pytest.mark.parametrize(
    "config",
    [
        {"sm70_awq_moe": {"qpn_m1": True}},
        {"sm70_awq_moe": {"w2_chunk_tokens": 4096}, "linear_backend": "auto"},
        {"disabled_kernels": ["a", "b"]},
        {},
    ],
)
def test_common_configs_take_the_plain_path(config: dict[str, Any]):
    assert plain_typed_values(FIELDS, config) == typed(config)


@pytest.mark.parametrize(
    "config",
    [
        {"sm70_awq_moe": {"qpn_m1": 1}},  # strict: no int for bool
        {"sm70_awq_moe": {"w2_chunk_tokens": True}},  # no bool for int
        {"sm70_awq_moe": {"qpn_m1x": True}},  # unknown key: the typed config words it
        {"sm70_awq_moe": True},
        {"disabled_kernels": ("a",)},  # strict: a tuple is no list
    ],
)
def test_what_the_typed_config_refuses_goes_to_it(config: dict[str, Any]):
    assert plain_typed_values(FIELDS, config) is None


def test_an_engine_started_with_a_plain_config_never_imports_pydantic():
    code = (
        "import sys\n"
        "from routectl import EngineConfig, Hardware, load_project, start\n"
        "project = load_project()\n"
        "start(project, {'sm70_awq_moe': {'qpn_m1': True}}, Hardware(70), EngineConfig(tp=4),"
        " environ={})\n"
        "print('pydantic' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["False"], done.stderr
