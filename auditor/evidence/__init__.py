"""Signed, self-verifying audit bundles (`auditor keygen`, `bundle`, `sign`, `verify`).

A bundle is one deterministic tar laid out as a BagIt bag (RFC 8493): the run dirs, the
report rendered from them, the labels and calibration the figures used, the index manifest
(and with `--with-documents` the documents) and the questions. Beside the bag's tag files,
`audit.dsse.json` is a DSSE envelope whose payload is an in-toto Statement v1: every other file
of the bag is a subject with its sha256, and the predicate says what an auditor asks (period,
system, knowledge base, judge, figures, review, signers' tools). `verify` checks it offline
against public keys the verifier brings, and recomputes the figures with the code that made
them. docs/compliance.md says what each field answers.
"""
