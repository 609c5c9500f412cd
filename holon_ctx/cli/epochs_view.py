"""The session projection beside a stateless view: which epoch a turn is in, and what of the
request a runtime would send for it is a cached prefix (``preview`` and ``explain`` show it)."""

from __future__ import annotations

import attrs

from holon_ctx import LedgerStore
from holon_ctx.cli._api import SessionRequest, read_through_request
from holon_ctx.cli.wording import plural
from holon_ctx.lowlevel import EpisodeSource, MemoryStore, Projector, StoreEpisodeSource

__all__ = ["EpochView", "epoch_view", "runtime_recall"]


@attrs.frozen
class EpochView:
    request: SessionRequest
    started_at: str
    reason: str

    def line(self) -> str:
        r = self.request
        session = r.manifest.session or {}
        appended = session.get("appended_records", 0)
        assert isinstance(appended, int)  # the manifest's session figures are counts
        return (f"since {self.started_at} ({self.reason.replace('_', ' ')}), "
                f"{plural(appended, 'record')} appended since — a runtime's request now: "
                f"{r.request_tokens:,} tokens, {r.cached_tokens:,} of them the previous "
                "request's prefix (`holon-ctx replay` for every call)")


def epoch_view(store: LedgerStore, projector: Projector, budget: int,
               at: str | None) -> EpochView:
    """The session request as of ``at`` at ``budget`` (the whole request), made right after the
    one for the turn before it, so that its cached share is the one a runtime would see."""
    # The runtime's persisted re-plans are read, never written: a ledger a session worked on
    # (or the demo, whose build saves its epoch) walks from its newest epoch, not from the last
    # checkpoint (RFC 0024).
    request = read_through_request(store, budget_tokens=budget, at=at,
                                   episodes=runtime_recall(store, projector.episodes),
                                   control=projector.control, counter=projector.counter,
                                   policy=projector.policy)
    info = request.manifest.session or {}
    return EpochView(request=request, started_at=str(info.get("epoch_started_at", "?")),
                     reason=str(info.get("epoch_reason", "?")))


def runtime_recall(store: LedgerStore, episodes: EpisodeSource | None) -> EpisodeSource | None:
    """The recall a runtime's session makes over a database's episodes: as of the position
    each request projects (RFC 0020), where the CLI's stateless plans recall every stored
    episode. A walk that recalled every episode re-planned earlier turns with episodes archived
    after them, and showed another request than the runtime's (RFC 0024, decision 5: on the
    demo at 4,096, 3,032 tokens against 2,894). A ledger read from a file keeps the in-memory
    archive as built (cli/file_episodes.py): no runtime archived it, there is no other."""
    if isinstance(episodes, StoreEpisodeSource) and not isinstance(store, MemoryStore) \
            and not episodes.as_of_position:
        return StoreEpisodeSource(episodes.episodes, store, episodes.weights,
                                  as_of_position=True)
    return episodes
