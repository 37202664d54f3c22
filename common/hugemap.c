/* Mappings placed for 2 MiB pages (hugemap.h). */
#include "hugemap.h"

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

void *ivm_hugemap_mmap(size_t len, int prot, int flags, int fd, off_t off)
{
    const size_t huge = IVM_HUGE_PAGE_SIZE;
    uintptr_t lo, at;
    void *span, *map;
    int err;

    if (len < huge || len > SIZE_MAX - huge) {
        return mmap(NULL, len, prot, flags, fd, off);
    }
    /* Room for len bytes at any congruence, taken then trimmed: the span
       holds the place, so the fixed mapping replaces only our own pages. */
    span = mmap(NULL, len + huge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                0);
    if (span == MAP_FAILED) {
        return mmap(NULL, len, prot, flags, fd, off);
    }
    lo  = (uintptr_t)span;
    at  = lo + (((uintptr_t)off % huge) + huge - lo % huge) % huge;
    map = mmap((void *)at, len, prot, flags | MAP_FIXED, fd, off);
    if (map == MAP_FAILED) {
        err = errno;
        munmap(span, len + huge);
        errno = err;
        return MAP_FAILED;
    }
    if (at > lo) {
        munmap(span, at - lo);
    }
    if (lo + len + huge > at + len) {
        munmap((void *)(at + len), lo + len + huge - (at + len));
    }
    return map;
}
