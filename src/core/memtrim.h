/* Giving freed heap memory back to the kernel.
 *
 * glibc keeps what a burst freed: a free block at the top of an arena is only given back once it
 * passes the trim threshold, and that threshold rises (to twice the size) every time a large block
 * is freed, so one start-up buffer or one burst of concurrent gRPC calls leaves the process tens of
 * MiB bigger for good, none of it in use (docs/bench.md, "Soak"). malloc_trim(0) gives back every
 * whole free page of every arena. The long-running commands call mem_release once their start-up
 * is done and then every MEM_RELEASE_EVERY_MS from their main thread, which is otherwise idle
 * (serve_wait), so no request path ever waits for it. Without glibc these do nothing. */
#ifndef GS_MEMTRIM_H
#define GS_MEMTRIM_H

#include <stdbool.h>
#include <stddef.h>

/* How often serve_wait checks, and how much freed memory the allocator must hold for a trim to
 * be worth its cost (each trim walks every free block; a page given back costs a fault when it
 * is used again). */
#define MEM_RELEASE_EVERY_MS 10000
#define MEM_RELEASE_MIN_FREE ((size_t)2 << 20)

/* Bytes the allocator holds free (every arena), or 0 where it cannot say. */
size_t mem_free_held(void);
/* Gives freed memory back if the allocator holds at least min_free bytes free (0: always).
 * Returns true when it trimmed. Thread-safe. */
bool mem_release(size_t min_free);

#endif
