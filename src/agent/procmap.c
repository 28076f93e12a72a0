/* Process -> pod map: cgroup paths give a process's pod UID, the kubelet's log directory names
 * give a UID's namespace and pod. Both are read from host paths mounted read-only. */
#include "agent/procmap.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"

/* Reads a UID (8-4-4-4-12 hex, separated by sep) at p; writes it with dashes, lower case. */
static bool read_uid(const char *p, const char *end, char sep, char uid[PROCMAP_UID_LEN]) {
  static const int group[] = {8, 4, 4, 4, 12};
  size_t k = 0;
  for (size_t g = 0; g < sizeof group / sizeof group[0]; g++) {
    if (g) {
      if (p >= end || *p != sep)
        return false;
      uid[k++] = '-';
      p++;
    }
    for (int i = 0; i < group[g]; i++, p++) {
      if (p >= end || !isxdigit((unsigned char)*p))
        return false;
      uid[k++] = (char)tolower((unsigned char)*p);
    }
  }
  /* the UID must end its path component: "/", ".slice", end of line */
  if (p < end && isxdigit((unsigned char)*p))
    return false;
  uid[k] = '\0';
  return true;
}

int procmap_uid_from_cgroup(const char *text, size_t len, char uid[PROCMAP_UID_LEN]) {
  const char *end = text + len;
  bool found = false;
  for (const char *p = text; p + 3 < end; p++) {
    if (p[0] != 'p' || p[1] != 'o' || p[2] != 'd')
      continue;
    /* "pod" must start a path component or follow the QoS slice name's '-' */
    if (p > text && p[-1] != '/' && p[-1] != '-')
      continue;
    char u[PROCMAP_UID_LEN];
    if (!read_uid(p + 3, end, '-', u) && !read_uid(p + 3, end, '_', u))
      continue;
    if (found && strcmp(u, uid) != 0)
      return GS_EPARSE;
    memcpy(uid, u, sizeof u);
    found = true;
  }
  return found ? 0 : GS_ENOTFOUND;
}

int procmap_parse_dir(const char *name, struct procmap_pod *out) {
  const char *a = strchr(name, '_');
  const char *b = strrchr(name, '_');
  if (!a || a == b || a == name || b == a + 1)
    return GS_EPARSE;
  size_t nl = (size_t)(a - name), pl = (size_t)(b - a - 1), ul = strlen(b + 1);
  if (nl >= sizeof out->ns || pl >= sizeof out->pod || ul != PROCMAP_UID_LEN - 1)
    return GS_EPARSE;
  if (!read_uid(b + 1, b + 1 + ul, '-', out->uid))
    return GS_EPARSE;
  memcpy(out->ns, name, nl);
  out->ns[nl] = '\0';
  memcpy(out->pod, a + 1, pl);
  out->pod[pl] = '\0';
  return 0;
}

static int cmp_pod(const void *x, const void *y) {
  return strcmp(((const struct procmap_pod *)x)->uid, ((const struct procmap_pod *)y)->uid);
}

int procmap_load(const char *dir, struct procmap *m) {
  memset(m, 0, sizeof *m);
  DIR *d = opendir(dir);
  if (!d)
    return GS_EIO;
  size_t cap = 0;
  int rc = 0;
  struct dirent *e;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    struct procmap_pod p;
    if (procmap_parse_dir(e->d_name, &p) != 0)
      continue;
    if (m->n == PROCMAP_MAX_PODS) {
      rc = GS_ETOOBIG;
      break;
    }
    if (m->n == cap) {
      size_t nc = cap ? cap * 2 : 64;
      struct procmap_pod *np = realloc(m->pods, nc * sizeof *np);
      if (!np) {
        rc = GS_ENOMEM;
        break;
      }
      m->pods = np;
      cap = nc;
    }
    m->pods[m->n++] = p;
  }
  closedir(d);
  if (rc) {
    procmap_free(m);
    return rc;
  }
  if (m->n)
    qsort(m->pods, m->n, sizeof *m->pods, cmp_pod);
  return 0;
}

const struct procmap_pod *procmap_find(const struct procmap *m, const char *uid) {
  if (!m->n)
    return NULL;
  struct procmap_pod key;
  snprintf(key.uid, sizeof key.uid, "%s", uid);
  return bsearch(&key, m->pods, m->n, sizeof *m->pods, cmp_pod);
}

void procmap_free(struct procmap *m) {
  if (!m)
    return;
  free(m->pods);
  m->pods = NULL;
  m->n = 0;
}

int procmap_pod_of_pid(const char *proc_root, uint32_t pid, const struct procmap *m,
                       const struct procmap_pod **out) {
  *out = NULL;
  char path[4096];
  int w = snprintf(path, sizeof path, "%s/%u/cgroup", proc_root, (unsigned)pid);
  if (w < 0 || (size_t)w >= sizeof path)
    return GS_EIO;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return GS_EIO;
  char *buf = malloc(PROCMAP_MAX_CGROUP);
  if (!buf) {
    close(fd);
    return GS_ENOMEM;
  }
  size_t len = 0;
  int rc = 0;
  while (len < PROCMAP_MAX_CGROUP) {
    ssize_t r = read(fd, buf + len, PROCMAP_MAX_CGROUP - len);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      rc = GS_EIO;
    if (r <= 0)
      break;
    len += (size_t)r;
  }
  /* a real cgroup file is a few lines: a longer one is not read in part (the pod line could be
   * past the cap, and the process would pass for a host process) */
  if (rc == 0 && len == PROCMAP_MAX_CGROUP) {
    char extra;
    ssize_t r;
    while ((r = read(fd, &extra, 1)) < 0 && errno == EINTR)
      ;
    rc = r > 0 ? GS_ETOOBIG : r < 0 ? GS_EIO : 0;
  }
  close(fd);
  char uid[PROCMAP_UID_LEN];
  if (rc == 0)
    rc = procmap_uid_from_cgroup(buf, len, uid);
  free(buf);
  if (rc)
    return rc;
  *out = procmap_find(m, uid);
  return *out ? 0 : GS_EUNAVAIL;
}
