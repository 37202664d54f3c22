/* Unit tests of the mappings placed for 2 MiB pages (common/hugemap.c): a
 * map of 2 MiB or more lands congruent to its file offset modulo 2 MiB,
 * holds exactly its bytes (the room taken to place it is given back), and
 * shows the file's bytes; a smaller one is a plain mmap. No daemon. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hugemap.h"

#define HUGE IVM_HUGE_PAGE_SIZE

/* 1 if the page at p is mapped in this process. */
static int page_mapped(const void *p)
{
    unsigned char v;

    return mincore((void *)((uintptr_t)p & ~(uintptr_t)4095), 4096, &v) == 0 || errno != ENOMEM;
}

/* Lines of /proc/self/maps: this process's mappings. */
static int count_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    int n = 0, c;

    cr_assert_not_null(f);
    while ((c = fgetc(f)) != EOF) {
        n += c == '\n';
    }
    fclose(f);
    return n;
}

Test(hugemap, placed_congruent_and_exact)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), fsize = 8 * HUGE;
    const struct {
        size_t off, len;
    } cases[] = {
        {0, HUGE}, {0, 3 * HUGE + page}, {page, 2 * HUGE}, {HUGE - page, 2 * HUGE + page},
        {3 * HUGE + 5 * page, HUGE + 7 * page}, {HUGE, 4 * HUGE},
    };
    int fd = memfd_create("test-hugemap", MFD_CLOEXEC);

    cr_assert_geq(fd, 0);
    cr_assert_eq(ftruncate(fd, (off_t)fsize), 0);
    for (size_t o = 0; o < fsize; o += page) {
        uint64_t v = o;
        cr_assert_eq(pwrite(fd, &v, sizeof(v), (off_t)o), (ssize_t)sizeof(v));
    }
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        size_t off = cases[i].off, len = cases[i].len;
        unsigned char *m = ivm_hugemap_mmap(len, PROT_READ, MAP_SHARED, fd, (off_t)off);

        cr_assert(m != MAP_FAILED, "case %zu: %s", i, strerror(errno));
        cr_assert_eq((uintptr_t)m % HUGE, off % HUGE, "case %zu: %p for offset %zu", i,
                     (void *)m, off);
        for (size_t k = 0; k < len; k += page) {
            uint64_t v;
            memcpy(&v, m + k, sizeof(v));
            cr_assert_eq(v, off + k, "case %zu: page %zu holds %llu", i, k / page,
                         (unsigned long long)v);
        }
        cr_assert(page_mapped(m) && page_mapped(m + len - 1));
        cr_assert(!page_mapped(m - page), "case %zu: the page before the map is mapped", i);
        cr_assert(!page_mapped(m + len), "case %zu: the page after the map is mapped", i);
        cr_assert_eq(munmap(m, len), 0);
    }
    close(fd);
}

Test(hugemap, small_maps_and_errors)
{
    int fd = memfd_create("test-hugemap", MFD_CLOEXEC), before;
    unsigned char *m;

    cr_assert_geq(fd, 0);
    cr_assert_eq(ftruncate(fd, (off_t)HUGE), 0);
    m = ivm_hugemap_mmap(HUGE - 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 4096);
    cr_assert(m != MAP_FAILED);
    m[0] = 1;
    cr_assert_eq(munmap(m, HUGE - 4096), 0);
    /* A failing map (no file) fails as mmap does and leaves no mapping. */
    before = count_maps();
    errno  = 0;
    cr_assert(ivm_hugemap_mmap(2 * HUGE, PROT_READ | PROT_WRITE, MAP_SHARED, -1, 0) ==
              MAP_FAILED);
    cr_assert_eq(errno, EBADF);
    cr_assert_eq(count_maps(), before);
    close(fd);
}
