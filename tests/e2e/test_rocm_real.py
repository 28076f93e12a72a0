"""The rocm collector on Debian's REAL librocm_smi64.so.1 (librocm-smi64-1 5.2.3), driven by a
fake amdgpu/KFD sysfs tree in a private mount namespace (unshare -m, tmpfs over /sys/class and
/dev/shm), so that the collector is shown to work with the real library, and to survive what
makes it abort. Each scenario runs tests/e2e/rocm_real_inner.py inside the namespace."""

import ctypes.util
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def _unshare_ok():
    try:
        # the mount happens in the private namespace only, and goes with it
        p = subprocess.run(["unshare", "-m", "--propagation", "private", "mount", "-t", "tmpfs",
                            "gs-probe", "/sys/class"], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        return "unshare is not installed (util-linux)"
    if p.returncode != 0:
        return "a private mount namespace with a tmpfs over /sys/class is not permitted here " \
            "(needs root or CAP_SYS_ADMIN): %s" % p.stderr.strip()
    return None


def _library_ok():
    try:
        ctypes.CDLL("librocm_smi64.so.1")
    except OSError as e:
        return "Debian's librocm_smi64.so.1 is not installed (apt-get install " \
               "librocm-smi64-1): %s" % e
    return None


def run_inner(scenario):
    why = _library_ok()
    if why:
        pytest.fail(why)  # the test set installs it: a missing library is a broken setup
    why = _unshare_ok()
    if why:
        pytest.skip(why)
    p = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable,
                        os.path.join(HERE, "rocm_real_inner.py"), scenario],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert p.returncode == 0, "scenario %s failed (rc %d):\n%s\n%s" % (
        scenario, p.returncode, p.stdout[-6000:], p.stderr[-6000:])
    assert '"ok": true' in p.stdout


def test_real_library_serves_keda_and_survives_a_card_without_hwmon_and_a_lost_gpu():
    run_inner("serve")


def test_real_library_card_link_not_a_symlink_is_an_error_not_an_abort():
    run_inner("card_not_symlink")


def test_real_library_kfd_node_without_io_links_is_an_error_not_an_abort():
    run_inner("no_io_links")


def test_real_library_skips_a_partition_card_and_serves_the_whole_gpu():
    run_inner("partition_skipped")


def test_real_library_partition_card_taken_for_a_gpu_is_an_error_not_a_hang():
    run_inner("partition_taken_for_a_gpu")
