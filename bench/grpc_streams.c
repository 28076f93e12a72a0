/* The C-core client pieces shared by bench/gs_load and bench/gs_soak: see grpc_streams.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "grpc_streams.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char gs_m_spec[] = "/externalscaler.ExternalScaler/GetMetricSpec";
const char gs_m_metrics[] = "/externalscaler.ExternalScaler/GetMetrics";
const char gs_m_stream[] = "/externalscaler.ExternalScaler/StreamIsActive";

int64_t gs_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

gpr_timespec gs_in_ms(int64_t ms) {
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

grpc_channel *gs_channel(const char *target) {
  grpc_arg args[2];
  args[0].type = GRPC_ARG_INTEGER;
  args[0].key = (char *)GRPC_ARG_ENABLE_HTTP_PROXY;
  args[0].value.integer = 0;
  args[1].type = GRPC_ARG_INTEGER;
  args[1].key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL; /* one connection per channel */
  args[1].value.integer = 1;
  grpc_channel_args ca = {2, args};
  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  grpc_channel *ch = grpc_channel_create(target, creds, &ca);
  grpc_channel_credentials_release(creds);
  return ch;
}

uint8_t *gs_pack(const ProtobufCMessage *m, size_t *len) {
  *len = protobuf_c_message_get_packed_size(m);
  uint8_t *p = malloc(*len ? *len : 1);
  if (p)
    protobuf_c_message_pack(m, p);
  return p;
}

int gs_md_add(struct gs_md *md, const char *kv) {
  const char *eq = strchr(kv, '=');
  if (!eq || md->n == GS_MAX_MD)
    return -1;
  md->key[md->n] = strndup(kv, (size_t)(eq - kv));
  md->val[md->n] = strdup(eq + 1);
  if (!md->key[md->n] || !md->val[md->n]) {
    free(md->key[md->n]);
    free(md->val[md->n]);
    return -1;
  }
  md->n++;
  return 0;
}

void gs_md_free(struct gs_md *md) {
  for (size_t i = 0; i < md->n; i++) {
    free(md->key[i]);
    free(md->val[i]);
  }
  md->n = 0;
}

void gs_make_ref(Externalscaler__ScaledObjectRef *ref,
                 Externalscaler__ScaledObjectRef__ScalerMetadataEntry *ents,
                 Externalscaler__ScaledObjectRef__ScalerMetadataEntry **ptrs, const char *name,
                 const struct gs_md *md) {
  externalscaler__scaled_object_ref__init(ref);
  ref->name = (char *)name;
  ref->namespace_ = (char *)"default";
  for (size_t i = 0; i < md->n; i++) {
    externalscaler__scaled_object_ref__scaler_metadata_entry__init(&ents[i]);
    ents[i].key = md->key[i];
    ents[i].value = md->val[i];
    ptrs[i] = &ents[i];
  }
  ref->n_scalermetadata = md->n;
  ref->scalermetadata = ptrs;
}

/* ---- unary calls ---- */

/* Fills ops[0..4) with a call's request half: send the initial metadata, the one message body
 * (consumed) and the close, and receive the initial metadata into init_md. Returns the byte buffer
 * to destroy once the batch is started. */
static grpc_byte_buffer *request_ops(grpc_op *ops, grpc_slice body, grpc_metadata_array *init_md) {
  grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&body, 1);
  grpc_slice_unref(body);
  ops[0] = (grpc_op){.op = GRPC_OP_SEND_INITIAL_METADATA};
  ops[1] = (grpc_op){.op = GRPC_OP_SEND_MESSAGE};
  ops[1].data.send_message.send_message = send;
  ops[2] = (grpc_op){.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT};
  ops[3] = (grpc_op){.op = GRPC_OP_RECV_INITIAL_METADATA};
  ops[3].data.recv_initial_metadata.recv_initial_metadata = init_md;
  return send;
}

int gs_unary_start(struct gs_unary *u, grpc_channel *ch, grpc_completion_queue *cq,
                   const char *path, gpr_timespec deadline, grpc_slice body, void *tag) {
  u->call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                     grpc_slice_from_static_string(path), NULL, deadline, NULL);
  grpc_metadata_array_init(&u->init_md);
  grpc_metadata_array_init(&u->trailing_md);
  u->recv = NULL;
  u->details = grpc_empty_slice();
  grpc_op ops[6];
  grpc_byte_buffer *send = request_ops(ops, body, &u->init_md);
  ops[4] = (grpc_op){.op = GRPC_OP_RECV_MESSAGE};
  ops[4].data.recv_message.recv_message = &u->recv;
  ops[5] = (grpc_op){.op = GRPC_OP_RECV_STATUS_ON_CLIENT};
  ops[5].data.recv_status_on_client.trailing_metadata = &u->trailing_md;
  ops[5].data.recv_status_on_client.status = &u->status;
  ops[5].data.recv_status_on_client.status_details = &u->details;
  grpc_call_error e = grpc_call_start_batch(u->call, ops, 6, tag, NULL);
  grpc_byte_buffer_destroy(send);
  if (e != GRPC_CALL_OK) {
    gs_unary_done(u);
    return -1;
  }
  return 0;
}

void gs_unary_done(struct gs_unary *u) {
  grpc_metadata_array_destroy(&u->init_md);
  grpc_metadata_array_destroy(&u->trailing_md);
  if (u->recv)
    grpc_byte_buffer_destroy(u->recv);
  u->recv = NULL;
  grpc_slice_unref(u->details);
  grpc_call_unref(u->call);
  u->call = NULL;
}

/* The whole of a received message as malloc'd bytes (*len); NULL when it does not read. */
static uint8_t *read_all(grpc_byte_buffer *b, size_t *len) {
  grpc_byte_buffer_reader r;
  if (!grpc_byte_buffer_reader_init(&r, b))
    return NULL;
  grpc_slice all = grpc_byte_buffer_reader_readall(&r);
  grpc_byte_buffer_reader_destroy(&r);
  *len = GRPC_SLICE_LENGTH(all);
  uint8_t *out = malloc(*len ? *len : 1);
  if (out && *len)
    memcpy(out, GRPC_SLICE_START_PTR(all), *len);
  grpc_slice_unref(all);
  return out;
}

uint8_t *gs_call_sync(grpc_channel *ch, const char *path, const uint8_t *req, size_t reqlen,
                      int deadline_ms, size_t *outlen, grpc_status_code *status, char *msg,
                      size_t msglen) {
  grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
  struct gs_unary u;
  memset(&u, 0, sizeof u);
  uint8_t *out = NULL;
  *outlen = 0;
  grpc_slice body = grpc_slice_from_copied_buffer((const char *)req, reqlen);
  if (gs_unary_start(&u, ch, cq, path, gs_in_ms(deadline_ms), body, &u) == 0) {
    grpc_event ev = grpc_completion_queue_pluck(cq, &u, gs_in_ms(deadline_ms + 5000), NULL);
    *status = ev.type == GRPC_OP_COMPLETE ? u.status : GRPC_STATUS_DEADLINE_EXCEEDED;
    char *d = grpc_slice_to_c_string(u.details);
    snprintf(msg, msglen, "%s", d);
    gpr_free(d);
    if (ev.type == GRPC_OP_COMPLETE && u.status == GRPC_STATUS_OK && u.recv) {
      out = read_all(u.recv, outlen);
      if (!out) {
        *status = GRPC_STATUS_INTERNAL;
        snprintf(msg, msglen, "the answer does not read (or out of memory)");
      }
    } else if (*status == GRPC_STATUS_OK) {
      *status = GRPC_STATUS_INTERNAL;
      snprintf(msg, msglen, "no message in the answer");
    }
    gs_unary_done(&u);
  } else {
    *status = GRPC_STATUS_INTERNAL;
    snprintf(msg, msglen, "start_batch failed");
  }
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
         GRPC_QUEUE_SHUTDOWN)
    ;
  grpc_completion_queue_destroy(cq);
  return out;
}

uint8_t *gs_metrics_request(grpc_channel *ch, Externalscaler__ScaledObjectRef *ref, int deadline_ms,
                            size_t *len, char *err, size_t errlen) {
  size_t n = 0, rlen = 0;
  grpc_status_code status = GRPC_STATUS_OK;
  char msg[512] = "out of memory";
  uint8_t *req = gs_pack(&ref->base, &n);
  uint8_t *resp =
      req ? gs_call_sync(ch, gs_m_spec, req, n, deadline_ms, &rlen, &status, msg, sizeof msg)
          : NULL;
  free(req);
  if (!resp) {
    snprintf(err, errlen, "GetMetricSpec failed: status %d: %s", (int)status, msg);
    return NULL;
  }
  Externalscaler__GetMetricSpecResponse *sr =
      externalscaler__get_metric_spec_response__unpack(NULL, rlen, resp);
  free(resp);
  if (!sr || sr->n_metricspecs < 1) {
    snprintf(err, errlen, "GetMetricSpec answered no metric spec");
    if (sr)
      externalscaler__get_metric_spec_response__free_unpacked(sr, NULL);
    return NULL;
  }
  Externalscaler__GetMetricsRequest gm = EXTERNALSCALER__GET_METRICS_REQUEST__INIT;
  gm.scaledobjectref = ref;
  gm.metricname = sr->metricspecs[0]->metricname;
  uint8_t *p = gs_pack(&gm.base, len);
  externalscaler__get_metric_spec_response__free_unpacked(sr, NULL);
  if (!p)
    snprintf(err, errlen, "out of memory");
  return p;
}

const char *gs_opt_value(int argc, char **argv, int *i, void (*usage)(FILE *)) {
  const char *a = argv[*i];
  if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
    usage(stdout);
    exit(0);
  }
  if (*i + 1 >= argc) {
    usage(stderr);
    return NULL;
  }
  return argv[++*i];
}

int gs_cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

uint32_t gs_rank(const uint32_t *v, size_t n, double p) {
  if (n == 0)
    return 0;
  size_t r = (size_t)((p / 100.0) * (double)n + 0.999999);
  r = r < 1 ? 1 : r > n ? n : r;
  return v[r - 1];
}

/* ---- held-open StreamIsActive calls ---- */

enum { ST_START, ST_RECV, ST_STATUS };

static bool post_recv(struct gs_stream *s) {
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = &s->recv;
  return grpc_call_start_batch(s->call, &op, 1, &s->tags[ST_RECV], NULL) == GRPC_CALL_OK;
}

/* Drains the streams' queue: hands each message to on_msg, re-posts reads, notes ends, until
 * the queue shuts down. */
static void *streams_main(void *arg) {
  struct gs_streams *st = arg;
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(st->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN)
      break;
    if (ev.type != GRPC_OP_COMPLETE)
      continue;
    struct gs_stream_tag *t = ev.tag;
    struct gs_stream *s = t->s;
    if (t->kind == ST_RECV && ev.success && s->recv) {
      int64_t now = gs_now_ns();
      if (st->on_msg)
        st->on_msg(st, s->i, s->recv, now);
      grpc_byte_buffer_destroy(s->recv);
      s->recv = NULL;
      atomic_fetch_add(&st->msgs, 1);
      if (!s->got_msg) {
        s->got_msg = true;
        atomic_fetch_add(&st->first_msgs, 1);
      }
      if (!post_recv(s))
        fprintf(stderr, "%s: stream: cannot post a read\n", st->prog);
    } else if (t->kind == ST_STATUS) {
      s->ended = true;
      if (!atomic_load(&st->stopping) && atomic_fetch_add(&st->ended, 1) == 0) {
        st->first_end = s->status;
        char *d = grpc_slice_to_c_string(s->details);
        snprintf(st->first_end_msg, sizeof st->first_end_msg, "%s", d);
        gpr_free(d);
      }
    }
  }
  return NULL;
}

/* Starts stream i: the request, the first read and the status, in three batches. */
static bool stream_start(struct gs_streams *st, int i, const uint8_t *ref, size_t reflen) {
  struct gs_stream *s = &st->s[i];
  s->i = i;
  for (int k = 0; k < 3; k++)
    s->tags[k] = (struct gs_stream_tag){s, k};
  s->call = grpc_channel_create_call(
      st->ch[i / GS_STREAMS_PER_CHANNEL], NULL, GRPC_PROPAGATE_DEFAULTS, st->cq,
      grpc_slice_from_static_string(gs_m_stream), NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
  grpc_metadata_array_init(&s->init_md);
  grpc_metadata_array_init(&s->trailing_md);
  s->details = grpc_empty_slice();
  grpc_op ops[4];
  grpc_byte_buffer *send =
      request_ops(ops, grpc_slice_from_copied_buffer((const char *)ref, reflen), &s->init_md);
  grpc_op sop;
  memset(&sop, 0, sizeof sop);
  sop.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  sop.data.recv_status_on_client.trailing_metadata = &s->trailing_md;
  sop.data.recv_status_on_client.status = &s->status;
  sop.data.recv_status_on_client.status_details = &s->details;
  bool ok = grpc_call_start_batch(s->call, ops, 4, &s->tags[ST_START], NULL) == GRPC_CALL_OK &&
            post_recv(s) &&
            grpc_call_start_batch(s->call, &sop, 1, &s->tags[ST_STATUS], NULL) == GRPC_CALL_OK;
  grpc_byte_buffer_destroy(send);
  return ok;
}

static void free_refs(uint8_t **refb, size_t *reflen, int n) {
  for (int k = 0; refb && k < n; k++)
    free(refb[k]);
  free(refb);
  free(reflen);
}

int gs_streams_open(struct gs_streams *st, const char *target, const char *name,
                    const struct gs_md *md, int wait_s) {
  Externalscaler__ScaledObjectRef ref;
  Externalscaler__ScaledObjectRef__ScalerMetadataEntry ents[GS_MAX_MD];
  Externalscaler__ScaledObjectRef__ScalerMetadataEntry *ptrs[GS_MAX_MD];
  int nrefs = st->nmds > 0 ? st->nmds : 1;
  uint8_t **refb = calloc((size_t)nrefs, sizeof *refb);
  size_t *reflen = calloc((size_t)nrefs, sizeof *reflen);
  bool packed = refb && reflen;
  for (int k = 0; packed && k < nrefs; k++) {
    gs_make_ref(&ref, ents, ptrs, name, st->nmds > 0 ? &st->mds[k] : md);
    packed = (refb[k] = gs_pack(&ref.base, &reflen[k])) != NULL;
  }
  st->nch = (st->n + GS_STREAMS_PER_CHANNEL - 1) / GS_STREAMS_PER_CHANNEL;
  st->ch = calloc((size_t)st->nch, sizeof *st->ch);
  st->s = calloc((size_t)st->n, sizeof *st->s);
  st->cq = grpc_completion_queue_create_for_next(NULL);
  if (!packed || !st->ch || !st->s || pthread_create(&st->thread, NULL, streams_main, st) != 0) {
    fprintf(stderr, "%s: out of memory or threads\n", st->prog);
    free_refs(refb, reflen, nrefs);
    return GS_STREAMS_NOMEM;
  }
  st->thread_started = true;
  for (int c = 0; c < st->nch; c++)
    st->ch[c] = gs_channel(target);
  for (int i = 0; i < st->n; i++)
    if (!stream_start(st, i, refb[i % nrefs], reflen[i % nrefs])) {
      fprintf(stderr, "%s: cannot start stream %d\n", st->prog, i);
      free_refs(refb, reflen, nrefs);
      return GS_STREAMS_NOMEM;
    }
  free_refs(refb, reflen, nrefs);
  int64_t until = gs_now_ns() + wait_s * 1000000000LL;
  while (atomic_load(&st->first_msgs) + atomic_load(&st->ended) < st->n && gs_now_ns() < until) {
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
  }
  return atomic_load(&st->ended) == 0 && atomic_load(&st->first_msgs) == st->n ? 0 : -1;
}

void gs_streams_close(struct gs_streams *st, int wait_s) {
  atomic_store(&st->stopping, true);
  for (int i = 0; st->s && i < st->n; i++)
    if (st->s[i].call)
      grpc_call_cancel(st->s[i].call, NULL);
  int64_t until = gs_now_ns() + wait_s * 1000000000LL;
  for (int i = 0; st->s && i < st->n && gs_now_ns() < until; i++)
    while (st->s[i].call && !st->s[i].ended && gs_now_ns() < until) {
      struct timespec ts = {0, 1000000L};
      nanosleep(&ts, NULL);
    }
  if (st->cq) {
    grpc_completion_queue_shutdown(st->cq);
    if (st->thread_started)
      pthread_join(st->thread, NULL);
    else
      while (grpc_completion_queue_next(st->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
             GRPC_QUEUE_SHUTDOWN)
        ;
  }
  for (int i = 0; st->s && i < st->n; i++) {
    struct gs_stream *s = &st->s[i];
    if (!s->call)
      continue;
    grpc_metadata_array_destroy(&s->init_md);
    grpc_metadata_array_destroy(&s->trailing_md);
    if (s->recv)
      grpc_byte_buffer_destroy(s->recv);
    grpc_slice_unref(s->details);
    grpc_call_unref(s->call);
  }
  if (st->cq)
    grpc_completion_queue_destroy(st->cq);
  for (int c = 0; st->ch && c < st->nch; c++)
    if (st->ch[c])
      grpc_channel_destroy(st->ch[c]);
  free(st->s);
  free(st->ch);
  st->s = NULL;
  st->ch = NULL;
  st->cq = NULL;
}
