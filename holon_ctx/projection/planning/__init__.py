"""One stateless projection: view → context → items → plan → assembled projection.

    projector.py       the orchestrator (``Projector``): composes the modules below
    view.py            bounded, indexed reads: the current turn, window pages, point queries
    context.py         what a call knows before building items (relation, work item, pins,
                       frontier)
    pins.py            pinned turns (a pure function of the view) and SLOTS, the pinned order
    retention.py       retention facts and classes (RULES is the policy table)
    frontier.py        the execution frontier of the current work item
    history.py         the recent window as the planner reads it, page by page
    turns.py           turn items and tiers
    sections.py        items of the other sections (environment, work item, refs, episodes,
                       input)
    tail.py            the current-state tail
    planner.py         the budget planner (a prefix of a budget-independent step order)
    shown_lines.py     output lines an earlier output shows, folded into a note
    manifest.py        assembly of the text, the manifest and the per-item decisions
"""
