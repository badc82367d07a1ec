"""Claim verification: claims, verdicts and RAGAS metrics for every answer (checks.jsonl)."""
