#include "CHeapStats.h"
#include <malloc.h>

size_t strata_heap_bytes_in_use(void) {
    return mallinfo2().uordblks;
}
