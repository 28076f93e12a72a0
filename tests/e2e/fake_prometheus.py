#!/usr/bin/python3
"""A tiny fake Prometheus for the rightsize end-to-end tests: serves /api/v1/query_range from a
JSON description of series with patterns, and can answer with errors, malformed JSON or delays.

Description (JSON file given as argv[1]):
  {"mode": "ok" | "error_status" | "malformed" | "http_500" | "empty" | "huge",
   "delay_s": 0,                      # sleep before answering
   "max_steps": 0,                    # > 0: a range of more steps is refused as Prometheus
                                      # refuses too many samples (HTTP 422, errorType execution)
   "partial": false,                  # answers carry "isPartial": true (VictoriaMetrics cluster)
   "cut": false,                      # each answer stops half-way: the connection is closed
   "cut_first": "DCGM_FI_DEV_GPU_UTIL", # only the first answer to each such query is cut
   "series": [{"metric": "DCGM_FI_DEV_GPU_UTIL", "labels": {...},
               "pattern": {"const": 5} | {"square": [lo, hi, period_s]},
               "gaps": [[from_unix_s, to_unix_s], ...]}]}   # no points inside [from, to)
Prints "PORT <n>" on stdout once listening on 127.0.0.1. Requests are logged to argv[2] (JSON
lines) when given, so tests can assert what was asked.
"""

import json
import re
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def value_at(pattern, t):
    if "const" in pattern:
        return float(pattern["const"])
    if "square" in pattern:
        lo, hi, period = pattern["square"]
        return float(hi if (t % period) < period / 2 else lo)
    raise ValueError("unknown pattern %r" % pattern)


def fmt(v):
    if v != v:
        return "NaN"
    return repr(int(v)) if v == int(v) else repr(v)


QUERY = re.compile(r"^\s*(?:(avg|max)_over_time\()?\s*([A-Za-z_:][A-Za-z0-9_:]*)")


class Handler(BaseHTTPRequestHandler):
    desc = {}
    log_path = None
    lock = threading.Lock()
    cut_seen = set()  # cut_first: the paths already answered once

    def log_message(self, *args):
        pass

    def reply(self, code, body):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(u.query)
        if Handler.log_path:
            with Handler.lock, open(Handler.log_path, "a") as f:
                f.write(json.dumps({"path": u.path, "query": {k: v[0] for k, v in q.items()},
                                    "auth": self.headers.get("Authorization")}) + "\n")
        d = Handler.desc
        if d.get("delay_s"):
            time.sleep(d["delay_s"])
        if u.path != "/api/v1/query_range":
            return self.reply(404, '{"status":"error","errorType":"not_found","error":"no route"}')
        mode = d.get("mode", "ok")
        if mode == "error_status":
            return self.reply(400, json.dumps({"status": "error", "errorType": "bad_data",
                                               "error": "invalid parameter \"query\": parse error"}))
        if mode == "http_500":
            return self.reply(500, "internal error")
        if mode == "malformed":
            return self.reply(200, '{"status":"success","data":{"resultType":"matrix","result":[{')
        if mode == "huge":
            pad = "x" * (3 << 20)
            return self.reply(200, json.dumps({"status": "success", "data": {
                "resultType": "matrix", "result": [], "pad": pad}}))
        # rightsize asks avg_over_time(NAME{sel}[step]) / max_over_time(...): the patterns are
        # per step, so a step's mean and max are both the pattern's value
        m = QUERY.match(q["query"][0])
        name = m.group(2) if m else q["query"][0]
        start, end, step = float(q["start"][0]), float(q["end"][0]), float(q["step"][0])
        n_steps = int(round((end - start) / step)) + 1
        if d.get("max_steps") and n_steps > d["max_steps"]:
            # Prometheus' ErrTooManySamples (promql/engine.go) as its API writes it
            return self.reply(422, json.dumps({
                "status": "error", "errorType": "execution",
                "error": "query processing would load too many samples into memory in query "
                         "execution"}))
        result = []
        if mode != "empty":
            for s in d.get("series", []):
                if s["metric"] != name:
                    continue
                vals = []
                n = int(round((end - start) / step))
                for k in range(n + 1):
                    t = start + k * step
                    if any(a <= t < b for a, b in s.get("gaps", [])):
                        continue
                    vals.append([t, fmt(value_at(s["pattern"], t))])
                if vals:
                    m = dict(s["labels"])
                    m["__name__"] = name
                    result.append({"metric": m, "values": vals})
        ans = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        if d.get("partial"):
            ans["isPartial"] = True
        body = json.dumps(ans).encode()
        cut = d.get("cut")
        if d.get("cut_first") == name:
            with Handler.lock:
                cut = self.path not in Handler.cut_seen
                Handler.cut_seen.add(self.path)
        if cut:  # the headers promise the whole answer; half of it comes
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.reply(200, body)


def main():
    with open(sys.argv[1]) as f:
        Handler.desc = json.load(f)
    Handler.log_path = sys.argv[2] if len(sys.argv) > 2 else None
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print("PORT %d" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
