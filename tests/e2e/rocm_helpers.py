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


# What Debian's librocm_smi64 5.2.3 reads, found with RSMI_DEBUG_BITFIELD=1 and strace, and in
# ROCm/rocm_smi_lib (tag rocm-5.2.3) src/rocm_smi_kfd.cc (KFDNode::Initialize: hive_id,
# simd_arrays_per_engine, array_count, cu_per_simd_array, io_links/) and src/rocm_smi_main.cc.
REAL_VALUES = {"busy": 37, "membusy": 11, "total_mib": 196592, "used_mib": 20480,
               "edge_mc": 41000, "junction_mc": 55500, "mem_mc": 60000,
               "power_uw": 350250000}


def _w(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def real_device_dir(root, bdf):
    return os.path.join(root, "fakepci", "pci0000:00", bdf)


def build_real_tree(root, cards, card_as_dir=(), node_without_io_links=()):
    """An amdgpu + KFD sysfs tree under root (the tmpfs over /sys/class) for the real library.
    cards: [(bdf, hwmon name or None)]; card<i> links to a device directory whose path holds the
    PCI address. card_as_dir: card numbers made plain directories (rsmi_init asserts);
    node_without_io_links: KFD node numbers without io_links/ (rsmi_init asserts)."""
    v = REAL_VALUES
    os.makedirs(os.path.join(root, "drm"), exist_ok=True)
    for n, (bdf, hw) in enumerate(cards):
        dev = real_device_dir(root, bdf)
        os.makedirs(os.path.join(dev, "drm", "card%d" % n), exist_ok=True)
        os.symlink("../..", os.path.join(dev, "drm", "card%d" % n, "device"))
        for name, text in (("vendor", "0x1002"), ("device", "0x74a1"),
                           ("subsystem_vendor", "0x1002"), ("subsystem_device", "0x74a1"),
                           ("vbios_version", "113-M3000100-102"),
                           ("gpu_busy_percent", str(v["busy"])),
                           ("mem_busy_percent", str(v["membusy"])),
                           ("mem_info_vram_total", str(v["total_mib"] << 20)),
                           ("mem_info_vram_used", str(v["used_mib"] << 20)),
                           ("unique_id", "5a3c1e0f00aa%04x" % n),
                           ("serial_number", "69225100%04d" % n)):
            _w(os.path.join(dev, name), text + "\n")
        if hw:
            h = os.path.join(dev, "hwmon", "hwmon%d" % (n + 2))
            for name, text in (("name", hw), ("in0_label", "vddgfx"), ("in0_input", "800"),
                               ("temp1_label", "edge"), ("temp1_input", str(v["edge_mc"])),
                               ("temp2_label", "junction"),
                               ("temp2_input", str(v["junction_mc"])),
                               ("temp3_label", "mem"), ("temp3_input", str(v["mem_mc"])),
                               ("power1_average", str(v["power_uw"]))):
                _w(os.path.join(h, name), text + "\n")
        card = os.path.join(root, "drm", "card%d" % n)
        if n in card_as_dir:
            os.makedirs(card)
            os.symlink(dev, os.path.join(card, "device"))
        else:
            os.symlink(os.path.join(dev, "drm", "card%d" % n), card)
        dom, bus, devfn = bdf.split(":")[0], bdf.split(":")[1], bdf.split(":")[2]
        d, fn = devfn.split(".")
        node = os.path.join(root, "kfd", "kfd", "topology", "nodes", str(n + 1))
        if n + 1 not in node_without_io_links:
            os.makedirs(os.path.join(node, "io_links"), exist_ok=True)
        _w(os.path.join(node, "gpu_id"), "%d\n" % (4242 + n))
        _w(os.path.join(node, "name"), "gfx942\n")
        _w(os.path.join(node, "properties"),
           "cpu_cores_count 0\nsimd_count 1216\narray_count 32\nsimd_arrays_per_engine 1\n"
           "cu_per_simd_array 10\nlocation_id %d\ndomain %d\nhive_id 0\nvendor_id 4098\n"
           "device_id 29857\n" % ((int(bus, 16) << 8) | (int(d, 16) << 3) | int(fn, 16),
                                  int(dom, 16)))
    cpu = os.path.join(root, "kfd", "kfd", "topology", "nodes", "0")
    if 0 not in node_without_io_links:
        os.makedirs(os.path.join(cpu, "io_links"), exist_ok=True)
    _w(os.path.join(cpu, "gpu_id"), "0\n")
    _w(os.path.join(cpu, "name"), "\n")
    _w(os.path.join(cpu, "properties"),
       "cpu_cores_count 64\nsimd_count 0\nlocation_id 0\ndomain 0\nhive_id 0\n")


def add_partition_card(root, n, xcp, gpu_bdf=None):
    """An MI300 partition's DRM card as amdgpu lays it out: class/drm/card<n> ->
    .../platform/amdgpu_xcp_<xcp>/drm/card<n>, a target without a PCI address. The platform device
    has no PCI vendor file; gpu_bdf gives it one (vendor 0x1002, vbios_version) as if it were the
    GPU's, the case in which ROCm SMI 5.2 takes it for an AMD GPU."""
    dev = os.path.join(root, "fakeplatform", "amdgpu_xcp_%d" % xcp)
    os.makedirs(os.path.join(dev, "drm", "card%d" % n))
    os.symlink("../..", os.path.join(dev, "drm", "card%d" % n, "device"))
    if gpu_bdf:
        _w(os.path.join(dev, "vendor"), "0x1002\n")
        _w(os.path.join(dev, "vbios_version"), "113-M3000100-102\n")
    os.symlink(os.path.join(dev, "drm", "card%d" % n), os.path.join(root, "drm", "card%d" % n))
