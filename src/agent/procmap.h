/* Process -> pod: the pod UID in a process's cgroup path (host /proc mounted read-only), and
 * pod UID -> (namespace, pod) from the kubelet's log directory names (/var/log/pods), for
 * splitting a shared GPU by NVML per-process utilisation. */
#ifndef GS_PROCMAP_H
#define GS_PROCMAP_H

#include <stddef.h>
#include <stdint.h>

#include "core/attrib.h"

#define PROCMAP_UID_LEN 37       /* 8-4-4-4-12 hex digits and dashes, NUL */
#define PROCMAP_MAX_CGROUP 65536 /* bytes of /proc/<pid>/cgroup read at most */
#define PROCMAP_MAX_PODS 100000  /* pod directories read at most */
#define PROCMAP_DEFAULT_LOGS "/var/log/pods"

/* Finds the pod UID in the text of a /proc/<pid>/cgroup file: "pod<uid>" in any line, with the
 * cgroupfs driver's dashes (kubepods/burstable/pod1b2c...-.../<container>) or the systemd
 * driver's underscores (kubepods-burstable-pod1b2c..._..._....slice), under cgroup v1 or v2 and
 * with or without a cgroup namespace's "/.." prefix. Writes the UID with dashes, lower case.
 * Returns 0, GS_ENOTFOUND when no line names a pod (a host process), or GS_EPARSE when lines
 * name two different pods. */
int procmap_uid_from_cgroup(const char *text, size_t len, char uid[PROCMAP_UID_LEN]);

/* One pod the kubelet keeps logs for. */
struct procmap_pod {
  char uid[PROCMAP_UID_LEN];
  char ns[64];
  char pod[254];
};

/* UID -> pod, sorted by uid. */
struct procmap {
  struct procmap_pod *pods; /* owned */
  size_t n;
};

/* Parses one /var/log/pods entry name, "<namespace>_<pod>_<uid>" (names cannot hold '_').
 * Returns 0, or GS_EPARSE for any other name (too long, no UID, an empty part). */
int procmap_parse_dir(const char *name, struct procmap_pod *out);
/* Reads the entries of dir (the kubelet's pod log directory) into *m, which must be zeroed or
 * freed. Entries that are not "<namespace>_<pod>_<uid>" are skipped. Returns 0, GS_EIO (dir
 * unreadable; errno kept), GS_ETOOBIG (over PROCMAP_MAX_PODS) or GS_ENOMEM. */
int procmap_load(const char *dir, struct procmap *m);
/* The pod of uid, or NULL. */
const struct procmap_pod *procmap_find(const struct procmap *m, const char *uid);
/* Frees m->pods and zeroes m. NULL is fine. */
void procmap_free(struct procmap *m);

/* The pod running host process pid: reads <proc_root>/<pid>/cgroup and looks its UID up in m.
 * Returns 0 with *out set, GS_ENOTFOUND when the process is in no pod (its cgroup names none),
 * GS_EUNAVAIL when it names a pod that m does not know (a pod newer than the map), GS_EIO when the
 * file cannot be read (the process ended, or /proc is not the host's), GS_ETOOBIG when the file is
 * longer than PROCMAP_MAX_CGROUP (not read in part), or GS_EPARSE. */
int procmap_pod_of_pid(const char *proc_root, uint32_t pid, const struct procmap *m,
                       const struct procmap_pod **out);

#endif
