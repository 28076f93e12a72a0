#!/usr/bin/python3
"""A fake Kubernetes API server for the drain tests: Python stdlib http.server speaking the real
REST paths, JSON shapes and status codes of the calls a drain makes.

No real API server can run in this environment, so gpuscale's Kubernetes client is tested against
this one. Paths:

    GET   /api/v1/nodes/{name}                                  200 Node | 404 Status
    GET   /api/v1/nodes                                         200 NodeList
          (?labelSelector= with the API's grammar: k=v, k==v, k!=v, k, !k, k in (a,b),
          k notin (a,b), comma-joined; a bad one is 400 BadRequest; pages with ?limit=N&continue=T)
    PATCH /api/v1/nodes/{name}                                  200 Node (merge / strategic merge)
    GET   /api/v1/pods?fieldSelector=spec.nodeName%3D{name}     200 PodList
    GET   /api/v1/pods?...&watch=1&resourceVersion=RV           200 a watch stream: chunked JSON
          lines {"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": ...} of the changes after
          RV (put_pod, delete_pod), until timeoutSeconds; an RV older than compact() left gets an
          ERROR event with a 410 Expired Status, as the API server does
    GET   /api/v1/pods                                          200 PodList (every namespace)
    GET   /api/v1/namespaces/{ns}/pods                          200 PodList
          (the pod lists page with ?limit=N&continue=TOKEN, as the API server does)
    POST  /api/v1/namespaces/{ns}/pods/{name}/eviction          201 Status | 429 (PDB) | 404
    POST  /api/v1/namespaces/{ns}/events                        201 Event | 409 AlreadyExists

Pods are served with status.conditions and status.containerStatuses: a fixture's own, or those
the kubelet would report (kubelet_status: Running is Ready, Pending is ContainerCreating).

State comes from a JSON fixture:

    {
      "nodes": [<v1 Node>...],
      "pods":  [<v1 Pod>...],                 # spec.nodeName places a pod
      "pdb":   {"ns/pod": N},                 # eviction answers 429 N times, then 201
      "pdb_retry_after": S,                   # optional: a Retry-After: S header on those 429s
      "linger": {"ns/pod": S},                # an evicted pod stays listed, terminating
                                              # (deletionTimestamp set), for S seconds; -1: for good
      "faults": [{"method": "GET", "path": "/api/v1/nodes/a", "status": 500,
                  "body": <JSON or null>, "raw": "<text sent verbatim>", "times": 1,
                  "headers": {"Retry-After": "1"}}]
    }

A fault matches a request by method and by path (with or without the query string); `times`
(default: always) limits how often. Every request is recorded (method, path, query, content type,
authorization present, JSON body) in memory and, with a log path, as JSON lines the test reads.
An evicted pod disappears from the state (after its linger time, if any); a PATCH updates the node, so a test can assert the
cluster's state after a run. With a token, requests without "Authorization: Bearer <token>" get
401. With a certificate and key the server speaks TLS, and with a client CA it requires mTLS.

Nodes come and go with api.put_node(node) and api.delete_node(name) (a cluster autoscaler's
scale-up and scale-down).

Pod changes that watches see go through api.put_pod(pod) and api.delete_pod(ns, name) (each gets a new
resourceVersion); api.compact() drops the event history, so that older resourceVersions are Gone.

In-process:   api = FakeKubeAPI(state, log_path); api.start(); ...; api.stop()
Stand-alone:  python3 fake_kube_api.py --state FILE [--port 0] [--log FILE] [--token T]
                  [--tls-cert F --tls-key F [--client-ca F]]      prints "listening PORT"
"""

import argparse
import copy
import json
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PATCH_TYPES = ("application/strategic-merge-patch+json", "application/merge-patch+json")


def status_body(code, reason, message, details=None):
    """A metav1 Status, as the API server sends with every error."""
    b = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": reason, "code": code}
    if details is not None:
        b["details"] = details
    return b


def kubelet_status(pod):
    """Fills status.conditions and status.containerStatuses as the kubelet reports them, when a
    fixture leaves them out: a Running pod is Ready with every container running and ready, a
    Pending one that is scheduled has its containers waiting in ContainerCreating. A fixture that
    gives conditions (a loading pod: Running, Ready False) is served as it is. The shapes are the
    API server's (k8s.io/api core/v1 types.go: PodCondition, ContainerStatus)."""
    status = pod.setdefault("status", {})
    phase = status.get("phase")
    if "conditions" in status or phase not in ("Running", "Pending"):
        return pod
    t = "2026-12-01T20:00:00Z"
    names = [c.get("name", "main") for c in pod.get("spec", {}).get("containers", [])] or ["main"]
    ready = phase == "Running"
    scheduled = bool(pod.get("spec", {}).get("nodeName"))

    def cond(kind, ok, reason=None):
        c = {"type": kind, "status": "True" if ok else "False", "lastProbeTime": None,
             "lastTransitionTime": t}
        if not ok and reason:
            c["reason"] = reason
            c["message"] = "containers with unready status: [%s]" % " ".join(names)
        return c

    if not scheduled:
        status["conditions"] = [dict(cond("PodScheduled", False), reason="Unschedulable")]
        return pod
    status["conditions"] = [cond("Initialized", True),
                            cond("Ready", ready, "ContainersNotReady"),
                            cond("ContainersReady", ready, "ContainersNotReady"),
                            cond("PodScheduled", True)]
    if "containerStatuses" not in status:
        status["containerStatuses"] = [
            {"name": n, "ready": ready, "restartCount": 0, "started": ready,
             "image": "img", "imageID": "",
             "state": {"running": {"startedAt": t}} if ready else
             {"waiting": {"reason": "ContainerCreating"}}}
            for n in names]
    return pod


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch (strategic merge is the same for the maps a drain patches)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def _split_selector(sel):
    """Splits on the commas outside parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in sel:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts]


def parse_label_selector(sel):
    """[(op, key, values)] of a label selector, in the API server's grammar
    (k8s.io/apimachinery pkg/labels/selector.go): =, ==, !=, in, notin, exists, !exists."""
    reqs = []
    if not sel.strip():
        return reqs
    for p in _split_selector(sel):
        if not p:
            raise ValueError("empty requirement in %r" % sel)
        for word in (" notin ", " in "):
            if word in p:
                key, _, rest = p.partition(word)
                rest = rest.strip()
                if not (rest.startswith("(") and rest.endswith(")")):
                    raise ValueError("%r: expected (values)" % p)
                vals = {v.strip() for v in rest[1:-1].split(",")}
                reqs.append((word.strip(), key.strip(), vals))
                break
        else:
            if p.startswith("!"):
                reqs.append(("!exists", p[1:].strip(), None))
            elif "!=" in p:
                k, _, v = p.partition("!=")
                reqs.append(("!=", k.strip(), {v.strip()}))
            elif "==" in p or "=" in p:
                k, _, v = p.partition("==") if "==" in p else p.partition("=")
                reqs.append(("=", k.strip(), {v.strip()}))
            else:
                reqs.append(("exists", p, None))
        key = reqs[-1][1]
        if not key or any(c in key for c in " ()!=,"):
            raise ValueError("invalid label key %r" % key)
    return reqs


def label_match(reqs, labels):
    for op, key, vals in reqs:
        has = key in labels
        if op == "exists" and not has or op == "!exists" and has:
            return False
        if op in ("=", "in") and (not has or labels[key] not in vals):
            return False
        if op in ("!=", "notin") and has and labels[key] in vals:
            return False
    return True


def kubeconfig(path, server, token):
    """Writes a kubeconfig that points at server with a bearer token; returns path."""
    with open(path, "w") as f:
        f.write("apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                "clusters:\n- name: t\n  cluster:\n    server: %s\n"
                "contexts:\n- name: t\n  context:\n    cluster: t\n    user: u\n"
                "users:\n- name: u\n  user:\n    token: %s\n" % (server, token))
    return path


class FakeKubeAPI:
    def __init__(self, state, log_path=None, token=None, tls_cert=None, tls_key=None,
                 client_ca=None, host="127.0.0.1", port=0):
        self.lock = threading.Lock()
        self.nodes = {n["metadata"]["name"]: copy.deepcopy(n) for n in state.get("nodes", [])}
        self.pods = [kubelet_status(copy.deepcopy(p)) for p in state.get("pods", [])]
        self.pdb = dict(state.get("pdb", {}))
        self.pdb_retry_after = state.get("pdb_retry_after")
        self.linger = dict(state.get("linger", {}))
        self.gone_at = {}  # "ns/pod" -> monotonic time it leaves the list (None: never)
        self.faults = [dict(f) for f in state.get("faults", [])]
        self.events = []
        self.requests = []
        self.log_path = log_path
        self.token = token
        self.rv = 1000
        self.cond = threading.Condition(self.lock)
        self.watch_log = []     # [(rv, type, pod)] for watches
        self.watch_floor = 0    # a watch from below this resourceVersion is Gone (410)
        self.closing = False
        self.watch_timeout_cap = None  # seconds: end every watch sooner than it asked
        # Node list pages hold at most this many items, whatever limit asks: the API server may
        # return fewer than limit (metav1.ListOptions.Limit), so a client must follow continue.
        self.node_page_cap = None
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):
                pass

            def do_GET(self):
                api.handle(self, "GET")

            def do_POST(self):
                api.handle(self, "POST")

            def do_PATCH(self):
                api.handle(self, "PATCH")

            def do_PUT(self):
                api.handle(self, "PUT")

            def do_DELETE(self):
                api.handle(self, "DELETE")

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.scheme = "http"
        if tls_cert:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(tls_cert, tls_key)
            if client_ca:
                ctx.verify_mode = ssl.CERT_REQUIRED
                ctx.load_verify_locations(client_ca)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
            self.scheme = "https"
        self.port = self.httpd.server_address[1]
        self.thread = None

    @property
    def url(self):
        return "%s://127.0.0.1:%d" % (self.scheme, self.port)

    def start(self):
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        with self.cond:
            self.closing = True
            self.cond.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- state views for tests ---------------------------------------------------------------

    def node(self, name):
        with self.lock:
            return copy.deepcopy(self.nodes.get(name))

    def purge(self):
        """Drops lingering evicted pods whose grace time is over (call with the lock held)."""
        now = time.monotonic()
        for key, t in list(self.gone_at.items()):
            if t is not None and now >= t:
                self.pods = [p for p in self.pods if "%s/%s" % (
                    p["metadata"]["namespace"], p["metadata"]["name"]) != key]
                del self.gone_at[key]

    def put_node(self, node):
        """Adds or replaces a node (by metadata.name)."""
        node = copy.deepcopy(node)
        with self.lock:
            self.rv += 1
            node.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
            self.nodes[node["metadata"]["name"]] = node

    def delete_node(self, name):
        with self.lock:
            self.rv += 1
            self.nodes.pop(name, None)

    def node_lists(self):
        """The GET /api/v1/nodes requests so far."""
        with self.lock:
            return [r for r in self.requests
                    if r["method"] == "GET" and r["path"].split("?")[0] == "/api/v1/nodes"]

    def pod_names(self):
        with self.lock:
            self.purge()
            return ["%s/%s" % (p["metadata"]["namespace"], p["metadata"]["name"])
                    for p in self.pods]

    def calls(self, include_events=True):
        """[(method, path with query)] in order."""
        with self.lock:
            return [(r["method"], r["path"]) for r in self.requests
                    if include_events or not r["path"].endswith("/events")]

    # -- pod changes that watches see ----------------------------------------------------------

    def _changed(self, kind, pod):
        self.rv += 1
        pod.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        self.watch_log.append((self.rv, kind, copy.deepcopy(pod)))
        self.cond.notify_all()

    def put_pod(self, pod):
        """Adds the pod or replaces the one of the same namespace/name (ADDED / MODIFIED)."""
        pod = kubelet_status(copy.deepcopy(pod))
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        with self.cond:
            for i, p in enumerate(self.pods):
                if (p["metadata"]["namespace"], p["metadata"]["name"]) == key:
                    self.pods[i] = pod
                    self._changed("MODIFIED", pod)
                    return
            self.pods.append(pod)
            self._changed("ADDED", pod)

    def delete_pod(self, ns, name):
        with self.cond:
            for p in list(self.pods):
                if (p["metadata"]["namespace"], p["metadata"]["name"]) == (ns, name):
                    self.pods.remove(p)
                    self._changed("DELETED", p)

    def compact(self):
        """Forgets the event history: a watch from an older resourceVersion gets 410 Gone."""
        with self.cond:
            self.watch_log = []
            self.watch_floor = self.rv + 1
            self.rv += 1

    def watches(self):
        """The watch requests so far."""
        with self.lock:
            return [r for r in self.requests if r["query"].get("watch") in (["1"], ["true"])]

    def writes(self):
        with self.lock:
            return [r for r in self.requests if r["method"] != "GET"]

    # -- request handling --------------------------------------------------------------------

    def record(self, entry):
        with self.lock:
            self.requests.append(entry)
            if self.log_path:
                with open(self.log_path, "a") as f:
                    f.write(json.dumps(entry) + "\n")

    def send(self, h, code, body, raw=None, headers=None):
        data = raw.encode() if raw is not None else json.dumps(body).encode()
        h.send_response(code)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def fault_for(self, method, full, path):
        with self.lock:
            for f in self.faults:
                if f.get("method", method) != method or f.get("path") not in (full, path):
                    continue
                if "times" in f:
                    if f["times"] <= 0:
                        continue
                    f["times"] -= 1
                return f
        return None

    def handle(self, h, method):
        n = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(n) if n else b""
        parsed = urllib.parse.urlsplit(h.path)
        path, query = parsed.path, urllib.parse.parse_qs(parsed.query)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = {"_unparsable": raw.decode(errors="replace")}
        auth = h.headers.get("Authorization")
        self.record({"method": method, "path": h.path, "query": query,
                     "content_type": h.headers.get("Content-Type"), "auth": auth is not None,
                     "body": body})
        if self.token is not None and auth != "Bearer " + self.token:
            return self.send(h, 401, status_body(401, "Unauthorized", "Unauthorized"))
        f = self.fault_for(method, h.path, path)
        if f:
            return self.send(h, f.get("status", 500), f.get("body", status_body(
                f.get("status", 500), "InternalError", "injected fault")), raw=f.get("raw"),
                headers=f.get("headers"))
        if (method == "GET" and path == "/api/v1/pods" and
                query.get("watch", [""])[0] in ("1", "true")):
            return self.watch(h, query)
        if body is not None and "_unparsable" in body:
            return self.send(h, 400, status_body(400, "BadRequest", "request body is not JSON"))
        parts = [p for p in path.split("/") if p]
        with self.lock:
            code, out = self.route(method, parts, query, body, h.headers.get("Content-Type"))
        headers = None
        if code == 429 and self.pdb_retry_after is not None:
            headers = {"Retry-After": str(self.pdb_retry_after)}
        self.send(h, code, out, headers=headers)

    def watch(self, h, query):
        """A watch stream of pod events, as chunked JSON lines (Transfer-Encoding: chunked)."""
        sel = query.get("fieldSelector", [""])[0]
        node = sel.partition("=")[2] if sel.startswith("spec.nodeName=") else None
        timeout = float(query.get("timeoutSeconds", ["300"])[0] or 300)
        if self.watch_timeout_cap is not None:
            timeout = min(timeout, self.watch_timeout_cap)
        rv_q = query.get("resourceVersion", [""])[0]
        h.close_connection = True
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()

        def chunk(obj):
            data = (json.dumps(obj) + "\n").encode()
            h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            h.wfile.flush()

        def mine(pod):
            return node is None or pod.get("spec", {}).get("nodeName") == node

        deadline = time.monotonic() + timeout
        try:
            with self.cond:
                if rv_q and int(rv_q) < self.watch_floor:
                    chunk({"type": "ERROR", "object": status_body(
                        410, "Expired", "too old resource version: %s (%d)" % (
                            rv_q, self.watch_floor))})
                    h.wfile.write(b"0\r\n\r\n")
                    return
                rv = int(rv_q) if rv_q else self.rv
                start = [] if rv_q else [("ADDED", copy.deepcopy(p)) for p in self.pods if mine(p)]
            for kind, pod in start:
                chunk({"type": kind, "object": pod})
            while True:
                with self.cond:
                    batch = [(r, k, p) for r, k, p in self.watch_log if r > rv]
                    left = deadline - time.monotonic()
                    if not batch and not self.closing and left > 0:
                        self.cond.wait(min(left, 0.5))
                        continue
                    if self.closing:
                        break
                for r, kind, pod in batch:
                    rv = r
                    if mine(pod):
                        chunk({"type": kind, "object": pod})
                if not batch and left <= 0:
                    break
            h.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def route(self, method, parts, query, body, ctype):
        if parts[:2] != ["api", "v1"]:
            return 404, status_body(404, "NotFound", "the server could not find the requested "
                                    "resource")
        rest = parts[2:]
        if rest == ["nodes"] and method == "GET":
            return self.list_nodes(query)
        if len(rest) == 2 and rest[0] == "nodes":
            return self.node_call(method, rest[1], body, ctype)
        if rest == ["pods"] and method == "GET":
            return self.list_pods(query, None)
        if len(rest) == 3 and rest[0] == "namespaces" and rest[2] == "pods" and method == "GET":
            return self.list_pods(query, rest[1])
        if (len(rest) == 5 and rest[0] == "namespaces" and rest[2] == "pods" and
                rest[4] == "eviction" and method == "POST"):
            return self.evict(rest[1], rest[3], body)
        if len(rest) == 3 and rest[0] == "namespaces" and rest[2] == "events" and method == "POST":
            return self.event(rest[1], body)
        return 405 if rest else 404, status_body(405, "MethodNotAllowed",
                                                 "the server does not allow this method")

    def node_call(self, method, name, body, ctype):
        node = self.nodes.get(name)
        if node is None:
            return 404, status_body(404, "NotFound", 'nodes "%s" not found' % name,
                                    {"name": name, "kind": "nodes"})
        if method == "GET":
            return 200, node
        if method == "PATCH":
            if ctype not in PATCH_TYPES:
                return 415, status_body(415, "UnsupportedMediaType",
                                        "the body of the request was in an unknown format")
            if not isinstance(body, dict):
                return 400, status_body(400, "BadRequest", "patch is not a JSON object")
            patched = merge_patch(node, body)
            self.rv += 1
            patched["metadata"]["resourceVersion"] = str(self.rv)
            self.nodes[name] = patched
            return 200, patched
        return 405, status_body(405, "MethodNotAllowed", "the server does not allow this method")

    def list_nodes(self, query):
        sel = query.get("labelSelector", [""])[0]
        try:
            reqs = parse_label_selector(sel)
        except ValueError as e:
            return 400, status_body(400, "BadRequest",
                                    "unable to parse requirement: %s" % e)
        items = [n for _, n in sorted(self.nodes.items())
                 if label_match(reqs, n.get("metadata", {}).get("labels") or {})]
        meta = {"resourceVersion": str(self.rv)}
        limit = query.get("limit", [""])[0]
        if limit:
            start = int(query.get("continue", ["0"])[0] or 0)
            end = start + max(min(int(limit), self.node_page_cap or int(limit)), 1)
            if end < len(items):
                meta["continue"] = str(end)
            items = items[start:end]
        return 200, {"kind": "NodeList", "apiVersion": "v1", "metadata": meta,
                     "items": copy.deepcopy(items)}

    def list_pods(self, query, ns):
        self.purge()
        sel = query.get("fieldSelector", [""])[0]
        node = None
        if sel:
            key, _, val = sel.partition("=")
            if key != "spec.nodeName":
                return 400, status_body(400, "BadRequest",
                                        '"%s" is not a known field selector' % key)
            node = val
        items = [p for p in self.pods
                 if (node is None or p.get("spec", {}).get("nodeName") == node) and
                 (ns is None or p["metadata"]["namespace"] == ns)]
        meta = {"resourceVersion": str(self.rv)}
        limit = query.get("limit", [""])[0]
        if limit:
            # Paging as the API server does it: `limit` items, then an opaque continue token.
            start = int(query.get("continue", ["0"])[0] or 0)
            end = start + max(int(limit), 1)
            if end < len(items):
                meta["continue"] = str(end)
            items = items[start:end]
        return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": items}

    def evict(self, ns, name, body):
        if (not isinstance(body, dict) or body.get("apiVersion") != "policy/v1" or
                body.get("kind") != "Eviction" or
                body.get("metadata", {}).get("name") != name or
                body.get("metadata", {}).get("namespace") not in (None, ns)):
            return 400, status_body(400, "BadRequest", "body is not a policy/v1 Eviction for "
                                    "this pod")
        pod = next((p for p in self.pods if p["metadata"]["namespace"] == ns and
                    p["metadata"]["name"] == name), None)
        if pod is None:
            return 404, status_body(404, "NotFound", 'pods "%s" not found' % name,
                                    {"name": name, "kind": "pods"})
        key = "%s/%s" % (ns, name)
        if self.pdb.get(key, 0) > 0:
            self.pdb[key] -= 1
            return 429, status_body(
                429, "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                {"causes": [{"reason": "DisruptionBudget",
                             "message": "The disruption budget %s-pdb needs 1 healthy pods and "
                                        "has 1 currently" % name}]})
        if key in self.linger:  # graceful termination: listed, terminating, for a while
            if key not in self.gone_at:
                pod["metadata"]["deletionTimestamp"] = "2026-01-12T10:00:00Z"
                secs = self.linger[key]
                self.gone_at[key] = None if secs < 0 else time.monotonic() + secs
        else:
            self.pods.remove(pod)
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                     "code": 201}

    def event(self, ns, body):
        if (not isinstance(body, dict) or body.get("kind") != "Event" or
                body.get("apiVersion") != "v1"):
            return 400, status_body(400, "BadRequest", "body is not a v1 Event")
        meta = body.get("metadata", {})
        if meta.get("namespace", ns) != ns:
            return 400, status_body(400, "BadRequest", "the namespace of the object does not "
                                    "match the namespace on the request")
        inv = body.get("involvedObject", {})
        if not inv.get("kind") or not inv.get("name") or not body.get("reason"):
            return 422, status_body(422, "Invalid", "Event is invalid: involvedObject and "
                                    "reason are required")
        if any(e["metadata"].get("name") == meta.get("name") for e in self.events):
            return 409, status_body(409, "AlreadyExists",
                                    'events "%s" already exists' % meta.get("name"))
        ev = copy.deepcopy(body)
        ev["metadata"]["namespace"] = ns
        self.events.append(ev)
        return 201, ev


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--state", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log")
    ap.add_argument("--token")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--client-ca")
    a = ap.parse_args()
    with open(a.state) as f:
        state = json.load(f)
    api = FakeKubeAPI(state, a.log, a.token, a.tls_cert, a.tls_key, a.client_ca, port=a.port)
    print("listening %d" % api.port, flush=True)
    try:
        api.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
