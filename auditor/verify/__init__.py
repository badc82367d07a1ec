"""Claim verification: claims, verdicts and RAGAS metrics for every answer (checks.jsonl).

The route of one answer, each step a module named for its noun (`pipeline` calls them in
this order; nothing calls back up the list):

    check        run dir: answers left to check, judge and embedder, check.json, resume
    pipeline     one batch of answers, step by step:
      claims       0. outcome (checked / refusal / no context)      helpers: kinds, extraction
      listing      1. the judge lists the claims; cleaned
      premise      2. each listed claim against its own answer; sentences added (listing)
      evidence     3. each claim's likeliest source chunks; one label call per pair
      verdicts     4. verdict, p_supported, sources, evidence     (entailment, figures)
      quotes       5. optional: the claim against its quote alone
      record       6. the checks.jsonl row
    examples     7. optional (`--examples`): each row's facts moved by what people said of
                 its question's labelled answers, as `check` writes it (any runner)
    asker        sends each step's calls as one judge batch, re-asks, books usage
    metrics      the other RAGAS metrics, riding along in steps 1 and 3 (ragas_judge)
    thresholds   agreement with human labels; the decision threshold (benches, calibrate)
"""
