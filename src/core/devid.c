/* Parses the device ids that GPU device plugins hand the kubelet, and finds the agent's device
 * each one names. Forms (NVIDIA's k8s-device-plugin, GKE's plugin, time-slicing replicas):
 *   GPU-<uuid>   MIG-<uuid>   MIG-GPU-<uuid>/<gi>/<ci>   <id>::<replica>
 *   nvidia<minor>   nvidia<minor>/gi<gi>   nvidia<minor>[/gi<gi>]/vgpu<replica>   <index>
 * and the NVIDIA DRA driver's device and CDI names (gpu-<minor>, gpu-<minor>-mig-...). */
#include "core/devid.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/err.h"

#define DEVID_NUM_MAX 1000000 /* bound for every number in an id: no overflow, no nonsense */

/* AMD's partition resources: "<compute>_<memory>" after "amd.com/". */
static bool amd_partition_resource(const char *r) {
  static const char *const compute[] = {"spx_", "dpx_", "tpx_", "qpx_", "cpx_"};
  static const char *const memory[] = {"nps1", "nps2", "nps4", "nps8"};
  for (size_t c = 0; c < sizeof compute / sizeof compute[0]; c++)
    if (strncmp(r, compute[c], 4) == 0)
      for (size_t m = 0; m < sizeof memory / sizeof memory[0]; m++)
        if (strcmp(r + 4, memory[m]) == 0)
          return true;
  return false;
}

bool devid_resource_is_gpu(const char *r) {
  if (!r)
    return false;
  return strcmp(r, "nvidia.com/gpu") == 0 || strcmp(r, "nvidia.com/gpu.shared") == 0 ||
         (strncmp(r, "nvidia.com/mig-", 15) == 0 && r[15] != '\0') ||
         strcmp(r, "amd.com/gpu") == 0 ||
         (strncmp(r, "amd.com/", 8) == 0 && amd_partition_resource(r + 8));
}

/* "XXXX:XX:XX.X" in hex: a PCI address as AMD's device plugin names a GPU. */
static bool is_pci_address(const char *s) {
  static const char shape[] = "hhhh:hh:hh.h";
  for (size_t i = 0; i < sizeof shape - 1; i++) {
    char c = s[i];
    bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (shape[i] == 'h' ? !hex : c != shape[i])
      return false;
  }
  return s[sizeof shape - 1] == '\0';
}

/* Reads a decimal number of at least one digit at *p, advancing *p. False when none or too big. */
static bool read_num(const char **p, int *out) {
  const char *s = *p;
  long v = 0;
  if (*s < '0' || *s > '9')
    return false;
  while (*s >= '0' && *s <= '9') {
    v = v * 10 + (*s - '0');
    if (v > DEVID_NUM_MAX)
      return false;
    s++;
  }
  *out = (int)v;
  *p = s;
  return true;
}

/* A uuid body: hex digits and dashes, at least one character, until stop (or end). */
static size_t uuid_body_len(const char *s) {
  size_t n = 0;
  while ((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f') ||
         (s[n] >= 'A' && s[n] <= 'F') || s[n] == '-')
    n++;
  return n;
}

static int fail(const char **err, const char *msg) {
  if (err)
    *err = msg;
  return GS_EPARSE;
}

/* "nvidia<minor>[/gi<gi>][/vgpu<replica>]" after the "nvidia" prefix. */
static int parse_gke(const char *s, struct devid *d, const char **err) {
  if (!read_num(&s, &d->minor))
    return fail(err, "nvidiaN: N must be a device minor number");
  d->kind = DEVID_MINOR;
  if (strncmp(s, "/gi", 3) == 0) {
    s += 3;
    if (!read_num(&s, &d->gi))
      return fail(err, "nvidiaN/giM: M must be a GPU instance id");
    d->kind = DEVID_MINOR_GI;
  }
  if (strncmp(s, "/vgpu", 5) == 0) {
    s += 5;
    int r;
    if (!read_num(&s, &r))
      return fail(err, "nvidiaN/vgpuK: K must be a replica number");
    if (d->replica < 0)
      d->replica = r;
  }
  if (*s)
    return fail(err, "unexpected text after nvidiaN[/giM][/vgpuK]");
  return 0;
}

int devid_parse(const char *id, struct devid *d, const char **err) {
  memset(d, 0, sizeof *d);
  d->minor = d->gi = d->ci = d->replica = -1;
  if (!id || !*id)
    return fail(err, "empty device id");
  size_t len = strlen(id);
  if (len >= 2 * GPU_STR_LEN)
    return fail(err, "device id too long");
  char buf[2 * GPU_STR_LEN];
  memcpy(buf, id, len + 1);

  /* Time-slicing replicas: "<id>::<N>" names replica N of <id>. */
  char *sep = strstr(buf, "::");
  if (sep) {
    const char *r = sep + 2;
    if (!read_num(&r, &d->replica) || *r)
      return fail(err, "time-slicing suffix '::N' needs a replica number N");
    *sep = '\0';
  }

  const char *s = buf;
  if (strncmp(s, "MIG-GPU-", 8) == 0) {
    size_t n = uuid_body_len(s + 8);
    if (n == 0 || s[8 + n] != '/')
      return fail(err, "MIG-GPU-<uuid>/<gi>/<ci>: malformed");
    snprintf(d->uuid, sizeof d->uuid, "GPU-%.*s", (int)n, s + 8);
    if (strlen(d->uuid) != n + 4)
      return fail(err, "device id uuid too long");
    const char *p = s + 8 + n + 1;
    if (!read_num(&p, &d->gi) || *p != '/')
      return fail(err, "MIG-GPU-<uuid>/<gi>/<ci>: gi must be a number");
    p++;
    if (!read_num(&p, &d->ci) || *p)
      return fail(err, "MIG-GPU-<uuid>/<gi>/<ci>: ci must be a number");
    d->kind = DEVID_MIG_LEGACY;
    return 0;
  }
  if (strncmp(s, "GPU-", 4) == 0 || strncmp(s, "MIG-", 4) == 0) {
    size_t n = uuid_body_len(s + 4);
    if (n == 0 || s[4 + n] != '\0')
      return fail(err, "GPU-<uuid> / MIG-<uuid>: the uuid must be hex digits and dashes");
    if (4 + n >= sizeof d->uuid)
      return fail(err, "device id uuid too long");
    memcpy(d->uuid, s, 4 + n + 1);
    d->kind = s[0] == 'G' ? DEVID_GPU_UUID : DEVID_MIG_UUID;
    return 0;
  }
  if (strncmp(s, "nvidia", 6) == 0)
    return parse_gke(s + 6, d, err);
  /* AMD's plugin (ROCm/k8s-device-plugin internal/pkg/amdgpu/amdgpu.go GetAMDGPUs): a GPU by
   * its PCI address, an MI300 partition by its platform device amdgpu_xcp_N. */
  if (is_pci_address(s)) {
    for (size_t i = 0; s[i]; i++)
      d->uuid[i] = (char)(s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 'a' : s[i]);
    d->kind = DEVID_PCI;
    return 0;
  }
  if (strncmp(s, "amdgpu_xcp_", 11) == 0) {
    const char *p = s + 11;
    if (!read_num(&p, &d->minor) || *p)
      return fail(err, "amdgpu_xcp_N: N must be a number");
    d->kind = DEVID_AMD_XCP;
    return 0;
  }
  if (*s >= '0' && *s <= '9') {
    if (!read_num(&s, &d->minor) || *s)
      return fail(err, "index ids must be a plain number");
    d->kind = DEVID_INDEX;
    return 0;
  }
  return fail(err, "unknown device id form (want GPU-<uuid>, MIG-<uuid>, "
                   "MIG-GPU-<uuid>/<gi>/<ci>, nvidiaN[/giM][/vgpuK], an index, a PCI address "
                   "XXXX:XX:XX.X or amdgpu_xcp_N, with an optional ::N)");
}

/* ---- DRA ---- */

/* A profile as the DRA driver writes it in names: dots dropped, lower case, other characters
 * that a DNS label cannot hold as '-' ("1g.10gb+me" -> "1g10gb-me"). */
static void compact_profile(const char *p, char *out, size_t len) {
  size_t k = 0;
  for (; *p && k + 1 < len; p++) {
    char ch = *p;
    if (ch == '.')
      continue;
    if (ch >= 'A' && ch <= 'Z')
      ch = (char)(ch - 'A' + 'a');
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')))
      ch = '-';
    out[k++] = ch;
  }
  out[k] = '\0';
}

static bool all_digits(const char *s, size_t n) {
  if (n == 0)
    return false;
  for (size_t i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9')
      return false;
  return true;
}

/* "gpu-N" or "gpu-N-mig-...", the NVIDIA DRA driver's device (canonical) names. */
static int parse_dra_name(const char *s, struct devid *d, const char **err) {
  if (strncmp(s, "gpu-", 4) != 0)
    return fail(err, "NVIDIA DRA device name: want gpu-N or gpu-N-mig-...");
  s += 4;
  if (!read_num(&s, &d->minor))
    return fail(err, "NVIDIA DRA device name gpu-N: N must be a minor number (gpu-vfio-N is "
                     "passthrough, not in a container)");
  if (*s == '\0') {
    d->kind = DEVID_MINOR;
    return 0;
  }
  if (strncmp(s, "-mig-", 5) != 0)
    return fail(err, "NVIDIA DRA device name: want gpu-N or gpu-N-mig-...");
  s += 5;
  /* The last two dash-separated parts are numbers (profile id, placement); before them the
   * profile, unless the three parts are all numbers (older releases: id, start, size). */
  const char *end = s + strlen(s);
  const char *b = end, *parts[3] = {NULL, NULL, NULL};
  for (int k = 0; k < 3 && b > s; k++) {
    const char *q = b;
    while (q > s && q[-1] != '-')
      q--;
    parts[k] = q;
    b = q > s ? q - 1 : q;
  }
  if (!parts[1] || !all_digits(parts[0], (size_t)(end - parts[0])) ||
      !all_digits(parts[1], (size_t)(parts[0] - 1 - parts[1])))
    return fail(err, "NVIDIA DRA MIG device name: want gpu-N-mig-<profile>-<id>-<placement>");
  d->kind = DEVID_MINOR_MIG;
  if (parts[2] == s && all_digits(s, (size_t)(parts[1] - 1 - s)))
    return 0; /* gpu-N-mig-<id>-<start>-<size>: no profile */
  size_t pl = (size_t)(parts[1] - 1 - s);
  if (pl == 0 || pl >= sizeof d->profile)
    return fail(err, "NVIDIA DRA MIG device name: the profile is empty or too long");
  memcpy(d->profile, s, pl);
  d->profile[pl] = '\0';
  return 0;
}

/* A CDI name "k8s.gpu.nvidia.com/<class>=<name>": the device name in it, into buf. Returns 1,
 * 0 for another vendor's CDI name, or -1 for one of this vendor that cannot be read. */
static int cdi_device_name(const char *cdi, char *buf, size_t len) {
  size_t vl = strlen(DEVID_DRA_CDI_VENDOR);
  if (strncmp(cdi, DEVID_DRA_CDI_VENDOR, vl) != 0)
    return 0;
  const char *eq = strchr(cdi + vl, '=');
  if (!eq)
    return -1;
  const char *name = eq + 1;
  /* claim class: "<claim uid>-<device name>", the uid 36 characters (8-4-4-4-12) */
  if ((size_t)(eq - (cdi + vl)) == 5 && strncmp(cdi + vl, "claim", 5) == 0) {
    if (strlen(name) <= 37 || uuid_body_len(name) < 36 || name[36] != '-')
      return -1;
    name += 37;
  }
  if (!*name || strlen(name) >= len)
    return -1;
  memcpy(buf, name, strlen(name) + 1);
  return 1;
}

int devid_parse_dra(const char *driver, const char *device, char *const *cdi, size_t n_cdi,
                    struct devid *d, const char **err) {
  memset(d, 0, sizeof *d);
  d->minor = d->gi = d->ci = d->replica = -1;
  if (driver && *driver && strcmp(driver, DEVID_DRA_DRIVER) != 0)
    return GS_ENOTSUP;
  if (driver && *driver && device && *device) {
    if (strlen(device) >= 2 * GPU_STR_LEN)
      return fail(err, "DRA device name too long");
    return parse_dra_name(device, d, err);
  }
  /* A kubelet before 1.31 sends only the CDI names. */
  char name[2 * GPU_STR_LEN];
  for (size_t i = 0; i < n_cdi; i++) {
    int got = cdi[i] ? cdi_device_name(cdi[i], name, sizeof name) : 0;
    if (got < 0)
      return fail(err, "k8s.gpu.nvidia.com CDI name: want <kind>=<device name> (claim: "
                       "<claim uid>-<device name>)");
    if (got == 0)
      continue;
    if (strncmp(name, "GPU-", 4) == 0 || strncmp(name, "MIG-", 4) == 0)
      return devid_parse(name, d, err);
    return parse_dra_name(name, d, err);
  }
  if (driver && *driver)
    return fail(err, "NVIDIA DRA device without a device name or a k8s.gpu.nvidia.com CDI name");
  return GS_ENOTSUP; /* no driver named and no NVIDIA CDI device: not ours */
}

/* The one MIG instance of minor d->minor with d's profile (or any, without one). */
static int find_dra_mig(const struct gpu_info *infos, size_t n, const struct devid *d) {
  int found = GS_ENOTFOUND;
  for (size_t i = 0; i < n; i++) {
    if (!infos[i].mig || infos[i].minor != d->minor)
      continue;
    if (d->profile[0]) {
      char p[sizeof infos[i].mig_profile];
      compact_profile(infos[i].mig_profile, p, sizeof p);
      if (strcmp(p, d->profile) != 0)
        continue;
    }
    if (found >= 0)
      return GS_ENOTFOUND; /* ambiguous without the placement */
    found = (int)i;
  }
  return found;
}

static int find_whole(const struct gpu_info *infos, size_t n,
                      bool (*match)(const struct gpu_info *, const struct devid *),
                      const struct devid *d) {
  for (size_t i = 0; i < n; i++)
    if (!infos[i].mig && match(&infos[i], d))
      return (int)i;
  return GS_ENOTFOUND;
}

static bool by_uuid(const struct gpu_info *g, const struct devid *d) {
  return strcasecmp(g->uuid, d->uuid) == 0;
}

static bool by_minor(const struct gpu_info *g, const struct devid *d) {
  return g->minor == d->minor;
}

static bool by_index(const struct gpu_info *g, const struct devid *d) {
  return g->index == d->minor;
}

/* The MIG instance with GPU instance id gi whose parent is infos[parent]. */
static int find_instance(const struct gpu_info *infos, size_t n, int parent, int gi) {
  for (size_t i = 0; i < n; i++)
    if (infos[i].mig && infos[i].parent_index == infos[parent].index && infos[i].gi_id == gi)
      return (int)i;
  return GS_ENOTFOUND;
}

int devid_resolve(const struct devid *d, const struct gpu_info *infos, size_t n) {
  int p;
  switch (d->kind) {
  case DEVID_GPU_UUID:
  case DEVID_MIG_UUID:
    for (size_t i = 0; i < n; i++)
      if (by_uuid(&infos[i], d))
        return (int)i;
    return GS_ENOTFOUND;
  case DEVID_MIG_LEGACY:
    p = find_whole(infos, n, by_uuid, d);
    return p < 0 ? p : find_instance(infos, n, p, d->gi);
  case DEVID_MINOR: return find_whole(infos, n, by_minor, d);
  case DEVID_MINOR_GI:
    p = find_whole(infos, n, by_minor, d);
    if (p >= 0)
      return find_instance(infos, n, p, d->gi);
    /* No whole GPU listed for that minor: an instance carries its parent's minor. */
    for (size_t i = 0; i < n; i++)
      if (infos[i].mig && infos[i].minor == d->minor && infos[i].gi_id == d->gi)
        return (int)i;
    return GS_ENOTFOUND;
  case DEVID_INDEX: return find_whole(infos, n, by_index, d);
  case DEVID_MINOR_MIG: return find_dra_mig(infos, n, d);
  case DEVID_PCI:
    for (size_t i = 0; i < n; i++)
      if (!infos[i].mig && strcasecmp(infos[i].pci_bus_id, d->uuid) == 0)
        return (int)i;
    return GS_ENOTFOUND;
  case DEVID_AMD_XCP: return GS_ENOTFOUND;
  }
  return GS_ENOTFOUND;
}
