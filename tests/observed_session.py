"""A real engine session under routectl's observer, run as a subprocess by
tests/test_parity_end_to_end.py (it registers an op, which must not leak into the suite's
process): two Qwen3.8 TP4 AWQ MoE layers loaded through the example's namespace with QPN M1
requested, real M = 1 steps on CPU, and the observation record written.

- `model.layers.0.mlp.experts` is honest: one eager step, then one step while the injected
  capture predicate says a CUDA graph is being captured;
- `model.layers.1.mlp.experts` (with `--divergent`) is loaded through a namespace that serves
  its M = 1 call through another op at run time: the legacy single-token op, registered
  here with its catalogue schema (a fake kernel that zeroes the output).

    python tests/observed_session.py RECORD [--divergent]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
LEGACY_OP = "awq_moe_single_token_sm70_out"


def _example() -> Any:
    spec = importlib.util.spec_from_file_location(
        "engine_startup_example", ROOT / "examples" / "engine_startup.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def register_legacy(schema: str, namespace: str) -> Any:
    library = torch.library.Library(namespace, "FRAGMENT")
    library.define(schema)

    def fake_kernel(out: torch.Tensor, *args: Any) -> None:
        out.zero_()

    library.impl(LEGACY_OP, fake_kernel, "CPU")
    return library


class Divergent:
    """The engine's namespace, except that a call of the QPN M1 op runs the legacy
    single-token op on the same tensors."""

    def __init__(self, inner: Any, qpn_op: str, namespace: str) -> None:
        self._inner, self._qpn, self._ns = inner, qpn_op, namespace

    @property
    def name(self) -> str:
        return self._inner.name

    def has_op(self, op: str) -> bool:
        return bool(self._inner.has_op(op))

    def abi_revision(self, getter: str) -> int | None:
        return self._inner.abi_revision(getter)  # type: ignore[no-any-return]

    def call(self, op: str, /, **kw: Any) -> Any:
        if op != self._qpn:
            return self._inner.call(op, **kw)
        ids = kw["ids"]
        w13, w2 = kw["w13"], kw["w2"]
        return getattr(getattr(torch.ops, self._ns), LEGACY_OP)(
            kw["out"], kw["input"], kw["topk"], ids, w13, kw["s13"], w2, kw["s2"],
            kw["intermediate"], kw["intermediate"], int(kw["input"].shape[0]),
            int(ids.shape[1]), 0, 0, 0, 0, 32, int(kw["input"].shape[1]),
        )  # fmt: skip

    def call_repeated(self, op: str, times: int, /, **kw: Any) -> Any:
        return self._inner.call_repeated(op, times, **kw)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("record", type=Path)
    parser.add_argument("--divergent", action="store_true")
    args = parser.parse_args()
    example = _example()
    project = example.PROJECT
    from native.reference.moe_checkpoint import random_moe_checkpoint
    from routectl.engine.startup import start

    namespace = example.engine_namespace(project.catalogue)
    session = start(
        project,
        {"sm70_awq_moe": {"qpn_m1": True}},
        example.HARDWARE,
        example.WORKLOAD,
        environ={},
    )
    capturing = [False]
    observing = session.observe(
        args.record,
        namespace,
        example.REFERENCE_NAMESPACE,
        category=example.CATEGORY,
        is_capturing=lambda: capturing[0],
    )
    moe = example.AwqMoeLayer.for_rank(example.QWEN38_LAYER, example.WORKLOAD.tp)
    checkpoint = random_moe_checkpoint(moe, example.CHECKPOINT_SEED)
    honest = session.load_layer(example.FAMILY, example.QWEN38_LAYER, checkpoint, namespace)
    inputs = example.step_inputs(honest.prepared.state["layer"], torch.device("cpu"))
    honest(*inputs)
    capturing[0] = True
    honest(*inputs)
    capturing[0] = False
    if args.divergent:
        from native.awq_schemas import QPN_M1_OP

        _library = register_legacy(
            project.catalogue.op(LEGACY_OP).schema, example.REFERENCE_NAMESPACE
        )
        layer_1 = {**example.QWEN38_LAYER, "prefix": "model.layers.1.mlp.experts", "layer_id": 1}
        diverted = session.load_layer(
            example.FAMILY,
            layer_1,
            checkpoint,
            Divergent(namespace, QPN_M1_OP, example.REFERENCE_NAMESPACE),
        )
        diverted(*inputs)
    observing.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
