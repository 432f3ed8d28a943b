"""The row-id grammar's attention extension (docs/contracts/attention.md §6.1): `-` in the
first slot and digits in the spec slot, in the code, the schemas, the id parsers and the
matrix; the earlier grammar's ids stay valid."""

from __future__ import annotations

import pytest

from routectl.errors import InputError
from routectl.io.schemas import schema_violation
from routectl.review.compare import split_id
from routectl.review.matrix import MATRIX_ID
from routectl.rows import ROW_ID
from routectl.workload import SPEC_METHODS, EngineConfig

ATTENTION_ID = "decode-h256g6-none-eager/float16/tp1/dflash2/c1/q1"


@pytest.mark.parametrize(
    "text",
    [
        ATTENTION_ID,
        "mixed-h128g1-anchor-graph/fp8_e4m3/tp1/ddtree/c3/q32",
        "27b_dflash2_nvfp4/fp8_e4m3/tp4/dflash/c4/q8192",  # the earlier grammar
        "edge:prefix_q1024_declined",
    ],
)
def test_the_grammar_accepts_attention_and_earlier_ids(text):
    assert ROW_ID.match(text)
    assert schema_violation("expected-changes", [text]) is None
    assert split_id(f"sm70-attention:{text}", {"sm70-attention"}) == ("sm70-attention", text)


@pytest.mark.parametrize(
    "text",
    [
        "decode h256/float16/tp1/none/c1/q1",  # a space
        "decode-h256/float16/tp1/DFlash2/c1/q1",  # upper case in the spec
        "decode-h256/float-16/tp1/none/c1/q1",  # `-` is for the first slot only
        "edge:prefix-q1024",  # probe names keep their grammar
    ],
)
def test_the_grammar_still_refuses_malformed_ids(text):
    assert not ROW_ID.match(text)
    assert schema_violation("expected-changes", [text]) is not None
    with pytest.raises(InputError, match="malformed row id"):
        split_id(text, {"sm70-attention"})


def test_the_matrix_reads_attention_ids_by_dimension():
    match = MATRIX_ID.match(ATTENTION_ID)
    assert match is not None
    assert match.group("model") == "decode-h256g6-none-eager"
    assert match.group("spec") == "dflash2"


def test_engine_accepts_a_categorys_declared_methods_only():
    with pytest.raises(ValueError, match="speculative method"):
        EngineConfig(spec_method="ddtree")
    engine = EngineConfig(spec_method="ddtree", declared_methods=("dflash2", "ddtree"))
    assert engine.spec_method == "ddtree"
    # Not a fact of the engine: equality and the JSON form ignore it.
    assert "declared_methods" not in engine.to_json()
    assert EngineConfig(declared_methods=("ddtree",)) == EngineConfig()
    assert "ddtree" not in SPEC_METHODS
