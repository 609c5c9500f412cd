"""The projection engine: pure functions from a bounded view of the ledger to a Projection."""
