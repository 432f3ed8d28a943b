"""The one JSON reader's limits and messages, pinned whole (issue 28's mutation run of
`routectl.io.jsonread`).

The module docstring and docs/commands.md ("Limits on input files") state the contract: a
regular file of at most the cap (ROUTECTL_MAX_INPUT_BYTES, a positive number of bytes),
containers nested at most MAX_DEPTH = 64 deep, integers within 64 bits, finite numbers, and
every failure one InputError line that starts with what the text is and where it came from,
quoting the user's text through `shorten`. The hostile-input corpus checks fragments of these
lines through the CLI; here each boundary is taken from both sides and each message compared
whole, so that a refactor moving a bound by one or dropping a clause of a line is caught.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from routectl.errors import InputError
from routectl.io.jsonread import (
    DEFAULT_LIMITS,
    DEFAULT_MAX_BYTES,
    MAX_BYTES_VARIABLE,
    MAX_DEPTH,
    QUOTE_CHARS,
    Limits,
    current_limits,
    is_decimal,
    limits_from_environ,
    name_list,
    nesting_depth_exceeds,
    parse_json,
    read_bytes,
    read_json_file,
    shorten,
    using_limits,
)

CAP_HINT = f"(set {MAX_BYTES_VARIABLE} to a larger number of bytes to read it)"


def nested(levels: int, inner: str = "") -> str:
    """`levels` lists, one inside the other, around `inner`."""
    return "[" * levels + inner + "]" * levels


def refusal(data: bytes | str, source: str = "doc") -> str:
    """The one-line message parse_json gives for `data` (a test failure when it reads it)."""
    with pytest.raises(InputError) as info:
        parse_json(data, source)
    message = str(info.value)
    assert "\n" not in message
    return message


# --- the cap from the environment ----------------------------------------------------------


def test_the_documented_default_cap_is_512_mib() -> None:
    # docs/commands.md: "every file routectl reads must be a regular file of at most 512 MiB".
    assert DEFAULT_MAX_BYTES == 512 * 1024 * 1024
    assert DEFAULT_LIMITS == Limits() == Limits(max_bytes=512 * 1024 * 1024)
    assert MAX_BYTES_VARIABLE == "ROUTECTL_MAX_INPUT_BYTES"


@pytest.mark.parametrize("environ", [{}, {"ROUTECTL_MAX_INPUT_BYTES": ""}, {"OTHER": "5"}])
def test_an_unset_or_empty_cap_is_the_default(environ: dict[str, str]) -> None:
    assert limits_from_environ(environ) == DEFAULT_LIMITS


@pytest.mark.parametrize(
    ("text", "cap"),
    [("1", 1), ("1024", 1024), (" 2048 ", 2048), ("\t7\n", 7), ("9" * 19, int("9" * 19))],
)
def test_a_positive_number_of_bytes_is_the_cap(text: str, cap: int) -> None:
    # Surrounding blanks are stripped; up to 19 ASCII digits are a number.
    assert limits_from_environ({MAX_BYTES_VARIABLE: text}) == Limits(max_bytes=cap)


@pytest.mark.parametrize(
    "text", ["0", "00", "-1", "+5", "1.5", "1e6", "ten", "\u00b2", "\u0663", "1" * 20, " "]
)
def test_anything_but_a_positive_number_of_bytes_is_refused_whole(text: str) -> None:
    with pytest.raises(InputError) as info:
        limits_from_environ({MAX_BYTES_VARIABLE: text})
    # The message quotes the value as given (before stripping), through shorten.
    assert str(info.value) == (
        f"ROUTECTL_MAX_INPUT_BYTES must be a positive number of bytes, got {text!r}"
    )


def test_a_long_cap_value_is_quoted_short() -> None:
    text = "x" * 500
    with pytest.raises(InputError) as info:
        limits_from_environ({MAX_BYTES_VARIABLE: text})
    assert str(info.value) == (
        f"ROUTECTL_MAX_INPUT_BYTES must be a positive number of bytes, got "
        f"{'x' * 80!r}... (500 characters)"
    )


@pytest.mark.parametrize(
    ("text", "digits", "wanted"),
    [
        ("0", 19, True),
        ("9" * 19, 19, True),
        ("9" * 20, 19, False),
        ("123", 3, True),
        ("1234", 3, False),
        ("", 19, False),
        ("12a", 19, False),
        ("\u00b2", 19, False),
        ("\u0663\u0664", 19, False),
        ("-1", 19, False),
    ],
)
def test_is_decimal(text: str, digits: int, wanted: bool) -> None:
    # ASCII digits only (int() refuses "²"), at most `max_digits` of them.
    assert is_decimal(text, digits) is wanted


def test_using_limits_scopes_the_cap_and_restores_it_after_an_error() -> None:
    assert current_limits() == DEFAULT_LIMITS
    with using_limits(Limits(max_bytes=10)):
        assert current_limits() == Limits(max_bytes=10)
        with using_limits(Limits(max_bytes=3)):
            assert current_limits() == Limits(max_bytes=3)
        assert current_limits() == Limits(max_bytes=10)
    assert current_limits() == DEFAULT_LIMITS
    with pytest.raises(RuntimeError), using_limits(Limits(max_bytes=4)):
        raise RuntimeError("inside")
    assert current_limits() == DEFAULT_LIMITS


# --- quoting the user's text ---------------------------------------------------------------


def test_shorten_keeps_a_value_of_the_limit_and_cuts_one_longer() -> None:
    assert QUOTE_CHARS == 80
    # A string longer than the limit: its first 80 characters quoted, then its length.
    assert shorten("a" * 81) == f"{'a' * 80!r}... (81 characters)"
    assert shorten("b" * 12_345) == f"{'b' * 80!r}... (12,345 characters)"
    assert shorten(b"z" * 81) == f"{b'z' * 80!r}... (81 bytes)"
    assert shorten(b"z" * 1_000_000) == f"{b'z' * 80!r}... (1,000,000 bytes)"
    assert shorten("abcdef", limit=3) == "'abc'... (6 characters)"
    # Otherwise the repr, whole when it is at most the limit, cut to it when longer.
    assert shorten("a" * 78) == repr("a" * 78)  # 80 characters with the quotes
    assert shorten("a" * 79) == f"{repr('a' * 79)[:80]}... (81 characters)"
    assert shorten("a" * 80) == f"{repr('a' * 80)[:80]}... (82 characters)"
    assert shorten(b"z" * 77) == repr(b"z" * 77)  # b'...': 80 characters
    assert shorten(b"z" * 80) == f"{repr(b'z' * 80)[:80]}... (83 characters)"
    assert shorten("a", limit=3) == "'a'"
    assert shorten("ab", limit=3) == "'ab... (4 characters)"


def test_shorten_cuts_the_repr_of_any_other_value() -> None:
    short = list(range(5))
    assert shorten(short) == repr(short)
    assert shorten(None) == "None" and shorten(12) == "12"
    long = list(range(100))
    text = repr(long)
    assert shorten(long) == f"{text[:80]}... ({len(text):,} characters)"
    # A repr of exactly the limit stays whole; longer ones are cut with their length.
    eighty = [1] * 25 + [12345]  # "[" + 25 * "1, " + "12345]" = 1 + 75 + 6 = 82
    assert len(repr(eighty)) == 82
    assert shorten(eighty) == f"{repr(eighty)[:80]}... (82 characters)"
    exact = [1] * 25 + [123]  # 80 characters
    assert len(repr(exact)) == 80
    assert shorten(exact) == repr(exact)


def test_name_list_shows_twenty_then_counts_the_rest() -> None:
    names = [f"N{i}" for i in range(25)]
    assert name_list(names[:20]) == ", ".join(names[:20])
    assert name_list(names[:21]) == ", ".join(names[:20]) + " and 1 more"
    assert name_list(names) == ", ".join(names[:20]) + " and 5 more"
    many = [f"V{i}" for i in range(5_020)]
    assert name_list(many) == ", ".join(many[:20]) + " and 5,000 more"
    assert name_list(names, limit=2) == "N0, N1 and 23 more"
    assert name_list([]) == ""


def test_name_list_cuts_each_name_past_the_quote_limit() -> None:
    assert name_list(["a" * 80]) == "a" * 80
    assert name_list(["a" * 81, "b"]) == f"{'a' * 80}... (81 characters), b"
    assert name_list(["c" * 100_000]) == f"{'c' * 80}... (100,000 characters)"


# --- reading a file ------------------------------------------------------------------------


def test_a_file_of_exactly_the_cap_is_read_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_bytes(b"[" + b"1," * 9 + b"1]")  # 21 bytes
    assert read_bytes(path, "snapshot", Limits(max_bytes=21)) == path.read_bytes()
    assert read_json_file(path, "snapshot", Limits(max_bytes=21)) == [1] * 10
    with pytest.raises(InputError) as info:
        read_bytes(path, "snapshot", Limits(max_bytes=20))
    assert str(info.value) == (
        f"snapshot {path} is 21 bytes, over the 20-byte limit on input files {CAP_HINT}"
    )


def test_the_cap_message_groups_thousands(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 12_345)
    with pytest.raises(InputError) as info:
        read_bytes(path, "baseline", Limits(max_bytes=1_234))
    assert str(info.value) == (
        f"baseline {path} is 12,345 bytes, over the 1,234-byte limit on input files {CAP_HINT}"
    )


def test_the_cap_in_force_is_the_one_using_limits_sets(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_bytes(b"[1, 2, 3]")  # 9 bytes
    with using_limits(Limits(max_bytes=8)), pytest.raises(InputError) as info:
        read_json_file(path, "expected changes")
    assert str(info.value) == (
        f"expected changes {path} is 9 bytes, over the 8-byte limit on input files {CAP_HINT}"
    )
    with using_limits(Limits(max_bytes=9)):
        assert read_json_file(path, "expected changes") == [1, 2, 3]
    # An explicit Limits wins over the one in force.
    with using_limits(Limits(max_bytes=1)):
        assert read_bytes(path, "x", Limits(max_bytes=9)) == b"[1, 2, 3]"


def test_a_file_larger_than_one_read_chunk_is_read_whole(tmp_path: Path) -> None:
    # Over 1.5 MiB (the reader takes 1 MiB at a time): every byte back, in order.
    values = list(range(250_000))
    data = json.dumps(values).encode()
    assert len(data) > 1024 * 1024 + 512 * 1024
    path = tmp_path / "large.json"
    path.write_bytes(data)
    assert read_bytes(path, "snapshot") == data
    assert read_bytes(path, "snapshot", Limits(max_bytes=len(data))) == data
    assert read_json_file(path, "snapshot") == values
    with pytest.raises(InputError) as info:
        read_bytes(path, "snapshot", Limits(max_bytes=len(data) - 1))
    assert str(info.value) == (
        f"snapshot {path} is {len(data):,} bytes, over the {len(data) - 1:,}-byte limit on "
        f"input files {CAP_HINT}"
    )


def test_an_empty_file_is_no_json(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_bytes(b"")
    assert read_bytes(path, "snapshot") == b""
    with pytest.raises(InputError) as info:
        read_json_file(path, "snapshot")
    assert str(info.value) == f"snapshot {path} is not valid JSON: it is empty"


def test_a_missing_file_names_itself_and_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "missing.json"
    with pytest.raises(InputError) as info:
        read_json_file(path, "baseline snapshot")
    assert str(info.value) == f"cannot read baseline snapshot {path}: No such file or directory"


def test_a_directory_is_not_a_regular_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        read_bytes(tmp_path, "snapshot")
    assert str(info.value) == (
        f"cannot read snapshot {tmp_path}: it is a directory, not a regular file"
    )


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    with pytest.raises(InputError) as info:
        read_bytes(path, "kernel config")
    assert str(info.value) == (
        f"cannot read kernel config {path}: it is a FIFO (named pipe), not a regular file"
    )


def test_a_socket_is_not_a_regular_file(tmp_path: Path) -> None:
    # A bound UNIX socket exists on disk; opening it fails (ENXIO) before fstat: the reason
    # is the system's, still one line naming the file.
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        with pytest.raises(InputError) as info:
            read_bytes(path, "snapshot")
    message = str(info.value)
    assert message.startswith(f"cannot read snapshot {path}: ")
    assert "\n" not in message and len(message) > len(f"cannot read snapshot {path}: ")


def test_a_dangling_link_is_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "link.json"
    path.symlink_to(tmp_path / "nowhere.json")
    with pytest.raises(InputError) as info:
        read_bytes(path, "snapshot")
    assert str(info.value) == f"cannot read snapshot {path}: No such file or directory"


# --- nesting depth -------------------------------------------------------------------------


@pytest.mark.parametrize("levels", [MAX_DEPTH - 1, MAX_DEPTH])
def test_sixty_four_levels_are_read(levels: int) -> None:
    assert MAX_DEPTH == 64
    text = nested(levels, "1")
    assert nesting_depth_exceeds(text.encode()) is False
    value = parse_json(text, "doc")
    for _ in range(levels):
        assert isinstance(value, list) and len(value) == 1
        value = value[0]
    assert value == 1


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, MAX_DEPTH + 2, 1000])
def test_sixty_five_levels_are_refused(levels: int) -> None:
    text = nested(levels)
    assert nesting_depth_exceeds(text.encode()) is True
    assert refusal(text) == "doc is not accepted: JSON nested deeper than 64 levels"


def test_objects_count_as_levels_like_lists() -> None:
    def objects(levels: int) -> str:
        return '{"k":' * levels + "0" + "}" * levels

    assert parse_json(objects(64), "doc") is not None
    assert refusal(objects(65)) == "doc is not accepted: JSON nested deeper than 64 levels"
    mixed = '{"a":[' * 32 + "[]" + "]}" * 32  # 65 levels
    assert refusal(mixed) == "doc is not accepted: JSON nested deeper than 64 levels"


def test_brackets_inside_strings_are_no_levels() -> None:
    # Strings holding brackets, escaped quotes and escaped backslashes next to the nesting.
    inner = json.dumps(["[[[[" * 40, '\\"[{', "\\\\", "]]]]" * 40, '"'])
    text = nested(MAX_DEPTH - 1, inner)  # 64 levels with the inner list
    assert nesting_depth_exceeds(text.encode()) is False
    assert isinstance(parse_json(text, "doc"), list)
    deeper = nested(MAX_DEPTH, inner)  # 65
    assert nesting_depth_exceeds(deeper.encode()) is True
    # A string ending in an escaped backslash closes there: the brackets after it count.
    tricky = '["\\\\", ' + nested(MAX_DEPTH) + "]"  # 65 levels
    assert nesting_depth_exceeds(tricky.encode()) is True
    quoted = '["\\"' + "[" * 100 + '"]'  # brackets after an escaped quote are in the string
    assert nesting_depth_exceeds(quoted.encode()) is False


def test_the_depth_limit_is_a_parameter() -> None:
    for limit in (1, 2, 5, 30):
        for levels in range(1, 3 * limit + 3):
            # Padding makes the text longer than the 2 * limit bytes the short cut skips.
            text = nested(levels, " " * (2 * limit + 2)).encode()
            assert nesting_depth_exceeds(text, limit) is (levels > limit), (limit, levels)


def test_a_wide_shallow_document_is_not_deep() -> None:
    # Thousands of sibling containers peel in one pass each level: no false alarm.
    text = json.dumps([[[]] * 5000, [{"a": [1]}] * 5000])
    assert nesting_depth_exceeds(text.encode()) is False
    assert len(parse_json(text, "doc")[0]) == 5000


def test_an_unbalanced_text_is_left_to_the_parser() -> None:
    # No `[]` pair to peel: the scan says nothing and the parser names the place.
    assert nesting_depth_exceeds(("[" * 200).encode()) is False
    assert refusal("[" * 200) == "doc is not valid JSON: Expecting value at line 1 column 201"
    assert nesting_depth_exceeds(("]" * 200).encode()) is False
    assert nesting_depth_exceeds(("[" + "]" * 200).encode()) is False
    message = refusal("[" * 10 + "]" * 9 + " " * 200)
    assert message.startswith("doc is not valid JSON: ")


def test_an_unclosed_level_beyond_the_peeled_ones_is_not_deep() -> None:
    # 64 balanced levels inside one more "[" that never closes: after 64 peels one "[" is
    # left, with no pair to peel: unbalanced, so the parser (not the depth rule) answers.
    text = "[" + nested(MAX_DEPTH, " " * 10)
    assert nesting_depth_exceeds(text.encode()) is False
    assert refusal(text).startswith("doc is not valid JSON: ")
    # Balanced, the same 65 levels are too deep.
    assert nesting_depth_exceeds((text + "]").encode()) is True


# --- numbers -------------------------------------------------------------------------------


@pytest.mark.parametrize("number", [2**64 - 1, -(2**63), 10**18, 10**19, -(10**18), 0])
def test_integers_of_64_bits_are_read_exactly(number: int) -> None:
    value = parse_json(f'{{"n": {number}, "s": "x"}}', "doc")
    assert value == {"n": number, "s": "x"}
    assert type(value["n"]) is int


@pytest.mark.parametrize(
    "number", [2**64, -(2**63) - 1, 10**20, -(10**20), 2**64 * 1000 + 7, -(2**64)]
)
def test_integers_beyond_64_bits_are_refused_whole(number: int) -> None:
    assert refusal(f"[1, {number}]", "snapshot s.json") == (
        f"snapshot s.json is not accepted: integer '{number}' does not fit in 64 bits"
    )


def test_a_huge_integer_is_quoted_short() -> None:
    digits = "7" * 5000
    assert refusal(f"[{digits}]") == (
        f"doc is not accepted: integer {'7' * 80!r}... (5,000 characters) does not fit in 64 bits"
    )


def test_a_long_digit_run_inside_a_string_reads_the_same() -> None:
    # 19+ digits anywhere send the text to the strict parser: the value is the same.
    document = {"id": "9" * 40, "n": [1, -2, 3.5, 1e300], "t": True, "z": None}
    assert parse_json(json.dumps(document), "doc") == document
    eighteen = {"id": "9" * 18, "n": 2**63}
    assert parse_json(json.dumps(eighteen), "doc") == eighteen


@pytest.mark.parametrize("text", ["1e999", "-1e999", "1e400"])
def test_infinite_numbers_are_refused_whole(text: str) -> None:
    assert refusal(f"[{text}]") == (
        f"doc is not accepted: number '{text}' is out of range for a 64-bit float"
    )
    # The same on the strict parser's path (a 19-digit run elsewhere in the text).
    assert refusal(f'["{"1" * 19}", {text}]') == (
        f"doc is not accepted: number '{text}' is out of range for a 64-bit float"
    )


def test_large_finite_floats_are_read() -> None:
    assert parse_json("[1.7976931348623157e308, -1e308, 5e-324]", "doc") == [
        1.7976931348623157e308,
        -1e308,
        5e-324,
    ]
    assert parse_json(f'["{"1" * 19}", 1e308]', "doc") == ["1" * 19, 1e308]


@pytest.mark.parametrize("name", ["NaN", "Infinity", "-Infinity"])
def test_the_constants_javascript_allows_are_not_json(name: str) -> None:
    assert refusal(f'{{"a": {name}}}') == f"doc is not valid JSON: {name} is not JSON"
    assert refusal(f'{{"a": {name}, "b": {2**64 - 1}}}') == (
        f"doc is not valid JSON: {name} is not JSON"
    )


# --- messages of text that is no JSON ------------------------------------------------------


def test_a_byte_order_mark_is_refused_with_the_remedy() -> None:
    assert refusal(b'\xef\xbb\xbf{"a": 1}') == (
        "doc is not valid JSON: it starts with a UTF-8 byte order mark (save it without one)"
    )
    assert refusal("\ufeff[]") == (
        "doc is not valid JSON: it starts with a UTF-8 byte order mark (save it without one)"
    )


@pytest.mark.parametrize("text", ["", "   ", "\n\t\r\n"])
def test_an_empty_or_blank_text_is_no_json(text: str) -> None:
    assert refusal(text) == "doc is not valid JSON: it is empty"


def test_bytes_that_are_not_utf8_name_the_byte_and_its_place() -> None:
    assert refusal(b'["a", "\xff"]') == (
        "doc is not valid JSON: not UTF-8 (invalid start byte at byte 7, line 1 column 8)"
    )
    assert refusal(b'[\n "ok",\n  "\xc3"]') == (
        "doc is not valid JSON: not UTF-8 (invalid continuation byte at byte 12, line 3 column 4)"
    )


def test_a_syntax_error_names_the_line_and_column() -> None:
    assert refusal('{"a": 1,\n "b": }', "expected e.json") == (
        "expected e.json is not valid JSON: Expecting value at line 2 column 7"
    )
    assert refusal('{"a": 1} {') == "doc is not valid JSON: Extra data at line 1 column 10"
    assert refusal("[1, 2,]") == "doc is not valid JSON: Expecting value at line 1 column 7"


def test_a_lone_surrogate_names_orjsons_reason_and_the_place() -> None:
    # The standard library reads a lone surrogate escape; orjson refuses it and names it.
    assert refusal('{"a":\n  "\\ud800"}') == (
        "doc is not valid JSON: no low surrogate in string at line 2 column 4"
    )


def test_text_and_bytes_parse_alike() -> None:
    text = '{"caf\u00e9": ["\u4e2d", 1, 2.5, false, null]}'
    assert (
        parse_json(text, "doc")
        == parse_json(text.encode(), "doc")
        == {"caf\u00e9": ["\u4e2d", 1, 2.5, False, None]}
    )


def test_a_lone_surrogate_character_in_text_is_not_utf8() -> None:
    # A str holding a lone surrogate (not an escape) is encoded as it is
    # ("surrogatepass"), so it is refused as bytes that are no UTF-8, never a crash.
    data = '["ok", "\ud800"]'
    raw = data.encode("utf-8", "surrogatepass")
    with pytest.raises(UnicodeDecodeError) as decode:
        raw.decode("utf-8")
    reason, start = decode.value.reason, decode.value.start
    assert start == 8
    assert refusal(data) == (
        f"doc is not valid JSON: not UTF-8 ({reason} at byte 8, line 1 column 9)"
    )


def test_read_json_file_obeys_the_limits_it_is_given(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_bytes(b"[1, 2, 3]")  # 9 bytes
    with pytest.raises(InputError) as info:
        read_json_file(path, "baseline", Limits(max_bytes=8))
    assert str(info.value) == (
        f"baseline {path} is 9 bytes, over the 8-byte limit on input files {CAP_HINT}"
    )
    with using_limits(Limits(max_bytes=1)):
        assert read_json_file(path, "baseline", Limits(max_bytes=9)) == [1, 2, 3]


def test_a_file_message_starts_with_what_and_where(tmp_path: Path) -> None:
    path = tmp_path / "kc.json"
    path.write_text('{"x": 1e999}')
    with pytest.raises(InputError) as info:
        read_json_file(path, "kernel config")
    assert str(info.value) == (
        f"kernel config {path} is not accepted: number '1e999' is out of range for a 64-bit float"
    )
