"""Shared fixtures: an isolated AUDITOR_HOME, small corpora, the fake and the real embedder."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from auditor.models import models_dir, prepare_model
from auditor.testing import FakeEmbedder

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
RAGTRUTH = SHARED / "datasets" / "ragtruth-qa"
KESTREL = REPO / "corpora" / "kestrel"

WriteCorpus = Callable[[dict[str, str | bytes]], Path]


def _engine_cores() -> list[int]:
    """The cores this test process's engines compute on: every core, or those `make test`
    gives its shard of the end-to-end tests (AUDITOR_TEST_CORES, e.g. "1"; scripts/test.sh).
    An engine start is mostly single-threaded imports (~60-90 s on 2 cores), so one shard's
    start overlaps the other's work; two engines binding the same cores would instead slow
    each other down (their OpenMP threads spin)."""
    cores = sorted(os.sched_getaffinity(0))
    given = os.environ.get("AUDITOR_TEST_CORES")
    if not given:
        return cores
    chosen = set()
    for part in given.split(","):
        low, _, high = part.partition("-")
        chosen.update(range(int(low), int(high or low) + 1))
    return [core for core in cores if core in chosen] or cores


def _binding(cores: list[int]) -> str:
    """vLLM's VLLM_CPU_OMP_THREADS_BIND form of a list of cores."""
    if cores == list(range(cores[0], cores[-1] + 1)):
        return f"{cores[0]}-{cores[-1]}" if len(cores) > 1 else str(cores[0])
    return ",".join(map(str, cores))


ENGINE_CORES = _binding(_engine_cores())  # the `cpu_threads` of the tests' engines
ONE_CORE = str(_engine_cores()[0])  # an engine on one core, as a Ray actor of one CPU has
if os.environ.get("AUDITOR_TEST_CORES"):
    # engines started outside our configs (a served vLLM, the LlamaIndex example) stay on the
    # shard's cores too: vLLM reads the binding from the environment, subprocesses inherit it
    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = ENGINE_CORES
    os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] = "0"
# Prepared models live in the user's model cache (keyed by sha256), read before any test
# points AUDITOR_HOME elsewhere, so a CI run converts each model once, not once per test.
MODELS_DIR = models_dir()


@pytest.fixture(autouse=True)
def _auditor_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own AUDITOR_HOME and no OpenAI key (nothing may default to OpenAI)."""
    monkeypatch.setenv("AUDITOR_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture
def write_corpus(tmp_path: Path) -> WriteCorpus:
    """Write {relative path: text or bytes} into a fresh corpus folder and return it."""
    counter = iter(range(1000))

    def write(files: dict[str, str | bytes]) -> Path:
        root = tmp_path / f"corpus{next(counter)}"
        root.mkdir()
        for rel, content in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
        return root

    return write


@pytest.fixture
def fake_embedder() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def use_fake_embedder(monkeypatch: pytest.MonkeyPatch) -> FakeEmbedder:
    """Make the CLI load the fake embedder instead of a model (fast CLI tests)."""
    fake = FakeEmbedder()
    monkeypatch.setattr("auditor.ingest.embed.load_embedder", lambda config: fake)
    return fake


@pytest.fixture(scope="session")
def real_embedder():  # type: ignore[no-untyped-def]
    """The packaged MiniLM, loaded once per session."""
    from auditor.config import EmbedderConfig
    from auditor.ingest.embed import load_embedder

    return load_embedder(EmbedderConfig())


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """SmolLM2-135M-Instruct prepared for vLLM from its PyPI package (converted once)."""
    return prepare_model("smollm2-135m-instruct", cache=MODELS_DIR).path


@pytest.fixture(scope="session")
def ragtruth() -> Path:
    """The shared RAGTruth QA slice; its absence is a broken checkout, not a reason to skip."""
    assert (RAGTRUTH / "dev.jsonl").is_file(), (
        f"missing {RAGTRUTH}: the shared datasets are required"
    )
    return RAGTRUTH


def make_pdf(pages: list[str]) -> bytes:
    """A small PDF with one text page per string (reportlab, a dev dependency)."""
    import io

    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=A4, invariant=1)
    for text in pages:
        y = 800
        for line in text.splitlines():
            pdf.drawString(72, y, line)
            y -= 14
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-gpu", action="store_true", help="Run tests that need CUDA.")
    parser.addoption(
        "--run-extended",
        action="store_true",
        help="Run the variants of paths make test covers (make test-extended).",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`gpu` and `extended` tests are reported as skipped, with the reason and the option that
    runs them, unless --run-gpu or --run-extended is given."""
    skips = {
        "gpu": (
            config.getoption("--run-gpu"),
            pytest.mark.skip(reason="needs CUDA: pass --run-gpu on a GPU machine"),
        ),
        "extended": (
            config.getoption("--run-extended"),
            pytest.mark.skip(
                reason="a variant of a path make test covers: make test-extended (--run-extended)"
            ),
        ),
    }
    for item in items:
        for marker, (run, skip) in skips.items():
            if marker in item.keywords and not run:
                item.add_marker(skip)
