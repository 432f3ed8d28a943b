"""The HTML report never holds a character HTML forbids: every code point of each class (the
HTML standard's input-stream parse errors) is replaced by U+FFFD, every other one kept, and a
report built from rows and a basis holding all of them parses and encodes as UTF-8."""

from __future__ import annotations

import html.parser
import sys

from routectl.review.matrix import build_matrix
from routectl.review.matrix_html import REPLACEMENT, html_text, render_report_page

ALLOWED_CONTROLS = {0x09, 0x0A, 0x0C, 0x0D}


def forbidden(code: int) -> str | None:
    """The class of a code point HTML forbids, from the standard's definitions; None when
    it is allowed."""
    if code == 0:
        return "NUL"
    if code < 0x20 and code not in ALLOWED_CONTROLS:
        return "C0 control"
    if 0x7F <= code <= 0x9F:
        return "DELETE or C1 control"
    if 0xD800 <= code <= 0xDFFF:
        return "surrogate"
    if 0xFDD0 <= code <= 0xFDEF or code & 0xFFFE == 0xFFFE:
        return "noncharacter"
    return None


def test_every_code_point_is_kept_or_replaced_by_its_class():
    every = "".join(chr(code) for code in range(sys.maxunicode + 1))
    cleaned = html_text(every)
    assert len(cleaned) == len(every)  # one for one: nothing removed, nothing added
    wrong = [
        (hex(code), forbidden(code))
        for code, (before, after) in enumerate(zip(every, cleaned, strict=True))
        if after != (REPLACEMENT if forbidden(code) else before)
    ]
    assert wrong == []
    counts: dict[str | None, int] = {}
    for code in range(sys.maxunicode + 1):
        counts[forbidden(code)] = counts.get(forbidden(code), 0) + 1
    # Each class is all there: 1 NUL, 27 C0 controls, 33 DELETE and C1, 2,048 surrogates,
    # 32 + 2 * 17 noncharacters.
    assert {k: v for k, v in counts.items() if k} == {
        "NUL": 1,
        "C0 control": 27,
        "DELETE or C1 control": 33,
        "surrogate": 2048,
        "noncharacter": 66,
    }


class Collector(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_a_report_of_hostile_text_holds_no_forbidden_character():
    hostile = "a\x00b\x01\x1b[31m\x7f\x85\ufdd0\uffff\U0010fffe\ud800z\t\n"
    route = {"kernel": None, "status": {"code": "x", "message": hostile}, "verdicts": []}
    rows = [{"id": "m/float16/tp1/none/c1/q64", "route": route}, {"id": "edge:e", "route": route}]
    page = render_report_page(
        f"proj{hostile}",
        [build_matrix(f"cat{hostile}", rows)],
        basis={f"cat{hostile}": f"basis {hostile}"},
        against=None,
        outcome=None,
    )
    page.encode("utf-8")  # a lone surrogate would raise here: the page could not be written
    assert [hex(ord(ch)) for ch in page if forbidden(ord(ch))] == []
    parser = Collector()
    parser.feed(page)
    text = "".join(parser.text)
    assert f"basis a{REPLACEMENT}b" in text  # replaced visibly, where the value held it
