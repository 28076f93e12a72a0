"""Shared by the AMD (rocm collector) end-to-end tests: a fake amdgpu sysfs tree, the fake
librocm_smi64 (tests/fixtures/fake_rocm_smi) and an AMD agent on loopback."""

import os

import pytest
from prometheus_client.parser import text_string_to_metric_families

import helpers
from helpers import Agent


def fake_rocm_dir():
    d = os.environ.get("FAKE_ROCM_DIR")
    if d:
        return os.path.abspath(d)
    return os.path.join(os.path.dirname(helpers.binary()), "tests", "fake_rocm_smi")


def fake_lib():
    p = os.path.join(fake_rocm_dir(), "librocm_smi64.so.1")
    if not os.path.exists(p):
        pytest.fail("fake ROCm SMI library not built: %s (build target fake_rocm_smi)" % p)
    return p


def add_card(root, n, bdf, hwmon="amdgpu"):
    """class/drm/card<n> -> ../../devices/pci0000:00/<bdf>/drm/card<n>, as amdgpu lays it out,
    with an hwmon named `hwmon` (None: no hwmon) in the PCI device directory."""
    dev = os.path.join(root, "devices", "pci0000:00", bdf)
    os.makedirs(os.path.join(dev, "drm", "card%d" % n), exist_ok=True)
    link = os.path.join(dev, "drm", "card%d" % n, "device")
    if not os.path.islink(link):
        os.symlink("../..", link)
    if hwmon:
        h = os.path.join(dev, "hwmon", "hwmon%d" % (n + 2))
        os.makedirs(h, exist_ok=True)
        with open(os.path.join(h, "name"), "w") as f:
            f.write(hwmon + "\n")
    os.makedirs(os.path.join(root, "class", "drm"), exist_ok=True)
    os.symlink("../../devices/pci0000:00/%s/drm/card%d" % (bdf, n),
               os.path.join(root, "class", "drm", "card%d" % n))


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def start_agent(tmp_path, procs, script, cards, extra=(), env=None, ready=True):
    """An agent on the fake library. cards: [(bdf, hwmon name or None)], card<i> for GPU i."""
    sysfs = str(tmp_path / "sys")
    os.makedirs(sysfs, exist_ok=True)
    for i, (bdf, hw) in enumerate(cards):
        add_card(sysfs, i, bdf, hw)
    s = str(tmp_path / "fake_rocm.txt")
    write_atomic(s, script)
    e = {"FAKE_RSMI_SCRIPT": s, "FAKE_RSMI_SYSFS": sysfs, "GPUSCALE_SYSFS_ROOT": sysfs}
    e.update(env or {})
    a = Agent(["--collector", "rocm", "--rocm-library", fake_lib(), "--interval",
               helpers.INTERVAL] + list(extra), env=e, workdir=str(tmp_path), ready=ready)
    procs.append(a)
    a.start()
    a.script_path = s
    return a


def families(body):
    """{name: [(labels, value)]} from an exposition, parsed by prometheus_client."""
    out = {}
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out
