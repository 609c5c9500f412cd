"""The projection engine: pure functions from a bounded view of the ledger to a Projection.

Where things are (one concern per module; ``projector.py`` composes them, RFC 0002 says why):

    projector.py   the orchestrator: view → context → items → plan → assembled projection
    view.py        bounded, indexed reads: the current turn, window pages, point queries
    context.py     what a call knows before building items (relation, work item, pins, frontier)
    pins.py        pinned turns (a pure function of the view) and SLOTS, the pinned order table
    retention.py   retention facts and classes (RULES is the policy table)
    chains.py      current-chain membership, decided newest first
    history.py     the recent window as the planner reads it, page by page
    turns.py       turn items and tiers; folding.py: fold runs and repeated tool calls
    sections.py    items of the other sections (environment, work item, refs, episodes, input)
    frontier.py    the execution frontier of the current work item
    planner.py     the budget planner (a prefix of a budget-independent step order)
    clipping.py    cutting the first step that does not fit to the tokens left
    render.py      a turn's and the work item's forms as blocks with exact token counts, over
                   render_records.py (a record's blocks) and render_base.py (label lines,
                   excerpts, fences, the memo); episode_forms.py: a recalled episode's forms,
                   from the episode; items.py: the vocabulary; digest.py: one-line digests of a
                   turn and of a work-item transition
    formats.py     every piece of markup (fences, labels, notes), written in one place
    manifest.py    assembly of the text, the manifest and the per-item decisions
    policy.py      every limit, with its default
    model.py       values passed between stages and the manifest's types
    providers.py   chat-format framing for providers
    session.py     the session projection (RFC 0010): the walk, record by record, and the request;
                   session_base.py: what a projector holds, its state key and the tail;
                   session_epochs.py: re-plans and the persisted epochs;
                   session_state.py: the walk's state and the request's values;
                   checkpoints.py: where a walk with no saved state starts
"""
