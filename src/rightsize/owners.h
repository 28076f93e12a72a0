/* Workload owners from the Kubernetes API: one cluster-wide pod list (paged, size-capped) replaces
 * the pod-name guesses of analyze.c with each pod's controller ownerReference.
 *
 * Only `pods list` is needed (gpuscale's RBAC has no ReplicaSet or Deployment read), so the owner
 * is what the pod itself says:
 *  - "<Kind>/<name>" of the ownerReference with controller=true, e.g. "StatefulSet/db",
 *    "Job/train-42", "ReplicaSet/vllm-7f9c8d";
 *  - "Deployment/<d> (ReplicaSet/<d>-<hash>)" when that ReplicaSet's name is "<d>-<hash>" and the
 *    pod's label pod-template-hash is exactly <hash>: the Deployment controller names its
 *    ReplicaSets so and sets that label, so the Deployment name is read, not guessed. A ReplicaSet
 *    made by hand (no such label, or a different one) stays "ReplicaSet/<name>";
 *  - "Pod/<name>" for a pod with no controller (a bare pod).
 * Such workloads get RS_OWNER_KUBE. A workload whose pod is no longer in the API (it ended inside
 * the analysed window) keeps its name-based guess, and a report note names it. */
#ifndef GS_RIGHTSIZE_OWNERS_H
#define GS_RIGHTSIZE_OWNERS_H

#include <stddef.h>

#include "rightsize/kube.h"
#include "rightsize/model.h"

#define RS_OWNERS_PAGE 500 /* pods per page (?limit=) */
#define RS_OWNERS_MAX_PAGES                                                                        \
  400                          /* at most this many pages (200k pods); each page is also capped    \
                                  by the client's max_body */
#define RS_OWNERS_NOTE_NAMES 5 /* pods named in the "pod gone" note; the rest are counted */

/* Lists every pod once (GET /api/v1/pods?limit=RS_OWNERS_PAGE, following metadata.continue) and
 * sets the owner of each workload whose namespace/pod is found. Nothing in r changes unless the
 * whole list was read. Returns 0; or kube_request's codes, GS_EPARSE (a malformed answer) or
 * GS_ETOOBIG (more than RS_OWNERS_MAX_PAGES pages), with a message in err; or GS_ENOMEM. */
int rs_owners_fill(struct rs_report *r, struct kube_client *kc, char *err, size_t errlen);

/* The matching step of rs_owners_fill on pod lists already read (exported for tests): sets owners
 * from pods[0..n_lists) and rewrites the owner notes. Returns 0 or GS_ENOMEM. */
int rs_owners_apply(struct rs_report *r, const struct kube_pod_list *lists, size_t n_lists);

/* Writes one pod's owner as described above into out. */
void rs_owner_from_kube(const struct kube_pod *p, char *out, size_t outlen);

#endif
