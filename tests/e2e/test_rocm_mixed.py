"""A mixed cluster: one NVIDIA agent (fake NVML) and one AMD agent (fake ROCm SMI) behind one
gateway. The same triggers mean the same on both vendors; gpuModel (a regex on the GPU's model
name) picks one vendor in cluster and workload scope."""

import os

import helpers
from gateway_helpers import Gateway
from helpers import Agent
from rocm_helpers import start_agent
from test_attribution import FakeKubelet, kubelet_args, pod
from test_nvml import lib_path as nvml_lib, write_atomic

NV = """driver 550.54.15
gpu 0 name="NVIDIA H100 80GB HBM3" uuid=GPU-aaaaaaaa-0000-4000-8000-000000000000 util=50 memutil=10 total_mib=81559 used_mib=40960 temp=60 power_mw=400000
gpu 1 name="NVIDIA H100 80GB HBM3" uuid=GPU-bbbbbbbb-0000-4000-8000-000000000000 util=20 memutil=5 total_mib=81559 used_mib=8192 temp=40 power_mw=150000
"""
AMD = """gpu 0 name="AMD Instinct MI300X" serial=692251001234 pci=0000:19:00.0 busy=37 membusy=11 total_mib=196592 used_mib=20480 temp_junction=55 temp_edge=41 power_uw=350000000
gpu 1 name="AMD Instinct MI300X" serial=692251005678 pci=0000:3a:00.0 busy=82 membusy=40 total_mib=196592 used_mib=98296 temp_junction=70 temp_edge=50 power_uw=700000000
"""


def test_mixed_cluster_through_the_gateway(tmp_path, procs):
    for d in ("kn", "ka", "nv", "amd"):
        os.makedirs(tmp_path / d)
    kn = FakeKubelet(str(tmp_path / "kn"))
    ka = FakeKubelet(str(tmp_path / "ka"))
    try:
        kn.set([pod("ml", "llm-0", "server", "nvidia.com/gpu",
                    ["GPU-aaaaaaaa-0000-4000-8000-000000000000"])])
        ka.set([pod("ml", "llm-1", "server", "amd.com/gpu", ["0000:19:00.0"])])
        kn.start()
        ka.start()
        s = str(tmp_path / "nv" / "fake.txt")
        write_atomic(s, NV)
        nv = Agent(["--collector", "nvml", "--nvml-library", nvml_lib(), "--interval",
                    helpers.INTERVAL] + kubelet_args(kn),
                   env={"FAKE_NVML_SCRIPT": s, "NODE_NAME": "nv-node"},
                   workdir=str(tmp_path / "nv"))
        procs.append(nv)
        nv.start()
        amd = start_agent(tmp_path / "amd", procs, AMD,
                          [("0000:19:00.0", "amdgpu"), ("0000:3a:00.0", "amdgpu")],
                          extra=kubelet_args(ka), env={"NODE_NAME": "amd-node"})
        for a in (nv, amd):
            helpers.wait_for(lambda: any(g["pods"] for g in a.gpus_json()["gpus"]), timeout=10,
                             what="pods attributed on %s" % a.grpc_address)
        gw = Gateway(["--agents", "%s,%s" % (nv.grpc_address, amd.grpc_address), "--tick",
                      "200ms"], workdir=str(tmp_path / "gw")).start()
        procs.append(gw)
        helpers.wait_for(lambda: all(v["reported"] for v in gw.agents().values()), timeout=10,
                         what="both agents reported")
        c = gw.client()

        def value(**kw):
            md = {"metricType": "gpu_utilization", "targetValue": "60"}
            md.update(kw)
            return c.spec_and_value(md)[1].metricValueFloat

        # cluster scope over both vendors: gpu_utilization is NVML's util and AMD's GFX busy
        assert value(scope="cluster", aggregation="max") == 82
        assert value(scope="cluster", aggregation="min") == 20
        assert helpers.close(value(scope="cluster", aggregation="avg"), (50 + 20 + 37 + 82) / 4)
        # gpuModel picks one vendor
        assert value(scope="cluster", aggregation="max", gpuModel="NVIDIA.*") == 50
        assert value(scope="cluster", aggregation="max", gpuModel=".*MI300X") == 82
        assert value(scope="node", node="amd-node", aggregation="min") == 37
        # workload scope: the sum of per-pod values over both vendors' pods
        helpers.wait_for(lambda: value(pods="llm-.*", namespace="ml") == 50 + 37, timeout=10,
                         what="workload scope over llm-0 (NVIDIA) and llm-1 (AMD)")
        assert value(pods="llm-.*", namespace="ml", gpuModel="AMD.*") == 37
        assert value(pods="llm-.*", namespace="ml", gpuModel="NVIDIA.*") == 50
        # memory_used_percent means the same on both
        mem = {"metricType": "memory_used_percent", "targetValue": "80", "scope": "cluster",
               "aggregation": "max"}
        got = c.spec_and_value(mem)[1].metricValueFloat
        want = max(40960 / 81559, 8192 / 81559, 20480 / 196592, 98296 / 196592) * 100
        assert helpers.close(got, want), got
        mem["gpuModel"] = "AMD.*"
        got = c.spec_and_value(mem)[1].metricValueFloat
        assert helpers.close(got, 98296 / 196592 * 100), got
    finally:
        kn.cleanup()
        ka.cleanup()
