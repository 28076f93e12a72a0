/* kubelet PodResources v1 List client on C-core: its own channel (16 MiB receive limit, no proxy,
 * a private subchannel pool so a restarted kubelet is reconnected at once) and a deadline. */
#include "rpc/podresources.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "core/err.h"
#include "podresources.pb-c.h"
#include "rpc/wire.h"

struct podres_client {
  grpc_channel *ch;
  grpc_completion_queue *cq;
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

static void free_container(struct podres_container *c) {
  free(c->name);
  for (size_t i = 0; i < c->n_devices; i++)
    free_devices(&c->devices[i]);
  free(c->devices);
}

static void free_pod(struct podres_pod *p) {
  free(p->name);
  free(p->ns);
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

static int copy_container(const V1__ContainerResources *m, struct podres_container *c) {
  if (!(c->name = dup_str(m->name)))
    return GS_ENOMEM;
  if (!m->n_devices)
    return 0;
  if (!(c->devices = calloc(m->n_devices, sizeof *c->devices)))
    return GS_ENOMEM;
  for (size_t i = 0; i < m->n_devices; i++) {
    c->n_devices++;
    if (!m->devices[i] || copy_devices(m->devices[i], &c->devices[i]))
      return GS_ENOMEM;
  }
  return 0;
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

int podres_decode(const uint8_t *buf, size_t len, struct podres_list *out) {
  memset(out, 0, sizeof *out);
  V1__ListPodResourcesResponse *m = v1__list_pod_resources_response__unpack(NULL, len, buf);
  if (!m)
    return GS_EPARSE;
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
  v1__list_pod_resources_response__free_unpacked(m, NULL);
  if (rc)
    podres_list_free(out);
  return rc;
}

/* ---- the call ---- */

static void set_status(struct rpc_status *st, int code, const char *msg) {
  st->code = code;
  snprintf(st->msg, sizeof st->msg, "%s", msg ? msg : "");
}

static void drain_and_destroy_cq(grpc_completion_queue *cq) {
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
         GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(cq);
}

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
  grpc_arg args[3];
  memset(args, 0, sizeof args);
  args[0].type = GRPC_ARG_INTEGER;
  args[0].key = (char *)GRPC_ARG_ENABLE_HTTP_PROXY;
  args[0].value.integer = 0;
  args[1].type = GRPC_ARG_INTEGER;
  args[1].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
  args[1].value.integer = PODRES_MAX_RESPONSE;
  /* A global pool would share one subchannel, and its reconnect backoff (up to 2 min), with
   * every later channel to the same socket; the refresher opens a fresh channel after a
   * failure and wants a fresh attempt. */
  args[2].type = GRPC_ARG_INTEGER;
  args[2].key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL;
  args[2].value.integer = 1;
  grpc_channel_args cargs = {3, args};
  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  c->ch = grpc_channel_create(target, creds, &cargs);
  grpc_channel_credentials_release(creds);
  c->cq = grpc_completion_queue_create_for_next(NULL);
  if (!c->ch || !c->cq) {
    snprintf(err, errlen, "kubelet client %s: cannot create channel", target);
    if (c->ch)
      grpc_channel_destroy(c->ch);
    if (c->cq)
      drain_and_destroy_cq(c->cq);
    free(c);
    return GS_EIO;
  }
  *out = c;
  return 0;
}

void podres_client_free(struct podres_client *c) {
  if (!c)
    return;
  grpc_channel_destroy(c->ch);
  drain_and_destroy_cq(c->cq);
  free(c);
}

int podres_list(struct podres_client *c, int timeout_ms, struct podres_list *out,
                struct rpc_status *st) {
  memset(out, 0, sizeof *out);
  set_status(st, RPC_OK, NULL);
  gpr_timespec deadline =
      gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                   gpr_time_from_millis(timeout_ms > 0 ? timeout_ms : 1, GPR_TIMESPAN));
  grpc_slice method = grpc_slice_from_static_string(PODRES_METHOD_LIST);
  grpc_call *call = grpc_channel_create_call(c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq, method,
                                             NULL, deadline, NULL);
  grpc_slice_unref(method);
  /* ListPodResourcesRequest has no fields: its encoding is zero bytes. */
  grpc_byte_buffer *send_bb = rpc_wire_buffer(NULL, 0);
  if (!call || !send_bb) {
    if (call)
      grpc_call_unref(call);
    if (send_bb)
      grpc_byte_buffer_destroy(send_bb);
    set_status(st, RPC_INTERNAL, "cannot create call");
    return GS_ENOMEM;
  }
  grpc_metadata_array initial_md, trailing_md;
  grpc_metadata_array_init(&initial_md);
  grpc_metadata_array_init(&trailing_md);
  grpc_byte_buffer *recv_bb = NULL;
  grpc_status_code status = GRPC_STATUS_UNKNOWN;
  grpc_slice details = grpc_empty_slice();
  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = send_bb;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial_md;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &recv_bb;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &trailing_md;
  ops[5].data.recv_status_on_client.status = &status;
  ops[5].data.recv_status_on_client.status_details = &details;
  int rc = 0;
  char tag;
  if (grpc_call_start_batch(call, ops, 6, &tag, NULL) != GRPC_CALL_OK) {
    set_status(st, RPC_INTERNAL, "cannot start call");
    rc = GS_EIO;
  } else {
    /* The call's deadline guarantees this completes. */
    for (;;) {
      grpc_event ev = grpc_completion_queue_next(c->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
      if (ev.type == GRPC_OP_COMPLETE && ev.tag == &tag)
        break;
    }
    size_t dn = GRPC_SLICE_LENGTH(details);
    if (dn >= sizeof st->msg)
      dn = sizeof st->msg - 1;
    st->code = (int)status;
    memcpy(st->msg, GRPC_SLICE_START_PTR(details), dn);
    st->msg[dn] = '\0';
    if (status != GRPC_STATUS_OK) {
      rc = rpc_gs_from_code((int)status);
    } else if (!recv_bb) {
      set_status(st, RPC_INTERNAL, "kubelet sent no response message");
      rc = GS_EPARSE;
    } else {
      uint8_t *buf = NULL;
      size_t len = 0;
      rc = rpc_wire_read(recv_bb, PODRES_MAX_RESPONSE, &buf, &len);
      if (rc == 0) {
        rc = podres_decode(buf, len, out);
        if (rc == GS_EPARSE)
          set_status(st, RPC_INTERNAL, "kubelet answer is not a ListPodResourcesResponse");
      }
      if (rc && st->code == RPC_OK)
        set_status(st, RPC_INTERNAL, gs_strerror(rc));
      free(buf);
    }
  }
  if (recv_bb)
    grpc_byte_buffer_destroy(recv_bb);
  grpc_byte_buffer_destroy(send_bb);
  grpc_slice_unref(details);
  grpc_metadata_array_destroy(&initial_md);
  grpc_metadata_array_destroy(&trailing_md);
  grpc_call_unref(call);
  return rc;
}
