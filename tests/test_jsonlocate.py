"""holon_ctx.ledger.jsonlocate: where a JSON path's value starts in a document's text."""

from __future__ import annotations

import json
import re
from typing import Any

import attrs
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holon_ctx.ledger.jsonlocate import line_of, value_offset

PRETTY = b"""{
  "system": "s",
  "messages": [
    {"role": "user", "content": "hi"},
    {
      "role": "assistant",
      "content": [
        {"type": "text", "text": "a \\"quoted\\" ] } [ {"},
        {"type": "tool_use", "id": "t1", "input": {"k": [1, 2, {"x": null}]}}
      ]
    }
  ]
}
"""


@pytest.mark.parametrize(("path", "line", "starts"), [
    ("$", 1, b"{\n"),
    ("$.system", 2, b'"s"'),
    ("$.messages", 3, b"[\n"),
    ("$.messages[0]", 4, b'{"role": "user"'),
    ("$.messages[0].content", 4, b'"hi"'),
    ("$.messages[1]", 5, b"{\n"),
    ("$.messages[1].role", 6, b'"assistant"'),
    ("$.messages[1].content[0].text", 8, b'"a \\"quoted'),
    ("$.messages[1].content[1]", 9, b'{"type": "tool_use"'),
    ("$.messages[1].content[1].input.k[2].x", 9, b"null}"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_a_path_finds_the_line_and_offset_of_its_value(path: str, line: int,
                                                       starts: bytes) -> None:
    """Each step of the path is followed past strings holding brackets and escaped quotes."""
    offset = value_offset(PRETTY, path)
    assert offset is not None
    assert PRETTY[offset:].startswith(starts)
    assert line_of(PRETTY, path) == line


@pytest.mark.parametrize(("path", "line"), [
    ("$.messages[0].tool_call_id", 4),  # missing: the object that lacks it
    ("$.messages[1].content[0].type.x", None),  # a step into a string
    ("$.messages[1].content[5]", None),  # past the end of an array
    ("$.messages.role", None),  # a key of an array
    ("$.messages[0][0]", None),  # an index of an object
    ("$.nope.deeper", None),  # missing before the last step
    ("$.messages[01]", None),  # not a path the readers build
    ("messages[0]", None),
    ("$.", None),
    ('$["messages"]', None),
    ("$.messages[1].content[0].text\ud800", 8),  # a lone surrogate matches no key: missing
])
def test_a_path_the_text_does_not_have(path: str, line: int | None) -> None:
    """A key missing at the last step is the object's line; any other mismatch is None."""
    assert line_of(PRETTY, path) == line


def test_one_line_crlf_and_leading_blank_lines() -> None:
    """A one-line document is line 1 throughout; CRLF ends count once; blank lines before the
    document count."""
    one = json.dumps(json.loads(PRETTY)).encode()
    assert line_of(one, "$.messages[1].content[1].input.k") == 1
    crlf = PRETTY.replace(b"\n", b"\r\n")
    assert line_of(crlf, "$.messages[1].content[1].id") == 9
    assert line_of(b"\r\n\n  [1,\r\n 2]", "$[1]") == 4
    assert line_of(b"\n\n 42 ", "$") == 3


def test_escaped_keys_are_compared_decoded() -> None:
    """A key spelt with escapes is the key it decodes to (``con\\u0074ent`` is ``content``)."""
    raw = b'[\n{"role": "user",\n "con\\u0074ent": 5}]'
    assert line_of(raw, "$[0].content") == 3
    raw = '{"\\u00e9t\\u00e9": 1,\n "été": [\n 2]}'.encode()
    assert line_of(raw, "$.été[0]") == 3
    assert line_of(b'{"a\\\\": 1,\n "a": 2}', "$.a") == 2
    assert line_of(b'{"\\ud83d\\ude00":\n1}', "$.\U0001f600") == 2


def test_a_duplicate_key_points_at_the_occurrence_the_decoder_keeps() -> None:
    """The decoder keeps the last of duplicate keys; so does the lookup, all the way down."""
    raw = b'{"messages": [1],\n "messages": [{"role": 1},\n {"role": 2,\n "role": 3}]}'
    assert msgspec.json.decode(raw)["messages"][1]["role"] == 3
    assert line_of(raw, "$.messages") == 2
    assert line_of(raw, "$.messages[1].role") == 4


def test_a_deeply_nested_value_is_skipped_without_recursion() -> None:
    """Skipping counts brackets: a value nested far beyond the stack's depth is passed over."""
    deep = b"[" * 100_000 + b"]" * 100_000
    raw = b'{"skip": ' + deep + b',\n "x": 1}'
    assert line_of(raw, "$.x") == 2


# -- properties --------------------------------------------------------------------------------
@attrs.frozen
class Obj:
    """A JSON object as written: its members in order, duplicate keys allowed."""

    members: tuple[tuple[str, Any], ...]


_KEYS = st.one_of(st.text(max_size=5), st.sampled_from(["content", "role", "a.b", "x[0]", "]",
                                                        "é", "\U0001f600", '"', "\\"]))
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.lists(st.tuples(_KEYS, inner), max_size=4).map(lambda m: Obj(tuple(m)))),
    max_leaves=16)
_SPACE = st.sampled_from(["", "", " ", "\n", "\r\n", "\t", "\n    ", " \n\t"])


def _plain(value: Any) -> Any:
    """What a decoder makes of ``value``: objects keep the last of duplicate keys."""
    if isinstance(value, Obj):
        return {k: _plain(v) for k, v in value.members}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@st.composite
def _documents(draw: st.DrawFn) -> tuple[bytes, dict[str, int], Any]:
    """A JSON document with random whitespace between tokens and strings escaped at random, the
    byte offset where every path's value starts (the last duplicate's, as written last), and
    the value as decoded."""
    value = draw(_VALUES)
    out = bytearray()
    offsets: dict[str, int] = {}

    def string(text: str) -> bytes:
        how = draw(st.sampled_from(["plain", "ascii", "all"]))
        if how == "all":  # every character as \\uXXXX (astral ones as a surrogate pair)
            units = text.encode("utf-16-be")
            return ('"' + "".join(f"\\u{int.from_bytes(units[i:i + 2]):04x}"
                                  for i in range(0, len(units), 2)) + '"').encode()
        return json.dumps(text, ensure_ascii=how == "ascii").encode()

    def emit(node: Any, path: str) -> None:
        out.extend(draw(_SPACE).encode())
        offsets[path] = len(out)
        if isinstance(node, Obj):
            out.extend(b"{")
            for n, (key, child) in enumerate(node.members):
                out.extend((b"," if n else b"") + draw(_SPACE).encode())
                out.extend(string(key) + draw(_SPACE).encode() + b":")
                emit(child, f"{path}.{key}")
            out.extend(draw(_SPACE).encode() + b"}")
        elif isinstance(node, list):
            out.extend(b"[")
            for n, child in enumerate(node):
                out.extend(b"," if n else b"")
                emit(child, f"{path}[{n}]")
            out.extend(draw(_SPACE).encode() + b"]")
        elif isinstance(node, str):
            out.extend(string(node))
        else:
            out.extend(json.dumps(node).encode())
        out.extend(draw(_SPACE).encode())

    emit(value, "$")
    return bytes(out), offsets, _plain(value)


def _at(data: Any, path: str) -> tuple[bool, Any]:
    """``(True, value)`` when the decoded ``data`` has ``path`` (a key naming one step only)."""
    node = data
    for key, index in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path[1:]):
        if key and isinstance(node, dict) and key in node:
            node = node[key]
        elif index and isinstance(node, list) and int(index) < len(node):
            node = node[int(index)]
        else:
            return False, None
    return True, node


def _expressible(path: str, data: Any) -> bool:
    """The path names one value: no key holds ``.`` or ``[`` or is empty, so its steps parse."""
    rebuilt = "".join(f".{k}" if k else f"[{i}]"
                      for k, i in re.findall(r"\.([^.\[]+)|\[(0|[1-9]\d*)\]", path[1:]))
    return rebuilt == path[1:] and _at(data, path)[0]


@settings(max_examples=300, deadline=None)
@given(_documents(), st.data())
def test_the_offset_is_where_the_value_is_written(doc: tuple[bytes, dict[str, int], Any],
                                                  data: st.DataObject) -> None:
    """For any document, whitespace and escaping, and any path to a value the decoder keeps,
    the offset is where the serializer wrote that value, and decoding from there gives it."""
    raw, offsets, decoded = doc
    assert msgspec.json.decode(raw) == decoded
    paths = sorted(p for p in offsets if _expressible(p, decoded))
    path = data.draw(st.sampled_from(paths))
    offset = value_offset(raw, path)
    assert offset == offsets[path], (raw, path)
    text = raw.decode()
    start = len(raw[:offset].decode())
    assert json.JSONDecoder().raw_decode(text, start)[0] == _at(decoded, path)[1]
    assert line_of(raw, path) == raw.count(b"\n", 0, offset) + 1
    # A key that an object on the path lacks points at that object.
    found, node = _at(decoded, path)
    if found and isinstance(node, dict) and "absent-key" not in node:
        assert value_offset(raw, f"{path}.absent-key") == offsets[path]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=40), _documents().map(lambda d: d[0])),
       st.integers(0, 80), st.from_regex(r"\$(\.[a-z\]]{1,3}|\[[0-9]{1,2}\]){0,4}", fullmatch=True)
       | st.text(max_size=12))
def test_never_raises_on_any_text_or_path(raw: bytes, cut: int, path: str) -> None:
    """Truncated documents, random bytes and random paths give an offset or None, never an error:
    the lookup runs while another error is being reported."""
    for text in (raw, raw[:cut]):
        offset = value_offset(text, path)
        assert offset is None or 0 <= offset < len(text)
        line_of(text, path)
