"""The tests' port helper (helpers.free_port): never the same port twice in one session.

bind-to-0 then close returns a port nothing listens on at that moment, and the kernel may return it
again at the next bind: a test that asked for 6 dead agent addresses once got 5 distinct ones (the
gateway merged the duplicate, and the coverage count was off by one). These tests check the helper
itself, including against a kernel that does hand the same port out twice.
"""

import socket

import gateway_helpers as gh
import helpers


def test_many_ports_are_distinct_and_free():
    ports = helpers.free_ports(500)
    assert len(set(ports)) == len(ports), sorted(p for p in ports if ports.count(p) > 1)
    for p in ports[:50]:  # nothing listens there: a server can bind each one
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((helpers.LOOPBACK, p))


def test_single_calls_never_repeat_a_port_across_the_session():
    first = helpers.free_port()
    later = [helpers.free_port() for _ in range(200)] + helpers.free_ports(50)
    assert first not in later
    assert len(set(later)) == len(later)


class _RepeatingKernel:
    """A socket whose bind to port 0 gets the ports of `sequence` in order, as a kernel that reuses
    a just-closed port would."""

    def __init__(self, sequence):
        self.sequence = list(sequence)

    def __call__(self, family=socket.AF_INET, type=socket.SOCK_STREAM):
        kernel = self

        class Sock:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def bind(self, addr):
                self.port = addr[1] or kernel.sequence.pop(0)

            def getsockname(self):
                return (helpers.LOOPBACK, self.port)

        return Sock()


def test_a_port_the_kernel_repeats_is_not_handed_out_twice(monkeypatch):
    # Ports 1..3 are privileged: a real bind to 0 never returns them, so they cannot clash with the
    # ports other tests of this session got.
    monkeypatch.setattr(helpers.socket, "socket", _RepeatingKernel([1, 1, 2, 1, 2, 3]))
    assert helpers.free_ports(3) == [1, 2, 3]


def test_common_free_port_is_free_on_every_host_and_new():
    hosts = [(helpers.LOOPBACK, socket.AF_INET), ("127.0.0.2", socket.AF_INET)]
    seen = set(gh.common_free_port(hosts) for _ in range(50))
    assert len(seen) == 50
    for p in list(seen)[:10]:
        for host, fam in hosts:
            with socket.socket(fam, socket.SOCK_STREAM) as s:
                s.bind((host, p))
