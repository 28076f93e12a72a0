"""Helpers for the gateway end-to-end tests (test_gateway.py): the `gpuscale gateway` process,
agents on fixed addresses (restart on the same port, listen on another loopback address), a
multi-address test resolver, and small readers for /metrics and /api/v1/agents.

Nothing here imports gpuscale code. It builds on helpers.py (Agent, Scenario, wait_for...) and on
the FakeKubelet of test_attribution.py.
"""

import json
import os
import re
import socket
import subprocess
import tempfile
import time

import helpers
from helpers import LOOPBACK, Agent, AgentError

# --------------------------------------------------------------------------------------------
# The gateway process


class Gateway(Agent):
    """One `gpuscale gateway` process on loopback ports. Reuses Agent's lifecycle and clients
    (wait_ready polls /readyz, stop() sends SIGTERM and returns the exit code)."""

    def __init__(self, args, env=None, workdir=None, ready=True):
        super().__init__(args, env=env, workdir=workdir or tempfile.mkdtemp(prefix="gs-e2e-gw-"),
                         ready=ready)
        os.makedirs(self.workdir, exist_ok=True)
        self.log_path = os.path.join(self.workdir, "gateway.log")

    def start(self):
        last = ""
        for _ in range(3):  # a probed free port may be taken before the gateway binds it
            self.grpc_port, self.http_port = helpers.free_ports(2)
            argv = [helpers.binary(), "gateway", "--grpc-listen",
                    "%s:%d" % (LOOPBACK, self.grpc_port),
                    "--http-listen", "%s:%d" % (LOOPBACK, self.http_port)] + self.args
            self._log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                         env=self.env, cwd=self.workdir)
            if not self._want_ready:
                self.wait_http()
                return self
            try:
                self.wait_ready()
                return self
            except AgentError as e:
                last = str(e)
                if self.proc.poll() is None:
                    raise
                self._log.close()
                if "address" not in self.log().lower() and "bind" not in self.log().lower():
                    raise
        raise AgentError(last)

    def wait_http(self, timeout=helpers.READY_TIMEOUT):
        """Waits until /healthz answers (the gateway may stay unready on purpose)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AgentError("gateway exited with %s:\n%s" % (self.proc.returncode,
                                                                  self.log()))
            try:
                if self.http_get("/healthz", timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise AgentError("gateway /healthz did not answer within %.0fs:\n%s" % (timeout,
                                                                                self.log()))

    def agents(self):
        """/api/v1/agents as {address: entry}."""
        status, body = self.http_get("/api/v1/agents")
        assert status == 200, body
        return {a["address"]: a for a in json.loads(body)["agents"]}

    def gpu_nodes(self):
        """/api/v1/agents' GPU node set as {name: entry}."""
        status, body = self.http_get("/api/v1/agents")
        assert status == 200, body
        return {n["name"]: n for n in json.loads(body)["gpu_nodes"]}

    def metrics_text(self):
        status, body = self.http_get("/metrics")
        assert status == 200, body
        return body


# --------------------------------------------------------------------------------------------
# Agents on fixed addresses


class FixedAgent(Agent):
    """An agent on a given host and ports: restarted on the same gRPC port after a kill, or
    listening on 127.0.0.2 / ::1 for discovery tests. host is a literal IP ("::1" for IPv6)."""

    def __init__(self, args, host, grpc_port, http_port=None, env=None, workdir=None):
        super().__init__(args, env=env, workdir=workdir)
        self.host = host
        self.grpc_port = grpc_port
        self.http_port = http_port or helpers.free_port()

    @property
    def grpc_address(self):
        return "[%s]:%d" % (self.host, self.grpc_port) if ":" in self.host else \
            "%s:%d" % (self.host, self.grpc_port)

    def start(self, timeout=helpers.READY_TIMEOUT):
        """Starts on the fixed gRPC port, retrying a few times while the port is still taken
        (a killed process's port can take a moment to be free again)."""
        deadline = time.monotonic() + timeout
        while True:
            argv = [helpers.binary(), "agent", "--grpc-listen", self.grpc_address,
                    "--http-listen", "%s:%d" % (LOOPBACK, self.http_port)] + self.args
            self._log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                         env=self.env, cwd=self.workdir)
            try:
                self.wait_ready(timeout=max(1.0, deadline - time.monotonic()))
                return self
            except AgentError:
                if self.proc.poll() is None or time.monotonic() > deadline:
                    raise
                self._log.close()
                self.http_port = helpers.free_port()  # in case it was the HTTP port
                time.sleep(0.2)


def common_free_port(hosts):
    """A port free on every (host, family) pair at probe time, never one handed out before in this
    test session (helpers.free_port)."""
    return helpers.free_port(also=hosts)


def ipv6_loopback_ok():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def localhost_addresses():
    """The set of addresses 'localhost' resolves to (TCP)."""
    try:
        return {ai[4][0] for ai in socket.getaddrinfo("localhost", None, 0, socket.SOCK_STREAM)}
    except OSError:
        return set()


# --------------------------------------------------------------------------------------------
# A test resolver: LD_PRELOAD getaddrinfo that answers one made-up name with several addresses

RESOLVER_C = r"""
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* GS_TEST_DNS_NAME resolves to the comma-separated IPv4 addresses in the file GS_TEST_DNS_FILE,
 * read again on every call (a test rewrites it: agents come and go); every other name goes to the
 * real getaddrinfo. An empty file answers EAI_NONAME. Results are one malloc'd block per entry,
 * released by our freeaddrinfo (which tells them apart by a magic canonname). */
static const char magic[] = "gs-test-resolver";

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res) {
  static int (*real)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
  if (!real)
    real = (int (*)(const char *, const char *, const struct addrinfo *, struct addrinfo **))
        dlsym(RTLD_NEXT, "getaddrinfo");
  const char *name = getenv("GS_TEST_DNS_NAME"), *path = getenv("GS_TEST_DNS_FILE");
  if (!node || !name || !path || strcmp(node, name) != 0)
    return real(node, service, hints, res);
  if (hints && hints->ai_family == AF_INET6)
    return EAI_NONAME;
  int port = service ? atoi(service) : 0;
  struct addrinfo *head = NULL, **tail = &head;
  char buf[512];
  FILE *f = fopen(path, "r");
  size_t len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f)
    fclose(f);
  buf[len] = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ", \n", &save); tok;
       tok = strtok_r(NULL, ", \n", &save)) {
    struct {
      struct addrinfo ai;
      struct sockaddr_in sin;
    } *e = calloc(1, sizeof *e);
    if (!e)
      return EAI_MEMORY;
    e->sin.sin_family = AF_INET;
    e->sin.sin_port = htons((unsigned short)port);
    if (inet_pton(AF_INET, tok, &e->sin.sin_addr) != 1) {
      free(e);
      continue;
    }
    e->ai.ai_family = AF_INET;
    e->ai.ai_socktype = hints && hints->ai_socktype ? hints->ai_socktype : SOCK_STREAM;
    e->ai.ai_protocol = IPPROTO_TCP;
    e->ai.ai_addrlen = sizeof e->sin;
    e->ai.ai_addr = (struct sockaddr *)&e->sin;
    e->ai.ai_canonname = (char *)magic;
    *tail = &e->ai;
    tail = &e->ai.ai_next;
  }
  if (!head)
    return EAI_NONAME;
  *res = head;
  return 0;
}

void freeaddrinfo(struct addrinfo *ai) {
  static void (*real)(struct addrinfo *);
  if (!real)
    real = (void (*)(struct addrinfo *))dlsym(RTLD_NEXT, "freeaddrinfo");
  if (ai && ai->ai_canonname == magic) {
    while (ai) {
      struct addrinfo *next = ai->ai_next;
      free(ai);
      ai = next;
    }
    return;
  }
  real(ai);
}
"""


def build_test_resolver(workdir):
    """Compiles the LD_PRELOAD resolver; returns the .so path, or None when no C compiler."""
    cc = None
    for c in ("cc", "gcc", "clang"):
        for d in os.environ.get("PATH", "/usr/bin").split(os.pathsep):
            if os.access(os.path.join(d, c), os.X_OK):
                cc = os.path.join(d, c)
                break
        if cc:
            break
    if not cc:
        return None
    src = os.path.join(workdir, "gs_test_resolver.c")
    so = os.path.join(workdir, "gs_test_resolver.so")
    with open(src, "w") as f:
        f.write(RESOLVER_C)
    r = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", so, src, "-ldl"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("cannot build the test resolver:\n" + r.stderr)
    return so


# --------------------------------------------------------------------------------------------
# /metrics


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """[(name, {label: value}, float)] for every sample line."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = dict(_LABEL.findall(m.group(3) or ""))
        out.append((m.group(1), labels, float(m.group(4))))
    return out


def samples(text, name, **want):
    return [(lab, v) for n, lab, v in parse_metrics(text)
            if n == name and all(lab.get(k) == w for k, w in want.items())]
