#!/usr/bin/python3
"""Runs the chart's workloads from the built image as a kubelet would, without Kubernetes (the image stage of
`make check`, scripts/image-check.sh).

    image-run.py --image REF --manifests RENDERED.yaml [--tool podman] [--only agent,gateway,rightsize]

RENDERED.yaml is `helm template` output. From it, each container runs with its exact image, args, env, user,
security context (read-only root, capabilities, no-new-privileges, seccomp), memory limit, volumes (emptyDir
as tmpfs, configMap as read-only files) and grace period; its probes are run as the kubelet runs them
(gRPC grpc.health.v1 and httpGet, from the node to the pod's address, with the probe's timeout, within
initialDelaySeconds + failureThreshold x periodSeconds).

Network: each pod gets its own network namespace, as in a cluster, since the agent and the gateway both
listen on 0.0.0.0:6000 and :9400. The namespaces hang on a bridge that lives in one more namespace (the
"node", 192.0.2.254), in TEST-NET-1 (RFC 5737) with no route anywhere else: nothing on the host's
interfaces, no iptables, no outside network. Service names go into /etc/hosts (--add-host).

Checks: the agent's and the gateway's readiness and liveness probes answer; their main process (its PID from
`podman inspect`, its /proc read from the node) has the uid, capability bounding set, no_new_privs, seccomp
filter and read-only root mount the chart asks for; `gpuscale query` (from the
image, from the node) gets KEDA's three calls answered by the agent and through the gateway; rightsize
writes its report from a Prometheus (Debian's /usr/bin/prometheus) that scraped the agent; every container
stops on SIGTERM within its grace period with exit code 0 (rightsize, which holds no state, may also end
by the signal: 143). Exits 1 with one line per failure, naming the workload and the reason (a container's
last log lines are shown when it exits early).
"""
import argparse
import ctypes
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import yaml

CLONE_NEWNET = 0x40000000
NET = "192.0.2"  # TEST-NET-1: never routed
NODE_IP = NET + ".254"
NODE_NAME = "gs-image-node"
PROMETHEUS = "/usr/bin/prometheus"
failures = []


def log(msg):
    print("image-run: " + msg, flush=True)


def fail(msg):
    failures.append(msg)
    print("FAIL " + msg, flush=True)


def ok(msg):
    print("ok   " + msg, flush=True)


def sh(args, check=True, **kw):
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(args), r.returncode, r.stdout.strip()))
    return r


class Net:
    """The node namespace with a bridge, and one namespace per pod with a veth on it."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.node = prefix + "node"
        self.pods = []
        sh(["ip", "netns", "add", self.node])
        sh(["ip", "-n", self.node, "link", "set", "lo", "up"])
        sh(["ip", "-n", self.node, "link", "add", "br0", "type", "bridge"])
        sh(["ip", "-n", self.node, "addr", "add", NODE_IP + "/24", "dev", "br0"])
        sh(["ip", "-n", self.node, "link", "set", "br0", "up"])

    def pod(self, name, last_octet):
        ns = self.prefix + name
        ip = "%s.%d" % (NET, last_octet)
        sh(["ip", "netns", "add", ns])
        sh(["ip", "-n", ns, "link", "set", "lo", "up"])
        host_end = "v%d" % last_octet
        sh(["ip", "-n", self.node, "link", "add", host_end, "type", "veth", "peer", "name", "eth0",
            "netns", ns])
        sh(["ip", "-n", self.node, "link", "set", host_end, "master", "br0", "up"])
        sh(["ip", "-n", ns, "addr", "add", ip + "/24", "dev", "eth0"])
        sh(["ip", "-n", ns, "link", "set", "eth0", "up"])
        self.pods.append(ns)
        return "/run/netns/" + ns, ip

    def enter_node(self):
        """Moves this process into the node namespace (before any thread starts), as the kubelet's probes
        and KEDA's calls come from outside the pod."""
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open("/run/netns/" + self.node, os.O_RDONLY)
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns " + self.node)
        os.close(fd)

    def close(self):
        for ns in self.pods + [self.node]:
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)


def quantity_bytes(q):
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "K": 1000, "M": 10**6, "G": 10**9}
    q = str(q)
    for u, m in units.items():
        if q.endswith(u):
            return int(float(q[:-len(u)]) * m)
    return int(q)


class Workload:
    def __init__(self, kind, obj):
        self.kind = kind
        self.name = obj["metadata"]["name"]
        if kind == "CronJob":
            pod = obj["spec"]["jobTemplate"]["spec"]["template"]
        else:
            pod = obj["spec"]["template"]
        self.pod = pod["spec"]
        self.c = self.pod["containers"][0]
        self.role = self.c["name"]
        self.grace = int(self.pod.get("terminationGracePeriodSeconds", 30))


def podman_args(tool, w, image, netns, ip, hosts, cfgmaps, tmpdir, name, extra_env=None):
    """The `podman run` flags for workload w, from its rendered pod spec. Raises ValueError naming what the
    check cannot reproduce."""
    c, pod = w.c, w.pod
    psc = pod.get("securityContext") or {}
    csc = c.get("securityContext") or {}
    a = [tool]
    if tool == "podman" and shutil.which("runc"):
        a += ["--runtime", shutil.which("runc")]  # crun refuses cgroup v1 / hybrid hosts
    a += ["run", "-d", "--name", name, "--pull", "never", "--network", "ns:" + netns,
          "--hostname", w.name, "--stop-timeout", str(w.grace)]
    # nofile: podman's default (1048576) is above this machine's hard limit, which runc cannot raise; so no
    # more than the hard limit. nproc: runc refused anything above 32768 here (the kernel's pid_max); 4096 is
    # far above the threads gpuscale starts.
    hard_nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nofile = 1048576 if hard_nofile == resource.RLIM_INFINITY else min(hard_nofile, 1048576)
    a += ["--ulimit", "nofile=%d:%d" % (nofile, nofile), "--ulimit", "nproc=4096:4096"]
    for h, hip in hosts.items():
        a += ["--add-host", "%s:%s" % (h, hip)]
    uid = csc.get("runAsUser", psc.get("runAsUser"))
    gid = csc.get("runAsGroup", psc.get("runAsGroup"))
    if uid is not None:
        a += ["--user", str(uid) if gid is None else "%d:%d" % (uid, gid)]
    if "fsGroup" in psc:
        a += ["--group-add", str(psc["fsGroup"])]
    w.run_as_non_root = csc.get("runAsNonRoot", psc.get("runAsNonRoot", False))
    w.uid = uid
    if csc.get("readOnlyRootFilesystem"):
        a += ["--read-only", "--read-only-tmpfs=false"]
    caps = csc.get("capabilities") or {}
    for cap in caps.get("drop") or []:
        a += ["--cap-drop", cap]
    for cap in caps.get("add") or []:
        a += ["--cap-add", cap]
    if csc.get("allowPrivilegeEscalation") is False:
        a += ["--security-opt", "no-new-privileges"]
    if csc.get("privileged"):
        a += ["--privileged"]
    seccomp = (csc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type", "RuntimeDefault")
    if seccomp == "Unconfined":
        a += ["--security-opt", "seccomp=unconfined"]
    elif seccomp != "RuntimeDefault":
        raise ValueError("seccompProfile %s: the check runs RuntimeDefault (podman's default) only" % seccomp)
    mem = ((c.get("resources") or {}).get("limits") or {}).get("memory")
    if mem:
        a += ["--memory", str(quantity_bytes(mem))]
    env = dict(extra_env or {})
    for e in c.get("env") or []:
        if "value" in e:
            env[e["name"]] = str(e["value"])
            continue
        ref = (e.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath")
        field = {"spec.nodeName": NODE_NAME, "metadata.name": w.name, "metadata.namespace": "gpuscale",
                 "status.podIP": ip}
        if ref not in field:
            raise ValueError("env %s: valueFrom %s is not reproduced by the check" % (e["name"], e.get("valueFrom")))
        env[e["name"]] = field[ref]
    for k, v in env.items():
        a += ["-e", "%s=%s" % (k, v)]
    vols = {v["name"]: v for v in pod.get("volumes") or []}
    for m in c.get("volumeMounts") or []:
        v = vols[m["name"]]
        if "subPath" in m:
            raise ValueError("volumeMount %s: subPath is not reproduced by the check" % m["name"])
        if "emptyDir" in v:
            size = (v["emptyDir"] or {}).get("sizeLimit")
            opt = "type=tmpfs,destination=%s,tmpfs-mode=1777" % m["mountPath"]
            if size:
                opt += ",tmpfs-size=%d" % quantity_bytes(size)
            a += ["--mount", opt]
        elif "configMap" in v:
            cm = cfgmaps.get(v["configMap"]["name"])
            if cm is None:
                raise ValueError("volume %s: ConfigMap %s is not in the rendered chart" % (m["name"], v["configMap"]["name"]))
            d = tempfile.mkdtemp(prefix="cm-", dir=tmpdir)
            for k, val in (cm.get("data") or {}).items():
                with open(os.path.join(d, k), "w") as f:
                    f.write(val)
                os.chmod(os.path.join(d, k), 0o644)
            os.chmod(d, 0o755)
            a += ["-v", "%s:%s:ro" % (d, m["mountPath"])]
        else:
            raise ValueError("volume %s (%s): the check mounts emptyDir and configMap volumes only; render the "
                             "chart with values that switch it off" % (m["name"], ",".join(k for k in v if k != "name")))
    if c.get("command"):
        a += ["--entrypoint", json.dumps(c["command"])]
    if c.get("workingDir"):
        a += ["--workdir", c["workingDir"]]
    a += [image] + [str(x) for x in c.get("args") or []]
    return a


def container_state(tool, name):
    r = sh([tool, "inspect", "--format", "{{.State.Running}} {{.State.ExitCode}}", name], check=False)
    if r.returncode != 0:
        return False, None
    running, code = r.stdout.split()
    return running == "true", int(code)


def logs_tail(tool, name, n=15):
    return sh([tool, "logs", "--tail", str(n), name], check=False).stdout.rstrip()


def probe_once(p, ip, ports):
    """One kubelet probe against the pod's address: (ok, detail)."""
    timeout = float(p.get("timeoutSeconds", 1))
    if "grpc" in p:
        return grpc_health(ip, p["grpc"]["port"], p["grpc"].get("service", ""), timeout)
    if "httpGet" in p:
        g = p["httpGet"]
        port = g["port"]
        port = ports.get(port, port)
        url = "%s://%s:%s%s" % (g.get("scheme", "HTTP").lower(), ip, port, g.get("path", "/"))
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r:
                return 200 <= r.status < 400, "GET %s: %d" % (url, r.status)
        except Exception as e:  # noqa: BLE001 (any failure is a failed probe)
            return False, "GET %s: %s" % (url, e)
    if "tcpSocket" in p:
        port = ports.get(p["tcpSocket"]["port"], p["tcpSocket"]["port"])
        try:
            socket.create_connection((ip, int(port)), timeout).close()
            return True, "tcp %s:%s" % (ip, port)
        except OSError as e:
            return False, "tcp %s:%s: %s" % (ip, port, e)
    raise ValueError("probe %s is not reproduced by the check" % list(p))


def grpc_health(ip, port, service, timeout):
    """grpc.health.v1 Check, as the kubelet's gRPC probe sends it (service "" unless the probe names one).
    The request and answer are encoded by hand (one string field; one enum field) so that no generated
    module is needed: HealthCheckRequest{service=1}, HealthCheckResponse{status=1}, SERVING = 1."""
    import grpc
    svc = service.encode()
    req = (b"\x0a" + bytes([len(svc)]) + svc) if svc else b""
    with grpc.insecure_channel("%s:%s" % (ip, port)) as ch:
        call = ch.unary_unary("/grpc.health.v1.Health/Check", request_serializer=None,
                              response_deserializer=None)
        try:
            resp = call(req, timeout=timeout)
        except grpc.RpcError as e:
            return False, "grpc health %s:%s: %s %s" % (ip, port, e.code().name, e.details())
    status = resp[1] if len(resp) >= 2 and resp[0] == 0x08 else 0
    names = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}
    return status == 1, "grpc health %s:%s: %s" % (ip, port, names.get(status, status))


def await_probe(tool, name, w, kind, ip):
    """Probes until the first success, as often as every 0.5 s, within the time the kubelet allows
    (initialDelaySeconds + failureThreshold x periodSeconds). Returns whether it answered."""
    p = w.c.get(kind)
    if not p:
        fail("%s: the chart renders no %s" % (w.role, kind))
        return False
    ports = {x["name"]: x["containerPort"] for x in w.c.get("ports") or [] if "name" in x}
    budget = p.get("initialDelaySeconds", 0) + p.get("failureThreshold", 3) * p.get("periodSeconds", 10)
    t0 = time.monotonic()
    detail = ""
    while time.monotonic() - t0 < budget:
        running, code = container_state(tool, name)
        if not running:
            fail("%s: the container exited (code %s) before its %s answered:\n%s"
                 % (w.role, code, kind, logs_tail(tool, name)))
            return False
        good, detail = probe_once(p, ip, ports)
        if good:
            ok("%s %s after %.1f s (%s)" % (w.role, kind, time.monotonic() - t0, detail))
            return True
        time.sleep(0.5)
    fail("%s: %s did not answer within %d s (initialDelaySeconds + failureThreshold x periodSeconds): %s\n%s"
         % (w.role, kind, budget, detail, logs_tail(tool, name)))
    return False


def container_proc(tool, name, files=("status", "mountinfo")):
    """The container's own main process, read from this side: its PID as podman knows it (`inspect`,
    .State.Pid, in this PID namespace) and /proc/PID/FILE for each file. Never `exec cat /proc/1/...`:
    where the container's /proc is not its own (a private mount namespace, a chroot), /proc/1 is the
    host's init, uid 0 with every capability. Returns ({file: text}, None) or (None, why)."""
    r = sh([tool, "inspect", "--format", "{{.State.Pid}}", name], check=False)
    pid = r.stdout.strip()
    if r.returncode != 0 or not pid.isdigit() or pid == "0":
        return None, "%s inspect gives no running PID: %s" % (tool, pid or "(nothing)")
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            argv = f.read().split(b"\0")
        if not any(os.path.basename(a) == b"gpuscale" for a in argv):
            return None, "PID %s runs %r, not gpuscale" % (pid, b" ".join(argv).decode(errors="replace"))
        out = {}
        for name_ in files:
            with open("/proc/%s/%s" % (pid, name_)) as f:
                out[name_] = f.read()
        return out, None
    except OSError as e:
        return None, "PID %s: %s" % (pid, e)


def verify_context(tool, name, w):
    """What the container's main process really got: uid, capabilities, no_new_privs, seccomp, read-only
    root."""
    csc = w.c.get("securityContext") or {}
    proc, why = container_proc(tool, name)
    if proc is None:
        fail("%s: cannot read the container's own process status: %s" % (w.role, why))
        return
    f = dict(line.split(":", 1) for line in proc["status"].splitlines() if ":" in line)
    got = {k: f.get(k, "").split() for k in ("Uid", "CapEff", "CapBnd", "NoNewPrivs", "Seccomp")}
    want_uid = str(w.uid) if w.uid is not None else None
    problems = []
    if want_uid is not None and got["Uid"][:1] != [want_uid]:
        problems.append("uid %s, the chart says %s" % (got["Uid"][:1], want_uid))
    caps = csc.get("capabilities") or {}
    # The bounding set: a non-root process has no effective capabilities anyway, whatever was dropped.
    if "ALL" in (caps.get("drop") or []) and not caps.get("add") and \
            (got["CapBnd"] != ["0000000000000000"] or got["CapEff"] != ["0000000000000000"]):
        problems.append("capabilities CapBnd %s CapEff %s with drop: [ALL]" % (got["CapBnd"], got["CapEff"]))
    if csc.get("allowPrivilegeEscalation") is False and got["NoNewPrivs"] != ["1"]:
        problems.append("no_new_privs %s with allowPrivilegeEscalation: false" % got["NoNewPrivs"])
    if got["Seccomp"] != ["2"]:
        problems.append("seccomp mode %s, not a filter (RuntimeDefault)" % " ".join(got["Seccomp"] or ["?"]))
    if csc.get("readOnlyRootFilesystem"):
        # The root mount's options (a non-root uid could not write to / anyway, so a write test proves nothing).
        mi = proc["mountinfo"].splitlines()
        root = [ln.split() for ln in mi if len(ln.split()) > 5 and ln.split()[4] == "/"]
        if not root or "ro" not in root[-1][5].split(","):
            problems.append("the root filesystem is not mounted read-only (%s)" % (root[-1][5] if root else "no / mount"))
    for m in w.c.get("volumeMounts") or []:
        if m["mountPath"] == "/tmp":
            r = sh([tool, "exec", name, "touch", "/tmp/gs-image-write-test"], check=False)
            if r.returncode != 0:
                problems.append("/tmp (emptyDir) is not writable: %s" % r.stdout.strip())
    if problems:
        fail("%s: security context: %s" % (w.role, "; ".join(problems)))
    else:
        ok("%s runs as uid %s, CapBnd %s, no_new_privs %s, seccomp filter, root %s, /tmp writable"
           % (w.role, got["Uid"][0], got["CapBnd"][0], got["NoNewPrivs"][0],
              "read-only" if csc.get("readOnlyRootFilesystem") else "writable"))


def sigterm_stop(tool, name, w, allowed=(0,)):
    t0 = time.monotonic()
    sh([tool, "kill", "--signal", "TERM", name], check=False)
    try:
        r = subprocess.run([tool, "wait", name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=w.grace)
        code = int(r.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        code = None  # the kubelet would SIGKILL it now
        sh([tool, "kill", "--signal", "KILL", name], check=False)
    except (ValueError, IndexError):
        code = None
    took = time.monotonic() - t0
    if code in allowed and took <= w.grace:
        ok("%s stops on SIGTERM: exit %d after %.1f s (grace %d s)" % (w.role, code, took, w.grace))
    else:
        fail("%s on SIGTERM: exit %s after %.1f s (wanted %s within the %d s grace period):\n%s"
             % (w.role, code, took, " or ".join(map(str, allowed)), w.grace, logs_tail(tool, name)))


def query(tool, image, netns, addr, meta, what):
    """`gpuscale query` from the image, in a pod of its own as KEDA: GetMetricSpec, GetMetrics, IsActive."""
    a = [tool]
    if tool == "podman" and shutil.which("runc"):
        a += ["--runtime", shutil.which("runc")]
    a += ["run", "--rm", "--pull", "never", "--network", "ns:" + netns, "--read-only", "--cap-drop", "ALL",
          "--user", "65532:65532", "--ulimit", "nproc=4096:4096", "--ulimit", "nofile=1024:1024", image,
          "query", "--address", addr]
    for m in meta:
        a += ["-m", m]
    r = sh(a, check=False, timeout=60)
    if r.returncode == 0:
        ok("gpuscale query %s (%s): %s" % (what, " ".join(meta), " | ".join(r.stdout.strip().splitlines()[:4])))
    else:
        fail("gpuscale query %s (%s): exit %d:\n%s" % (what, " ".join(meta), r.returncode, r.stdout.strip()))
    return r.returncode == 0


class BlackHole(threading.Thread):
    """Accepts connections and never answers (a Prometheus that hangs), for rightsize's SIGTERM check."""

    def __init__(self, ip, port):
        super().__init__(daemon=True)
        self.s = socket.create_server((ip, port))
        self.held = []

    def run(self):
        while True:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            self.held.append(c)


def reap_stale(tool):
    """Removes the namespaces and containers of an earlier run that was killed before its cleanup
    (gs-image-PID-...: only those whose PID is gone)."""
    r = sh(["ip", "netns", "list"], check=False).stdout.split("\n")
    r += sh([tool, "ps", "-a", "--format", "{{.Names}}"], check=False).stdout.split("\n")
    for name in r:
        name = name.split(" ")[0]
        parts = name.split("-")
        if len(parts) < 4 or parts[:2] != ["gs", "image"] or not parts[2].isdigit():
            continue
        if os.path.exists("/proc/" + parts[2]):
            continue
        if name.startswith("gs-image-%s-" % parts[2]):
            subprocess.run(["ip", "netns", "del", name], stderr=subprocess.DEVNULL)
            subprocess.run([tool, "rm", "-f", "-t", "0", name], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", required=True)
    ap.add_argument("--manifests", required=True)
    ap.add_argument("--tool", default="podman")
    ap.add_argument("--only", default="agent,gateway,rightsize")
    args = ap.parse_args()
    only = set(args.only.split(","))

    docs = [d for d in yaml.safe_load_all(open(args.manifests)) if d]
    cfgmaps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    by_role = {}
    for d in docs:
        if d["kind"] in ("DaemonSet", "Deployment", "CronJob"):
            w = Workload(d["kind"], d)
            by_role[w.role] = w
    for role in sorted(only):
        if role not in by_role:
            fail("%s: not in the rendered chart (enable it in the values)" % role)
    for w in by_role.values():
        if w.role in only and w.c["image"] != args.image:
            fail("%s: the chart renders image %s, the built image is %s (image.repository / image.tag)"
                 % (w.role, w.c["image"], args.image))
    if failures:
        return 1

    reap_stale(args.tool)
    tmp = tempfile.mkdtemp(prefix="gs-image-run.")
    os.chmod(tmp, 0o755)
    prefix = "gs-image-%d-" % os.getpid()
    names = []
    net = None
    prom = None
    try:
        net = Net(prefix)
        hosts = {}
        agent_ns, agent_ip = net.pod("agent", 1)
        gw_ns, gw_ip = net.pod("gateway", 2)
        prom_ns, prom_ip = net.pod("prometheus", 3)
        rs_ns, rs_ip = net.pod("rightsize", 4)
        rs2_ns, rs2_ip = net.pod("rightsize-term", 5)
        keda_ns, _ = net.pod("keda", 6)  # gpuscale query, as KEDA: a pod of its own
        hosts["gpuscale-agent-headless.gpuscale.svc.cluster.local"] = agent_ip
        hosts["gpuscale-agent.gpuscale.svc.cluster.local"] = agent_ip
        net.enter_node()

        def start(w, netns, ip, suffix="", host_map=None):
            name = prefix + w.role + suffix
            a = podman_args(args.tool, w, args.image, netns, ip, host_map or hosts, cfgmaps, tmp, name)
            if w.run_as_non_root and (w.uid is None or w.uid == 0):
                fail("%s: runAsNonRoot with uid %s: the kubelet would refuse to start it" % (w.role, w.uid))
            r = sh(a, check=False)
            names.append(name)
            if r.returncode != 0:
                fail("%s: %s could not start the container: %s" % (w.role, args.tool, r.stdout.strip()))
                return None
            log("%s: %s" % (w.role, " ".join(str(x) for x in w.c.get("args") or [])))
            return name

        agent = gateway = None
        if "agent" in only:
            w = by_role["agent"]
            agent = start(w, agent_ns, agent_ip)
            if agent and await_probe(args.tool, agent, w, "readinessProbe", agent_ip) and \
                    await_probe(args.tool, agent, w, "livenessProbe", agent_ip):
                verify_context(args.tool, agent, w)
                query(args.tool, args.image, keda_ns, agent_ip + ":6000",
                      ["metricType=gpu_utilization", "targetValue=60"], "to the agent")
            elif agent:
                agent = None
        if "gateway" in only and agent:
            w = by_role["gateway"]
            gateway = start(w, gw_ns, gw_ip)
            if gateway and await_probe(args.tool, gateway, w, "readinessProbe", gw_ip) and \
                    await_probe(args.tool, gateway, w, "livenessProbe", gw_ip):
                verify_context(args.tool, gateway, w)
                # The gateway learns the agent's GPUs through its stream; the first answer may come before it.
                deadline = time.monotonic() + 20
                meta = ["scope=cluster", "metricType=gpu_utilization", "targetValue=70"]
                while True:
                    before = len(failures)
                    good = query(args.tool, args.image, keda_ns, gw_ip + ":6000", meta, "through the gateway")
                    if good or time.monotonic() > deadline:
                        break
                    del failures[before:]
                    time.sleep(1)
                query(args.tool, args.image, keda_ns, gw_ip + ":6000",
                      ["scope=node", "node=" + NODE_NAME, "metricType=memory_used_percent", "targetValue=80"],
                      "through the gateway, node scope (the agent's NODE_NAME)")
        if "rightsize" in only and agent:
            w = by_role["rightsize"]
            url = next((x.split("=", 1)[1] for x in w.c.get("args") or [] if str(x).startswith("--prometheus=")), None)
            host, _, port = url.split("//", 1)[1].split("/", 1)[0].partition(":")
            port = int(port or 80)
            data = os.path.join(tmp, "prom")
            with open(os.path.join(tmp, "prometheus.yml"), "w") as f:
                f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                        "scrape_configs:\n  - job_name: gpuscale-agent\n    static_configs:\n"
                        "      - targets: ['%s:9400']\n" % agent_ip)
            prom = subprocess.Popen(["nsenter", "--net=" + prom_ns, PROMETHEUS,
                                     "--config.file=" + os.path.join(tmp, "prometheus.yml"),
                                     "--storage.tsdb.path=" + data, "--web.listen-address=0.0.0.0:%d" % port,
                                     "--log.level=warn"], stdout=open(os.path.join(tmp, "prom.log"), "w"),
                                    stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 60
            have = 0
            while time.monotonic() < deadline and prom.poll() is None:
                try:
                    q = "http://%s:%d/api/v1/query?query=count(DCGM_FI_DEV_GPU_UTIL)" % (prom_ip, port)
                    with urllib.request.urlopen(q, timeout=2) as r:
                        res = json.load(r)["data"]["result"]
                        have = int(res[0]["value"][1]) if res else 0
                except Exception:  # noqa: BLE001 (not up yet)
                    have = 0
                if have:
                    break
                time.sleep(0.5)
            if not have:
                fail("rightsize: the test's Prometheus did not scrape the agent within 60 s:\n%s"
                     % open(os.path.join(tmp, "prom.log")).read()[-2000:])
            else:
                ok("Prometheus (%s) scraped %d GPUs from the agent's /metrics" % (PROMETHEUS, have))
                # rightsize ends its window at a multiple of --step: wait one step past the first sample.
                step = next((str(x).split("=", 1)[1] for x in w.c.get("args") or [] if str(x).startswith("--step=")), "5m")
                step_s = {"s": 1, "m": 60}.get(step[-1], 0) * float(step[:-1] or 0) if step[-1] in "sm" and step[-2:] != "ms" else 0
                if not 0 < step_s <= 30:
                    raise ValueError("rightsize --step=%s: render the chart with a short rightsize.step (at most 30s) "
                                     "so that the test's seconds of history fill a step (scripts/image-values.yaml)" % step)
                time.sleep(step_s + 1)
                name = start(w, rs_ns, rs_ip, host_map={host: prom_ip})
                if name:
                    t0 = time.monotonic()
                    r = subprocess.run([args.tool, "wait", name], stdout=subprocess.PIPE, text=True,
                                       timeout=300)
                    code = int(r.stdout.strip().splitlines()[-1])
                    out = sh([args.tool, "logs", name], check=False).stdout
                    if code == 0 and out.strip():
                        ok("rightsize: exit 0 after %.1f s, report from %s: %s"
                           % (time.monotonic() - t0, url, " | ".join(out.strip().splitlines()[:3])))
                    else:
                        fail("rightsize: exit %d (wanted 0 and a report):\n%s" % (code, out[-3000:]))
                # SIGTERM while it waits on a Prometheus that never answers.
                hole = BlackHole(NODE_IP, port)
                hole.start()
                name = start(w, rs2_ns, rs2_ip, suffix="-term", host_map={host: NODE_IP})
                if name:
                    deadline = time.monotonic() + 10
                    while not hole.held and time.monotonic() < deadline:
                        time.sleep(0.2)
                    sigterm_stop(args.tool, name, w, allowed=(0, 143))
                hole.s.close()
        if gateway:
            sigterm_stop(args.tool, gateway, by_role["gateway"])
        if agent:
            sigterm_stop(args.tool, agent, by_role["agent"])
    except (ValueError, RuntimeError, subprocess.TimeoutExpired) as e:
        fail(str(e))
    finally:
        if prom:
            prom.terminate()
            try:
                prom.wait(10)
            except subprocess.TimeoutExpired:
                prom.kill()
        for n in names:
            subprocess.run([args.tool, "rm", "-f", "-t", "0", n], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        if net:
            net.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
