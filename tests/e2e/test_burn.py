"""`gpuscale burn` end to end against the fake libcuda.so.1 (tests/fixtures/fake_cuda), found by
the real dlopen("libcuda.so.1") through LD_LIBRARY_PATH, and the fake libnvidia-ml.so.1 for its
readings. The fake simulates each kernel's run time from its launch arguments and records it; the
duty cycle, memory and patterns are checked on that record, never on wall-clock timings of the
test itself."""

import os
import signal
import statistics
import subprocess
import time

import pytest

import helpers

RATE = 10000  # fake kernel iterations per ms
CYCLE_MS = 100


def fake_cuda_dir():
    d = os.environ.get("FAKE_CUDA_DIR")
    if not d:
        d = os.path.join(os.path.dirname(helpers.fake_nvml_dir()), "fake_cuda")
    if not os.path.exists(os.path.join(d, "libcuda.so.1")):
        pytest.fail("fake libcuda not built in %s (build target fake_cuda)" % d)
    return os.path.abspath(d)  # burn runs in the test's directory


def nvml_lib():
    return os.path.abspath(os.path.join(helpers.fake_nvml_dir(), "libnvidia-ml.so.1"))


def nvml_script(path, util=35, used_mib=20480):
    """GPU 0 at the fake CUDA device 0's bus id, reading util% and used_mib."""
    with open(path, "w") as f:
        f.write("driver 550.54.15\n"
                "gpu 0 name=\"NVIDIA Fake\" uuid=GPU-b0000000-0000-4000-8000-000000000000 "
                "pci=00000000:07:00.0 util=%d memutil=5 total_mib=16384 used_mib=%d temp=40 "
                "power_mw=100000\n" % (util, used_mib))
    return path


class Record:
    """What the fake libcuda recorded: launches, allocations, memsets, the exit report."""

    def __init__(self, path):
        self.launches, self.events, self.memsets, self.exit, self.fails = [], [], [], None, []
        if not os.path.exists(path):
            return
        with open(path) as f:
            for line in f:
                words = line.split()
                if not words:
                    continue
                kv = dict(w.split("=", 1) for w in words[1:] if "=" in w)
                if words[0] == "launch" and "start_us" in kv:
                    self.launches.append({k: int(kv[k]) for k in
                                          ("n", "host_us", "start_us", "end_us", "iters")})
                    self.events.append(("launch", None, 0))
                elif words[0] in ("alloc", "free") and "ptr" in kv:
                    self.events.append((words[0], kv["ptr"], int(kv["bytes"])))
                elif words[0] == "memset":
                    self.memsets.append((kv["ptr"], int(kv["bytes"])))
                elif words[0] == "exit":
                    self.exit = {k: int(v) for k, v in kv.items()}
                elif words[0] == "fail":
                    self.fails.append(kv)

    def nothing_left(self):
        assert self.exit is not None, "the fake libcuda was never unloaded (no exit report)"
        for k in ("contexts", "allocs", "bytes", "modules", "events"):
            assert self.exit[k] == 0, "left on the GPU at exit: %r" % self.exit

    def memory_plateaus(self):
        """Bytes held in touched (memset) chunks at each kernel launch and at the end, repeats
        collapsed: the levels memory went through (burn changes memory between kernels)."""
        touched = {p for p, _ in self.memsets}
        held, sizes, out = 0, {}, []
        for kind, ptr, n in self.events:
            if kind == "launch":
                out.append(held)
                continue
            if ptr not in touched:
                continue
            if kind == "alloc":
                sizes[ptr] = n
                held += n
            else:
                held -= sizes.pop(ptr)
        out.append(held)
        plateaus = []
        for h in out:
            if not plateaus or plateaus[-1] != h:
                plateaus.append(h)
        return plateaus


def calibration_kernels(stderr):
    for line in stderr.splitlines():
        if "calibrated:" in line:
            return int(line.rsplit("(", 1)[1].split()[0])
    raise AssertionError("no calibration line in:\n" + stderr)


def loop_kernels(rec, stderr):
    """(offset seconds from the loop's first kernel, GPU ms) of every kernel after calibration."""
    ks = rec.launches[calibration_kernels(stderr):]
    if not ks:
        return []
    t0 = ks[0]["host_us"]
    return [((k["host_us"] - t0) / 1e6, (k["end_us"] - k["start_us"]) / 1000.0) for k in ks]


def burn_env(tmp_path, extra=None, util=35):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = fake_cuda_dir()
    env["FAKE_CUDA_RECORD"] = str(tmp_path / "cuda.rec")
    env["FAKE_CUDA_RATE"] = str(RATE)
    env["FAKE_NVML_SCRIPT"] = nvml_script(str(tmp_path / "nvml.txt"), util=util)
    env.update(extra or {})
    return env


def run_burn(tmp_path, args, extra=None, util=35, timeout=60):
    argv = [os.path.abspath(helpers.binary()), "burn", "--nvml-library", nvml_lib()] + list(args)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                       env=burn_env(tmp_path, extra, util), cwd=str(tmp_path))
    return p, Record(str(tmp_path / "cuda.rec"))


def median_in(ks, lo, hi):
    vals = [ms for t, ms in ks if lo <= t < hi]
    assert vals, "no kernels between %.1fs and %.1fs: %r" % (lo, hi, ks)
    return statistics.median(vals)


# --- the duty cycle ------------------------------------------------------------------------------

@pytest.mark.parametrize("util", [30, 60, 90])
def test_duty_cycle_holds_the_asked_fraction(tmp_path, util):
    p, rec = run_burn(tmp_path, ["--util", str(util), "--duration", "3s"])
    assert p.returncode == 0, p.stderr
    ks = loop_kernels(rec, p.stderr)
    assert len(ks) >= 20, ks
    # Each kernel runs for util% of the cycle (GPU time as the fake simulates it).
    assert abs(median_in(ks, 0, 10) - util * CYCLE_MS / 100.0) <= 0.03 * CYCLE_MS, ks
    # And over the run, the GPU was busy util% of the time from the first kernel to the last.
    lk = rec.launches[calibration_kernels(p.stderr):]
    busy = sum(k["end_us"] - k["start_us"] for k in lk)
    span = lk[-1]["end_us"] - lk[0]["start_us"]
    assert abs(100.0 * busy / span - util) <= 10, (busy, span)
    # Output: what was asked beside what NVML reads, once a second, plain lines (not a TTY).
    status = [l for l in p.stdout.splitlines() if l.startswith("t=")]
    assert len(status) >= 2, p.stdout
    assert all(("util_asked=%d" % util) in l and "util_nvml=35" in l for l in status), p.stdout
    assert "\r" not in p.stdout
    assert "burn: done after" in p.stdout
    rec.nothing_left()


def test_status_line_updates_in_place_on_a_terminal(tmp_path):
    import pty
    master, slave = pty.openpty()
    try:
        p = subprocess.run([os.path.abspath(helpers.binary()), "burn", "--nvml-library", nvml_lib(),
                            "--util", "40", "--duration", "2500ms"], stdout=slave,
                           stderr=subprocess.PIPE, text=True, timeout=60,
                           env=burn_env(tmp_path), cwd=str(tmp_path))
        os.close(slave)
        slave = None
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal has no writer left
                break
            if not chunk:
                break
            out += chunk
    finally:
        if slave is not None:
            os.close(slave)
        os.close(master)
    assert p.returncode == 0, p.stderr
    text = out.decode()
    # every status rewrites the same line: carriage return, the line, erase to its end
    assert text.count("\rt=") >= 2 and "\x1b[K" in text, repr(text)
    assert "\nt=" not in text.replace("\r\n", "\n"), repr(text)
    assert text.rstrip().splitlines()[-1].startswith("burn: done after"), repr(text)


def test_zero_and_full_utilisation(tmp_path):
    p, rec = run_burn(tmp_path, ["--util", "0", "--duration", "2s"])
    assert p.returncode == 0, p.stderr
    assert loop_kernels(rec, p.stderr) == []  # 0 %: no kernel at all after calibration
    rec.nothing_left()
    p, rec = run_burn(tmp_path, ["--util", "100", "--duration", "2s"])
    assert p.returncode == 0, p.stderr
    # 100 %: each cycle's kernel is the whole cycle (the last one ends with the run). What burn
    # asks of the GPU, not the host's gaps between a kernel's end and the next launch, which
    # grow with the machine's load (the kernels' busy share of the wall span fell to 0.90 on two
    # loaded cores).
    # The first kernels time the GPU (each 4x longer, up to a part of the first cycle).
    ks = loop_kernels(rec, p.stderr)
    full = [i for i, (_, ms) in enumerate(ks) if ms >= 0.95 * CYCLE_MS]
    assert full and full[0] <= 5, ks
    assert all(ms < ks[i + 1][1] for i, (_, ms) in enumerate(ks[:full[0]])), ks
    assert len(ks) - full[0] >= 5 and all(ms >= 0.95 * CYCLE_MS for _, ms in ks[full[0]:-1]), ks


# --- memory --------------------------------------------------------------------------------------

@pytest.mark.parametrize("size,want", [("1GiB", 1 << 30), ("300MiB", 300 << 20),
                                       ("20%", (16384 * 20 // 100) << 20)])
def test_memory_reaches_its_target_touched_and_freed(tmp_path, size, want):
    p, rec = run_burn(tmp_path, ["--util", "10", "--memory", size, "--duration", "2s"])
    assert p.returncode == 0, p.stderr
    plateaus = rec.memory_plateaus()
    assert max(plateaus) == want, plateaus  # every byte asked was allocated and touched
    assert plateaus[-1] == 0, plateaus
    assert "mem_held_mib=%d" % (want >> 20) in p.stdout
    rec.nothing_left()


def test_memory_follows_a_step_pattern(tmp_path):
    p, rec = run_burn(tmp_path, ["--pattern", "step", "--steps", "50:2s,100:2s,0", "--follow",
                                 "memory", "--memory", "1GiB", "--util", "20",
                                 "--duration", "5s"])
    assert p.returncode == 0, p.stderr
    assert rec.memory_plateaus() == [512 << 20, 1024 << 20, 0], rec.memory_plateaus()
    # utilisation does not follow: every kernel is 20% of the cycle
    ks = loop_kernels(rec, p.stderr)
    assert abs(median_in(ks, 0, 10) - 20) <= 3
    rec.nothing_left()


# --- patterns ------------------------------------------------------------------------------------

def test_step_pattern_is_followed(tmp_path):
    p, rec = run_burn(tmp_path, ["--pattern", "step", "--steps", "20:1500ms,80:1500ms,0",
                                 "--duration", "4s"])
    assert p.returncode == 0, p.stderr
    ks = loop_kernels(rec, p.stderr)
    assert abs(median_in(ks, 0.1, 1.4) - 20) <= 2, ks
    assert abs(median_in(ks, 1.6, 2.9) - 80) <= 4, ks
    assert [k for k in ks if 3.1 <= k[0]] == [], ks  # the last step is 0: no kernels
    rec.nothing_left()


def test_step_pattern_repeats(tmp_path):
    p, rec = run_burn(tmp_path, ["--pattern", "step", "--steps", "20:500ms,60:500ms", "--repeat",
                                 "--duration", "3s"])
    assert p.returncode == 0, p.stderr
    ks = loop_kernels(rec, p.stderr)
    low = [ms for t, ms in ks if 0.1 <= t % 1.0 < 0.4]
    high = [ms for t, ms in ks if 0.6 <= t % 1.0 < 0.9]
    assert len(low) >= 4 and len(high) >= 4, ks  # every loop, not only the first
    assert abs(statistics.median(low) - 20) <= 2 and abs(statistics.median(high) - 60) <= 3, ks
    rec.nothing_left()


def util_error(ks, expected):
    return statistics.median(abs(ms - expected(t) * CYCLE_MS / 100.0) for t, ms in ks)


def test_sine_pattern_is_followed(tmp_path):
    import math
    p, rec = run_burn(tmp_path, ["--pattern", "sine", "--sine-min", "20", "--util", "80",
                                 "--period", "4s", "--duration", "4s"])
    assert p.returncode == 0, p.stderr
    ks = loop_kernels(rec, p.stderr)
    assert median_in(ks, 0, 0.4) < 30 and median_in(ks, 1.8, 2.2) > 70, ks
    assert util_error(ks, lambda t: 50 - 30 * math.cos(2 * math.pi * t / 4)) <= 3, ks
    rec.nothing_left()


def test_csv_pattern_is_followed(tmp_path):
    csv = tmp_path / "load.csv"
    csv.write_text("seconds,percent\n0,10\n2,90\n")
    p, rec = run_burn(tmp_path, ["--pattern", "csv", str(csv), "--duration", "3s"])
    assert p.returncode == 0, p.stderr
    ks = loop_kernels(rec, p.stderr)
    assert util_error(ks, lambda t: 10 + 40 * t if t < 2 else 90) <= 3, ks
    rec.nothing_left()


# --- closed loop ---------------------------------------------------------------------------------

@pytest.mark.parametrize("nvml_reads,direction", [(30, "up"), (90, "down")])
def test_closed_loop_corrects_from_nvml(tmp_path, nvml_reads, direction):
    p, rec = run_burn(tmp_path, ["--util", "60", "--closed-loop", "--duration", "4s"],
                      util=nvml_reads)
    assert p.returncode == 0, p.stderr
    ks = loop_kernels(rec, p.stderr)
    late = median_in(ks, 2.1, 10)
    if direction == "up":  # NVML reads less than asked: the kernels grow
        assert late >= 85, ks
    else:  # more than asked: they shrink (to nothing, as this fake GPU never reads less)
        assert late <= 40, ks
    assert "util_nvml=%d" % nvml_reads in p.stdout
    rec.nothing_left()


def test_open_loop_ignores_nvml(tmp_path):
    p, rec = run_burn(tmp_path, ["--util", "60", "--duration", "3s"], util=30)
    assert p.returncode == 0, p.stderr
    assert abs(median_in(loop_kernels(rec, p.stderr), 2.1, 10) - 60) <= 3


def test_without_nvml_readings_are_absent_and_closed_loop_refuses(tmp_path):
    p, rec = run_burn(tmp_path, ["--util", "50", "--duration", "1s", "--nvml-library",
                                 str(tmp_path / "nope.so")])
    assert p.returncode == 0, p.stderr
    assert "util_nvml=- " in p.stdout and "mem_nvml_mib=-" in p.stdout  # absent, never 0
    assert "no NVML readings" in p.stderr
    p, rec = run_burn(tmp_path, ["--util", "50", "--duration", "1s", "--closed-loop",
                                 "--nvml-library", str(tmp_path / "nope.so")])
    assert p.returncode == 7, p.stderr
    assert "--closed-loop needs NVML" in p.stderr
    rec.nothing_left()


# --- errors: a message and a distinct exit status each, nothing left allocated -------------------

@pytest.mark.parametrize("args,env,status,msg", [
    (["--cuda-library", "/nonexistent/libcuda.so.1"], {}, 3, "cannot load the CUDA driver"),
    ([], {"FAKE_CUDA_INIT_FAIL": "999"}, 3, "the CUDA driver did not initialise"),
    ([], {"FAKE_CUDA_DEVICES": "0"}, 4, "no CUDA GPU is visible"),
    (["--gpu", "5"], {"FAKE_CUDA_DEVICES": "2"}, 4, "--gpu 5: no such GPU; CUDA sees 2 GPUs"),
    (["--memory", "20GiB"], {}, 5, "--memory 20GiB is more than the GPU's 16384 MiB"),
    (["--memory", "100%"], {"FAKE_CUDA_TOTAL_MIB": "1000"}, 5, "out of GPU memory"),
    ([], {"FAKE_CUDA_LAUNCH_FAIL": "6"}, 6, "the burn kernel did not launch"),
    ([], {"FAKE_CUDA_KERNEL_FAULT": "7"}, 6, "CUDA_ERROR_ILLEGAL_ADDRESS"),
    ([], {"FAKE_CUDA_FAIL_CALL": "4", "FAKE_CUDA_FAIL_CODE": "999"}, 1, "CUDA_ERROR_UNKNOWN"),
])
def test_failures_have_a_message_and_an_exit_status(tmp_path, args, env, status, msg):
    p, rec = run_burn(tmp_path, ["--util", "50", "--duration", "2s"] + args, extra=env)
    assert p.returncode == status, (p.returncode, p.stderr)
    assert msg in p.stderr, p.stderr
    if "--cuda-library" not in args:
        rec.nothing_left()


@pytest.mark.parametrize("args,msg", [
    (["--util", "120"], "--util (GPUSCALE_BURN_UTIL): invalid value \"120\""),
    (["--steps", "30:1s"], "--steps is for --pattern step"),
    (["--pattern", "step"], "--steps: required with --pattern step"),
    (["--pattern", "step", "--steps", "30,60"], "step 1 (\"30\") needs a duration"),
    (["--pattern", "csv"], "--pattern csv needs a file"),
    (["--pattern", "sine", "--sine-min", "70", "--util", "50"], "--sine-min 70 is above"),
    (["--follow", "memory"], "--follow memory needs --memory SIZE"),
    (["--memory", "4XB"], "--memory: unknown unit \"XB\""),
    (["--cycle", "5ms"], "--cycle"),
])
def test_bad_options_are_usage_errors(tmp_path, args, msg):
    p, rec = run_burn(tmp_path, args)
    assert p.returncode == 2, p.stderr
    assert msg in p.stderr, p.stderr
    assert rec.launches == []  # refused before touching the GPU


def test_help_lists_every_option(tmp_path):
    p, _ = run_burn(tmp_path, ["--help"])
    assert p.returncode == 0
    for opt in ("--gpu", "--util", "--memory", "--duration", "--pattern", "--steps", "--csv",
                "--follow", "--closed-loop", "--cycle", "GPUSCALE_BURN_UTIL"):
        assert opt in p.stdout, opt


# --- signals -------------------------------------------------------------------------------------

@pytest.mark.parametrize("sig,word", [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT")])
def test_signal_frees_everything(tmp_path, sig, word):
    env = burn_env(tmp_path)
    proc = subprocess.Popen([os.path.abspath(helpers.binary()), "burn", "--nvml-library", nvml_lib(), "--util", "70",
                             "--memory", "512MiB"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=str(tmp_path))
    try:
        path = str(tmp_path / "cuda.rec")
        helpers.wait_for(lambda: len(Record(path).launches) >= 10, timeout=30,
                         what="burn kernels running")
        with open("/proc/%d/maps" % proc.pid) as f:
            assert "libcuda.so.1" in f.read()  # burn has the (fake) driver loaded
        assert max(Record(path).memory_plateaus()) == 512 << 20
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "stopped by %s" % word in out
    rec = Record(path)
    assert rec.memory_plateaus()[-1] == 0
    rec.nothing_left()


def test_agent_never_loads_libcuda(tmp_path, procs, monkeypatch):
    """Only burn loads the CUDA driver: an agent with the fake libcuda on its library path has it
    neither mapped nor called."""
    monkeypatch.setenv("GPUSCALE_BIN", os.path.abspath(helpers.binary()))  # it runs in tmp_path
    a = helpers.Agent(["--collector", "nvml", "--nvml-library", nvml_lib()],
                      env=burn_env(tmp_path), workdir=str(tmp_path))
    procs.append(a)
    a.start()
    with open("/proc/%d/maps" % a.proc.pid) as f:
        maps = f.read()
    assert "libnvidia-ml.so.1" in maps
    assert "libcuda" not in maps
    a.stop()
    assert not os.path.exists(str(tmp_path / "cuda.rec"))


# --- examples/load-test ----------------------------------------------------------------------------

def load_test_docs(name):
    import yaml
    with open(os.path.join(helpers.source_root(), "examples", "load-test", name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def test_load_test_burn_args_run(tmp_path):
    """The Deployment's burn arguments are ones burn accepts, and they run (on the fake GPU)."""
    dep = [d for d in load_test_docs("burn-deployment.yaml") if d["kind"] == "Deployment"][0]
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert c["args"][0] == "burn"
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1
    env = {e["name"]: e["value"] for e in c["env"]}
    assert "compute" in env["NVIDIA_DRIVER_CAPABILITIES"].split(",")  # libcuda is mounted
    p, rec = run_burn(tmp_path, c["args"][1:] + ["--duration", "2s"])
    assert p.returncode == 0, p.stderr
    assert max(rec.memory_plateaus()) == 4 << 30
    rec.nothing_left()


def test_load_test_scaledobject_metadata_is_accepted_by_the_gateway(tmp_path, monkeypatch):
    """The ScaledObject's trigger metadata parses at the gateway (a spec with target 30), while
    the same with one bad key is refused: the check can fail."""
    monkeypatch.setenv("GPUSCALE_BIN", os.path.abspath(helpers.binary()))  # it runs in tmp_path
    import grpc
    from gateway_helpers import Gateway
    so = load_test_docs("scaledobject.yaml")[0]
    md = dict(so["spec"]["triggers"][0]["metadata"])
    assert md["scalerAddress"].startswith("gpuscale-gateway.gpuscale.svc")
    dead = "%s:%d" % (helpers.LOOPBACK, helpers.free_port())
    gw = Gateway(["--agents", dead, "--tick", "200ms"], workdir=str(tmp_path / "gw"),
                 ready=False).start()
    try:
        client = gw.client()
        spec = client.spec(md)
        assert len(spec.metricSpecs) == 1 and spec.metricSpecs[0].targetSizeFloat == 30, spec
        bad = dict(md, aggregation="median")
        e = helpers.rpc_error(client.spec, bad)
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e.details()
    finally:
        gw.stop()
        gw.kill()
