/* A small Kubernetes REST client (libcurl + json-c): access config, the node and pod calls a drain
 * needs, and parsers for the Node, PodList and Status shapes. */
#ifndef GS_RIGHTSIZE_KUBE_H
#define GS_RIGHTSIZE_KUBE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Default service account directory of an in-cluster pod. */
#define KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
/* Largest answer read from the API server; a bigger one fails with GS_ETOOBIG. */
#define KUBE_MAX_BODY (32u * 1024u * 1024u)
/* Largest kubeconfig, token file and in-cluster CA file read; a bigger one fails with GS_ETOOBIG.
 * (Certificate and key files a kubeconfig names are read by libcurl.) */
#define KUBE_FILE_MAX (4u * 1024u * 1024u)

/* How to reach and authenticate to one API server. All strings are owned (kube_config_free). */
struct kube_config {
  char *server;       /* "https://host:port", no trailing slash */
  char *token;        /* bearer token, or NULL */
  char *token_file;   /* re-read before each request when set (rotating SA tokens), or NULL */
  char *ca_file;      /* PEM file the server certificate must chain to, or NULL */
  char *ca_data;      /* PEM text (decoded certificate-authority-data), or NULL */
  char *cert_file;    /* client certificate (PEM file), or NULL */
  char *cert_data;    /* client certificate (PEM text), or NULL */
  char *key_file;     /* client key (PEM file), or NULL */
  char *key_data;     /* client key (PEM text), or NULL */
  char *source;       /* where this came from, for messages: "in-cluster", "kubeconfig PATH" */
  bool insecure;      /* insecure-skip-tls-verify: true in the kubeconfig (logged as a warning) */
  int64_t timeout_ms; /* per request; 0 means 30 s */
  size_t max_body;    /* answer cap; 0 means KUBE_MAX_BODY */
};

/* Reads a kubeconfig (YAML): the context named `context`, or current-context when NULL. Relative
 * file paths are taken from the kubeconfig's directory, as kubectl does. Returns 0, GS_EIO
 * (unreadable), GS_ETOOBIG (over KUBE_FILE_MAX), GS_EPARSE (not YAML / missing pieces) or
 * GS_ENOTSUP (exec or auth-provider plugins, basic auth), with a message in err. Call
 * kube_config_free after, also on failure. */
int kube_config_from_kubeconfig(const char *path, const char *context, struct kube_config *out,
                                char *err, size_t errlen);
/* As above, from YAML text already in memory (dir: base for relative paths, may be NULL). */
int kube_config_from_yaml(const char *text, size_t len, const char *dir, const char *context,
                          struct kube_config *out, char *err, size_t errlen);
/* In-cluster: KUBERNETES_SERVICE_HOST/PORT, then sa_dir/token and sa_dir/ca.crt (sa_dir NULL
 * means KUBE_SA_DIR). Returns 0, GS_EUNAVAIL (not in a cluster: variables unset), GS_EIO or
 * GS_ETOOBIG (a file over KUBE_FILE_MAX). */
int kube_config_in_cluster(const char *sa_dir, struct kube_config *out, char *err, size_t errlen);
/* kubectl's order: `kubeconfig` when given; else in-cluster when KUBERNETES_SERVICE_HOST is set
 * (service account directory from $GPUSCALE_KUBE_SA_DIR, else KUBE_SA_DIR); else $KUBECONFIG
 * (its first path); else ~/.kube/config. Same returns as the loaders. */
int kube_config_load(const char *kubeconfig, struct kube_config *out, char *err, size_t errlen);
/* The access --kube-api asks for: "off" (none); "auto" (in-cluster when KUBERNETES_SERVICE_HOST
 * is set, else none; an unusable service account is none, with msg); or a kubeconfig path (errors
 * are errors). need_node: the caller works for one node, whose name (node) must then be a DNS-1123
 * name. Returns 0 with *have true and *cfg filled (kube_config_free after); 0 with *have false and
 * msg saying why; or GS_EINVAL (empty mode, bad node name), GS_EIO, GS_EPARSE, GS_ENOTSUP or
 * GS_ENOMEM with msg. */
int kube_access(const char *mode, bool need_node, const char *node, struct kube_config *cfg,
                bool *have, char *msg, size_t msglen);
/* Frees the owned strings; the struct may be reused. kube_config_free(NULL) is fine. */
void kube_config_free(struct kube_config *c);
/* The bearer token of the next request: token_file read again (service account tokens rotate,
 * at most KUBE_FILE_MAX), else token; trailing whitespace cut. *tok is NULL when there is none.
 * Returns 0, GS_EIO, GS_ETOOBIG or GS_ENOMEM. The caller frees *tok. */
int kube_config_token(const struct kube_config *c, char **tok);

/* What the last call got back, for messages and the audit record. */
struct kube_result {
  long http_status;       /* 0 when no HTTP answer came (connection, TLS, timeout) */
  char reason[64];        /* Status.reason ("NotFound", "TooManyRequests"...) or "" */
  char message[512];      /* one line: the method, path, status and the server's message */
  int64_t retry_after_ms; /* Retry-After header, or 0 */
};

struct kube_client;

/* Opens a client (one curl handle, kept alive). The config is copied. Returns 0, GS_ENOMEM or
 * GS_EINVAL (no server). Free with kube_client_free. */
int kube_client_new(const struct kube_config *cfg, struct kube_client **out);
void kube_client_free(struct kube_client *c);

/* Raw call: method, path ("/api/v1/..."), optional body and its content type. On 2xx stores the
 * answer (caller frees) in *resp when resp != NULL. Returns 0 on 2xx; else GS_ENOTFOUND (404),
 * GS_EUNAVAIL (429, 5xx, no answer), GS_EINVAL (other 4xx: 401, 403, 409, 422), GS_ETOOBIG (answer
 * over the cap), with res filled in every case. */
int kube_request(struct kube_client *c, const char *method, const char *path, const char *body,
                 const char *content_type, char **resp, size_t *resp_len, struct kube_result *res);

/* LeaderWorkerSet's pod labels and annotation (kubernetes-sigs/lws
 * api/leaderworkerset/v1/leaderworkerset_types.go: WorkerIndexLabelKey, the leader's being always
 * "0"; GroupUniqueHashLabelKey, the same on every pod of one group; LeaderPodNameAnnotationKey,
 * on the workers). */
#define KUBE_LWS_WORKER_INDEX "leaderworkerset.sigs.k8s.io/worker-index"
#define KUBE_LWS_GROUP_KEY "leaderworkerset.sigs.k8s.io/group-key"
#define KUBE_LWS_LEADER_NAME "leaderworkerset.sigs.k8s.io/leader-name"

/* One annotation or label. */
struct kube_kv {
  char *key;
  char *value;
};

/* The parts of a v1 Node the drain reads. */
struct kube_node {
  char *name;
  char *uid;
  bool unschedulable;
  struct kube_kv *annotations;
  size_t n_annotations;
};

/* One status.containerStatuses[] entry of a pod. */
struct kube_container_status {
  char *name;
  bool ready;
  int restarts;      /* restartCount */
  const char *state; /* "waiting", "running", "terminated" (static), or NULL when not said */
  char *reason;      /* the state's reason ("CrashLoopBackOff", "ContainerCreating", "Error",
                        "OOMKilled"...), or NULL */
  int exit_code;     /* terminated: its exitCode, when has_exit_code */
  bool has_exit_code;
};
/* Containers of one pod kept; more are left out (a pod's readiness is its condition's). */
#define KUBE_POD_MAX_CONTAINERS 32

/* The parts of a v1 Pod the drain and the agent read. */
struct kube_pod {
  char *ns;
  char *name;
  char *uid;
  char *phase;         /* "Running", "Succeeded"... or "" */
  char *owner_kind;    /* kind of the ownerReference with controller=true, or NULL */
  char *owner_name;    /* its name, or NULL */
  char *template_hash; /* label pod-template-hash (set by the Deployment controller), or NULL */
  bool terminating;    /* metadata.deletionTimestamp is set */
  char *local_volume;  /* the first volume whose data lives and dies with the pod on this node
                          (emptyDir, or a generic ephemeral volume), or NULL when none */
  struct kube_kv *annotations;
  size_t n_annotations;
  char *pod_ip;           /* status.podIP, or NULL before the pod has one */
  char *node_name;        /* spec.nodeName, or NULL when not scheduled */
  char *resource_version; /* metadata.resourceVersion, or NULL */
  struct kube_kv *labels; /* metadata.labels (look up with kube_annotation) */
  size_t n_labels;
  /* status.conditions[type=Ready]: ready when its status is "True". has_ready_condition is false
   * when the pod has no such condition (not scheduled yet): not ready either. */
  bool ready;
  bool has_ready_condition;
  char *ready_reason; /* the condition's reason when not ready ("ContainersNotReady"...), or NULL */
  struct kube_container_status *containers; /* status.containerStatuses, in the API's order */
  size_t n_containers;
};

struct kube_pod_list {
  struct kube_pod *items;
  size_t n;
  char *resource_version; /* the list's metadata.resourceVersion (where a watch starts), or NULL */
};

/* Parses a v1 Node. Returns 0 or GS_EPARSE (err says what is wrong: not JSON, not a Node, no
 * name...), GS_ENOMEM. Call kube_node_free after, also on failure. */
int kube_node_parse(const char *json, size_t len, struct kube_node *out, const char **err);
void kube_node_free(struct kube_node *n);
/* Parses a v1 PodList. Same contract as kube_node_parse. */
int kube_pod_list_parse(const char *json, size_t len, struct kube_pod_list *out, const char **err);
void kube_pod_list_free(struct kube_pod_list *l);
/* Looks up an annotation (or a label, in the labels array); NULL when absent. */
const char *kube_annotation(const struct kube_kv *a, size_t n, const char *key);
/* True when s is a valid DNS-1123 subdomain (node, pod and namespace names): the only names the
 * client puts into a path. */
bool kube_name_valid(const char *s);

/* GET /api/v1/nodes/{name}, parsed. Returns kube_request's codes, or GS_EPARSE for a malformed
 * answer (res->message says so). Call kube_node_free after. */
int kube_get_node(struct kube_client *c, const char *name, struct kube_node *out,
                  struct kube_result *res);
/* PATCH the node (strategic merge patch): spec.unschedulable=true, and each annotation in ann
 * set (value non-NULL) or removed (value NULL). n_ann may be 0. */
int kube_cordon_node(struct kube_client *c, const char *name, const struct kube_kv *ann,
                     size_t n_ann, struct kube_result *res);
/* PATCH only the annotations of a node (merge patch; value NULL removes the key). */
int kube_annotate_node(struct kube_client *c, const char *name, const struct kube_kv *ann,
                       size_t n_ann, struct kube_result *res);
/* GET /api/v1/pods?fieldSelector=spec.nodeName={node}, parsed, every namespace. */
int kube_list_pods_on_node(struct kube_client *c, const char *node, struct kube_pod_list *out,
                           struct kube_result *res);
/* Releases one pod's strings (kube_pod_list_free does it for each item). NULL is fine. */
void kube_pod_free(struct kube_pod *p);

/* One event of a pod watch: type is "ADDED", "MODIFIED" or "DELETED" (the pod as the API sent it).
 * Returning non-zero ends the watch (kube_watch_pods_on_node then returns that value). */
typedef int (*kube_watch_fn)(void *ud, const char *type, const struct kube_pod *pod);
/* Largest single watch event accepted (one JSON line); a longer one ends the watch, GS_ETOOBIG. */
#define KUBE_WATCH_MAX_EVENT (4u * 1024u * 1024u)
/* GET /api/v1/pods?fieldSelector=spec.nodeName={node}&watch=1&resourceVersion={rv}
 * &allowWatchBookmarks=true&timeoutSeconds={timeout_s}: calls fn for each event as it streams in,
 * and keeps rv (capacity rvlen, in and out) at the newest resourceVersion seen (BOOKMARK events
 * included), so that the caller can watch again from there. Returns 0 when the server ended the
 * watch (its timeout), the callback's value, or an error: an ERROR event (the Status's code in
 * res->http_status: 410 Gone means rv is too old, list again) is GS_EUNAVAIL, a malformed event is
 * GS_EPARSE, kube_request's codes for a refused request. *stop (may be NULL) is polled about once
 * a second: when it turns true the watch ends with 0. The client's timeout_ms does not apply; the
 * transfer is limited to timeout_s + 30 s. */
int kube_watch_pods_on_node(struct kube_client *c, const char *node, char *rv, size_t rvlen,
                            int timeout_s, kube_watch_fn fn, void *ud, const atomic_bool *stop,
                            struct kube_result *res);

/* POST a policy/v1 Eviction for the pod. 201/200: 0. 429 (a PodDisruptionBudget forbids it now):
 * GS_EUNAVAIL with res->http_status 429; the caller retries. */
int kube_evict_pod(struct kube_client *c, const char *ns, const char *name,
                   struct kube_result *res);

/* A core/v1 Event about a Node. */
struct kube_event {
  const char *node;
  const char *node_uid; /* may be NULL */
  const char *type;     /* "Normal" or "Warning" */
  const char *reason;   /* "GpuscaleDrainCordon"... */
  const char *message;
};
/* POST /api/v1/namespaces/default/events (node events live in "default", as the kubelet's). */
int kube_post_event(struct kube_client *c, const struct kube_event *ev, struct kube_result *res);

/* Builds the Event JSON body (exported for tests). now_ms: wall clock. Caller frees. */
char *kube_event_json(const struct kube_event *ev, int64_t now_ms);

#endif
