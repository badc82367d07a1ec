"""RAGAS 0.4.3 prompts, response models and scoring, driven in batches by our judge.

The only module that imports ragas. RAGAS's collections metrics call their LLM one prompt at
a time; we build the very same prompts (`Prompt().to_string(Input(...))`), send them to the
judge as one batch with output constrained to the response model's (bounded) JSON schema,
parse with the same response models and score with RAGAS's own functions.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

__all__ = [
    "BINARY_INT_FIELDS",
    "average_precision",
    "bounded_schema",
    "context_precision_prompt",
    "context_precision_verdict_prompt",
    "context_recall_prompt",
    "correctness_f1",
    "correctness_prompt",
    "nli_prompt",
    "relevance_prompt",
    "statements_prompt",
]

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")  # must be "true" before ragas is imported

# Integer fields RAGAS uses as 0/1 flags; their schemas say only "integer".
BINARY_INT_FIELDS = frozenset({"verdict", "attributed", "noncommittal"})


def _faithfulness_util() -> Any:
    from ragas.metrics.collections.faithfulness import util

    return util


def statements_prompt(question: str, answer: str) -> tuple[str, type[BaseModel]]:
    """RAGAS Faithfulness step 1: break the answer into standalone statements."""
    util = _faithfulness_util()
    prompt = util.StatementGeneratorPrompt().to_string(
        util.StatementGeneratorInput(question=question, answer=answer)
    )
    return prompt, util.StatementGeneratorOutput


def nli_prompt(contexts: str, statements: list[str]) -> tuple[str, type[BaseModel]]:
    """Stock RAGAS Faithfulness step 2: every statement against the joined contexts at once."""
    util = _faithfulness_util()
    prompt = util.NLIStatementPrompt().to_string(
        util.NLIStatementInput(context=contexts, statements=statements)
    )
    return prompt, util.NLIStatementOutput


def context_precision_prompt(
    question: str, context: str, answer: str
) -> tuple[str, type[BaseModel]]:
    """RAGAS context precision: was this chunk useful for the answer (or the reference)?"""
    from ragas.metrics.collections.context_precision import util

    prompt = util.ContextPrecisionPrompt().to_string(
        util.ContextPrecisionInput(question=question, context=context, answer=answer)
    )
    return prompt, util.ContextPrecisionOutput


# the line that replaces RAGAS's output-format instruction in the verdict-alone prompt
VERDICT_ALONE = "Answer with the verdict alone, 1 or 0, and nothing else."


def context_precision_verdict_prompt(question: str, context: str, answer: str) -> str:
    """RAGAS context precision's prompt asking for the verdict alone, so that the judge's first
    generated token is it (`context_precision_verdict = "first_token"`).

    It is the stock prompt (`context_precision_prompt`, as RAGAS renders it) with three edits,
    and nothing else changed:
    - the instruction's closing words " with json output" are dropped;
    - the output-format instruction (return JSON that complies with the schema, then the
      schema, then "Do not use single quotes ...") is replaced by one line, `VERDICT_ALONE`;
    - each example's output is its verdict alone (`1`, `1`, `0`) instead of its JSON reason
      and verdict.
    The rest of the instruction, the examples' inputs, the input and the closing "Output: "
    are RAGAS's own. RuntimeError when a RAGAS release renders its prompt otherwise.
    """
    from ragas.metrics.collections.context_precision import util

    prompt = util.ContextPrecisionPrompt()
    text = prompt.to_string(
        util.ContextPrecisionInput(question=question, context=context, answer=answer)
    )
    schema = json.dumps(prompt.output_model.model_json_schema())
    output_format = (
        " with json output.\nPlease return the output in a JSON format that complies with the "
        f"following schema as specified in JSON Schema:\n{schema}Do not use single quotes in "
        "your response but double quotes,properly escaped with a backslash."
    )
    text = _replace_once(text, output_format, f".\n{VERDICT_ALONE}")
    for _, output in prompt.examples:
        stock_output = f"Output: {output.model_dump_json(indent=4)}"
        text = _replace_once(text, stock_output, f"Output: {int(output.verdict)}")
    return text


def _replace_once(text: str, old: str, new: str) -> str:
    """`text` with `old`, found exactly once before the input (the input is the caller's own
    text, never edited), replaced by `new`."""
    head, marker, rest = text.rpartition("\nNow perform the same with the following input\n")
    if not marker or head.count(old) != 1:
        raise RuntimeError(f"RAGAS's context precision prompt no longer holds {old[:60]!r}")
    return head.replace(old, new) + marker + rest


def relevance_prompt(answer: str) -> tuple[str, type[BaseModel]]:
    """RAGAS answer relevancy: the question this answer answers, and whether it is noncommittal."""
    from ragas.metrics.collections.answer_relevancy import util

    prompt = util.AnswerRelevancePrompt().to_string(util.AnswerRelevanceInput(response=answer))
    return prompt, util.AnswerRelevanceOutput


def context_recall_prompt(
    question: str, contexts: str, reference: str
) -> tuple[str, type[BaseModel]]:
    """RAGAS context recall: which sentences of the reference the contexts support."""
    from ragas.metrics.collections.context_recall import util

    prompt = util.ContextRecallPrompt().to_string(
        util.ContextRecallInput(question=question, context=contexts, answer=reference)
    )
    return prompt, util.ContextRecallOutput


def correctness_prompt(
    question: str, answer_statements: list[str], reference_statements: list[str]
) -> tuple[str, type[BaseModel]]:
    """RAGAS answer correctness: answer statements vs reference statements as TP / FP / FN."""
    from ragas.metrics.collections.answer_correctness import util

    prompt = util.CorrectnessClassifierPrompt().to_string(
        util.CorrectnessClassifierInput(
            question=question, answer=answer_statements, ground_truth=reference_statements
        )
    )
    return prompt, util.ClassificationWithReason


def correctness_f1(classification: BaseModel, beta: float = 1.0) -> float:
    """RAGAS's F-beta over the TP / FP / FN classification."""
    from types import SimpleNamespace

    from ragas.metrics.collections.answer_correctness.metric import AnswerCorrectness

    return float(AnswerCorrectness._compute_f1_score(SimpleNamespace(beta=beta), classification))  # type: ignore[arg-type]


def average_precision(verdicts: list[int]) -> float:
    """RAGAS context precision over rank order (0.0 when no chunk is useful)."""
    from ragas.metrics.collections.context_precision.metric import ContextPrecisionWithoutReference

    return float(ContextPrecisionWithoutReference._calculate_average_precision(None, verdicts))  # type: ignore[arg-type]


def bounded_schema(
    model: type[BaseModel],
    max_items: int,
    max_length: int,
    *,
    binary_int_fields: Iterable[str] = BINARY_INT_FIELDS,
) -> dict[str, Any]:
    """The model's JSON schema with ``maxItems`` on every array and ``maxLength`` on every string.

    Existing tighter bounds are kept. Walks ``$defs`` too (nested models are ``$ref``s there).
    Strings with ``pattern``/``format`` are left alone: xgrammar rejects a length bound combined
    with them (vLLM then falls back to another backend or errors). Integer properties named in
    ``binary_int_fields`` get ``minimum: 0, maximum: 1``.
    """
    if max_items < 1 or max_length < 1:
        raise ValueError("max_items and max_length must be >= 1")
    schema = copy.deepcopy(model.model_json_schema())
    _bound(schema, max_items, max_length, frozenset(binary_int_fields))
    return schema


def _types(node: dict[str, Any]) -> set[str]:
    t = node.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list):
        return {x for x in t if isinstance(x, str)}
    return set()


def _bound(node: Any, max_items: int, max_length: int, binary: frozenset[str]) -> None:
    if not isinstance(node, dict):
        return
    types = _types(node)
    if "array" in types:
        node["maxItems"] = min(int(node.get("maxItems", max_items)), max_items)
    if "string" in types and "pattern" not in node and "format" not in node:
        node["maxLength"] = min(int(node.get("maxLength", max_length)), max_length)

    # Recurse only into keywords that hold subschemas, so a property named "type" or a
    # "default" value that looks like a schema is never mistaken for one.
    for key in ("properties", "$defs", "definitions", "patternProperties"):
        sub = node.get(key)
        if isinstance(sub, dict):
            for name, child in sub.items():
                _bound(child, max_items, max_length, binary)
                if (
                    key == "properties"
                    and name in binary
                    and isinstance(child, dict)
                    and _types(child) == {"integer"}
                ):
                    child.setdefault("minimum", 0)
                    child.setdefault("maximum", 1)
    for key in ("items", "additionalProperties", "not", "contains"):
        sub = node.get(key)
        if isinstance(sub, dict):
            _bound(sub, max_items, max_length, binary)
        elif isinstance(sub, list):  # old-style tuple "items"
            for child in sub:
                _bound(child, max_items, max_length, binary)
    for key in ("prefixItems", "anyOf", "oneOf", "allOf"):
        sub = node.get(key)
        if isinstance(sub, list):
            for child in sub:
                _bound(child, max_items, max_length, binary)


# --------------------------------------------------------------------------------------------
# The judge LLM
# --------------------------------------------------------------------------------------------
