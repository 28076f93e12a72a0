#!/usr/bin/python3
"""A fake kubelet for the end-to-end tests: a grpcio PodResourcesLister (v1) on a unix socket,
answering with device-plugin devices and DRA dynamic_resources (the kubelet's field numbers).

    python3 fake_kubelet.py --socket PATH --pods FILE.json [--proto-dir DIR]

Every List re-reads FILE.json, so a test changes the answer (or the behaviour) while the agent
runs by rewriting the file (write a temp file and rename it over). The file holds:

    {
      "pods": [
        {"namespace": "ml", "name": "llm-0",
         "containers": [{"name": "server",
                         "devices": [{"resource_name": "nvidia.com/gpu",
                                      "device_ids": ["GPU-...::0"]}]}]},
        {"namespace": "ml", "name": "llm-1",          # a GPU allocated through DRA
         "containers": [{"name": "server",
                         "dynamic_resources": [{
                             "claim_name": "gpu", "claim_namespace": "ml",
                             "claim_resources": [{
                                 "driver_name": "gpu.nvidia.com", "pool_name": "node-1",
                                 "device_name": "gpu-0",     # "" as kubelets before 1.31
                                 "cdi_devices": ["k8s.gpu.nvidia.com/claim=<uid>-gpu-0"]}]}]}]}
      ],
      "delay": 0,          # seconds to sleep before answering: a slow or hung kubelet
      "error": null        # a gRPC status code name ("UNAVAILABLE", "INTERNAL"...) to fail with
    }

A top-level list is taken as "pods". A missing or unreadable file answers an empty list. The
message classes are generated at start with `protoc --python_out` from proto/podresources.proto
into a temp dir. "Down" is simulated by stopping the process (SIGTERM/SIGINT remove the socket).
Each List prints one line "list N" on stdout; "listening PATH" is printed once the socket is up.
"""

import argparse
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc


def load_messages(proto_dir):
    out = tempfile.mkdtemp(prefix="gs-fake-kubelet-pb-")
    subprocess.run(["protoc", "--python_out=" + out, "-I", proto_dir, "podresources.proto"],
                   check=True, timeout=60)
    sys.path.insert(0, out)
    try:
        return importlib.import_module("podresources_pb2"), out
    finally:
        sys.path.remove(out)


def read_state(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        print("pods file %s unreadable (%s): answering no pods" % (path, e), flush=True)
        return {"pods": []}
    if isinstance(data, list):
        data = {"pods": data}
    return data


def build_response(pb, pods):
    resp = pb.ListPodResourcesResponse()
    for p in pods:
        pr = resp.pod_resources.add(name=p.get("name", ""), namespace=p.get("namespace", ""))
        for c in p.get("containers", []):
            cr = pr.containers.add(name=c.get("name", ""))
            for d in c.get("devices", []):
                cr.devices.add(resource_name=d.get("resource_name", ""),
                               device_ids=list(d.get("device_ids", [])))
            for dr in c.get("dynamic_resources", []):
                m = cr.dynamic_resources.add(claim_name=dr.get("claim_name", ""),
                                             claim_namespace=dr.get("claim_namespace", ""))
                for r in dr.get("claim_resources", []):
                    x = m.claim_resources.add(driver_name=r.get("driver_name", ""),
                                              pool_name=r.get("pool_name", ""),
                                              device_name=r.get("device_name", ""))
                    for name in r.get("cdi_devices", []):
                        x.cdi_devices.add(name=name)
    return resp


class Lister:
    def __init__(self, pb, pods_path):
        self.pb = pb
        self.pods_path = pods_path
        self.calls = 0
        self.lock = threading.Lock()

    def list(self, request, context):
        with self.lock:
            self.calls += 1
            n = self.calls
        print("list %d" % n, flush=True)
        state = read_state(self.pods_path)
        delay = float(state.get("delay") or 0)
        if delay > 0:
            end = time.monotonic() + delay
            while time.monotonic() < end and context.is_active():
                time.sleep(0.05)
        err = state.get("error")
        if err:
            context.abort(getattr(grpc.StatusCode, err), "fake kubelet: told to fail")
        return build_response(self.pb, state.get("pods", []))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--socket", required=True, help="unix socket path to listen on")
    ap.add_argument("--pods", required=True, help="JSON file re-read on every List")
    ap.add_argument("--proto-dir", default=os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "..", "proto"), help="directory holding podresources.proto")
    args = ap.parse_args()

    pb, gen_dir = load_messages(args.proto_dir)
    lister = Lister(pb, args.pods)
    handler = grpc.method_handlers_generic_handler("v1.PodResourcesLister", {
        "List": grpc.unary_unary_rpc_method_handler(
            lister.list, request_deserializer=pb.ListPodResourcesRequest.FromString,
            response_serializer=pb.ListPodResourcesResponse.SerializeToString),
    })
    if os.path.exists(args.socket):
        os.unlink(args.socket)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port("unix:" + args.socket)
    server.start()
    print("listening %s" % args.socket, flush=True)

    done = threading.Event()

    def on_signal(signum, frame):
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not done.wait(0.5):
        pass
    server.stop(0).wait(5)
    try:
        os.unlink(args.socket)
    except OSError:
        pass
    shutil.rmtree(gen_dir, ignore_errors=True)
    print("stopped", flush=True)


if __name__ == "__main__":
    main()
