/* Guards around ROCm SMI's asserting calls (see rocm_guard.h). */
#include "collect/rocm_guard.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/err.h"

/* True when name is prefix followed by decimal digits only. */
static bool numbered(const char *name, const char *prefix) {
  size_t n = strlen(prefix);
  if (strncmp(name, prefix, n) != 0 || name[n] == '\0')
    return false;
  for (const char *p = name + n; *p; p++)
    if (*p < '0' || *p > '9')
      return false;
  return true;
}

/* What ROCm SMI 5.2 takes for an AMD GPU's card (rocm_smi_main.cc isAMDGPU): device/vendor
 * 0x1002 and a device/vbios_version file. */
static bool looks_amd(const char *card) {
  char p[1024], vendor[32] = "";
  struct stat st;
  snprintf(p, sizeof p, "%s/device/vbios_version", card);
  if (stat(p, &st) != 0)
    return false;
  snprintf(p, sizeof p, "%s/device/vendor", card);
  FILE *f = fopen(p, "r");
  if (!f)
    return false;
  if (!fgets(vendor, sizeof vendor, f))
    vendor[0] = '\0';
  fclose(f);
  return strncmp(vendor, "0x1002", 6) == 0;
}

/* True when some element of path has the form XXXX:XX:XX.X in lower-case hex, the PCI address
 * ROCm SMI 5.2 looks for in a card link's target (rocm_smi_main.cc bdfid_from_path). */
static bool has_pci_element(const char *path) {
  static const char shape[] = "hhhh:hh:hh.h";
  const char *p = path;
  while (*p) {
    const char *e = strchr(p, '/');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == sizeof shape - 1) {
      size_t i = 0;
      for (; i < len; i++) {
        char c = p[i];
        bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        if (shape[i] == 'h' ? !hex : c != shape[i])
          break;
      }
      if (i == len)
        return true;
    }
    if (!e)
      break;
    p = e + 1;
  }
  return false;
}

bool rocm_guard_init_ok(const char *root, char *why, size_t whylen) {
  char path[512];
  snprintf(path, sizeof path, "%s/class/drm", root);
  DIR *d = opendir(path);
  if (d) {
    struct dirent *e;
    bool ok = true;
    while (ok && (e = readdir(d))) {
      if (!numbered(e->d_name, "card"))
        continue;
      char p[768];
      struct stat st;
      snprintf(p, sizeof p, "%s/%s", path, e->d_name);
      if (lstat(p, &st) == 0 && !S_ISLNK(st.st_mode) && looks_amd(p)) {
        snprintf(why, whylen,
                 "%s is an AMD GPU's DRM card but not a symbolic link (ROCm SMI's rsmi_init "
                 "asserts that it is one, and would abort the agent)",
                 p);
        ok = false;
      }
      char target[1024];
      ssize_t tn = ok && lstat(p, &st) == 0 && S_ISLNK(st.st_mode) && looks_amd(p)
                       ? readlink(p, target, sizeof target - 1)
                       : -1;
      if (tn > 0) {
        target[tn] = '\0';
        if (!has_pci_element(target)) {
          snprintf(why, whylen,
                   "%s is an AMD GPU's DRM card whose link target (%.200s) holds no PCI address "
                   "XXXX:XX:XX.X (ROCm SMI's rsmi_init would loop forever looking for one)",
                   p, target);
          ok = false;
        }
      }
    }
    closedir(d);
    if (!ok)
      return false;
  }
  snprintf(path, sizeof path, "%s/class/kfd/kfd/topology/nodes", root);
  d = opendir(path);
  if (!d)
    return true;
  struct dirent *e;
  bool ok = true;
  while (ok && (e = readdir(d))) {
    if (!numbered(e->d_name, ""))
      continue;
    char p[1100];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s/io_links", path, e->d_name);
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
      snprintf(why, whylen,
               "%s is missing (ROCm SMI's rsmi_init asserts that every KFD topology node has "
               "one, and would abort the agent)",
               p);
      ok = false;
    }
  }
  closedir(d);
  return ok;
}

void rocm_format_bdf(uint64_t bdfid, char *out, size_t outlen) {
  snprintf(out, outlen, "%04x:%02x:%02x.%x", (unsigned)((bdfid >> 32) & 0xffffffffu),
           (unsigned)((bdfid >> 8) & 0xffu), (unsigned)((bdfid >> 3) & 0x1fu),
           (unsigned)(bdfid & 0x7u));
}

int rocm_guard_card(const char *root, const char *pci, char *dir, size_t dirlen) {
  char path[512];
  snprintf(path, sizeof path, "%s/class/drm", root);
  DIR *d = opendir(path);
  if (!d)
    return -1;
  struct dirent *e;
  int found = -1;
  while ((e = readdir(d))) {
    if (!numbered(e->d_name, "card"))
      continue;
    char p[768], target[1024];
    snprintf(p, sizeof p, "%s/%s", path, e->d_name);
    ssize_t n = readlink(p, target, sizeof target - 1);
    if (n <= 0)
      continue;
    target[n] = '\0';
    if (!strstr(target, pci))
      continue;
    found = (int)strtol(e->d_name + 4, NULL, 10);
    snprintf(dir, dirlen, "%s/device", p);
    break;
  }
  closedir(d);
  return found;
}

bool rocm_guard_hwmon_ok(const char *devdir) {
  char path[1024];
  snprintf(path, sizeof path, "%s/hwmon", devdir);
  DIR *d = opendir(path);
  if (!d)
    return false;
  struct dirent *e;
  bool ok = false;
  while (!ok && (e = readdir(d))) {
    if (!numbered(e->d_name, "hwmon"))
      continue;
    char p[1400], name[64] = "";
    snprintf(p, sizeof p, "%s/%s/name", path, e->d_name);
    FILE *f = fopen(p, "r");
    if (!f)
      continue;
    if (fgets(name, sizeof name, f))
      name[strcspn(name, "\n")] = '\0';
    fclose(f);
    ok = strcmp(name, "amdgpu") == 0;
  }
  closedir(d);
  return ok;
}

bool rocm_guard_present(const char *devdir) {
  struct stat st;
  return stat(devdir, &st) == 0;
}

int rocm_guard_probe(int (*fn)(void *arg), void *arg, int timeout_ms, char *why, size_t whylen) {
  int fds[2];
  if (pipe(fds) != 0) {
    snprintf(why, whylen, "pipe: %s", strerror(errno));
    return GS_EIO;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    snprintf(why, whylen, "fork: %s", strerror(errno));
    return GS_EIO;
  }
  if (pid == 0) {
    close(fds[0]);
    int rc = fn(arg);
    /* The pipe closes at exit: the parent then knows the child finished. */
    _exit(rc == 0 ? 0 : 1);
  }
  close(fds[1]);
  struct pollfd p = {.fd = fds[0], .events = POLLIN};
  int n;
  do
    n = poll(&p, 1, timeout_ms);
  while (n < 0 && errno == EINTR);
  close(fds[0]);
  int status = 0;
  if (n == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    snprintf(why, whylen, "did not finish within %d ms", timeout_ms);
    return GS_EUNAVAIL;
  }
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (WIFSIGNALED(status)) {
    snprintf(why, whylen, "killed the probe process with signal %d (%s)", WTERMSIG(status),
             strsignal(WTERMSIG(status)));
    return GS_EIO;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    snprintf(why, whylen, "failed in the probe process (exit %d)",
             WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return GS_EIO;
  }
  return 0;
}
