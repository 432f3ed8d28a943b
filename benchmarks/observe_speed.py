"""What does observing a real run cost, and how fast does `routectl parity` join a large record?

1. The session observer's cost per call (`routectl.replay.observe.RouteObserver`, inside a
   layer's call context as the engine enters it): a catalogue op (the QPN M1 op on meta
   tensors, so the op itself is cheap: its fake kernel) and a plain aten op (`torch.add` on
   two small CPU tensors, which the observer only passes through), each timed `--calls`
   times with and without the observer; the difference per call is the observer's cost
   (goal: under 2 us a catalogue call on CPU). Median of `--repeat` runs.
2. The parity join of a record of `--entries` observations (one QPN M1 call of M = 1 per
   layer, every layer a distinct name): the record validated (`parse_record`, JSON Schema
   included) and joined with the retained row (`check_parity`), each timed; then the peak
   traced memory of a second, untimed join.

Run from the repository root: `python benchmarks/observe_speed.py [--calls N] [--entries N]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import native.reference  # noqa: E402,F401  (registers the routectl:: reference ops)
from native.awq_schemas import QPN_M1_OP, REFERENCE_NAMESPACE  # noqa: E402
from routectl import EngineConfig, Hardware, load_project  # noqa: E402
from routectl.engine.observing import native_build  # noqa: E402
from routectl.engine.startup import start  # noqa: E402
from routectl.replay.harness import RecordingNamespace  # noqa: E402
from routectl.replay.observe import RouteObserver  # noqa: E402
from routectl.replay.observed import Header, Target  # noqa: E402
from routectl.review.parity import check_parity  # noqa: E402
from routectl.review.snapshot import read_snapshot  # noqa: E402

PROJECT = load_project(ROOT)
WORKLOAD = EngineConfig(tp=4, max_num_seqs=8, max_num_batched_tokens=8192)
CATEGORY = "sm70-awq-moe"


def qpn_call() -> Any:
    """One QPN M1 call of M = 1 on meta tensors of the contract's shapes (3-byte metadata)."""
    from native.awq_layout import qpn_m1_arguments

    op = getattr(getattr(torch.ops, REFERENCE_NAMESPACE), QPN_M1_OP)
    args = [
        torch.empty(spec.shape, dtype=getattr(torch, spec.dtype), device="meta")
        for spec in qpn_m1_arguments(True).values()
    ]
    return lambda: op(*args)


class NullMode(TorchDispatchMode):
    """A dispatch mode that only runs each call: torch's own cost of any Python mode."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


def add_call() -> Any:
    a, b = torch.ones(4), torch.ones(4)
    return lambda: torch.add(a, b)


def timed(call: Any, calls: int, observer: RouteObserver | NullMode | None) -> float:
    """Seconds for `calls` calls, under `observer` (inside a layer call of M = 1) or none."""
    if isinstance(observer, NullMode):
        with observer:
            start_s = time.perf_counter()
            for _ in range(calls):
                call()
            return time.perf_counter() - start_s
    if observer is None:
        start_s = time.perf_counter()
        for _ in range(calls):
            call()
        return time.perf_counter() - start_s
    with observer, observer.in_layer("model.layers.0.mlp.experts", 1):
        start_s = time.perf_counter()
        for _ in range(calls):
            call()
        return time.perf_counter() - start_s


def per_call_cost(name: str, call: Any, calls: int, repeat: int) -> None:
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the fake kernel refused the shapes: say so
        print(f"{name}: cannot time ({type(exc).__name__}: {exc})")
        return
    plain, null, observed = [], [], []
    for _ in range(repeat):
        plain.append(timed(call, calls, None) / calls)
        null.append(timed(call, calls, NullMode()) / calls)
        observer = RouteObserver(PROJECT.catalogue, REFERENCE_NAMESPACE, is_capturing=lambda: False)
        observed.append(timed(call, calls, observer) / calls)
    base, mode, seen = (statistics.median(x) * 1e6 for x in (plain, null, observed))
    print(
        f"{name}: {base:.2f} us a call without a mode, {mode:.2f} us under a null dispatch "
        f"mode, {seen:.2f} us under the observer: the observer's cost {seen - base:.2f} us a "
        f"call, {seen - mode:.2f} us of it its own (median of {repeat} x {calls:,})"
    )


def parity_join(entries: int) -> None:
    from routectl.replay.observed import parse_record

    session = start(PROJECT, {"sm70_awq_moe": {"qpn_m1": True}}, Hardware(70), WORKLOAD, environ={})
    header = Header(
        "0.1.0",
        PROJECT.name,
        Target(CATEGORY),
        WORKLOAD.to_json(),
        70,
        session.policy_hash,
        native_build(PROJECT, RecordingNamespace(PROJECT.catalogue)),
    )
    plan = {"m": 1, "metadata": "3-byte", "routed_slots": 10}
    document = {
        "schema_version": 1,
        **header.to_json(),
        "entries": [
            {
                "layer": f"model.layers.{i}.mlp.experts",
                "m": 1,
                "captured": i % 2 == 0,
                "op": QPN_M1_OP,
                "plan": dict(plan),
                "count": i + 1,
            }
            for i in range(entries)
        ],
    }
    assert PROJECT.snapshot_dir is not None
    rows = {CATEGORY: read_snapshot(PROJECT.snapshot_dir / f"{CATEGORY}.json").by_id()}
    start_s = time.perf_counter()
    record = parse_record(document, "synthetic", PROJECT.catalogue.ops)
    parsed_s = time.perf_counter() - start_s
    start_s = time.perf_counter()
    result = check_parity(PROJECT, [record], rows)
    join_s = time.perf_counter() - start_s
    # The peak from a second join: tracing slows every allocation, so it is not timed.
    tracemalloc.start()
    check_parity(PROJECT, [record], rows)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert result.ok and len(result.rows[0].agreed) == entries
    print(
        f"parity of {entries:,} observations: record validated in {parsed_s:.2f} s, joined in "
        f"{join_s:.2f} s (peak traced memory of the join {peak / 2**20:.1f} MiB)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--entries", type=int, default=100_000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    per_call_cost("catalogue op (QPN M1, meta)", qpn_call(), args.calls, args.repeat)
    per_call_cost("aten op passed through (torch.add)", add_call(), args.calls, args.repeat)
    parity_join(args.entries)
    return 0


if __name__ == "__main__":
    sys.exit(main())
