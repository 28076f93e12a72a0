/* kubelet PodResources v1 List client on C-core: its own channel (16 MiB receive limit, no proxy,
 * a private subchannel pool so a restarted kubelet is reconnected at once) and a deadline. */
#include "rpc/podresources.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "podresources.pb-c.h"
#include "rpc/client.h"

struct podres_client {
  struct rpc_client *rpc;
};

/* ---- decoding ---- */

static char *dup_str(const char *s) {
  return strdup(s ? s : "");
}

static void free_devices(struct podres_devices *d) {
  free(d->resource_name);
  for (size_t i = 0; i < d->n_ids; i++)
    free(d->ids[i]);
  free(d->ids);
}

static void free_dra(struct podres_dra *d) {
  free(d->claim_name);
  free(d->claim_ns);
  free(d->driver);
  free(d->pool);
  free(d->device);
  for (size_t i = 0; i < d->n_cdi; i++)
    free(d->cdi[i]);
  free(d->cdi);
}

static void free_container(struct podres_container *c) {
  free(c->name);
  for (size_t i = 0; i < c->n_devices; i++)
    free_devices(&c->devices[i]);
  free(c->devices);
  for (size_t i = 0; i < c->n_dra; i++)
    free_dra(&c->dra[i]);
  free(c->dra);
}

static void free_pod(struct podres_pod *p) {
  free(p->name);
  free(p->ns);
  free(p->uid);
  for (size_t i = 0; i < p->n_containers; i++)
    free_container(&p->containers[i]);
  free(p->containers);
}

void podres_list_free(struct podres_list *l) {
  if (!l)
    return;
  for (size_t i = 0; i < l->n_pods; i++)
    free_pod(&l->pods[i]);
  free(l->pods);
  l->pods = NULL;
  l->n_pods = 0;
}

/* Each copy_* fills a zeroed target and counts what it filled as it goes, so that the free_*
 * functions release exactly the filled part when an allocation fails midway. */
static int copy_devices(const V1__ContainerDevices *m, struct podres_devices *d) {
  if (!(d->resource_name = dup_str(m->resource_name)))
    return GS_ENOMEM;
  if (!m->n_device_ids)
    return 0;
  if (!(d->ids = calloc(m->n_device_ids, sizeof *d->ids)))
    return GS_ENOMEM;
  for (size_t i = 0; i < m->n_device_ids; i++) {
    if (!(d->ids[i] = dup_str(m->device_ids[i])))
      return GS_ENOMEM;
    d->n_ids++;
  }
  return 0;
}

static int copy_dra(const V1__DynamicResource *dr, const V1__ClaimResource *cr,
                    struct podres_dra *d) {
  if (!(d->claim_name = dup_str(dr->claim_name)) || !(d->claim_ns = dup_str(dr->claim_namespace)) ||
      !(d->driver = dup_str(cr->driver_name)) || !(d->pool = dup_str(cr->pool_name)) ||
      !(d->device = dup_str(cr->device_name)))
    return GS_ENOMEM;
  if (!cr->n_cdi_devices)
    return 0;
  if (!(d->cdi = calloc(cr->n_cdi_devices, sizeof *d->cdi)))
    return GS_ENOMEM;
  for (size_t i = 0; i < cr->n_cdi_devices; i++) {
    if (!(d->cdi[i] = dup_str(cr->cdi_devices[i] ? cr->cdi_devices[i]->name : "")))
      return GS_ENOMEM;
    d->n_cdi++;
  }
  return 0;
}

/* dynamic_resources flattened to one entry per claim device. A claim without devices (a
 * kubelet that lists the claim before the driver prepared it) gives none. */
static int copy_dynamic(const V1__ContainerResources *m, struct podres_container *c) {
  size_t n = 0;
  for (size_t i = 0; i < m->n_dynamic_resources; i++)
    if (m->dynamic_resources[i])
      n += m->dynamic_resources[i]->n_claim_resources;
  if (!n)
    return 0;
  if (!(c->dra = calloc(n, sizeof *c->dra)))
    return GS_ENOMEM;
  for (size_t i = 0; i < m->n_dynamic_resources; i++) {
    const V1__DynamicResource *dr = m->dynamic_resources[i];
    for (size_t k = 0; dr && k < dr->n_claim_resources; k++) {
      if (!dr->claim_resources[k])
        continue;
      c->n_dra++;
      if (copy_dra(dr, dr->claim_resources[k], &c->dra[c->n_dra - 1]))
        return GS_ENOMEM;
    }
  }
  return 0;
}

static int copy_container(const V1__ContainerResources *m, struct podres_container *c) {
  if (!(c->name = dup_str(m->name)))
    return GS_ENOMEM;
  if (m->n_devices) {
    if (!(c->devices = calloc(m->n_devices, sizeof *c->devices)))
      return GS_ENOMEM;
    for (size_t i = 0; i < m->n_devices; i++) {
      c->n_devices++;
      if (!m->devices[i] || copy_devices(m->devices[i], &c->devices[i]))
        return GS_ENOMEM;
    }
  }
  return copy_dynamic(m, c);
}

static int copy_pod(const V1__PodResources *m, struct podres_pod *p) {
  if (!(p->name = dup_str(m->name)) || !(p->ns = dup_str(m->namespace_)))
    return GS_ENOMEM;
  if (!m->n_containers)
    return 0;
  if (!(p->containers = calloc(m->n_containers, sizeof *p->containers)))
    return GS_ENOMEM;
  for (size_t i = 0; i < m->n_containers; i++) {
    p->n_containers++;
    if (!m->containers[i] || copy_container(m->containers[i], &p->containers[i]))
      return GS_ENOMEM;
  }
  return 0;
}

/* protobuf-c's default allocator, remembering a failure: unpack returns NULL for both a
 * malformed message and an allocation that failed, and only one of them is GS_EPARSE. */
static void *pb_alloc(void *ud, size_t n) {
  void *p = malloc(n);
  if (!p)
    *(bool *)ud = true;
  return p;
}

static void pb_free(void *ud, void *p) {
  (void)ud;
  free(p);
}

int podres_decode(const uint8_t *buf, size_t len, struct podres_list *out) {
  memset(out, 0, sizeof *out);
  bool oom = false;
  ProtobufCAllocator pa = {pb_alloc, pb_free, &oom};
  V1__ListPodResourcesResponse *m = v1__list_pod_resources_response__unpack(&pa, len, buf);
  if (!m)
    return oom ? GS_ENOMEM : GS_EPARSE;
  int rc = 0;
  if (m->n_pod_resources) {
    out->pods = calloc(m->n_pod_resources, sizeof *out->pods);
    if (!out->pods)
      rc = GS_ENOMEM;
    for (size_t i = 0; !rc && i < m->n_pod_resources; i++) {
      out->n_pods++;
      if (!m->pod_resources[i] || copy_pod(m->pod_resources[i], &out->pods[i]))
        rc = GS_ENOMEM;
    }
  }
  v1__list_pod_resources_response__free_unpacked(m, &pa);
  if (rc)
    podres_list_free(out);
  return rc;
}

/* ---- the call ---- */

int podres_client_new(const char *socket_path, struct podres_client **out, char *err,
                      size_t errlen) {
  *out = NULL;
  char target[4200];
  int tn = strncmp(socket_path, "unix:", 5) == 0
               ? snprintf(target, sizeof target, "%s", socket_path)
               : snprintf(target, sizeof target, "unix:%s", socket_path);
  if (tn < 0 || (size_t)tn >= sizeof target) {
    snprintf(err, errlen, "kubelet socket path too long");
    return GS_EINVAL;
  }
  struct podres_client *c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(err, errlen, "kubelet client: out of memory");
    return GS_ENOMEM;
  }
  /* The refresher opens a fresh channel after a failure and wants a fresh attempt, not the
   * shared subchannel's backoff; answers of busy nodes exceed gRPC's 4 MiB default. */
  struct rpc_client_opts o = {NULL, PODRES_MAX_RESPONSE, true};
  int rc = rpc_client_new_opts(target, &o, &c->rpc, err, errlen);
  if (rc) {
    free(c);
    return rc;
  }
  *out = c;
  return 0;
}

void podres_client_free(struct podres_client *c) {
  if (!c)
    return;
  rpc_client_free(c->rpc);
  free(c);
}

int podres_list(struct podres_client *c, int timeout_ms, struct podres_list *out,
                struct rpc_status *st) {
  memset(out, 0, sizeof *out);
  uint8_t *buf = NULL;
  size_t len = 0;
  /* ListPodResourcesRequest has no fields: its encoding is zero bytes. */
  int rc = rpc_client_unary(c->rpc, PODRES_METHOD_LIST, NULL, 0, timeout_ms, &buf, &len, st);
  if (rc == 0) {
    rc = podres_decode(buf, len, out);
    if (rc) {
      st->code = RPC_INTERNAL;
      snprintf(st->msg, sizeof st->msg, "%s",
               rc == GS_EPARSE ? "kubelet answer is not a ListPodResourcesResponse"
                               : gs_strerror(rc));
    }
  }
  free(buf);
  return rc;
}
