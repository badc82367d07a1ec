"""Pipeline configuration: strict keys, kinds, precedence, and every shipped pipeline file."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from auditor.config import (
    IngestConfig,
    PipelineConfig,
    apply_overrides,
    config_sha256,
    load_judge,
    load_pipeline,
    parse_set_option,
    resolve_pipeline_path,
)
from auditor.errors import BadInput
from tests.conftest import REPO


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_unknown_key_is_named(tmp_path: Path) -> None:
    """A typo in a nested key is an error naming the file and the dotted key."""
    path = _write(tmp_path, "[ingest.chunking]\nchunk_sise = 100\n")
    with pytest.raises(BadInput, match=r"p.toml: ingest.chunking.chunk_sise: unknown key"):
        load_pipeline(path)


def test_unknown_index_kind_lists_valid_kinds(tmp_path: Path) -> None:
    """A bad `kind` names the valid ones."""
    path = _write(tmp_path, '[ingest.index]\nkind = "annoy"\n')
    with pytest.raises(
        BadInput, match=r"ingest.index: unknown kind; valid kinds: 'flat', 'hnsw', 'ivf'"
    ):
        load_pipeline(path)


def test_kind_specific_keys_are_checked(tmp_path: Path) -> None:
    """An HNSW setting under a flat index is rejected rather than ignored."""
    path = _write(tmp_path, '[ingest.index]\nkind = "flat"\nm = 16\n')
    with pytest.raises(BadInput, match=r"ingest.index.m: unknown key"):
        load_pipeline(path)


def test_invalid_toml_names_file(tmp_path: Path) -> None:
    """Broken TOML is reported with the file and position."""
    with pytest.raises(BadInput, match=r"p.toml: invalid TOML: .*line 1"):
        load_pipeline(_write(tmp_path, "name = \n"))


def test_overrides_beat_the_file_and_switching_kind_resets_its_table(tmp_path: Path) -> None:
    """--set wins over the file, explicit False/0 count, and a new kind drops the old kind's keys."""
    path = _write(
        tmp_path, 'name = "x"\n[ingest.index]\nkind = "hnsw"\nm = 16\n[retrieval]\ntop_k = 3\n'
    )
    config = load_pipeline(
        path,
        dict([parse_set_option("retrieval.top_k=7"), parse_set_option("ingest.index.kind=flat")]),
    )
    assert config.retrieval.top_k == 7
    assert config.ingest.index.kind == "flat"
    merged = apply_overrides({"a": {"b": True}}, {"a.b": False, "a.c": ""})
    assert merged == {"a": {"b": False, "c": ""}}
    config = load_pipeline(path, {"ingest.index.m": 48, "ingest.index.kind": "hnsw"})
    assert config.ingest.index.kind == "hnsw" and config.ingest.index.m == 48


def test_set_option_parses_toml_values() -> None:
    """--set values are TOML when they parse, strings otherwise."""
    assert parse_set_option("a.b=128") == ("a.b", 128)
    assert parse_set_option("a.b=true") == ("a.b", True)
    assert parse_set_option("a.b=cpu") == ("a.b", "cpu")
    with pytest.raises(BadInput, match="expected KEY=VALUE"):
        parse_set_option("novalue")


def test_pipeline_name_resolution(tmp_path: Path) -> None:
    """A bare name resolves in pipelines/; an unknown one lists the known ones."""
    (tmp_path / "alpha.toml").write_text("")
    (tmp_path / "qwen-1.5b-cpu.toml").write_text("")
    assert resolve_pipeline_path("alpha", [tmp_path]) == tmp_path / "alpha.toml"
    assert resolve_pipeline_path("qwen-1.5b-cpu", [tmp_path]) == tmp_path / "qwen-1.5b-cpu.toml"
    with pytest.raises(
        BadInput,
        match=r"no such pipeline file \(looked in .*\); known pipelines: alpha, qwen-1\.5b-cpu",
    ):
        resolve_pipeline_path("beta", [tmp_path])


def test_config_hash_changes_with_content() -> None:
    """The recorded config hash is stable and sensitive to any setting."""
    a = PipelineConfig(name="a")
    assert config_sha256(a) == config_sha256(PipelineConfig(name="a"))
    assert config_sha256(a) != config_sha256(
        PipelineConfig.model_validate({"name": "a", "retrieval": {"top_k": 5}})
    )


@pytest.mark.parametrize("path", sorted((REPO / "pipelines").glob("*.toml")), ids=lambda p: p.name)
def test_shipped_pipelines_load(path: Path) -> None:
    """Every pipeline file in pipelines/ validates."""
    config = load_pipeline(path)
    assert config.name and isinstance(config.ingest, IngestConfig)


def _models(model: type[BaseModel]) -> list[type[BaseModel]]:
    found = [model]
    for field in model.model_fields.values():
        for arg in (field.annotation, *getattr(field.annotation, "__args__", ())):
            for inner in (arg, *getattr(arg, "__args__", ())):
                if isinstance(inner, type) and issubclass(inner, BaseModel) and inner not in found:
                    found += _models(inner)
    return found


def test_every_config_field_is_documented() -> None:
    """Each config field has a description (it is the documentation `config show` points to)."""
    missing = [
        f"{model.__name__}.{name}"
        for model in _models(PipelineConfig)
        for name, field in model.model_fields.items()
        if not field.description and name not in {"embedder", "chunking", "ingest", "retrieval"}
    ]
    assert missing == []


@pytest.mark.parametrize("command", [["config", "show"], ["check", "--judge"]])
def test_a_non_utf8_toml_is_one_line_naming_file_and_line(
    tmp_path: Path, command: list[str]
) -> None:
    """A Latin-1 pipeline or judge file is refused in one line with its line, not a traceback."""
    from click.testing import CliRunner

    from auditor.cli import cli

    path = tmp_path / "latin1.toml"
    path.write_bytes('name = "x"\n# caf\xe9\n'.encode("latin-1"))
    args = [*command, str(path)]
    if command[0] == "check":
        args += ["--answers", str(tmp_path / "answers.jsonl"), "--out", str(tmp_path / "out")]
        (tmp_path / "answers.jsonl").write_text(
            '{"id": "a", "question": "q", "answer": "a", "contexts": ["c"]}\n', encoding="utf-8"
        )
    result = CliRunner().invoke(cli, args)
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    (line,) = [line for line in result.output.splitlines() if "latin1.toml" in line]
    assert "latin1.toml:2: not UTF-8 (byte 0xe9); save the" in line


def test_bare_pipeline_names_resolve_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From another folder a bundled name still resolves (the checkout's pipelines/), and
    $AUDITOR_PIPELINES folders come first."""
    monkeypatch.chdir(tmp_path)
    bundled = resolve_pipeline_path("smollm2-135m-cpu")
    assert bundled.name == "smollm2-135m-cpu.toml" and bundled.is_file()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "smollm2-135m-cpu.toml").write_text('name = "mine"\n')
    monkeypatch.setenv("AUDITOR_PIPELINES", str(mine))
    assert resolve_pipeline_path("smollm2-135m-cpu") == mine / "smollm2-135m-cpu.toml"
    with pytest.raises(BadInput, match=r"nope: no such pipeline file \(looked in .*mine"):
        resolve_pipeline_path("nope")


def _refusal(args: list[str]) -> str:
    """The stderr of a command that must be refused with exit code 2."""
    from click.testing import CliRunner

    from auditor.cli import cli

    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    return result.stderr


def test_a_toml_file_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """A pipeline or judge file saved with a UTF-8 BOM loads (tomllib alone says "Invalid
    statement (at line 1, column 1)"); a bad byte after the mark is named on its own line."""
    pipeline = tmp_path / "bom.toml"
    pipeline.write_bytes("\ufeff".encode() + b'name = "bom"\n[retrieval]\ntop_k = 3\n')
    assert load_pipeline(pipeline).retrieval.top_k == 3
    judge = tmp_path / "judge.toml"
    judge.write_bytes("\ufeff".encode() + b"support_threshold = 0.5\n")
    assert load_judge(judge).support_threshold == 0.5
    pipeline.write_bytes("\ufeff".encode() + b'name = "bom"\n# \xff\n')
    assert _refusal(["config", "show", str(pipeline)]) == (
        f"Error: {pipeline}:2: not UTF-8 (byte 0xff); save the pipeline file as UTF-8\n"
    )


def test_a_judge_set_without_a_value_names_judge_set(tmp_path: Path) -> None:
    """`audit --judge-set claims` blames --judge-set (not --set), with a judge key example;
    an unknown judge key given there is blamed on it too."""
    audit = [
        "audit", "--pipeline", "smollm2-135m-cpu", "--questions", str(tmp_path / "q.jsonl"),
        "--index", str(tmp_path / "index"), "--out", str(tmp_path / "audit"),
    ]  # fmt: skip
    assert _refusal([*audit, "--judge-set", "claims"]) == (
        "Error: --judge-set 'claims': expected KEY=VALUE, e.g. --judge-set claims=sentences\n"
    )
    assert _refusal([*audit, "--judge-set", "claimz=listed"]) == (
        "Error: --judge-set claimz: unknown key; did you mean claims?\n"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--set", "retrieval.topk=3"],
            "--set retrieval.topk: unknown key; did you mean top_k?",
        ),
        (
            ["--set", "generator.kind=tgi"],
            "--set generator.kind: unknown kind; valid kinds: 'vllm', 'openai', 'http', 'python'",
        ),
        (
            ["--set", "retrieval={topk = 3}"],
            "--set retrieval: retrieval.topk: unknown key; did you mean top_k?",
        ),
        (
            ["--set", "sampling.seed=1"],
            "--set sampling.seed: sampling: unknown key (check the spelling; `auditor config "
            "show` lists valid keys)",
        ),
    ],
    ids=["unknown-key", "unknown-kind", "a-whole-table", "in-an-unknown-table"],
)
def test_a_bad_override_is_blamed_on_set_not_the_file(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    """The key came from the option, so the line names `--set KEY`, not `ok.toml: KEY`."""
    ok = _write(tmp_path, 'name = "ok"\n')
    assert _refusal(["config", "show", str(ok), *extra]) == f"Error: {message}\n"


def test_a_bad_flag_value_is_blamed_on_the_flag(tmp_path: Path) -> None:
    """`ingest --chunk-size 9000` names --chunk-size, not the pipeline (or the defaults)."""
    args = ["ingest", str(tmp_path / "corpus"), "--index", str(tmp_path / "i")]
    assert _refusal([*args, "--chunk-size", "9000"]) == (
        "Error: --chunk-size: Input should be less than or equal to 8192\n"
    )


def test_several_problems_are_one_line(tmp_path: Path) -> None:
    """`FILE: 2 problems: a; b` in one line; with an option's problem among them, each names
    where it is."""
    path = _write(tmp_path, "[retrieval]\ntop_k = 0\ntop_kk = 3\n")
    assert _refusal(["config", "show", str(path)]) == (
        f"Error: {path}: 2 problems: retrieval.top_k: Input should be greater than or equal "
        "to 1; retrieval.top_kk: unknown key; did you mean top_k?\n"
    )
    path = _write(tmp_path, "[retrieval]\ntop_k = 0\n")
    assert _refusal(["config", "show", str(path), "--set", "retrieval.topk=3"]) == (
        f"Error: 2 problems: {path}: retrieval.top_k: Input should be greater than or equal "
        "to 1; --set retrieval.topk: unknown key; did you mean top_k?\n"
    )
