"""StreamMetricSpec through a client that behaves as KEDA 2.21 does: it keeps the last spec of each
stream and skips a message equal to it (nothing to rebuild), and rebuilds the HPA for each one
that differs. gpuscale must send a changed target at once, the same as GetMetricSpec, and never
two different specs for one trigger within one second: two quick profile reloads send the newer
target when the second is over, and KEDA rebuilds the HPA once, not once per reload.

KEDA's side as its release notes for 2.21 describe it (StreamMetricSpec #7794; "skip unchanged
streamed metric specs" #8306): the stored KEDA source stops at main of 2026-08-20 (#8073), before
#8306, so the skip is modelled here from its description, not read from code.
"""

import time

import helpers
from conftest import main_gpus
from helpers import Scenario
from test_keda_220 import hup_and_wait, profiles_yaml, spec_of, write_atomic


class Keda221:
    """One trigger's StreamMetricSpec as KEDA 2.21 consumes it: every message with its arrival
    time, and the HPA rebuilds it causes (messages that differ from the cached spec)."""

    def __init__(self, client, md):
        self.reader = helpers.StreamReader(client.stream_spec(md))
        self.messages = []  # (monotonic s, spec)
        self.rebuilds = []  # (monotonic s, spec)

    def poll(self, timeout):
        """Reads for timeout seconds; returns the specs that caused a rebuild meanwhile."""
        got = []
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            item = self.reader.next(timeout=max(0.01, end - time.monotonic()))
            if item is None:
                continue
            assert item[0] == "msg", item  # the stream must not end
            spec = spec_of(item[1])
            now = time.monotonic()
            self.messages.append((now, spec))
            if not self.rebuilds or self.rebuilds[-1][1] != spec:
                self.rebuilds.append((now, spec))
                got.append(spec)
        return got

    def wait_rebuild(self, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            got = self.poll(0.05)
            if got:
                return got[-1], time.monotonic()
        return None, None


def test_keda_221_gets_each_change_once_and_never_two_in_a_second(agents, tmp_path):
    prof = str(tmp_path / "profiles.yaml")
    write_atomic(prof, profiles_yaml(60))
    a = agents(Scenario(main_gpus()[:2]), ["--profiles", prof])
    c = a.client()
    md = {"profile": "sdxl-inference"}
    k = Keda221(c, md)
    try:
        spec, _ = k.wait_rebuild(5)
        assert spec[1:] == (60, 60.0), spec  # the current spec when the stream opens
        k.poll(1.2)  # a second passes with no change: nothing more
        assert len(k.rebuilds) == 1, k.rebuilds
        # a changed target: at once (within a tick), the same as GetMetricSpec
        write_atomic(prof, profiles_yaml(42.5))
        t0 = time.monotonic()
        hup_and_wait(a, "reloaded --profiles")
        spec, t1 = k.wait_rebuild(5)
        assert spec is not None and spec[1:] == (43, 42.5), k.messages
        assert t1 - t0 < 1.0 + 2 * helpers.INTERVAL_S, t1 - t0
        assert spec == spec_of(c.spec(md))
        # two reloads in quick succession: the newer target, once, a second after the last one
        write_atomic(prof, profiles_yaml(30))
        hup_and_wait(a, "reloaded --profiles")
        write_atomic(prof, profiles_yaml(25))
        hup_and_wait(a, "reloaded --profiles")
        spec, t2 = k.wait_rebuild(5)
        assert spec is not None and spec[1:] == (25, 25.0), k.messages
        assert t2 - t1 >= 0.9, (t2 - t1, k.messages)  # not within the second of the last one
        k.poll(3 * helpers.INTERVAL_S + 1.2)
        assert [s[1:] for _, s in k.rebuilds] == [(60, 60.0), (43, 42.5), (25, 25.0)], k.rebuilds
        assert spec_of(c.spec(md)) == k.rebuilds[-1][1]
        # never two different specs for the trigger within one second
        for (ta, sa), (tb, sb) in zip(k.messages, k.messages[1:]):
            assert sa == sb or tb - ta >= 0.9, k.messages
    finally:
        k.reader.cancel()
