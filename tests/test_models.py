"""Packaged models: registry, integrity check before any conversion, CLI listing."""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.errors import AuditorError, BadInput
from auditor.models import PACKAGED_MODELS, PackagedModel, get_packaged_model, prepare_model
from auditor.models.prepare import PreparationStopped, PreparedAhead, prepared


@pytest.fixture
def tiny_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[PackagedModel, bytes]:
    return make_tiny_package(tmp_path, monkeypatch)


def make_tiny_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[PackagedModel, bytes]:
    """A fake two-part 'model package' importable from tmp_path."""
    parts = [b"GGUF part one ", b"and part two"]
    for number, data in enumerate(parts, start=1):
        package = tmp_path / "site" / f"tinypart{number}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{number:02d}.bin").write_bytes(data)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    whole = b"".join(parts)
    model = PackagedModel(
        name="tiny",
        title="Tiny",
        requirement="tinypart1..2",
        files=(("tinypart1", "data/part01.bin"), ("tinypart2", "data/part02.bin")),
        gguf_sha256=hashlib.sha256(whole).hexdigest(),
        gguf_size=len(whole),
        license="test",
    )
    return model, whole


def test_registry_names_three_models_with_pinned_hashes() -> None:
    """The three packaged models are listed with their pinned GGUF sha256."""
    assert set(PACKAGED_MODELS) == {
        "smollm2-135m-instruct",
        "qwen2.5-coder-0.5b-instruct",
        "qwen2.5-coder-1.5b-instruct",
    }
    assert all(len(m.gguf_sha256) == 64 for m in PACKAGED_MODELS.values())
    with pytest.raises(
        BadInput, match="unknown model 'gpt-5'; packaged models: smollm2-135m-instruct"
    ):
        get_packaged_model("gpt-5")


def test_parts_of_installed_packages_add_up_to_the_pinned_size() -> None:
    """Set-up installed every part, and their sizes add up to the pinned GGUF size."""
    for model in PACKAGED_MODELS.values():
        assert sum(p.stat().st_size for p in model.part_paths()) == model.gguf_size, model.name


def test_tampered_part_is_refused_before_conversion(
    tiny_package: tuple[PackagedModel, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A part whose bytes changed fails the sha256 check; nothing is left in the cache."""
    model, _ = tiny_package
    tampered = PackagedModel(**{**model.__dict__, "gguf_sha256": "0" * 64})
    monkeypatch.setitem(PACKAGED_MODELS, "tiny", tampered)
    converted: list[Path] = []
    monkeypatch.setattr(
        "auditor.models.prepare._convert", lambda gguf, folder, **_: converted.append(gguf)
    )
    cache = tmp_path / "cache"
    with pytest.raises(
        BadInput, match=r"model tiny: joined GGUF sha256 .* does not match .*reinstall tinypart1..2"
    ):
        prepare_model("tiny", cache=cache)
    assert converted == []
    assert [p.name for p in cache.iterdir() if not p.name.startswith(".")] == []


def test_prepare_joins_in_order_verifies_and_records_identity(
    tiny_package: tuple[PackagedModel, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parts are joined in order, converted once, and the identity file names both hashes."""
    model, whole = tiny_package
    monkeypatch.setitem(PACKAGED_MODELS, "tiny", model)
    calls: list[bytes] = []

    def fake_convert(gguf: Path, folder: Path, **_: object) -> dict[str, object]:
        calls.append(gguf.read_bytes())
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(b"weights")
        return {"architecture": "Fake"}

    monkeypatch.setattr("auditor.models.prepare._convert", fake_convert)
    cache = tmp_path / "cache"
    seen: list[tuple[int, int]] = []
    ready = prepare_model(
        "tiny", cache=cache, on_bytes=lambda done, total: seen.append((done, total))
    )
    assert calls == [whole] and seen[-1] == (len(whole), len(whole))
    identity = json.loads((ready.path / "auditor-model.json").read_text())
    assert identity["gguf_sha256"] == model.gguf_sha256
    assert identity["weights_sha256"] == hashlib.sha256(b"weights").hexdigest()
    assert not (ready.path / "model.gguf").exists()
    again = prepare_model("tiny", cache=cache)
    assert again.path == ready.path and len(calls) == 1  # cached: not converted twice
    (ready.path / "auditor-model.json").write_text(json.dumps(identity | {"gguf_sha256": "x"}))
    assert prepared("tiny", cache) is None  # an outdated folder is not trusted


def test_cli_models_list_and_bad_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`models list --json` shows installed packages; a typo lists the valid names, exit 2."""
    monkeypatch.setenv("AUDITOR_MODELS_DIR", str(tmp_path / "models"))
    result = CliRunner().invoke(cli, ["models", "list", "--json"], catch_exceptions=False)
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert result.exit_code == 0 and set(rows) == set(PACKAGED_MODELS)
    assert all(row["installed"] and not row["prepared"] for row in rows.values())
    result = CliRunner().invoke(cli, ["models", "prepare", "qwen-7b"], catch_exceptions=False)
    assert result.exit_code == 2 and "unknown model 'qwen-7b'; packaged models:" in result.stderr


def _left_in(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir() if not p.name.startswith("."))


def test_a_preparation_stopped_in_the_background_leaves_no_half_model(
    tiny_package: tuple[PackagedModel, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing a background preparation mid-conversion kills the conversion's process at once,
    removes the work dir and names the model to whoever waits for it."""
    model, _ = tiny_package
    monkeypatch.setitem(PACKAGED_MODELS, "tiny", model)
    monkeypatch.setattr(
        "auditor.models.prepare._convert_command",
        lambda gguf, folder: [sys.executable, "-c", "import time; time.sleep(120)"],
    )
    cache = tmp_path / "cache"
    converting = threading.Event()

    def on_stage(message: str) -> None:
        if message.startswith("converting"):
            converting.set()

    def prepare(name: str, **kw: object) -> object:
        return prepare_model(name, cache=cache, **kw)  # type: ignore[arg-type]

    ahead = PreparedAhead(["tiny"], prepare, on_stage=on_stage)
    assert converting.wait(30)
    assert [p.name for p in cache.glob("tiny.tmp-*")]  # at work
    started = time.monotonic()
    ahead.close()
    assert time.monotonic() - started < 10  # the 120-s conversion was killed
    assert _left_in(cache) == []
    with pytest.raises(PreparationStopped, match="stopped"):
        ahead.wait("tiny")


def test_a_background_failure_is_raised_where_the_caller_waits(
    tmp_path: Path,
) -> None:
    """The first failure is raised as it was, by `wait` of that model and of any later one
    and by `wait_all`; the models after it are not prepared."""
    prepared_names: list[str] = []

    def prepare(name: str, **_: object) -> None:
        if name == "b":
            raise AuditorError("converting model.gguf failed: out of memory")
        prepared_names.append(name)

    done: list[str] = []
    ahead = PreparedAhead(["a", "b", "c"], prepare, on_done=lambda name, s: done.append(name))
    ahead.wait("a")
    assert ahead.ready("a")  # ended: prepared
    for wait in (lambda: ahead.wait("b"), lambda: ahead.wait("c"), ahead.wait_all):
        with pytest.raises(AuditorError, match=r"^converting model\.gguf failed: out of memory$"):
            wait()
    ahead.close()
    assert prepared_names == ["a"] and done == ["a", "b"]
    assert ahead.ready("b") and ahead.ready("c")  # ended: failed, and never begun after it


def test_a_work_dir_left_by_a_killed_preparation_is_removed_by_the_next(
    tiny_package: tuple[PackagedModel, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, _ = tiny_package
    monkeypatch.setitem(PACKAGED_MODELS, "tiny", model)

    def fake_convert(gguf: Path, folder: Path, **_: object) -> dict[str, object]:
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(b"weights")
        return {}

    monkeypatch.setattr("auditor.models.prepare._convert", fake_convert)
    cache = tmp_path / "cache"
    (cache / "tiny.tmp-999999" / "hf").mkdir(parents=True)  # a killed process's
    prepare_model("tiny", cache=cache)
    assert _left_in(cache) == ["tiny"]


def test_a_background_conversion_yields_while_the_caller_works_not_while_it_waits(
    tiny_package: tuple[PackagedModel, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The conversion runs at idle CPU priority while the caller does its own work (an engine
    starts), at the normal one while the caller waits for it (nothing of ours competes then,
    and other processes must not starve it)."""
    import os

    if not hasattr(os, "SCHED_IDLE"):
        pytest.skip("no SCHED_IDLE here")
    model, _ = tiny_package
    monkeypatch.setitem(PACKAGED_MODELS, "tiny", model)
    seen = tmp_path / "policies"
    probe = (
        "import os, sys, time\n"
        "while not os.path.exists(sys.argv[2]):\n"
        "    open(sys.argv[1], 'a').write(f'{os.sched_getscheduler(0)}\\n'); time.sleep(0.05)\n"
        "os.makedirs(sys.argv[3]); open(os.path.join(sys.argv[3], 'model.safetensors'), 'w')\n"
        "print('{}')\n"
    )
    done = tmp_path / "done"
    monkeypatch.setattr(
        "auditor.models.prepare._convert_command",
        lambda gguf, folder: [sys.executable, "-c", probe, str(seen), str(done), str(folder)],
    )

    def last_policy(after: float) -> int:
        time.sleep(after)
        return int(seen.read_text().split()[-1])

    converting = threading.Event()
    ahead = PreparedAhead(
        ["tiny"],
        lambda name, **kw: prepare_model(name, cache=tmp_path / "cache", **kw),
        on_stage=lambda message: converting.set() if message.startswith("convert") else None,
    )
    try:
        assert converting.wait(30)
        assert last_policy(1.0) == os.SCHED_IDLE  # the caller works
        waiter = threading.Thread(target=ahead.wait, args=("tiny",))
        waiter.start()
        assert last_policy(1.0) == os.SCHED_OTHER  # the caller waits
        done.touch()
        waiter.join(30)
        assert not waiter.is_alive()
    finally:
        done.touch()
        ahead.close()
    assert prepared("tiny", tmp_path / "cache") is not None
