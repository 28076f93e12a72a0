#!/usr/bin/env python3
"""A synthetic GPU fleet for the rightsize benchmark (bench/rightsize_bench.sh).

  fake_prom_bench.py serve --gpus N --port P [--ready-file F] [--no-cache]
      A fake Prometheus on 127.0.0.1 that answers /api/v1/query_range for the four DCGM series
      (DCGM_FI_DEV_GPU_UTIL, _FB_USED, _FB_FREE, _POWER_USAGE) of N GPUs, 8 per node, at whatever
      start/end/step is asked, and the query of the scrape targets (`group by (job, instance,
      namespace, pod) (... up ...)`): one exporter pod per node. Each answer is built once and kept by its exact URL, so a warm-up
      run fills the cache and the timed run measures gpuscale, not Python. GET /stats tells
      the cache hits and misses, the answers built for the scrape-target query, how many paths
      were served and the last 256 of them.
  fake_prom_bench.py openmetrics --gpus N --end T --days D --out FILE
      The same fleet as an OpenMetrics file for `promtool tsdb create-blocks-from openmetrics`,
      for the real-Prometheus floor.

The fleet: GPU g is idle when g % 10 == 0, a small inference pod (5..20 %, ~8 GiB) when
g % 10 in (1, 2), else busy (40..100 %, ~60 GiB). Values depend only on (g, step index since the
epoch), so the fake and the real Prometheus hold the same numbers. Loopback only; standard
library only.
"""

import argparse
import http.server
import json
import socketserver
import sys
import threading
import re
import urllib.parse

METRICS = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
           "DCGM_FI_DEV_POWER_USAGE")
QUERY = re.compile(r"^\s*(?:(?:avg|max)_over_time\(\s*)?([A-Za-z_:][A-Za-z0-9_:]*)")
FB_TOTAL = 81559  # MiB, an H100 80GB as dcgm-exporter reports FB_USED + FB_FREE
STEP = 300


def labels(g):
    kind = g % 10
    lab = {"Hostname": "bench-node-%04d" % (g // 8), "gpu": str(g % 8),
           "job": "dcgm-exporter", "instance": "10.1.%d.%d:9400" % (g // 8 // 250, g // 8 % 250),
           "UUID": "GPU-%08x-0000-4000-8000-%012d" % (g, g),
           "modelName": "NVIDIA H100 80GB HBM3"}
    if kind != 0:
        lab.update({"namespace": "bench", "pod": "job-%04d-7d9f8c6b5-x%04d" % (g, g),
                    "container": "main"})
    return lab


def target(node):
    """The scrape target of node's exporter: what `up` carries (honorLabels: true, so the GPU
    series keep the workloads' own pod labels)."""
    return {"job": "dcgm-exporter", "instance": "10.1.%d.%d:9400" % (node // 250, node % 250),
            "namespace": "gpu-operator", "pod": "dcgm-exporter-%04d" % node}


def value(metric, g, i):
    """Value of metric for GPU g at absolute step index i (seconds // STEP)."""
    kind = g % 10
    h = (g * 7919 + i * 104729) % 1000
    if kind == 0:
        util, used, power = 0, 0, 70
    elif kind in (1, 2):
        util, used, power = 5 + h % 16, 7800 + h % 400, 120 + h % 40
    else:
        util, used, power = 40 + h % 61, 58000 + h * 4, 300 + h % 400
    if metric == "DCGM_FI_DEV_GPU_UTIL":
        return util
    if metric == "DCGM_FI_DEV_FB_USED":
        return used
    if metric == "DCGM_FI_DEV_FB_FREE":
        return FB_TOTAL - used
    return power


def fmt_ts(t):
    """Prometheus writes timestamps as seconds with up to 3 decimals."""
    s = "%.3f" % t
    return s.rstrip("0").rstrip(".") if "." in s else s


_LABELS = {}


def label_json(metric, g):
    k = (metric, g)
    j = _LABELS.get(k)
    if j is None:
        j = json.dumps(dict(labels(g), __name__=metric), separators=(",", ":"))
        if len(_LABELS) < 200000:
            _LABELS[k] = j
    return j


def answer(metric, gpus, start, end, step):
    """The query_range body for metric over [start, end] (seconds) at step, as bytes. A GPU's
    values depend on g only through g % 1000 (value()), so each values array is built once per
    g % 1000 and reused: a fleet of 10 000 GPUs costs the fake little more than 1 000."""
    n = int((end - start) // step) + 1 if end >= start else 0
    ts = [start + k * step for k in range(n)]
    tstr = [fmt_ts(t) for t in ts]
    idx = [int(t // STEP) for t in ts]
    blobs = {}
    parts = []
    for g in range(gpus):
        pts = blobs.get(g % 1000)
        if pts is None:
            pts = ",".join('[%s,"%d"]' % (tstr[k], value(metric, g, idx[k])) for k in range(n))
            blobs[g % 1000] = pts
        parts.append('{"metric":%s,"values":[%s]}' % (label_json(metric, g), pts))
    body = '{"status":"success","data":{"resultType":"matrix","result":[%s]}}' % ",".join(parts)
    return body.encode()


def targets_answer(gpus, start, end, step):
    """The answer to rightsize's first query of a chunk: one row per node's exporter pod."""
    n = int((end - start) // step) + 1 if end >= start else 0
    pts = ",".join('[%s,"1"]' % fmt_ts(start + k * step) for k in range(n))
    parts = ['{"metric":%s,"values":[%s]}' % (json.dumps(target(node), separators=(",", ":")), pts)
             for node in range((gpus + 7) // 8)]
    body = '{"status":"success","data":{"resultType":"matrix","result":[%s]}}' % ",".join(parts)
    return body.encode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: the bench prints its own table
        pass

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        if u.path == "/stats":  # for the bench script: cache use and what was asked
            srv = self.server
            with srv.lock:
                st = {"hits": srv.hits, "misses": srv.misses, "targets": srv.targets,
                      "n_served": len(srv.served), "served": srv.served[-256:]}
            return self.send(200, json.dumps(st).encode())
        if u.path != "/api/v1/query_range":
            return self.send(404, b'{"status":"error","errorType":"not_found","error":"no"}')
        q = urllib.parse.parse_qs(u.query)
        try:
            query = q["query"][0]
            start, end, step = (float(q[k][0]) for k in ("start", "end", "step"))
        except (KeyError, ValueError):
            return self.send(400, b'{"status":"error","errorType":"bad_data","error":"params"}')
        # rightsize asks avg_over_time(NAME{sel}[w]) and max_over_time(...): one value per
        # step here, so both are the step's value (gpuscale_gpu_pod_info: none, as from
        # dcgm-exporter)
        m = QUERY.match(query)
        metric = m.group(1) if m else query.split("{", 1)[0].strip()
        if step <= 0:
            return self.send(400, b'{"status":"error","errorType":"bad_data","error":"step"}')
        srv = self.server
        with srv.lock:
            body = srv.cache.get(self.path) if srv.keep else None
            if body is None:
                srv.misses += 1
                if query.startswith("group by (job, instance, namespace, pod)"):
                    body = targets_answer(srv.gpus, start, end, step)
                elif metric in METRICS:
                    body = answer(metric, srv.gpus, start, end, step)
                else:
                    body = b'{"status":"success","data":{"resultType":"matrix","result":[]}}'
                srv.targets += query.startswith("group by (job, instance, namespace, pod)")
                if srv.keep:
                    srv.cache[self.path] = body
            else:
                srv.hits += 1
            srv.served.append([self.path, len(body)])
        self.send(200, body)

    def send(self, code, body):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def serve(args):
    srv = Server(("127.0.0.1", args.port), Handler)
    srv.gpus = args.gpus
    srv.keep = not args.no_cache
    srv.cache = {}
    srv.lock = threading.Lock()
    srv.hits = srv.misses = srv.targets = 0
    srv.served = []
    if args.ready_file:
        with open(args.ready_file, "w") as f:
            f.write("%d\n" % srv.server_address[1])
    srv.serve_forever()


def openmetrics(args):
    start = args.end - args.days * 86400
    ts = list(range(start - start % STEP, args.end + 1, STEP))
    with open(args.out, "w") as f:
        for m in METRICS:
            f.write("# TYPE %s gauge\n" % m)
            for g in range(args.gpus):
                lab = ",".join('%s="%s"' % kv for kv in labels(g).items())
                f.write("".join("%s{%s} %d %d\n" % (m, lab, value(m, g, t // STEP), t)
                                for t in ts))
        f.write("# TYPE up gauge\n")
        for node in range((args.gpus + 7) // 8):
            lab = ",".join('%s="%s"' % kv for kv in target(node).items())
            f.write("".join("up{%s} 1 %d\n" % (lab, t) for t in ts))
        f.write("# EOF\n")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--gpus", type=int, default=1000)
    s.add_argument("--port", type=int, default=0)
    s.add_argument("--ready-file")
    s.add_argument("--no-cache", action="store_true",
                   help="build every answer anew (a fleet whose answers do not fit in memory)")
    o = sub.add_parser("openmetrics")
    o.add_argument("--gpus", type=int, default=100)
    o.add_argument("--end", type=int, required=True)
    o.add_argument("--days", type=int, default=7)
    o.add_argument("--out", required=True)
    args = p.parse_args()
    if args.cmd == "serve":
        serve(args)
    else:
        openmetrics(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
