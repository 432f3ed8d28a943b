"""The public library surface: resolve and select through `routectl` without torch."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import routectl
from native.layers import AwqLayer, Nvfp4Layer
from policies import PROJECT

ROOT = Path(__file__).resolve().parents[1]
QUALIFIED = routectl.EngineConfig(
    tp=4, spec_method="dflash", spec_tokens=7, selector_top_k=16, max_num_seqs=4
)


def _select(family, layer, config=None, env=None):
    hw = routectl.Hardware(70)
    policy = routectl.resolve(PROJECT, config, env or {}, hw, QUALIFIED)
    ns = routectl.InMemoryNamespace(PROJECT.catalogue.ops)
    return routectl.select(PROJECT, family, layer, policy, hw, QUALIFIED, ns)


def test_select_nvfp4_and_awq_layers_from_plain_specs():
    nvfp4 = _select(
        "sm70-nvfp4-linear", Nvfp4Layer.of("model.layers.0.linear_attn.in_proj_qkvz", 5120, 4120)
    )
    assert nvfp4.kernel == "Qpn2NvFp4LinearKernel"
    awq = _select(
        "sm70-awq-linear", AwqLayer.of("model.layers.0.self_attn.qkv_proj", 2560, 3584, 32)
    )
    assert awq.kernel == "TurboMindAwqLinearKernel"
    misaligned = _select(
        "sm70-nvfp4-linear", Nvfp4Layer.of("model.layers.0.linear_attn.in_proj_qkvz", 5000, 4120)
    )
    assert misaligned.kernel == "TurboMindNvFp4LinearKernel"
    qpn2 = next(v for v in misaligned.selection.verdicts if v.name == "Qpn2NvFp4LinearKernel")
    assert qpn2.message == "K % 128 != 0 (K=5000)"


def test_unknown_family_is_an_input_error():
    with pytest.raises(routectl.InputError, match="unknown kernel family"):
        _select("sm99", None)


def test_library_resolution_and_selection_never_import_torch():
    code = textwrap.dedent("""
        import sys
        import routectl
        from native.layers import AwqLayer, Nvfp4Layer
        project = routectl.load_project()
        hw = routectl.Hardware(70)
        wl = routectl.EngineConfig(tp=4, spec_method="dflash", spec_tokens=7,
                                   selector_top_k=16, max_num_seqs=4)
        policy = routectl.resolve(project, '{"sm70_awq": {"enabled": true}}', {}, hw, wl)
        ns = routectl.InMemoryNamespace(project.catalogue.ops)
        a = routectl.select(project, "sm70-nvfp4-linear",
                            Nvfp4Layer.of("model.layers.0.x.in_proj_qkvz", 5120, 4120),
                            policy, hw, wl, ns)
        b = routectl.select(project, "sm70-awq-linear",
                            AwqLayer.of("model.layers.0.x.qkv_proj", 2560, 3584, 32),
                            policy, hw, wl, ns)
        print(a.kernel, b.kernel, "torch" in sys.modules)
    """)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["Qpn2NvFp4LinearKernel", "TurboMindAwqLinearKernel", "False"]


def test_import_routectl_defers_pydantic_and_tomllib():
    # The engine's start-up import: pydantic and tomllib were most of its time; tomllib loads
    # when a project is looked up, pydantic and the KernelConfig model (about 0.13 s) only
    # when a typed config is first resolved (most check rows, an engine given none, never).
    code = (
        "import sys, routectl\n"
        "print(sorted(m for m in ('pydantic', 'tomllib', 'torch', 'jsonschema',\n"
        "      'jsonschema_rs', 'orjson', 'deepdiff') if m in sys.modules))\n"
        "project = routectl.load_project()\n"
        "routectl.resolve(project, None, {}, routectl.Hardware(70), routectl.EngineConfig(tp=1))\n"
        "print('pydantic' in sys.modules, 'tomllib' in sys.modules)\n"
        'policy = routectl.resolve(project, \'{"sm70_awq": {"enabled": true}}\', {},\n'
        "                          routectl.Hardware(70), routectl.EngineConfig(tp=1))\n"
        "print('pydantic' in sys.modules, policy.source('sm70_awq.enabled'))\n"
        "import policies\n"
        "print(project.config_class is policies.KernelConfig)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.splitlines() == ["[]", "False True", "True explicit", "True"]


def test_the_readme_library_example_runs(capsys):
    import re

    guide = (ROOT / "docs" / "library.md").read_text()
    example = re.findall(r"```python\n(.*?)```", guide, flags=re.S)[0]
    assert "routectl.select(" in example
    exec(compile(example, "docs/library.md", "exec"), {})
    assert capsys.readouterr().out.startswith("Qpn2NvFp4LinearKernel ")


def test_every_public_name_exists_and_is_documented():
    # `__all__` is the public API: each name resolves (the lazy ones too) and carries its own
    # docstring, not the signature a dataclass writes when it has none.
    assert "NativeNamespace" in routectl.__all__
    assert sorted(routectl.__all__) == routectl.__all__
    undocumented = []
    for name in routectl.__all__:
        obj = getattr(routectl, name)
        doc = (obj.__doc__ or "").strip()
        if not doc or doc.startswith(f"{name}("):
            undocumented.append(name)
    assert undocumented == []
    # Nothing public is left out of `__all__`: every module-level name that is not private,
    # a module or a typing helper is listed.
    import types

    public = {
        n
        for n, v in vars(routectl).items()
        if not n.startswith("_")
        and not isinstance(v, types.ModuleType)
        and n not in ("Any", "Mapping", "annotations", "sys")
    }
    assert public <= set(routectl.__all__)
