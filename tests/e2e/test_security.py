"""Security review checks (docs/security.md) that no other test makes: the gRPC request cap, the HTTP
request cap, and the deployment's privileges (non-root where possible, every capability dropped, no
privilege escalation, least-privilege ClusterRoles) read from the rendered chart snapshot."""

import os
import socket
import subprocess

import grpc
import pytest
import yaml

import helpers

SRC = os.environ.get("GPUSCALE_SRC", os.path.join(os.path.dirname(__file__), "..", ".."))
SNAPSHOT = os.path.join(SRC, "deploy", "manifests", "gpuscale.yaml")
RIGHTSIZE_ROLE = os.path.join(SRC, "deploy", "helm", "gpuscale", "templates", "rightsize.yaml")
RPC_SERVER_MAX_REQUEST = 1 << 20  # src/rpc/server.h


def test_grpc_request_over_1mib_is_refused_and_the_server_keeps_serving(main_client):
    # a valid ScaledObjectRef (field 1, name) just over the cap: refused by size, not by content
    name = b"x" * (RPC_SERVER_MAX_REQUEST + 16)
    body = b"\x0a" + _varint(len(name)) + name
    with pytest.raises(grpc.RpcError) as e:
        main_client.raw_unary("/externalscaler.ExternalScaler/IsActive", body)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value
    # the same request under the cap is read (and answered on its merits)
    assert main_client.is_active({"profile": "triton-inference"}) in (True, False)


def _varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def test_http_request_over_the_connection_memory_cap_is_refused(main_agent):
    # libmicrohttpd holds at most 64 KiB per connection (src/http/server.c): a 100 KiB header is
    # refused, never served; the server answers the next request as before
    s = socket.create_connection((helpers.LOOPBACK, main_agent.http_port), timeout=5)
    try:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (100 << 10) +
                  b"\r\n\r\n")
        got = b""
        try:
            while b"\r\n" not in got:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
        except (ConnectionResetError, BrokenPipeError):
            pass
    finally:
        s.close()
    status = got.split(b"\r\n", 1)[0]
    assert status.split()[1:2] in ([b"431"], [b"413"]), status  # too large, never served
    assert main_agent.http_get("/healthz")[0] == 200


def _workloads():
    docs = [d for d in yaml.safe_load_all(open(SNAPSHOT)) if d]
    out = []
    for d in docs:
        if d["kind"] in ("DaemonSet", "Deployment"):
            out.append((d["kind"], d["metadata"]["name"], d["spec"]["template"]["spec"]))
        elif d["kind"] == "CronJob":
            out.append((d["kind"], d["metadata"]["name"],
                        d["spec"]["jobTemplate"]["spec"]["template"]["spec"]))
    return docs, out


def test_every_container_drops_all_capabilities_and_cannot_escalate():
    _, work = _workloads()
    assert work, "no workload in %s" % SNAPSHOT
    for kind, name, pod in work:
        for c in pod["containers"] + pod.get("initContainers", []):
            sc = c.get("securityContext") or {}
            where = "%s %s container %s" % (kind, name, c["name"])
            assert sc.get("capabilities", {}).get("drop") == ["ALL"], where
            assert not sc.get("capabilities", {}).get("add"), where
            assert sc.get("allowPrivilegeEscalation") is False, where
            assert sc.get("readOnlyRootFilesystem") is True, where
            assert not sc.get("privileged"), where


def test_only_the_agent_runs_as_root_and_the_gateway_does_not():
    # the agent's uid 0 is for the root-owned kubelet pod-resources socket (values.yaml says so);
    # everything else runs as 65532, as the image's USER does
    _, work = _workloads()
    for kind, name, pod in work:
        sc = pod.get("securityContext") or {}
        if name.endswith("-agent"):
            assert sc.get("runAsUser") == 0 and sc.get("runAsNonRoot") is False, sc
        else:
            assert sc.get("runAsNonRoot") is True and sc.get("runAsUser") == 65532, (name, sc)
    assert any(n.endswith("-gateway") for _, n, _ in work)


READ = {"get", "list", "watch"}


def test_cluster_roles_are_read_only_and_never_touch_secrets():
    docs, _ = _workloads()
    roles = [d for d in docs if d["kind"] in ("ClusterRole", "Role")]
    assert roles
    for r in roles:
        for rule in r.get("rules", []):
            assert set(rule["verbs"]) <= READ, (r["metadata"]["name"], rule)
            assert "*" not in rule["resources"] and "secrets" not in rule["resources"], rule
            assert "*" not in rule.get("apiGroups", [])


def test_rightsize_role_is_exactly_what_a_drain_needs():
    # the template holds Helm directives; the ClusterRole document itself is plain YAML
    text = open(RIGHTSIZE_ROLE).read()
    role = [part for part in text.split("\n---\n") if "kind: ClusterRole\n" in part][0]
    plain = "\n".join(line for line in role.splitlines() if "{{" not in line)
    rules = yaml.safe_load(plain)["rules"]
    got = sorted((tuple(r["apiGroups"]), tuple(r["resources"]), tuple(sorted(r["verbs"])))
                 for r in rules)
    assert got == sorted([
        (("",), ("nodes",), ("get", "list", "patch")),
        (("",), ("pods",), ("list",)),
        (("",), ("pods/eviction",), ("create",)),
        (("",), ("events",), ("create",)),
    ]), got


def _big_pem(path, nbytes):
    body = "\n".join("A" * 64 for _ in range(nbytes // 65 + 1))
    path.write_text("-----BEGIN CERTIFICATE-----\n%s\n-----END CERTIFICATE-----\n" % body)


@pytest.mark.parametrize("what", ["profiles", "tls"])
def test_oversized_files_stop_the_agent_naming_the_flag_and_the_cap(tmp_path, what):
    # --profiles is capped at 256 KiB (src/core/profile.c), each TLS PEM file at 1 MiB
    # (src/rpc/tls.h): a larger file is refused at start-up, exit status 2
    if what == "profiles":
        f = tmp_path / "big.yaml"
        f.write_text("#" * (256 * 1024 + 1))
        args, want = ["--profiles", str(f)], "--profiles: %s: file is larger than 262144 bytes" % f
    else:
        f = tmp_path / "big.pem"
        _big_pem(f, (1 << 20) + 1)
        args, want = ["--tls-cert", str(f), "--tls-key", str(f)], \
            "--tls-cert %s: larger than 1048576 bytes" % f
    r = subprocess.run([helpers.binary(), "agent", "--collector", "mock", "--grpc-listen",
                        "%s:%d" % (helpers.LOOPBACK, helpers.free_port()), "--http-listen",
                        "%s:%d" % (helpers.LOOPBACK, helpers.free_port())] + args,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert want in r.stdout + r.stderr, r.stdout + r.stderr
