#ifndef CHEAPSTATS_H
#define CHEAPSTATS_H
#include <stddef.h>

/// Bytes the process's malloc heap holds in allocated blocks (glibc `mallinfo2().uordblks`).
size_t strata_heap_bytes_in_use(void);

#endif
