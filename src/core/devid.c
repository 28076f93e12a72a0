/* Parses the device ids that GPU device plugins hand the kubelet, and finds the agent's device
 * each one names. Forms (NVIDIA's k8s-device-plugin, GKE's plugin, time-slicing replicas):
 *   GPU-<uuid>   MIG-<uuid>   MIG-GPU-<uuid>/<gi>/<ci>   <id>::<replica>
 *   nvidia<minor>   nvidia<minor>/gi<gi>   nvidia<minor>[/gi<gi>]/vgpu<replica>   <index> */
#include "core/devid.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/err.h"

#define DEVID_NUM_MAX 1000000 /* bound for every number in an id: no overflow, no nonsense */

bool devid_resource_is_gpu(const char *r) {
  if (!r)
    return false;
  return strcmp(r, "nvidia.com/gpu") == 0 || strcmp(r, "nvidia.com/gpu.shared") == 0 ||
         (strncmp(r, "nvidia.com/mig-", 15) == 0 && r[15] != '\0');
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
  if (*s >= '0' && *s <= '9') {
    if (!read_num(&s, &d->minor) || *s)
      return fail(err, "index ids must be a plain number");
    d->kind = DEVID_INDEX;
    return 0;
  }
  return fail(err, "unknown device id form (want GPU-<uuid>, MIG-<uuid>, "
                   "MIG-GPU-<uuid>/<gi>/<ci>, nvidiaN[/giM][/vgpuK] or an index, with an "
                   "optional ::N)");
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
  }
  return GS_ENOTFOUND;
}
