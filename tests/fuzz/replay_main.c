/* Replays every file of a saved fuzz corpus through LLVMFuzzerTestOneInput (no libFuzzer needed).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int main(int argc, char **argv);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return 1;
  }
  uint8_t *data = malloc(1 << 20);
  size_t n = data ? fread(data, 1, 1 << 20, f) : 0;
  fclose(f);
  if (!data)
    return 1;
  LLVMFuzzerTestOneInput(data, n);
  free(data);
  return 0;
}

int main(int argc, char **argv) {
  int files = 0, bad = 0;
  for (int a = 1; a < argc; a++) {
    DIR *d = opendir(argv[a]);
    if (!d) {
      bad += run_file(argv[a]);
      files++;
      continue;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
      if (e->d_name[0] == '.')
        continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
      bad += run_file(path);
      files++;
    }
    closedir(d);
  }
  printf("replayed %d inputs, %d unreadable\n", files, bad);
  return (bad || files == 0) ? 1 : 0;
}
