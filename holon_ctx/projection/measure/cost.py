"""What a sequence of requests costs at a provider that caches prompt prefixes.

Theory of operation. Every major provider bills a re-read prefix at a fraction of the input price
(Anthropic cache reads 0.1x and writes 1.25x; OpenAI cached input 0.5x; Gemini 0.25x). A request
hits the cache for the longest prefix it shares, token for token, with a request sent before it.
The model here is the idealised one a runtime sees when it calls once per turn within the cache's
lifetime: request *t* shares with request *t - 1* the longest common prefix of their token
streams (:func:`shared_prefix_tokens`); those tokens are billed at the cache-read price, the
tokens up to the request's last cache breakpoint at the cache-write price (Anthropic writes what a
breakpoint covers), and any tokens after that breakpoint at the plain input price: a session
request's current-state tail, everything after a stateless request's stable part. Approaches that
keep a rolling breakpoint at the very end (keep-newest, the whole history) write all their new
tokens. The first request shares nothing. Prices are relative to one uncached input token, so a
request's ``billed`` is in "uncached-token equivalents" and ``billed / sent`` is the share of the
uncached price.

The same model is applied to every approach compared (holon_ctx's session and stateless
projections, keep-newest, the whole history), so the comparison is fair even where the model
idealises: it ignores cache TTLs, minimum cacheable lengths and block granularity, which affect
every approach alike.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import attrs

from holon_ctx.errors import InputError, quote_value

__all__ = ["PRICES", "CostMeter", "PriceTable", "RequestCost", "load_price_table", "price_table",
           "shared_prefix_tokens"]


@attrs.frozen
class PriceTable:
    """Prices per token relative to one uncached input token (``input`` is 1.0 by definition)."""

    name: str
    cache_read: float
    cache_write: float
    input: float = 1.0

    def billed(self, sent_tokens: int, shared_tokens: int, unwritten_tokens: int = 0) -> float:
        """Uncached-token equivalents for a request of ``sent_tokens`` sharing ``shared_tokens``
        with the one before; its last ``unwritten_tokens`` come after its last cache breakpoint,
        so they are plain input, not written to the cache."""
        unwritten = max(0, min(unwritten_tokens, sent_tokens - shared_tokens))
        return (self.cache_read * shared_tokens
                + self.cache_write * (sent_tokens - shared_tokens - unwritten)
                + self.input * unwritten)


#: Published cache prices (December 2026): Anthropic reads 0.1x and writes 1.25x (5-minute
#: cache); OpenAI bills cached input at 0.5x with no write premium; Gemini reads at 0.25x.
PRICES: dict[str, PriceTable] = {
    "anthropic": PriceTable("anthropic", cache_read=0.1, cache_write=1.25),
    "openai": PriceTable("openai", cache_read=0.5, cache_write=1.0),
    "gemini": PriceTable("gemini", cache_read=0.25, cache_write=1.0),
}

_PRICE_FIELDS = ("cache_read", "cache_write")


def price_table(name: str, *, option: str | None = None) -> PriceTable:
    """A bundled table by name (``PRICES``), else the JSON file at ``name``; ``option`` is the
    setting that named it, for the error when it is neither."""
    if name in PRICES:
        return PRICES[name]
    if not Path(name).exists():
        raise InputError(f"not a price table name ({', '.join(PRICES)}) nor a file",
                         source=name, path=option)
    return load_price_table(name)


def load_price_table(path: str | Path) -> PriceTable:
    """A price table from a JSON file ``{"name": …, "cache_read": 0.1, "cache_write": 1.25}``."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
        raw = json.loads(data.decode("utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read price table: {exc.strerror}", source=source) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not a JSON price table: invalid UTF-8 at byte {exc.start}",
                         source=source, line=data.count(b"\n", 0, exc.start) + 1) from None
    except json.JSONDecodeError as exc:
        # file:line as every other reader says it, not the decoder's "line 3 column 1 (char 34)".
        raise InputError(f"not a JSON price table: {exc.msg} (column {exc.colno})",
                         source=source, line=exc.lineno) from None
    if not isinstance(raw, dict):
        raise InputError("expected a JSON object", source=source, path="$")
    values: dict[str, float] = {}
    for key in _PRICE_FIELDS:
        value = raw.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(f"expected a number, got {quote_value(value)}", source=source, path=f"$.{key}")
        if not math.isfinite(value) or value < 0:
            raise InputError(f"expected a finite price >= 0, got {quote_value(value)}", source=source,
                             path=f"$.{key}")
        values[key] = float(value)
    name = raw.get("name", Path(path).stem)
    if not isinstance(name, str):
        raise InputError(f"expected a string, got {quote_value(name)}", source=source, path="$.name")
    return PriceTable(name, cache_read=values["cache_read"], cache_write=values["cache_write"])


def shared_prefix_tokens(previous: Sequence[int], current: Sequence[int]) -> int:
    """Length of the longest common prefix of two token streams."""
    n = min(len(previous), len(current))
    # Bisect on slice equality: C-speed comparisons instead of a Python loop per token.
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if previous[lo:mid] == current[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


@attrs.frozen
class RequestCost:
    """One request: tokens sent, tokens shared with the request before it, and its bill."""

    sent_tokens: int
    shared_tokens: int
    billed: float
    replanned: bool = False

    @property
    def reuse(self) -> float:
        """Share of the request's tokens that the previous request already held (0 when empty)."""
        return self.shared_tokens / self.sent_tokens if self.sent_tokens else 0.0


@attrs.define
class CostMeter:
    """Feeds requests in order; keeps the previous token stream and the running totals."""

    price: PriceTable
    requests: list[RequestCost] = attrs.Factory(list)
    _previous: Sequence[int] | None = None

    def add(self, tokens: Sequence[int], *, replanned: bool = False,
            unwritten_tokens: int = 0) -> RequestCost:
        """Price the next request (``unwritten_tokens``: its end after the last breakpoint)."""
        shared = shared_prefix_tokens(self._previous, tokens) if self._previous is not None else 0
        cost = RequestCost(sent_tokens=len(tokens), shared_tokens=shared,
                           billed=self.price.billed(len(tokens), shared, unwritten_tokens),
                           replanned=replanned)
        self._previous = tokens
        self.requests.append(cost)
        return cost

    @property
    def sent_tokens(self) -> int:
        return sum(r.sent_tokens for r in self.requests)

    @property
    def billed(self) -> float:
        return sum(r.billed for r in self.requests)

    @property
    def shared_tokens(self) -> int:
        return sum(r.shared_tokens for r in self.requests)

    @property
    def reuse(self) -> float:
        """Prefix reuse of the run: shared tokens over sent tokens (token-weighted, so that it
        moves with the bill: every shared token is billed at the read price, every other one at
        the write or the plain input price)."""
        sent = self.sent_tokens
        return self.shared_tokens / sent if sent else 0.0

    @property
    def billed_share(self) -> float:
        """Billed price as a share of sending every token uncached."""
        sent = self.sent_tokens
        return self.billed / sent if sent else 0.0

    @property
    def replans(self) -> int:
        return sum(1 for r in self.requests if r.replanned)
