/* Giving freed heap memory back to the kernel (memtrim.h). */
#include "core/memtrim.h"

#include <stdlib.h> /* defines __GLIBC__ where it is glibc */
#if defined(__GLIBC__)
#include <malloc.h>
#endif

size_t mem_free_held(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 mi = mallinfo2();
  return mi.fordblks; /* fsmblks, the fastbins' share, is already in it */
#else
  return 0;
#endif
}

bool mem_release(size_t min_free) {
#if defined(__GLIBC__)
  if (min_free > 0 && mem_free_held() < min_free)
    return false;
  malloc_trim(0);
  return true;
#else
  (void)min_free;
  return false;
#endif
}
