"""gpuscale rightsize against VictoriaMetrics (Debian's /usr/bin/victoria-metrics, single node), a
Prometheus-compatible store that large fleets run (its cluster version), beside Debian's
Prometheus on the very same synthetic week (tests/e2e/test_rightsize_prometheus.py builds it):
the recommendations and the summary must be the same from both, since rightsize asks both the
same query_range questions.

The week goes into VictoriaMetrics through /api/v1/import/prometheus (the Prometheus text format,
timestamps in milliseconds: VictoriaMetrics app/vminsert/prometheusimport). -search.latencyOffset=0s
lets it answer up to the last step (its default hides the last 30 s), and -search.disableCache
keeps its rollup cache out of the way.
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

import helpers
import test_rightsize_prometheus as prom_week

VICTORIA = "/usr/bin/victoria-metrics"

pytestmark = pytest.mark.skipif(
    not (os.path.exists(VICTORIA) and os.path.exists(prom_week.PROMETHEUS) and
         os.path.exists(prom_week.PROMTOOL)),
    reason="needs Debian's victoria-metrics, prometheus and promtool")

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Victoria:
    """A single-node VictoriaMetrics on loopback. Always stop()."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.proc = None
        self.port = None

    def start(self, timeout=60.0):
        self.log_path = os.path.join(self.workdir, "victoria.log")
        for _ in range(5):
            self.port = helpers.free_port()
            log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(
                [VICTORIA, "-storageDataPath=" + os.path.join(self.workdir, "vm-data"),
                 "-httpListenAddr=127.0.0.1:%d" % self.port, "-retentionPeriod=100y",
                 "-search.latencyOffset=0s", "-search.disableCache", "-loggerLevel=ERROR"],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir)
            log.close()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    with _opener.open(self.url + "/health", timeout=2) as r:
                        if r.status == 200:
                            return self
                except OSError:
                    pass
                time.sleep(0.2)
            self.stop()
        raise RuntimeError("victoria-metrics did not start:\n" + open(self.log_path).read()[-4000:])

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def import_openmetrics(self, path):
        """Imports an OpenMetrics file (timestamps in seconds) as Prometheus text (in ms)."""
        batch = []

        def flush():
            if batch:
                req = urllib.request.Request(self.url + "/api/v1/import/prometheus",
                                             data="".join(batch).encode(), method="POST")
                with _opener.open(req, timeout=60) as r:
                    assert r.status in (200, 204), r.status
                batch.clear()

        with open(path) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                head, ts = line.rsplit(" ", 1)
                batch.append("%s %d\n" % (head, int(ts) * 1000))
                if len(batch) >= 50000:
                    flush()
        flush()
        with _opener.open(self.url + "/internal/force_flush", timeout=60) as r:
            assert r.status == 200

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def stores():
    d = tempfile.mkdtemp(prefix="gs-rightsize-vm-")
    h = vm = None
    try:
        h = prom_week.History(d).start()
        vm = Victoria(d).start()
        vm.import_openmetrics(os.path.join(d, "history.om"))
        yield h, vm
    finally:
        for s in (vm, h):
            if s is not None:
                s.stop()
        shutil.rmtree(d, ignore_errors=True)


def report_from(url, end, workdir):
    out = os.path.join(workdir, "report-%d.json" % time.monotonic_ns())
    r = subprocess.run([helpers.binary(), "rightsize", "--prometheus", url, "--window", "7d",
                        "--step", "5m", "--end", str(end), "--format", "json", "--output", out],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, "rightsize against %s failed (%d): %s" % (url, r.returncode,
                                                                     r.stderr)
    with open(out) as f:
        return json.load(f)


def test_same_recommendations_from_victoria_and_prometheus(stores):
    h, vm = stores
    # VictoriaMetrics indexes a few seconds after the import: wait until it answers the whole week
    deadline = time.monotonic() + 60
    while True:
        q = urllib.parse.urlencode({"query": "count(DCGM_FI_DEV_GPU_UTIL)", "time": str(h.now)})
        with _opener.open(vm.url + "/api/v1/query?" + q, timeout=10) as r:
            res = json.load(r)["data"]["result"]
        if res and int(res[0]["value"][1]) == sum(s["gpus"] for s in h.specs):
            break
        assert time.monotonic() < deadline, "VictoriaMetrics did not index the week: %r" % res
        time.sleep(0.5)
    want = report_from(h.url, h.now, h.workdir)
    got = report_from(vm.url, h.now, h.workdir)
    assert want["recommendations"], "the week holds an idle node and a MIG candidate"
    assert got["recommendations"] == want["recommendations"]
    assert got["summary"] == want["summary"]
    assert [g["uuid"] for g in got.get("gpus", [])] == [g["uuid"] for g in want.get("gpus", [])]
