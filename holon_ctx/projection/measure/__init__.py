"""What requests cost and hold, measured over a ledger.

    replay.py          a ledger replayed as a runtime would, each approach's bill per call
    cost.py            what a sequence of requests costs at a provider that caches prefixes
    density.py         how much of a prompt is ledger content, and whether the newest steps were
                       cut with room left
"""
