"""Sketch (not wired in): our own JSON-schema-constrained judge behind RAGAS 0.4.3 collections metrics.

RAGAS collections metrics (``ragas.metrics.collections``) reject any LLM that is not an
instance of ``ragas.llms.base.InstructorBaseRagasLLM`` and only ever call
``await llm.agenerate(prompt: str, response_model: type[BaseModel])`` (one completion, no n,
no temperature). So a judge needs exactly two methods: ``generate`` and ``agenerate``.

The judge here delegates to ``complete_json(prompt, json_schema) -> str`` (an in-process vLLM
engine with ``StructuredOutputsParams(json=...)``, or an OpenAI-compatible server with
``response_format={"type": "json_schema", ...}`` or ``extra_body={"structured_outputs": {"json":
...}}``; NOT ``guided_json``, which vLLM 0.32 ignores silently), validates the text into the response model, and retries a bounded number of
times. The schema sent is ``bounded_schema(...)``: the model's schema with ``maxItems`` on every
array and ``maxLength`` on every string, because small judges loop inside unbounded arrays.

ragas is imported lazily (the project bans module-level ragas imports, TID253), so the LLM class
is built on first use by ``judge_llm_class()``.

Demo (no model, canned JSON): ``RAGAS_DO_NOT_TRACK=true python -m auditor.verify.ragas_adapter_sketch``
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

if TYPE_CHECKING:
    from ragas.embeddings.base import BaseRagasEmbedding
    from ragas.llms.base import InstructorBaseRagasLLM

__all__ = [
    "BINARY_INT_FIELDS",
    "JudgeCall",
    "JudgeOutputError",
    "bounded_schema",
    "judge_llm_class",
    "make_embedding",
    "make_judge_llm",
]

T = TypeVar("T", bound=BaseModel)

CompleteJson = Callable[[str, dict[str, Any]], str]
ACompleteJson = Callable[[str, dict[str, Any]], Awaitable[str]]
Encode = Callable[[list[str]], list[list[float]]]

# Integer fields the RAGAS response models use as 0/1 flags (faithfulness and context precision
# "verdict", context recall "attributed", answer relevancy "noncommittal"). Their schemas say only
# "type": "integer", so a constrained decoder would happily emit 7.
BINARY_INT_FIELDS = frozenset({"verdict", "attributed", "noncommittal"})


# --------------------------------------------------------------------------------------------
# Schema bounding
# --------------------------------------------------------------------------------------------


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


class JudgeOutputError(ValueError):
    """The judge returned no text valid for the response model within the allowed attempts."""

    def __init__(self, model_name: str, attempts: int, last_error: str, last_text: str) -> None:
        super().__init__(
            f"judge output invalid for {model_name} after {attempts} attempt(s): {last_error}"
        )
        self.model_name = model_name
        self.attempts = attempts
        self.last_error = last_error
        self.last_text = last_text


@dataclass
class JudgeCall:
    """One agenerate/generate call as seen by the judge: kept for claim-level audit trails."""

    response_model: str
    prompt: str
    schema: dict[str, Any]
    texts: list[str] = field(default_factory=list)  # raw output of every attempt
    errors: list[str] = field(default_factory=list)  # validation error of each failed attempt
    ok: bool = False


RETRY_SUFFIX = (
    "\n\nYour previous output was not valid for the JSON schema ({error}). "
    "Return only one JSON object that complies with the schema."
)


class _JudgeCore:
    """The ragas-free part: schema, delegate call, validation, bounded retries, trace."""

    is_async = True  # read by the legacy PydanticPrompt path (ragas.prompt.pydantic_prompt)

    def __init__(
        self,
        complete_json: CompleteJson,
        *,
        acomplete_json: ACompleteJson | None = None,
        max_items: int = 32,
        max_length: int = 600,
        max_retries: int = 2,
        schema_for: Callable[[type[BaseModel]], dict[str, Any]] | None = None,
        offload_sync: bool = False,
        keep_trace: bool = True,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if acomplete_json is not None and not inspect.iscoroutinefunction(acomplete_json):
            raise TypeError("acomplete_json must be an async function")
        self.complete_json = complete_json
        self.acomplete_json = acomplete_json
        self.max_retries = max_retries
        self.offload_sync = offload_sync  # run the sync delegate in a worker thread in agenerate
        self.keep_trace = keep_trace
        self.trace: list[JudgeCall] = []
        self._schema_for = schema_for or (
            lambda m: bounded_schema(m, max_items=max_items, max_length=max_length)
        )
        self._schemas: dict[type[BaseModel], dict[str, Any]] = {}

    def schema(self, response_model: type[BaseModel]) -> dict[str, Any]:
        if response_model not in self._schemas:
            self._schemas[response_model] = self._schema_for(response_model)
        return self._schemas[response_model]

    def _start(self, prompt: str, response_model: type[BaseModel]) -> JudgeCall:
        call = JudgeCall(response_model.__name__, prompt, self.schema(response_model))
        if self.keep_trace:
            self.trace.append(call)
        return call

    @staticmethod
    def _prompt_for(call: JudgeCall) -> str:
        if not call.errors:
            return call.prompt
        return call.prompt + RETRY_SUFFIX.format(error=call.errors[-1])

    @staticmethod
    def _accept(call: JudgeCall, text: str, response_model: type[T]) -> T | None:
        call.texts.append(text)
        try:
            out = response_model.model_validate_json(text)
        except ValidationError as e:  # bad JSON is a ValidationError too
            errs = e.errors()
            where = f"{errs[0]['type']} at {errs[0]['loc']}" if errs else "invalid"
            call.errors.append(where)
            return None
        call.ok = True
        return out

    def _fail(self, call: JudgeCall) -> JudgeOutputError:
        return JudgeOutputError(
            call.response_model,
            len(call.texts),
            call.errors[-1] if call.errors else "",
            call.texts[-1][:500] if call.texts else "",
        )

    def generate(self, prompt: str, response_model: type[T]) -> T:
        call = self._start(prompt, response_model)
        for _ in range(1 + self.max_retries):
            out = self._accept(
                call, self.complete_json(self._prompt_for(call), call.schema), response_model
            )
            if out is not None:
                return out
        raise self._fail(call)

    async def agenerate(self, prompt: str, response_model: type[T]) -> T:
        call = self._start(prompt, response_model)
        for _ in range(1 + self.max_retries):
            p = self._prompt_for(call)
            if self.acomplete_json is not None:
                text = await self.acomplete_json(p, call.schema)
            elif self.offload_sync:
                text = await asyncio.to_thread(self.complete_json, p, call.schema)
            else:
                text = self.complete_json(p, call.schema)  # blocks the loop; metrics await serially
            out = self._accept(call, text, response_model)
            if out is not None:
                return out
        raise self._fail(call)


def _ragas_quiet() -> None:
    """Force RAGAS telemetry off, also if ragas already cached the flag."""
    os.environ["RAGAS_DO_NOT_TRACK"] = "true"
    from ragas._analytics import do_not_track

    do_not_track.cache_clear()


@functools.cache
def judge_llm_class() -> type[Any]:
    """``class RagasJudgeLLM(_JudgeCore, InstructorBaseRagasLLM)``, built on first use."""
    _ragas_quiet()
    from ragas.llms.base import InstructorBaseRagasLLM

    class RagasJudgeLLM(_JudgeCore, InstructorBaseRagasLLM):
        """Passes ``BaseMetric._validate_llm``'s isinstance check; generate/agenerate from _JudgeCore."""

        def __repr__(self) -> str:
            return f"RagasJudgeLLM(calls={len(self.trace)}, max_retries={self.max_retries})"

    return RagasJudgeLLM


def make_judge_llm(complete_json: CompleteJson, **kwargs: Any) -> InstructorBaseRagasLLM:
    """An ``InstructorBaseRagasLLM`` for ``ragas.metrics.collections`` (kwargs: see _JudgeCore)."""
    llm: InstructorBaseRagasLLM = judge_llm_class()(complete_json, **kwargs)
    return llm


# --------------------------------------------------------------------------------------------
# Embeddings (AnswerRelevancy always; AnswerCorrectness unless weights=[1.0, 0.0])
# --------------------------------------------------------------------------------------------


@functools.cache
def _embedding_class() -> type[Any]:
    _ragas_quiet()
    from ragas.embeddings.base import BaseRagasEmbedding

    class EncodeEmbedding(BaseRagasEmbedding):
        """Delegates to ``encode(texts) -> vectors`` (e.g. a loaded SentenceTransformer)."""

        def __init__(self, encode: Encode) -> None:
            super().__init__(cache=None)
            self._encode = encode

        def embed_text(self, text: str, **kwargs: Any) -> list[float]:
            return self._encode([text])[0]

        async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
            return self._encode([text])[0]

        def embed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
            return self._encode(list(texts)) if texts else []

        async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
            return self._encode(list(texts)) if texts else []

    return EncodeEmbedding


def make_embedding(encode: Encode) -> BaseRagasEmbedding:
    """A modern ``BaseRagasEmbedding``. With sentence-transformers:
    ``make_embedding(lambda xs: st.encode(xs, normalize_embeddings=True).tolist())``."""
    emb: BaseRagasEmbedding = _embedding_class()(encode)
    return emb


# --------------------------------------------------------------------------------------------
# Demo: Faithfulness claim-level pipeline with a FAKE judge (no model)
# --------------------------------------------------------------------------------------------

_CANNED: dict[str, dict[str, Any]] = {
    "StatementGeneratorOutput": {
        "statements": [
            "The Eiffel Tower is in Paris.",
            "The Eiffel Tower was completed in 1889.",
            "The Eiffel Tower is 500 metres tall.",
        ]
    },
    "NLIStatementOutput": {
        "statements": [
            {
                "statement": "The Eiffel Tower is in Paris.",
                "reason": "Stated in the context.",
                "verdict": 1,
            },
            {
                "statement": "The Eiffel Tower was completed in 1889.",
                "reason": "The context gives 1889.",
                "verdict": 1,
            },
            {
                "statement": "The Eiffel Tower is 500 metres tall.",
                "reason": "The context says 330 metres.",
                "verdict": 0,
            },
        ]
    },
    "ContextPrecisionOutput": {"reason": "The context states the location.", "verdict": 1},
}


def _demo() -> None:
    import json

    _ragas_quiet()
    import jsonschema
    from ragas.metrics.collections import ContextPrecisionWithoutReference, Faithfulness

    seen: list[tuple[str, dict[str, Any]]] = []
    broke_once: set[str] = set()

    def fake_complete_json(prompt: str, json_schema: dict[str, Any]) -> str:
        title = str(json_schema["title"])
        seen.append((title, json_schema))
        if title not in broke_once:  # first call per model: truncated JSON, to exercise retry
            broke_once.add(title)
            return json.dumps(_CANNED[title])[:40]
        payload = _CANNED[title]
        jsonschema.validate(payload, json_schema)  # canned output obeys the bounded schema
        return json.dumps(payload)

    llm = make_judge_llm(fake_complete_json, max_items=16, max_length=400, max_retries=2)
    faith = Faithfulness(llm=llm)  # passes the isinstance(InstructorBaseRagasLLM) check

    question = "Where is the Eiffel Tower and how tall is it?"
    answer = "The Eiffel Tower is in Paris. It was completed in 1889 and is 500 metres tall."
    contexts = [
        "The Eiffel Tower is a wrought-iron lattice tower in Paris, completed in 1889.",
        "The tower is 330 metres tall.",
    ]

    async def run() -> None:
        statements = await faith._create_statements(question, answer)
        verdicts = await faith._create_verdicts(statements, "\n".join(contexts))
        score = faith._compute_score(verdicts)
        print("statements:", statements)
        for v in verdicts.statements:
            print(f"  verdict={v.verdict} | {v.statement} | {v.reason}")
        print("faithfulness (direct):", score)
        full = await faith.ascore(user_input=question, response=answer, retrieved_contexts=contexts)
        print("faithfulness (ascore):", full.value)
        assert abs(score - 2 / 3) < 1e-9 and abs(full.value - score) < 1e-9

        cp = ContextPrecisionWithoutReference(llm=llm)
        r = await cp.ascore(user_input=question, response=answer, retrieved_contexts=contexts)
        print("context precision without reference:", round(r.value, 6))

    asyncio.run(run())

    nli = next(s for t, s in seen if t == "NLIStatementOutput")
    item = nli["$defs"]["StatementFaithfulnessAnswer"]["properties"]
    assert nli["properties"]["statements"]["maxItems"] == 16
    assert item["reason"]["maxLength"] == 400 and item["verdict"]["maximum"] == 1
    calls: list[JudgeCall] = llm.trace  # type: ignore[attr-defined]
    print(
        "judge calls (model, attempts, ok):",
        [(c.response_model, len(c.texts), c.ok) for c in calls],
    )
    # first call per response model failed once (truncated JSON) and was retried with the hint
    first_stmt, first_nli = calls[0], calls[1]
    assert len(first_stmt.texts) == 2 and len(first_nli.texts) == 2 and all(c.ok for c in calls)
    assert "previous output was not valid" not in first_stmt.prompt
    print("bounded NLIStatementOutput schema:", json.dumps(nli)[:300], "...")


if __name__ == "__main__":
    _demo()
