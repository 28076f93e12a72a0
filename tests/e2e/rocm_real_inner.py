"""Run by tests/e2e/test_rocm_real.py inside a private mount namespace (unshare -m): mounts a tmpfs
over /sys/class and /dev/shm, builds an amdgpu/KFD sysfs tree there, and drives Debian's real
librocm_smi64.so.1 through `gpuscale agent --collector rocm`. Exit 0 when the scenario holds."""

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402

import helpers  # noqa: E402
from helpers import Agent, rpc_error  # noqa: E402
from rocm_helpers import (REAL_VALUES, add_partition_card, build_real_tree,  # noqa: E402
                          real_device_dir)

ROOT = "/sys/class"
BDF = ["0000:19:00.0", "0000:3a:00.0"]

# A raw call on Debian's library, in a child: how it ends (exit code, or -signal).
RAW = r"""
import ctypes, sys
lib = ctypes.CDLL("librocm_smi64.so.1")
rc = lib.rsmi_init(ctypes.c_uint64(0))
if sys.argv[1] == "init":
    sys.exit(0 if rc == 0 else 3)
want = int(sys.argv[2], 16)
n = ctypes.c_uint32(0)
lib.rsmi_num_monitor_devices(ctypes.byref(n))
for i in range(n.value):
    bdf = ctypes.c_uint64(0)
    lib.rsmi_dev_pci_id_get(i, ctypes.byref(bdf))
    if (bdf.value >> 8) & 0xff == want:
        t = ctypes.c_int64(0)
        lib.rsmi_dev_temp_metric_get(i, 1, 0, ctypes.byref(t))
        sys.exit(0)
sys.exit(4)
"""


def raw(*args, timeout=60):
    """How the raw call ended: the exit code, -signal, or None when it did not finish."""
    try:
        p = subprocess.run([sys.executable, "-c", RAW] + list(args), capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    return p.returncode


def mount_fresh():
    for d in (ROOT, "/dev/shm"):
        subprocess.run(["mount", "-t", "tmpfs", "gs-rocm-test", d], check=True)


def agent(workdir, ready=True):
    a = Agent(["--collector", "rocm", "--interval", helpers.INTERVAL], workdir=workdir,
              ready=ready)
    a.start()
    return a


def serve(workdir):
    build_real_tree(ROOT, [(BDF[0], "amdgpu"), (BDF[1], None)])
    # Without the guard: the library aborts on a temperature call for the card without an
    # amdgpu hwmon (Debian keeps its asserts).
    rc = raw("temp", "3a")
    assert rc == -signal.SIGABRT, "expected the raw call to abort, got %s" % rc
    # The aborted process died holding the library's shared mutex for that card
    # (/dev/shm/rocm_smi_card1), which leaves the card unusable to the next process: a fresh
    # /dev/shm for the agent.
    subprocess.run(["mount", "-t", "tmpfs", "gs-rocm-test", "/dev/shm"], check=True)
    a = agent(workdir)
    try:
        c = a.client()
        v = REAL_VALUES
        helpers.wait_for(lambda: all(g["fresh"] for g in a.gpus_json()["gpus"]), timeout=15,
                         what="a reading of every GPU")
        doc = a.gpus_json()
        assert doc["collector"] == "rocm", doc
        idx = {g["pci_bus_id"]: g["index"] for g in doc["gpus"]}
        assert sorted(idx) == BDF, doc
        i0, i1 = str(idx[BDF[0]]), str(idx[BDF[1]])
        for i in (i0, i1):
            _, val = c.spec_and_value({"profile": "triton-inference", "gpuIndex": i})
            assert val.metricValueFloat == v["busy"], val
            _, val = c.spec_and_value({"profile": "vllm-inference", "gpuIndex": i})
            assert abs(val.metricValueFloat - v["used_mib"] / v["total_mib"] * 100) < 1e-9
        _, val = c.spec_and_value({"metricType": "temperature", "targetValue": "80",
                                   "gpuIndex": i0})
        assert val.metricValueFloat == v["junction_mc"] / 1000.0, val
        _, val = c.spec_and_value({"metricType": "power_draw", "targetValue": "300",
                                   "gpuIndex": i0})
        assert val.metricValueFloat == v["power_uw"] / 1e6, val
        # the card without an amdgpu hwmon: no power, and the agent is alive
        e = rpc_error(c.metrics, {"metricType": "power_draw", "targetValue": "300",
                                  "gpuIndex": i1})
        assert e.code() == grpc.StatusCode.UNAVAILABLE, e
        status, body = a.http_get("/metrics")
        assert status == 200
        assert 'gpu_junction_temperature{gpu_id="%s"' % i0 in body, body
        assert 'gpu_power_usage{gpu_id="%s"' % i1 not in body, body
        assert a.proc.poll() is None
        # the GPU disappears: ROCm SMI keeps its index; the agent marks it lost
        shutil.rmtree(real_device_dir(ROOT, BDF[1]))
        helpers.wait_for(lambda: a.gpus_json()["gpus"][int(i1)]["health"] == "lost",
                         timeout=15, what="lost after the device went")
        _, val = c.spec_and_value({"profile": "triton-inference", "gpuIndex": i0})
        assert val.metricValueFloat == v["busy"]
        e = rpc_error(c.metrics, {"profile": "triton-inference", "gpuIndex": i1})
        assert e.code() == grpc.StatusCode.UNAVAILABLE, e
        assert a.proc.poll() is None
    finally:
        print(a.log()[-3000:])
        a.stop()


def partition(workdir, with_vendor):
    """An MI300X partition's DRM card (amdgpu_xcp_30). As amdgpu lays it out (no PCI vendor file on
    the platform device) ROCm SMI 5.2 skips it: the agent serves the whole GPU only. Taken for an AMD
    GPU, its link target (no PCI address) makes rsmi_init loop forever (ROCm/rocm_smi_lib
    rocm-5.2.3 src/rocm_smi_main.cc ConstructBDFID): the agent refuses to start, naming the card."""
    build_real_tree(ROOT, [(BDF[0], "amdgpu")])
    add_partition_card(ROOT, 1, 30, gpu_bdf=BDF[0] if with_vendor else None)
    if with_vendor:
        rc = raw("init", timeout=10)
        assert rc is None, "expected rsmi_init to hang, got %s" % rc
        subprocess.run(["mount", "-t", "tmpfs", "gs-rocm-test", "/dev/shm"], check=True)
        a = agent(workdir, ready=False)
        rc = a.proc.wait(timeout=60)
        log = a.log()
        print(log[-2000:])
        assert rc == 1, rc
        assert "card1 is an AMD GPU's DRM card whose link target" in log, log
        return
    assert raw("init") == 0
    a = agent(workdir)
    try:
        helpers.wait_for(lambda: all(g["fresh"] for g in a.gpus_json()["gpus"]), timeout=15,
                         what="a reading of every GPU")
        gpus = a.gpus_json()["gpus"]
        assert [g["pci_bus_id"] for g in gpus] == [BDF[0]], gpus
    finally:
        print(a.log()[-2000:])
        a.stop()


def init_abort(workdir, kind):
    if kind == "card_not_symlink":
        build_real_tree(ROOT, [(BDF[0], "amdgpu"), (BDF[1], "amdgpu")], card_as_dir=(1,))
        want = "card1 is an AMD GPU's DRM card but not a symbolic link"
    else:
        build_real_tree(ROOT, [(BDF[0], "amdgpu")], node_without_io_links=(1,))
        want = "nodes/1/io_links is missing"
    rc = raw("init")
    assert rc == -signal.SIGABRT, "expected rsmi_init to abort, got %s" % rc
    a = agent(workdir, ready=False)
    rc = a.proc.wait(timeout=60)
    log = a.log()
    print(log[-2000:])
    assert rc == 1, rc
    assert want in log, log


def main():
    scenario = sys.argv[1]
    mount_fresh()
    workdir = tempfile.mkdtemp(prefix="gs-e2e-rocm-real-")
    if scenario == "serve":
        serve(workdir)
    elif scenario.startswith("partition"):
        partition(workdir, scenario == "partition_taken_for_a_gpu")
    else:
        init_abort(workdir, scenario)
    print(json.dumps({"scenario": scenario, "ok": True, "t": time.time()}))


if __name__ == "__main__":
    main()
