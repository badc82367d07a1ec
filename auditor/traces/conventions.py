"""What a span says, read by the conventions that wrote it (docs/traces.md has the table).

Three conventions name what an answer needs, and each span is read by the one it follows:
- **OpenInference** (Phoenix, the LlamaIndex / LangChain instrumentations):
  `openinference.span.kind` CHAIN / LLM / RETRIEVER; a request's question and answer are a
  CHAIN's `input.value` / `output.value`; passages `retrieval.documents.N.document.*`; an LLM's
  `llm.output_messages.N.message.content`, `llm.token_count.*`, `llm.model_name`.
- **OTel GenAI** (`gen_ai.operation.name`): a `chat` / `text_completion` / `generate_content`
  span's `gen_ai.input.messages` / `gen_ai.output.messages` (JSON), or the older span events
  (`gen_ai.user.message`, `gen_ai.choice`, `gen_ai.content.prompt` / `.completion`); a
  `retrieval` span's `gen_ai.retrieval.query.text` and `gen_ai.retrieval.documents`; usage
  `gen_ai.usage.*`; `gen_ai.response.time_to_first_chunk`.
- **vLLM's server span** (`vllm serve --otlp-traces-endpoint`, span `llm_request`): the
  engine's own `gen_ai.latency.time_to_first_token`, `gen_ai.latency.e2e`,
  `gen_ai.latency.time_in_queue`, `gen_ai.usage.completion_tokens` / `prompt_tokens`,
  `gen_ai.response.model`.

Names come from the conventions' own packages (`opentelemetry-semantic-conventions`,
`openinference-semantic-conventions`); vLLM's latency names are its own (`vllm.tracing`
SpanAttributes, not importable without vLLM: `tests/traces` holds them equal).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from openinference.semconv.trace import (
    DocumentAttributes,
    MessageAttributes,
    OpenInferenceSpanKindValues,
    SpanAttributes,
)
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes import service_attributes

__all__ = [
    "INTERESTING_PREFIXES",
    "SERVICE_NAME",
    "VLLM",
    "SpanFacts",
    "read_span",
]

SERVICE_NAME = service_attributes.SERVICE_NAME


class VLLM:
    """vLLM's server-span names (vllm/tracing/utils.py SpanAttributes)."""

    SPAN_NAME = "llm_request"
    TIME_TO_FIRST_TOKEN = "gen_ai.latency.time_to_first_token"
    E2E = "gen_ai.latency.e2e"
    TIME_IN_QUEUE = "gen_ai.latency.time_in_queue"
    COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
    PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
    REQUEST_ID = "gen_ai.request.id"


OI_KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND
OI_CHAIN = OpenInferenceSpanKindValues.CHAIN.value
OI_LLM = OpenInferenceSpanKindValues.LLM.value
OI_RETRIEVER = OpenInferenceSpanKindValues.RETRIEVER.value
OI_DOCUMENTS = SpanAttributes.RETRIEVAL_DOCUMENTS + "."
OI_INPUT_MESSAGES = SpanAttributes.LLM_INPUT_MESSAGES + "."
OI_OUTPUT_MESSAGES = SpanAttributes.LLM_OUTPUT_MESSAGES + "."

# chat-like GenAI operations: their output is an answer
GENAI_ANSWERING = {"chat", "text_completion", "generate_content", "invoke_agent", "invoke_workflow"}
GENAI_RETRIEVAL = "retrieval"

# attributes read whole; those starting with INTERESTING_PREFIXES are read too (indexed lists)
INTERESTING = {
    OI_KIND,
    SpanAttributes.INPUT_VALUE,
    SpanAttributes.OUTPUT_VALUE,
    SpanAttributes.LLM_MODEL_NAME,
    SpanAttributes.LLM_TOKEN_COUNT_PROMPT,
    SpanAttributes.LLM_TOKEN_COUNT_COMPLETION,
    gen_ai.GEN_AI_OPERATION_NAME,
    gen_ai.GEN_AI_INPUT_MESSAGES,
    gen_ai.GEN_AI_OUTPUT_MESSAGES,
    gen_ai.GEN_AI_RETRIEVAL_QUERY_TEXT,
    gen_ai.GEN_AI_RETRIEVAL_DOCUMENTS,
    gen_ai.GEN_AI_RESPONSE_MODEL,
    gen_ai.GEN_AI_REQUEST_MODEL,
    gen_ai.GEN_AI_USAGE_INPUT_TOKENS,
    gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS,
    gen_ai.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
    gen_ai.GEN_AI_PROMPT,
    gen_ai.GEN_AI_COMPLETION,
    VLLM.TIME_TO_FIRST_TOKEN,
    VLLM.E2E,
    VLLM.TIME_IN_QUEUE,
    VLLM.COMPLETION_TOKENS,
    VLLM.PROMPT_TOKENS,
}
INTERESTING_PREFIXES = (OI_DOCUMENTS, OI_INPUT_MESSAGES, OI_OUTPUT_MESSAGES)

# span events of the earlier GenAI conventions that carry content
EVENT_USER = "gen_ai.user.message"
EVENT_CHOICE = "gen_ai.choice"
EVENT_PROMPT = "gen_ai.content.prompt"
EVENT_COMPLETION = "gen_ai.content.completion"
EVENT_DETAILS = "gen_ai.client.inference.operation.details"
CONTENT_EVENTS = {EVENT_USER, EVENT_CHOICE, EVENT_PROMPT, EVENT_COMPLETION, EVENT_DETAILS}

Role = Literal["chain", "llm", "retriever", "server", "other"]
Convention = Literal["openinference", "genai", "vllm"]


@dataclass
class SpanFacts:
    """What the import needs of one span: its place in the trace, and what it says in the
    conventions above. `content_missing`: an LLM-like span that records no text (content
    capture off)."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    service: str
    start_ns: int
    end_ns: int
    error: str | None = None  # the status message of a span whose status is ERROR
    role: Role = "other"
    convention: Convention | None = None
    question: str | None = None
    answer: str | None = None
    documents: list[dict[str, Any]] = field(default_factory=list)  # id, text, score, document
    model: str | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    ttft_s: float | None = None
    engine_e2e_s: float | None = None
    queue_s: float | None = None
    content_missing: bool = False
    oversized: str | None = None  # the attribute over the size limit, if one was

    def to_json(self) -> dict[str, Any]:
        # left out: what is unset (None, an empty list, a False flag); a 0 is kept
        return {k: v for k, v in self.__dict__.items() if not (v is None or v is False or v == [])}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SpanFacts:
        return cls(**data)


def read_span(
    trace_id: str,
    span_id: str,
    parent_id: str,
    name: str,
    service: str,
    start_ns: int,
    end_ns: int,
    error: str | None,
    attributes: dict[str, Any],
    events: list[tuple[str, dict[str, Any]]],
) -> SpanFacts:
    """A span's facts from its (interesting) attributes and content events."""
    facts = SpanFacts(trace_id, span_id, parent_id, name, service, start_ns, end_ns, error)
    kind = attributes.get(OI_KIND)
    operation = attributes.get(gen_ai.GEN_AI_OPERATION_NAME)
    if isinstance(kind, str):
        _openinference(facts, kind.upper(), attributes)
    elif (
        VLLM.TIME_TO_FIRST_TOKEN in attributes
        or VLLM.E2E in attributes
        or (name == VLLM.SPAN_NAME and VLLM.COMPLETION_TOKENS in attributes)
    ):
        _vllm(facts, attributes)
    elif isinstance(operation, str):
        _genai(facts, operation, attributes, events)
    return facts


def _openinference(facts: SpanFacts, kind: str, attributes: dict[str, Any]) -> None:
    facts.convention = "openinference"
    facts.model = _text(attributes.get(SpanAttributes.LLM_MODEL_NAME))
    facts.prompt_tokens = _count(attributes.get(SpanAttributes.LLM_TOKEN_COUNT_PROMPT))
    facts.output_tokens = _count(attributes.get(SpanAttributes.LLM_TOKEN_COUNT_COMPLETION))
    if kind == OI_CHAIN:
        facts.role = "chain"
        facts.question = _text(attributes.get(SpanAttributes.INPUT_VALUE))
        facts.answer = _text(attributes.get(SpanAttributes.OUTPUT_VALUE))
    elif kind == OI_LLM:
        facts.role = "llm"
        facts.answer = _indexed_message(attributes, OI_OUTPUT_MESSAGES, "assistant") or _text(
            attributes.get(SpanAttributes.OUTPUT_VALUE)
        )
        facts.question = _indexed_message(attributes, OI_INPUT_MESSAGES, "user")
        facts.content_missing = facts.answer is None
    elif kind == OI_RETRIEVER:
        facts.role = "retriever"
        facts.question = _text(attributes.get(SpanAttributes.INPUT_VALUE))
        facts.documents = _openinference_documents(attributes)


def _openinference_documents(attributes: dict[str, Any]) -> list[dict[str, Any]]:
    """retrieval.documents.N.document.{content,id,score,metadata}, in N's order."""
    found: dict[int, dict[str, Any]] = {}
    fields = {
        DocumentAttributes.DOCUMENT_CONTENT: "text",
        DocumentAttributes.DOCUMENT_ID: "id",
        DocumentAttributes.DOCUMENT_SCORE: "score",
        DocumentAttributes.DOCUMENT_METADATA: "metadata",
    }
    for key, value in attributes.items():
        if not key.startswith(OI_DOCUMENTS):
            continue
        number, _, rest = key[len(OI_DOCUMENTS) :].partition(".")
        if number.isdigit() and rest in fields:
            found.setdefault(int(number), {})[fields[rest]] = value
    return [_document(found[n]) for n in sorted(found)]


def _document(raw: dict[str, Any]) -> dict[str, Any]:
    """A passage as the import keeps it: id, text (None: ids only), score, source document."""
    metadata = raw.get("metadata")
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except (ValueError, RecursionError):
            metadata = None
    source = None
    if isinstance(metadata, dict):
        source = next(
            (
                metadata[key]
                for key in ("document", "file_path", "file_name", "source")
                if isinstance(metadata.get(key), str)
            ),
            None,
        )
    score = raw.get("score")
    return {
        "id": None if raw.get("id") is None else str(raw["id"]),
        "text": raw.get("text") if isinstance(raw.get("text"), str) else None,
        "score": float(score) if isinstance(score, int | float) else None,
        "document": source,
    }


def _indexed_message(attributes: dict[str, Any], prefix: str, role: str) -> str | None:
    """The last message of `role` among PREFIX.N.message.{role,content} (OpenInference)."""
    roles: dict[int, str] = {}
    contents: dict[int, str] = {}
    for key, value in attributes.items():
        if not key.startswith(prefix):
            continue
        number, _, rest = key[len(prefix) :].partition(".")
        if not number.isdigit():
            continue
        if rest == MessageAttributes.MESSAGE_ROLE and isinstance(value, str):
            roles[int(number)] = value
        elif rest == MessageAttributes.MESSAGE_CONTENT and isinstance(value, str):
            contents[int(number)] = value
    chosen = [n for n in sorted(contents) if roles.get(n, role) == role]
    return contents[chosen[-1]] if chosen else None


def _vllm(facts: SpanFacts, attributes: dict[str, Any]) -> None:
    facts.role = "server"
    facts.convention = "vllm"
    facts.ttft_s = _seconds(attributes.get(VLLM.TIME_TO_FIRST_TOKEN))
    facts.engine_e2e_s = _seconds(attributes.get(VLLM.E2E))
    facts.queue_s = _seconds(attributes.get(VLLM.TIME_IN_QUEUE))
    facts.output_tokens = _count(attributes.get(VLLM.COMPLETION_TOKENS))
    facts.prompt_tokens = _count(attributes.get(VLLM.PROMPT_TOKENS))
    facts.model = _text(attributes.get(gen_ai.GEN_AI_RESPONSE_MODEL))


def _genai(
    facts: SpanFacts,
    operation: str,
    attributes: dict[str, Any],
    events: list[tuple[str, dict[str, Any]]],
) -> None:
    facts.convention = "genai"
    facts.model = _text(attributes.get(gen_ai.GEN_AI_RESPONSE_MODEL)) or _text(
        attributes.get(gen_ai.GEN_AI_REQUEST_MODEL)
    )
    facts.prompt_tokens = _count(attributes.get(gen_ai.GEN_AI_USAGE_INPUT_TOKENS))
    facts.output_tokens = _count(attributes.get(gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS))
    if operation == GENAI_RETRIEVAL:
        facts.role = "retriever"
        facts.question = _text(attributes.get(gen_ai.GEN_AI_RETRIEVAL_QUERY_TEXT))
        facts.documents = _genai_documents(attributes.get(gen_ai.GEN_AI_RETRIEVAL_DOCUMENTS))
        return
    if operation not in GENAI_ANSWERING:
        return
    facts.role = "chain" if operation in ("invoke_agent", "invoke_workflow") else "llm"
    facts.ttft_s = _seconds(attributes.get(gen_ai.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK))
    inputs = _messages(attributes.get(gen_ai.GEN_AI_INPUT_MESSAGES))
    outputs = _messages(attributes.get(gen_ai.GEN_AI_OUTPUT_MESSAGES))
    for event, values in events:  # earlier conventions: the content in span events
        if event == EVENT_DETAILS:
            inputs = inputs or _messages(values.get(gen_ai.GEN_AI_INPUT_MESSAGES))
            outputs = outputs or _messages(values.get(gen_ai.GEN_AI_OUTPUT_MESSAGES))
        elif event in (EVENT_USER, EVENT_PROMPT):
            inputs = inputs or _event_messages(values, "user", gen_ai.GEN_AI_PROMPT)
        elif event in (EVENT_CHOICE, EVENT_COMPLETION):
            outputs = outputs or _event_messages(values, "assistant", gen_ai.GEN_AI_COMPLETION)
    if not inputs:
        inputs = _messages(attributes.get(gen_ai.GEN_AI_PROMPT))
    if not outputs:
        outputs = _messages(attributes.get(gen_ai.GEN_AI_COMPLETION))
    facts.question = _last_text(inputs, "user")
    facts.answer = _last_text(outputs, "assistant")
    facts.content_missing = facts.answer is None


def _genai_documents(value: Any) -> list[dict[str, Any]]:
    """gen_ai.retrieval.documents: a JSON list of {id, content?, score?} (or the list itself)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return []
    if not isinstance(value, list):
        return []
    documents = []
    for item in value:
        if isinstance(item, str):
            item = {"content": item}
        if isinstance(item, dict):
            text = item.get("content", item.get("text"))
            documents.append(
                _document(
                    {
                        "id": item.get("id"),
                        "text": text,
                        "score": item.get("score"),
                        "metadata": item.get("metadata"),
                    }
                )
            )
    return documents


def _messages(value: Any) -> list[dict[str, Any]]:
    """GenAI messages: a JSON list of {role, parts: [{type: text, content}]} (or of the
    earlier {role, content}); a bare string is one message of unknown role."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return [{"role": None, "content": value}]
        value = parsed
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict)]


def _event_messages(values: dict[str, Any], role: str, whole: str) -> list[dict[str, Any]]:
    """The content of a span event of the earlier GenAI conventions."""
    if whole in values:
        return _messages(values[whole])
    message = values.get("message")
    if isinstance(message, str):
        message = _messages(message)
        message = message[0] if message else None
    if isinstance(message, dict):
        return [{"role": message.get("role", role)} | message]
    if isinstance(values.get("content"), str):
        return [{"role": values.get("role", role), "content": values["content"]}]
    return []


def _last_text(messages: list[dict[str, Any]], role: str) -> str | None:
    """The text of the last message of `role` (or of no stated role)."""
    for message in reversed(messages):
        said = message.get("role")
        if said not in (None, role):
            continue
        text = _message_text(message)
        if text is not None:
            return text
    return None


def _message_text(message: dict[str, Any]) -> str | None:
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = message.get("parts")
    if isinstance(content, list):
        parts = content
    if not isinstance(parts, list):
        return None
    texts = [
        str(part.get("content", part.get("text")))
        for part in parts
        if isinstance(part, dict)
        and part.get("type", "text") == "text"
        and isinstance(part.get("content", part.get("text")), str)
    ]
    return "".join(texts) if texts else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 <= value < float("inf") else None
