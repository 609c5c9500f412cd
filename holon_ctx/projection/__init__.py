"""The projection engine: pure functions from a bounded view of the ledger to a Projection.

Six subpackages, in pipeline order: each imports only from those above it
(``tests/test_layering.py`` checks it; RFC 0002 says why the stages are apart, RFC 0028 how
they were grouped).

    base/              the vocabulary every stage shares: values passed between stages (model),
                       limits (policy), blocks and items, the markup (formats), provider framing
                       rules and types, and small facts read from the ledger (waits, relation,
                       topics, chains, questions)
    rendering/         records, turns and episodes as blocks with exact token counts
                       (render over render_records and render_base), folds, digests, clipping
    planning/          one stateless projection: the view, what a call knows (context), the
                       items of every section, the budget planner, assembly and the manifest;
                       projector.py composes them
    provider_formats/  a projection laid out for a provider: chat messages and native parts
    session/           the session projection (RFC 0010): the walk, record by record, its epochs,
                       state and re-plans, and the request it makes
    measure/           what requests cost over a ledger (replay, cost) and how much of a prompt
                       is markup (density)
"""
