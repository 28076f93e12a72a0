"""`gpuscale simulate --calibrate` and `--replay-bench` through the real binary, on published
`vllm bench serve --save-result` files (vLLM 0.8.5's benchmarks/benchmark_serving.py, as
IOG-Foundation/llm-inference-benchmarks ran it: tests/fixtures/vllm-bench/NOTICE.md)."""

import json
import os
import subprocess

import helpers

TIMEOUT = 120
L8 = "Meta-Llama-3-8B-Instruct_sharegpt_1xNVIDIA-H100-PCIe"


def bench(rate, model=L8):
    return os.path.join(helpers.source_root(), "tests", "fixtures", "vllm-bench",
                        f"vllm_200prompts{rate}qps_{model}.json")


def run(*args):
    return subprocess.run([helpers.binary(), "simulate"] + list(args), capture_output=True,
                          text=True, timeout=TIMEOUT)


def test_calibrate_then_replay_held_out_rates(tmp_path):
    out = tmp_path / "model.yaml"
    p = run("--calibrate", bench(1), bench(16), "--out", str(out))
    assert p.returncode == 0, p.stderr
    # one row per input file, measured beside fitted, and the error
    assert "vllm_200prompts1qps" in p.stdout and "vllm_200prompts16qps" in p.stdout
    assert "mean absolute error" in p.stdout
    # the cache size is not fitted from light loads: the user is told to give it
    assert "kvCacheTokens not given" in p.stdout
    text = out.read_text()
    assert "stepBaseMs" in text and "stepPerSequenceMs" in text
    # the written model replays a rate it was not fitted on, within the fidelity goal
    for rate in (4, 8):
        r = run("--model", str(out), "--replay-bench", bench(rate), "--format", "json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        for side in ("measured", "model"):
            assert set(doc[side]) == {"ttftMeanMs", "ttftP99Ms", "tpotMeanMs", "throughputRps"}
        m, s = doc["measured"], doc["model"]
        measured = json.load(open(bench(rate)))
        assert abs(m["ttftMeanMs"] - measured["mean_ttft_ms"]) < 1e-6 * measured["mean_ttft_ms"]
        for key in ("ttftMeanMs", "tpotMeanMs", "throughputRps"):
            assert abs(s[key] / m[key] - 1) <= 0.25, (rate, key, s[key], m[key])


def test_calibrate_json_names_the_fit():
    p = run("--calibrate", bench(1), bench(16), "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["engine"]["maxNumSeqs"] == 256 and doc["engine"]["maxNumBatchedTokens"] == 8192
    assert doc["kvCacheTokensGiven"] is False
    assert len(doc["files"]) == 2 and doc["capacityRps"] > 0
    assert doc["meanAbsErrorPercent"]["tpotMean"] < 25


def test_shipped_models_load_and_replay():
    for model, name in (("llama-3-8b-h100.yaml", L8),
                        ("llama-3-70b-2xh100.yaml",
                         "Meta-Llama-3-70B-Instruct_sharegpt_2xNVIDIA-H100-PCIe")):
        path = os.path.join(helpers.source_root(), "examples", "simulate", "models", model)
        r = run("--model", path, "--replay-bench", bench(32, name))
        assert r.returncode == 0, r.stderr
        assert "TPOT mean ms" in r.stdout and "measured" in r.stdout


def test_bad_result_files_exit_2(tmp_path):
    trunc = tmp_path / "t.json"
    trunc.write_text(open(bench(16)).read()[:200])
    nokey = tmp_path / "k.json"
    doc = json.load(open(bench(16)))
    del doc["mean_tpot_ms"]
    nokey.write_text(json.dumps(doc))
    cases = [(str(trunc), "truncated"), (str(nokey), "mean_tpot_ms: missing"),
             (str(tmp_path / "absent.json"), "cannot open")]
    for f, needle in cases:
        p = run("--calibrate", f)
        assert p.returncode == 2 and needle in p.stderr, (f, p.returncode, p.stderr)
    p = run("--replay-bench", bench(16))
    assert p.returncode == 2 and "--model" in p.stderr
