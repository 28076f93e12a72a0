"""TLS and mTLS on the agent's gRPC listener, seen by independent clients: Python grpcio for the
calls and Python's ssl module for the certificate a new connection is shown.

The PKI is made with the openssl CLI at test time (tls_certs.py). Flags under test:
--tls-cert, --tls-key, --tls-ca, --tls-require-client-cert (and their GPUSCALE_TLS_* variables).
"""

import os
import shutil
import socket
import ssl

import grpc
import pytest

import helpers
import tls_certs

MD = {"profile": "triton-inference"}
GPUS = [
    {"model": "NVIDIA TLS-0", "memory_total_mib": 81920, "memory_used_mib": 40960,
     "gpu_utilization": 60, "memory_utilization": 20, "temperature": 40, "power_draw": 100.0},
    {"model": "NVIDIA TLS-1", "memory_total_mib": 81920, "memory_used_mib": 8192,
     "gpu_utilization": 30, "memory_utilization": 10, "temperature": 41, "power_draw": 90.0},
]

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="the openssl CLI makes the test certificates")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return tls_certs.make_pki(str(tmp_path_factory.mktemp("pki")))


def tls_channel(address, ca, cert=None, key=None, server_name=None):
    creds = grpc.ssl_channel_credentials(
        root_certificates=tls_certs.PKI.read(ca),
        private_key=tls_certs.PKI.read(key) if key else None,
        certificate_chain=tls_certs.PKI.read(cert) if cert else None)
    opts = [("grpc.enable_http_proxy", 0), ("grpc.use_local_subchannel_pool", 1)]
    if server_name:
        opts.append(("grpc.ssl_target_name_override", server_name))
    return grpc.secure_channel(address, creds, options=opts)


def spec_over(channel):
    """GetMetricSpec as KEDA calls it; raises grpc.RpcError when the connection is refused."""
    try:
        return helpers.ScalerClient(channel).spec(MD)
    finally:
        channel.close()


def refused(channel):
    e = helpers.rpc_error(spec_over, channel)
    assert e.code() == grpc.StatusCode.UNAVAILABLE, (e.code(), e.details())
    return e


def peer_serial(port, ca, cert=None, key=None):
    """Opens a fresh TLS connection (ALPN h2, as gRPC) and returns the server certificate's
    serial number."""
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(["h2"])
    if cert:
        ctx.load_cert_chain(cert, key)
    with socket.create_connection((helpers.LOOPBACK, port), timeout=10) as s:
        with ctx.wrap_socket(s, server_hostname="localhost") as t:
            return int(t.getpeercert()["serialNumber"], 16)


def tls_args(cert, key, ca=None, require=False):
    a = ["--tls-cert", cert, "--tls-key", key]
    if ca:
        a += ["--tls-ca", ca]
    if require:
        a.append("--tls-require-client-cert")
    return a


def start_tls_agent(agents, args, env=None):
    return agents(helpers.Scenario(GPUS), extra=args, env=env)


# --------------------------------------------------------------------------------------------
# Server TLS


def test_right_ca_succeeds(agents, pki):
    a = start_tls_agent(agents, tls_args(pki.server_cert, pki.server_key))
    r = spec_over(tls_channel(a.grpc_address, pki.ca))
    assert len(r.metricSpecs) == 1 and r.metricSpecs[0].targetSizeFloat == 75.0, r
    # The DNS SAN works as well as the IP SAN.
    r = spec_over(tls_channel(a.grpc_address, pki.ca, server_name="localhost"))
    assert len(r.metricSpecs) == 1, r
    # Health checks (Kubernetes gRPC probes use plaintext, so a TLS agent needs an exec or HTTP
    # probe; grpc_health_probe -tls works) answer over TLS too.
    ch = tls_channel(a.grpc_address, pki.ca)
    try:
        assert helpers.ScalerClient(ch).check() == 1
    finally:
        ch.close()
    assert peer_serial(a.grpc_port, pki.ca) == 0x1001


def test_wrong_ca_fails(agents, pki):
    a = start_tls_agent(agents, tls_args(pki.server_cert, pki.server_key))
    refused(tls_channel(a.grpc_address, pki.wrong_ca))
    # A name the certificate does not carry fails too.
    refused(tls_channel(a.grpc_address, pki.ca, server_name="agent.example"))
    with pytest.raises(ssl.SSLError):
        peer_serial(a.grpc_port, pki.wrong_ca)


def test_plaintext_client_refused(agents, pki):
    a = start_tls_agent(agents, tls_args(pki.server_cert, pki.server_key))
    refused(helpers.new_channel(a.grpc_address))


def test_flags_from_environment(agents, pki):
    env = {"GPUSCALE_TLS_CERT": pki.server_cert, "GPUSCALE_TLS_KEY": pki.server_key,
           "GPUSCALE_TLS_CA": pki.ca, "GPUSCALE_TLS_REQUIRE_CLIENT_CERT": "true"}
    a = start_tls_agent(agents, [], env=env)
    spec_over(tls_channel(a.grpc_address, pki.ca, pki.client_cert, pki.client_key))
    refused(tls_channel(a.grpc_address, pki.ca))


# --------------------------------------------------------------------------------------------
# mTLS


def test_mtls_requires_client_cert(agents, pki):
    a = start_tls_agent(agents, tls_args(pki.server_cert, pki.server_key, pki.ca, require=True))
    r = spec_over(tls_channel(a.grpc_address, pki.ca, pki.client_cert, pki.client_key))
    assert len(r.metricSpecs) == 1, r
    refused(tls_channel(a.grpc_address, pki.ca))  # no client certificate
    refused(tls_channel(a.grpc_address, pki.ca, pki.rogue_cert, pki.rogue_key))  # unrelated CA


def test_ca_without_require_makes_client_cert_optional(agents, pki):
    a = start_tls_agent(agents, tls_args(pki.server_cert, pki.server_key, pki.ca))
    spec_over(tls_channel(a.grpc_address, pki.ca))
    spec_over(tls_channel(a.grpc_address, pki.ca, pki.client_cert, pki.client_key))
    refused(tls_channel(a.grpc_address, pki.ca, pki.rogue_cert, pki.rogue_key))


# --------------------------------------------------------------------------------------------
# Rotation (cert-manager rewrites the Secret; the kubelet swaps the files)


def test_rotation_new_connections_see_new_cert(agents, pki, tmp_path):
    live = tmp_path / "live"
    live.mkdir()
    crt, key = str(live / "tls.crt"), str(live / "tls.key")
    tls_certs.replace_atomically(pki.server_cert, crt)
    tls_certs.replace_atomically(pki.server_key, key)
    a = start_tls_agent(agents, tls_args(crt, key))
    assert peer_serial(a.grpc_port, pki.ca) == 0x1001
    old = tls_channel(a.grpc_address, pki.ca)  # an open connection keeps working
    helpers.ScalerClient(old).spec(MD)

    new_crt, new_key = pki.issue_server("rotated", 0x2002)
    tls_certs.replace_atomically(new_key, key)
    tls_certs.replace_atomically(new_crt, crt)
    assert helpers.wait_for(lambda: peer_serial(a.grpc_port, pki.ca) == 0x2002, timeout=10,
                            what="the rotated certificate on a new connection")
    spec_over(tls_channel(a.grpc_address, pki.ca))
    helpers.ScalerClient(old).spec(MD)
    old.close()
    assert "reloaded the certificate" in a.log()

    # A broken rotation: the agent keeps the last good certificate and says so once.
    with open(crt + ".new", "w") as f:
        f.write("not a certificate\n")
    os.replace(crt + ".new", crt)
    for _ in range(3):
        assert peer_serial(a.grpc_port, pki.ca) == 0x2002
    spec_over(tls_channel(a.grpc_address, pki.ca))
    assert a.log().count("cannot be used, keeping the previous certificate") == 1, a.log()[-3000:]


# --------------------------------------------------------------------------------------------
# Bad flags: a clear error naming the flag, and no listener


BAD = [
    (lambda p: ["--tls-key", p.server_key], "--tls-key is set without --tls-cert"),
    (lambda p: ["--tls-cert", p.server_cert], "--tls-cert is set without --tls-key"),
    (lambda p: tls_args(p.server_cert, p.server_key, require=True),
     "--tls-require-client-cert needs --tls-ca"),
    (lambda p: tls_args("/nonexistent/tls.crt", p.server_key),
     "--tls-cert /nonexistent/tls.crt: cannot open"),
    (lambda p: tls_args(p.server_cert, p.server_cert), "no PEM private key"),
]


@pytest.mark.parametrize("case", range(len(BAD)))
def test_bad_flags_name_the_flag(pki, procs, tmp_path, case):
    args, want = BAD[case]
    a = helpers.Agent(["--collector", "mock"] + args(pki), workdir=str(tmp_path), ready=False)
    procs.append(a)
    a.start()
    rc = a.proc.wait(timeout=20)
    assert rc == 2, (rc, a.log())
    assert want in a.log(), a.log()
