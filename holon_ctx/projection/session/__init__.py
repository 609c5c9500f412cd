"""The session projection (RFC 0010): one request per model call, walked record by record.

    session.py         ``SessionProjector``: the walk and the request
    session_base.py    what a projector holds, its state key and the tail
    session_epochs.py  re-plans and the persisted epochs
    session_state.py   the walk's state and the request's values
    checkpoints.py     where a walk with no saved state starts
    replan.py          a re-plan: the ledger planned as of a position and frozen into parts
    work_state.py      the work item and frontier a planned epoch's history states
    read_through.py    the request a runtime would send, made by a reader that writes nothing
"""
