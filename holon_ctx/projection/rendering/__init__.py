"""Records, turns and episodes as blocks with exact token counts.

    render.py          ``Renderer``: a turn's and the work item's forms, over
    render_records.py  a record's blocks, tool runs and changed re-runs, over
    render_base.py     label lines, record bodies and excerpts, fenced and trusted blocks, the memo
    episode_forms.py   a recalled episode's forms, from the episode
    folding.py         runs of low-value turns and repeated tool calls, folded
    digest.py          one-line digests of a turn and of a work-item transition
    clipping.py        cutting the first step that does not fit to the tokens left
    effects.py         side effects the ledger has not resolved, tracked by a session walk
"""
