"""`gpuscale query` against a live agent, and the agent's command-line errors."""

import re
import subprocess

import helpers
from conftest import main_gpus
from helpers import PROFILES, Scenario, c_round

SC = Scenario(main_gpus())
CLI_TIMEOUT = 30


def run(*args, timeout=CLI_TIMEOUT):
    return subprocess.run([helpers.binary()] + list(args), capture_output=True, text=True,
                          timeout=timeout)


def parse_table(out):
    """The query table: a header line of column names, then one row per metric."""
    lines = [ln for ln in out.splitlines() if ln.strip()]
    for k, ln in enumerate(lines):
        cols = ln.split()
        if "METRIC" in cols and "TARGET" in cols:
            rows = [dict(zip(cols, r.split())) for r in lines[k + 1:] if len(r.split()) == len(cols)]
            assert rows, out
            return rows
    raise AssertionError("no table in output:\n" + out)


def test_query_prints_target_value_and_activity(main_agent):
    metric, target, activation, agg = PROFILES["vllm-inference"]
    p = run("query", "--address", main_agent.grpc_address, "--profile", "vllm-inference")
    assert p.returncode == 0, p.stderr
    row = parse_table(p.stdout)[0]
    want = SC.expected(metric, agg)
    assert float(row["TARGET"]) == target == 80
    assert row["VALUE"] == str(c_round(want))
    assert abs(float(row["VALUE_FLOAT"]) - want) <= 1e-3 * max(1.0, abs(want))
    assert row["ACTIVE"] == ("true" if want > activation else "false")


def test_query_json_is_the_table_as_one_object(main_agent):
    import json
    args = ("query", "--address", main_agent.grpc_address, "--profile", "vllm-inference")
    table = parse_table(run(*args).stdout)[0]
    p = run(*args, "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert len(doc["metrics"]) == 1, doc
    m = doc["metrics"][0]
    assert m["metric"] == table["METRIC"]
    assert m["target"] == int(table["TARGET"]) and m["target_float"] == float(table["TARGET_FLOAT"])
    assert m["value"] == int(table["VALUE"])
    assert abs(m["value_float"] - float(table["VALUE_FLOAT"])) <= 1e-3 * max(1.0, m["value_float"])
    assert doc["activation"] == float(table["ACTIVATION"]) == PROFILES["vllm-inference"][2]
    assert doc["active"] == (table["ACTIVE"] == "true")
    # -o is the short form; a threshold this side cannot know is null.
    p = run("query", "--address", main_agent.grpc_address, "-m", "metricType=gpu_utilization",
            "-o", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["activation"] is None
    assert run(*args, "--format", "yaml").returncode == 2


def test_query_idle_gpu_is_inactive(main_agent):
    from conftest import IDLE_GPU
    p = run("query", "--address", main_agent.grpc_address, "--profile", "triton-inference",
            "-m", "gpuIndex=%d" % IDLE_GPU)
    assert p.returncode == 0, p.stderr
    row = parse_table(p.stdout)[0]
    assert float(row["VALUE_FLOAT"]) == SC.value(IDLE_GPU, "gpu_utilization") == 0
    assert row["ACTIVE"] == "false"


def test_query_bad_metadata_exits_nonzero_with_status_name(main_agent):
    p = run("query", "--address", main_agent.grpc_address, "--profile", "vllm-inference",
            "-m", "aggregation=bogus")
    assert p.returncode != 0
    assert "INVALID_ARGUMENT" in p.stdout + p.stderr
    assert "aggregation" in p.stdout + p.stderr


def test_query_not_found_exits_nonzero_with_status_name(main_agent):
    p = run("query", "--address", main_agent.grpc_address, "--profile", "triton-inference",
            "-m", "gpuIndex=%d" % len(SC.gpus))
    assert p.returncode != 0
    assert "NOT_FOUND" in p.stdout + p.stderr


def test_query_bad_address_exits_nonzero_with_status_name():
    port = helpers.free_port()  # nothing listens there
    p = run("query", "--address", "127.0.0.1:%d" % port, "--profile", "vllm-inference",
            "--timeout", "2s")
    assert p.returncode != 0
    assert re.search(r"UNAVAILABLE|DEADLINE_EXCEEDED", p.stdout + p.stderr), p.stderr


def test_query_without_address_is_usage_error():
    p = run("query", "--profile", "vllm-inference", timeout=CLI_TIMEOUT)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "address" in p.stderr


def test_agent_bad_interval_exits_2_naming_option():
    p = run("agent", "--collector", "mock", "--interval", "0s")
    assert p.returncode == 2, p.stderr
    assert "--interval" in p.stderr and "0s" in p.stderr


def test_agent_bad_grpc_listen_exits_2_naming_option():
    p = run("agent", "--collector", "mock", "--grpc-listen", "nope")
    assert p.returncode == 2, p.stderr
    assert "--grpc-listen" in p.stderr and "nope" in p.stderr


def test_agent_unknown_flag_exits_2():
    p = run("agent", "--no-such-flag")
    assert p.returncode == 2, p.stderr
    assert "no-such-flag" in p.stderr


def test_agent_env_override_is_validated_too():
    import os
    env = dict(os.environ, GPUSCALE_INTERVAL="0s")
    p = subprocess.run([helpers.binary(), "agent", "--collector", "mock"], capture_output=True,
                       text=True, timeout=CLI_TIMEOUT, env=env)
    assert p.returncode == 2, p.stderr
    assert "GPUSCALE_INTERVAL" in p.stderr


def test_help_exits_0():
    for cmd in ("agent", "query"):
        p = run(cmd, "--help")
        assert p.returncode == 0, (cmd, p.stderr)
        assert "--" in p.stdout
    p = run("agent", "--help")
    for opt in ("--collector", "--scenario", "--grpc-listen", "--http-listen", "--interval"):
        assert opt in p.stdout, opt


def test_help_examples_use_the_port_the_servers_listen_on():
    """query --help once showed 127.0.0.1:9500, where nothing listens: every example address in any
    command's --help must use the gRPC port agent and gateway listen on by default."""
    grpc_default = set()
    for cmd in ("agent", "gateway"):
        out = run(cmd, "--help").stdout
        m = re.search(r"--grpc-listen[^\[]*\[default [^\]]*?:(\d+);", out)
        assert m, (cmd, out)
        grpc_default.add(m.group(1))
    assert len(grpc_default) == 1, grpc_default
    commands = re.findall(r"^  ([a-z]+) ", run("--help").stdout, re.M)
    assert "query" in commands, commands
    examples = 0
    for cmd in commands:
        out = run(cmd, "--help").stdout
        for port in re.findall(r"--(?:address|agents|agents-dns)[ =]\S+:(\d+)", out):
            examples += 1
            assert {port} == grpc_default, (cmd, port, out)
    assert examples >= 3  # agent's, gateway's and query's examples were seen


def test_agent_missing_scenario_file_fails_with_message(tmp_path):
    missing = str(tmp_path / "nope.yaml")
    p = run("agent", "--collector", "mock", "--scenario", missing, "--grpc-listen",
            "127.0.0.1:%d" % helpers.free_port(), "--http-listen",
            "127.0.0.1:%d" % helpers.free_port())
    assert p.returncode != 0
    assert "nope.yaml" in p.stdout + p.stderr


def test_query_warns_about_memory_in_workload_scope(main_agent):
    """docs/profiles.md "Load-insensitive metrics": a memory metric in workload scope runs away,
    so query says so on stderr before it calls (the agent itself refuses workload scope, so the
    call fails here; test_load_insensitive.py runs it against a gateway)."""
    for md in (["--profile", "vllm-inference", "-m", "pods=vllm-.*"],
               ["-m", "targetMemoryUtilization=80", "-m", "scope=workload"],
               ["-m", "metricType=memory_used_mib", "-m", "targetValue=60000", "-m", "pods=x"]):
        p = run("query", "--address", main_agent.grpc_address, *md)
        warn = [ln for ln in p.stderr.splitlines() if "warning" in ln]
        assert len(warn) == 1, (md, p.stderr)
        assert "workload scope" in warn[0] and "maxReplicaCount" in warn[0], warn
        assert "memory_used" in warn[0], warn
    # node scope, or a utilisation metric in workload scope: no warning
    for md in (["--profile", "vllm-inference"], ["--profile", "batch", "-m", "scope=cluster"],
               ["--profile", "triton-inference", "-m", "pods=x"]):
        p = run("query", "--address", main_agent.grpc_address, *md)
        assert "warning" not in p.stderr, (md, p.stderr)


def test_a_mock_start_is_one_config_line_and_no_warning(tmp_path):
    """A mock start logs one config line at info (the options set, and how many are at their default),
    and no warning: no kubelet is expected off a node. --log-level debug lists every option."""
    a = helpers.start_mock(str(tmp_path), Scenario(main_gpus()))
    try:
        log = a.log()
    finally:
        a.stop()
    config = [ln for ln in log.splitlines() if 'msg="config' in ln]
    assert len(config) == 1, config
    assert "level=info" in config[0] and "collector=mock" in config[0], config[0]
    assert re.search(r"; \d+ options at their default \(--log-level debug lists every option\)", config[0])
    assert "level=warn" not in log and "level=error" not in log, log
    (tmp_path / "debug").mkdir()
    a = helpers.start_mock(str(tmp_path / "debug"), Scenario(main_gpus()), extra=["--log-level", "debug"])
    try:
        log = a.log()
    finally:
        a.stop()
    assert "level=debug module=agent msg=\"config interval=" in log, log
