"""The projection's vocabulary, shared by every stage (nothing here imports another stage).

    model.py           values passed between stages and the manifest's types
    policy.py          every limit, with its default
    items.py           blocks, forms, priorities and items: what the renderer makes and the
                       planner chooses between
    formats.py         every piece of markup (fences, labels, notes), written in one place
    framing.py         each provider's framing around messages, counted (measure_request)
    provider_types.py  typed shapes of the provider requests
    questions.py       whether a text asks a question (moved to the ledger; importable here)
    waits.py           waits as the latest records leave them (answered ones not open), and the
                       governed control state settled
    relation.py        how the current turn relates to what came before
    topics.py          which older turns the current input is about, and which hold a decision
    chains.py          current-chain membership, decided newest first
"""
