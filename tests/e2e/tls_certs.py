"""Test PKI made with the openssl CLI at test time: a CA, server certificates for 127.0.0.1 and
localhost, a client certificate, and an unrelated CA that must be refused.

Nothing is committed: every run makes fresh keys in a temporary directory. EC P-256 keys keep it
fast. Certificates are valid for two days, so a test never depends on the clock beyond that.

    pki = tls_certs.make_pki(tmpdir)
    pki.ca, pki.server_cert, pki.server_key, pki.client_cert, pki.client_key, pki.wrong_ca
    cert, key = pki.issue_server("server2", serial=0x2002)   # for rotation tests
"""

import os
import subprocess

DAYS = "2"


def _openssl(*args, cwd):
    r = subprocess.run(["openssl"] + list(args), cwd=cwd, capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        raise RuntimeError("openssl %s failed (%d):\n%s" % (" ".join(args), r.returncode,
                                                            r.stderr))
    return r.stdout


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def make_ca(d, name, cn):
    """Self-signed CA: returns (cert_path, key_path)."""
    key = os.path.join(d, name + ".key")
    crt = os.path.join(d, name + ".crt")
    ext = _write(os.path.join(d, name + ".ext"),
                 "[req]\ndistinguished_name=dn\n[dn]\n[v3]\n"
                 "basicConstraints=critical,CA:TRUE\n"
                 "keyUsage=critical,keyCertSign,cRLSign\n"
                 "subjectKeyIdentifier=hash\n")
    _openssl("req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", key, "-out", crt, "-days", DAYS, "-subj", "/CN=" + cn,
             "-config", ext, "-extensions", "v3", cwd=d)
    return crt, key


def issue(d, name, ca_crt, ca_key, cn, serial, server=True, sans=("IP:127.0.0.1", "DNS:localhost")):
    """A leaf certificate signed by the CA: returns (cert_path, key_path)."""
    key = os.path.join(d, name + ".key")
    csr = os.path.join(d, name + ".csr")
    crt = os.path.join(d, name + ".crt")
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", key, "-out", csr, "-subj", "/CN=" + cn, cwd=d)
    lines = ["basicConstraints=critical,CA:FALSE",
             "keyUsage=critical,digitalSignature,keyEncipherment",
             "extendedKeyUsage=" + ("serverAuth" if server else "clientAuth")]
    if sans:
        lines.append("subjectAltName=" + ",".join(sans))
    ext = _write(os.path.join(d, name + ".ext"), "\n".join(lines) + "\n")
    _openssl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-set_serial",
             str(serial), "-days", DAYS, "-sha256", "-extfile", ext, "-out", crt, cwd=d)
    os.unlink(csr)
    return crt, key


def serial_of(cert_path):
    """The certificate's serial as an int (from openssl x509 -serial)."""
    out = _openssl("x509", "-noout", "-serial", "-in", cert_path, cwd=os.path.dirname(cert_path))
    return int(out.strip().split("=", 1)[1], 16)


class PKI:
    def __init__(self, d):
        self.dir = d
        self.ca, self.ca_key = make_ca(d, "ca", "gpuscale test CA")
        self.wrong_ca, self.wrong_ca_key = make_ca(d, "wrong-ca", "gpuscale unrelated CA")
        self.server_cert, self.server_key = issue(d, "server", self.ca, self.ca_key,
                                                  "gpuscale-agent", 0x1001)
        self.client_cert, self.client_key = issue(d, "client", self.ca, self.ca_key, "keda",
                                                  0x3001, server=False, sans=())
        # A client certificate from the unrelated CA: must be refused under mTLS.
        self.rogue_cert, self.rogue_key = issue(d, "rogue", self.wrong_ca, self.wrong_ca_key,
                                                "rogue", 0x4001, server=False, sans=())

    def issue_server(self, name, serial):
        return issue(self.dir, name, self.ca, self.ca_key, "gpuscale-agent", serial)

    @staticmethod
    def read(path):
        with open(path, "rb") as f:
            return f.read()


def make_pki(d):
    os.makedirs(d, exist_ok=True)
    return PKI(d)


def replace_atomically(src, dst):
    """Copies src over dst the way a Kubernetes Secret volume updates: write aside, rename."""
    tmp = dst + ".new"
    with open(src, "rb") as f, open(tmp, "wb") as g:
        g.write(f.read())
    os.replace(tmp, dst)
