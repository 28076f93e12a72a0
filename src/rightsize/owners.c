/* Workload owners from the Kubernetes API: a paged cluster-wide pod list, matched to the report's
 * workloads by namespace/pod, replaces analyze.c's pod-name guesses (see owners.h). */
#include "rightsize/owners.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "core/err.h"

/* The note analyze.c writes when it guessed owners; replaced once the API has been asked. */
#define RS_GUESS_NOTE_PREFIX "Owners are guessed from pod names"

void rs_owner_from_kube(const struct kube_pod *p, char *out, size_t outlen) {
  if (!outlen)
    return;
  if (!p->owner_kind || !p->owner_name) {
    int n = snprintf(out, outlen, "Pod/%s", p->name);
    if (n < 0 || (size_t)n >= outlen)
      snprintf(out, outlen, "%s", p->name);
    return;
  }
  const char *kind = p->owner_kind, *name = p->owner_name, *hash = p->template_hash;
  size_t nl = strlen(name), hl = hash ? strlen(hash) : 0;
  if (!strcmp(kind, "ReplicaSet") && hl && nl > hl + 1 && name[nl - hl - 1] == '-' &&
      !strcmp(name + nl - hl, hash)) {
    int n =
        snprintf(out, outlen, "Deployment/%.*s (ReplicaSet/%s)", (int)(nl - hl - 1), name, name);
    if (n >= 0 && (size_t)n < outlen)
      return;
  }
  int n = snprintf(out, outlen, "%s/%s", kind, name);
  if (n < 0 || (size_t)n >= outlen)
    snprintf(out, outlen, "%s", name);
}

static const struct rs_report *sort_r; /* qsort has no context argument */

static int cmp_key(const struct rs_workload *w, const char *ns, const char *pod) {
  int c = strcmp(w->namespace_, ns);
  return c ? c : strcmp(w->pod, pod);
}

static int cmp_widx(const void *a, const void *b) {
  const struct rs_workload *wb = &sort_r->workloads[*(const size_t *)b];
  return cmp_key(&sort_r->workloads[*(const size_t *)a], wb->namespace_, wb->pod);
}

/* Index of the workload ns/pod through the sorted index ord, or (size_t)-1. */
static size_t find_workload(const struct rs_report *r, const size_t *ord, const char *ns,
                            const char *pod) {
  size_t lo = 0, hi = r->n_workloads;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = cmp_key(&r->workloads[ord[mid]], ns, pod);
    if (!c)
      return ord[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return (size_t)-1;
}

/* Text of the note about workloads whose pods are gone. */
static void gone_note(const struct rs_report *r, const bool *found, size_t n_gone, char *out,
                      size_t outlen) {
  size_t len = 0, named = 0;
  int n = snprintf(out, outlen,
                   "%zu workload(s) keep an owner guessed from the pod name: the pod is no longer "
                   "in the Kubernetes API (",
                   n_gone);
  len = n > 0 ? (size_t)n : 0;
  for (size_t i = 0; i < r->n_workloads && named < RS_OWNERS_NOTE_NAMES && len < outlen; i++) {
    if (found[i])
      continue;
    n = snprintf(out + len, outlen - len, "%s%s/%s", named ? ", " : "", r->workloads[i].namespace_,
                 r->workloads[i].pod);
    len += n > 0 ? (size_t)n : 0;
    named++;
  }
  if (len < outlen && n_gone > named)
    len += (size_t)snprintf(out + len, outlen - len, " and %zu more", n_gone - named);
  if (len < outlen)
    snprintf(out + len, outlen - len, ").");
  if (len >= outlen && outlen > 4) /* cut mid-name: end it visibly */
    snprintf(out + outlen - 5, 5, "...)");
}

int rs_owners_apply(struct rs_report *r, const struct kube_pod_list *lists, size_t n_lists) {
  if (!r->n_workloads)
    return 0;
  size_t *ord = malloc(r->n_workloads * sizeof(*ord));
  bool *found = calloc(r->n_workloads, sizeof(*found));
  if (!ord || !found) {
    free(ord);
    free(found);
    return GS_ENOMEM;
  }
  for (size_t i = 0; i < r->n_workloads; i++)
    ord[i] = i;
  sort_r = r;
  qsort(ord, r->n_workloads, sizeof(*ord), cmp_widx);
  sort_r = NULL;
  for (size_t l = 0; l < n_lists; l++)
    for (size_t i = 0; i < lists[l].n; i++) {
      const struct kube_pod *p = &lists[l].items[i];
      size_t w = find_workload(r, ord, p->ns, p->name);
      if (w == (size_t)-1 || found[w])
        continue;
      found[w] = true;
      char owner[RS_NAME_MAX];
      rs_owner_from_kube(p, owner, sizeof(owner));
      const char *o = rs_report_str(r, owner, RS_NAME_MAX);
      if (!o) {
        free(ord);
        free(found);
        return GS_ENOMEM;
      }
      r->workloads[w].owner = o;
      r->workloads[w].owner_source = RS_OWNER_KUBE;
    }
  size_t n_gone = 0;
  for (size_t i = 0; i < r->n_workloads; i++)
    n_gone += !found[i];
  /* analyze.c's "guessed" note no longer holds: drop it, or let it name the pods that are gone. */
  size_t guess = r->n_notes;
  for (size_t i = 0; i < r->n_notes; i++)
    if (!strncmp(r->notes[i].text, RS_GUESS_NOTE_PREFIX, strlen(RS_GUESS_NOTE_PREFIX))) {
      guess = i;
      break;
    }
  int rc = 0;
  if (n_gone && guess < r->n_notes) {
    gone_note(r, found, n_gone, r->notes[guess].text, sizeof(r->notes[guess].text));
  } else if (n_gone) {
    char text[RS_TEXT_MAX];
    gone_note(r, found, n_gone, text, sizeof(text));
    rc = rs_report_note(r, "%s", text);
  } else if (guess < r->n_notes) {
    memmove(&r->notes[guess], &r->notes[guess + 1], (r->n_notes - guess - 1) * sizeof(r->notes[0]));
    r->n_notes--;
  }
  free(ord);
  free(found);
  return rc;
}

static void seterr(char *err, size_t errlen, const char *msg) {
  if (err && errlen)
    snprintf(err, errlen, "listing pods for workload owners: %s", msg);
}

/* Percent-encodes s (a continue token) into out; false when it does not fit. */
static bool url_escape(const char *s, char *out, size_t outlen) {
  static const char hex[] = "0123456789ABCDEF";
  size_t o = 0;
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '_' || c == '.' || c == '~';
    if (o + (plain ? 1 : 3) >= outlen)
      return false;
    if (plain) {
      out[o++] = (char)c;
    } else {
      out[o++] = '%';
      out[o++] = hex[c >> 4];
      out[o++] = hex[c & 15];
    }
  }
  out[o] = '\0';
  return true;
}

/* metadata.continue of a PodList body, copied into out ("" when absent). GS_EPARSE when the token
 * does not fit. */
static int continue_token(const char *body, size_t len, char *out, size_t outlen) {
  out[0] = '\0';
  struct json_tokener *tok = json_tokener_new();
  if (!tok)
    return GS_ENOMEM;
  json_object *o = json_tokener_parse_ex(tok, body, (int)len);
  json_tokener_free(tok);
  json_object *meta = NULL, *c = NULL;
  int rc = 0;
  if (o && json_object_object_get_ex(o, "metadata", &meta) &&
      json_object_object_get_ex(meta, "continue", &c) && json_object_is_type(c, json_type_string)) {
    const char *s = json_object_get_string(c);
    if (strlen(s) >= outlen)
      rc = GS_EPARSE;
    else
      snprintf(out, outlen, "%s", s);
  }
  json_object_put(o);
  return rc;
}

int rs_owners_fill(struct rs_report *r, struct kube_client *kc, char *err, size_t errlen) {
  if (err && errlen)
    err[0] = '\0';
  if (!r->n_workloads)
    return 0;
  struct kube_pod_list *lists = calloc(RS_OWNERS_MAX_PAGES, sizeof(*lists));
  char *cont = malloc(4096), *esc = malloc(3 * 4096), *path = malloc(3 * 4096 + 128);
  size_t n_lists = 0;
  int rc = lists && cont && esc && path ? 0 : GS_ENOMEM;
  if (cont)
    cont[0] = '\0';
  while (!rc) {
    if (n_lists == RS_OWNERS_MAX_PAGES) {
      if (err && errlen)
        snprintf(err, errlen, "listing pods for workload owners: more than %d pods",
                 RS_OWNERS_MAX_PAGES * RS_OWNERS_PAGE);
      rc = GS_ETOOBIG;
      break;
    }
    if (!url_escape(cont, esc, 3 * 4096)) {
      seterr(err, errlen, "continue token too long");
      rc = GS_EPARSE;
      break;
    }
    snprintf(path, 3 * 4096 + 128, "/api/v1/pods?limit=%d%s%s", RS_OWNERS_PAGE,
             cont[0] ? "&continue=" : "", esc);
    char *body = NULL;
    size_t len = 0;
    struct kube_result res;
    rc = kube_request(kc, "GET", path, NULL, NULL, &body, &len, &res);
    if (rc) {
      seterr(err, errlen, res.message);
      free(body);
      break;
    }
    const char *perr = "";
    rc = kube_pod_list_parse(body, len, &lists[n_lists], &perr);
    n_lists++;
    if (!rc)
      rc = continue_token(body, len, cont, 4096);
    free(body);
    if (rc) {
      seterr(err, errlen,
             rc == GS_EPARSE ? perr[0] ? perr : "bad continue token" : gs_strerror(rc));
      break;
    }
    if (!cont[0])
      break;
  }
  if (!rc)
    rc = rs_owners_apply(r, lists, n_lists);
  for (size_t i = 0; lists && i < n_lists; i++)
    kube_pod_list_free(&lists[i]);
  free(lists);
  free(cont);
  free(esc);
  free(path);
  return rc;
}
