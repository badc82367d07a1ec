"""Audits past one machine: the claim check spread over judge actors on a Ray cluster.

    cluster      connect to (or start) a Ray cluster; how many judge actors, with what resources
    checking     answers as a Ray dataset -> judge actors (one engine each) -> rows streamed back
                 to the driver, which alone appends them to checks.jsonl (the commit log)

The per-answer logic is `auditor.verify.pipeline.check_batch`, the same function the
single-process check calls; Ray does placement, actor restarts and task retries.
"""
