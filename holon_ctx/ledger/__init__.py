"""The ledger: record types, the JSONL v1 codec, and the stores (the only package doing I/O)."""
