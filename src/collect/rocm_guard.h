/* Guards around ROCm SMI's asserting calls: Debian's librocm_smi64 keeps its asserts, so some
 * situations kill the calling process instead of returning an error (see DESIGN.md "AMD GPUs").
 * These checks read the same sysfs files the library would, before it is called. */
#ifndef GS_ROCM_GUARD_H
#define GS_ROCM_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Checks what rsmi_init would assert on under root (normally "/sys"): every
 * class/drm/card<N> entry of an AMD GPU (device/vendor 0x1002, device/vbios_version) is a
 * symbolic link (ROCm/rocm_smi_lib rocm-5.2.3 src/rocm_smi_main.cc ConstructBDFID asserts on
 * readlink) whose target holds a PCI address (without one, its BDF search loops forever), and
 * every KFD topology node
 * (class/kfd/kfd/topology/nodes/<N>) has an io_links directory. Returns true when init is safe;
 * else false with why (the path and what is wrong). */
bool rocm_guard_init_ok(const char *root, char *why, size_t whylen);

/* Formats a ROCm SMI BDF id (rsmi_dev_pci_id_get: domain << 32 | bus << 8 | device << 3 |
 * function) as the PCI address AMD's device plugin uses, "0000:19:00.0". */
void rocm_format_bdf(uint64_t bdfid, char *out, size_t outlen);

/* Finds the DRM card of a PCI address (its class/drm/card<N> link target contains it) and writes
 * the card's device directory (root/class/drm/card<N>/device) into dir. Returns the card number,
 * or -1 when none matches. */
int rocm_guard_card(const char *root, const char *pci, char *dir, size_t dirlen);

/* True when the card's device directory has a hwmon whose name is "amdgpu": the condition under
 * which ROCm SMI's temperature and power calls return instead of aborting. */
bool rocm_guard_hwmon_ok(const char *devdir);

/* True when the card's device directory still exists (a device that disappeared keeps its ROCm
 * SMI index until the library is initialised again). */
bool rocm_guard_present(const char *devdir);

/* Runs fn(arg) in a child process (fork, before any thread that matters is started) and reports
 * how it ended: 0 when it exited 0, GS_EIO with why when it exited otherwise or was killed by a
 * signal (an assert in the library), GS_EUNAVAIL when it did not finish within
 * timeout_ms (it is then killed). */
int rocm_guard_probe(int (*fn)(void *arg), void *arg, int timeout_ms, char *why, size_t whylen);

#endif
