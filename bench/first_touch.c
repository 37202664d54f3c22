/*
 * bench-first-touch: what a fresh process pays to read shared memory whose
 * page table entries it already has.
 *
 * A PE of a DS-LB app is a fresh process that maps its part of an object
 * (MAP_SHARED, MAP_POPULATE up to IVM_MAP_POPULATE bytes, as libivm does)
 * and reads it once. On bare metal or a VM with hardware-assisted paging the
 * read runs at cache or memory speed. On a VM whose hypervisor shadows the
 * guest's page tables, each page's first access in a new address space
 * exits to the hypervisor although the guest's entry is present; the guest
 * sees that time inside the instruction that touched the page (a profile
 * shows it in the app's own kernel). This program measures it: per round, a
 * fresh fork child maps MiB of a memfd with MAP_POPULATE, reads one byte per
 * page twice and reports both passes; the parent's own anonymous memory,
 * read twice, is the baseline.
 *
 * Run:  bench-first-touch [-m MIB (6)] [-r ROUNDS (7)]
 * Prints each round and "RESULT first-touch ..." with the medians, in us per
 * page.
 */

#define _POSIX_C_SOURCE 200809L

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"

#define FT_PAGE       4096u
#define FT_ROUNDS_MAX 101

/* One read of a byte per page; the sum keeps the loads. */
static unsigned long ft_pass(const volatile unsigned char *p, size_t len)
{
    unsigned long sum = 0;

    for (size_t off = 0; off < len; off += FT_PAGE) {
        sum += p[off];
    }
    return sum;
}

/* The fork child: map, two passes, the times through the pipe. */
static void ft_child(int fd, size_t len, int out)
{
    double t[3], us[2];
    unsigned char *m = mmap(NULL, len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
    unsigned long sum;

    if (m == MAP_FAILED) {
        _exit(1);
    }
    t[0]  = bench_now_ns();
    sum   = ft_pass(m, len);
    t[1]  = bench_now_ns();
    sum  += ft_pass(m, len);
    t[2]  = bench_now_ns();
    us[0] = (t[1] - t[0]) / 1e3;
    us[1] = (t[2] - t[1]) / 1e3;
    if (write(out, us, sizeof(us)) != (ssize_t)sizeof(us) || sum == 1) {
        _exit(1);
    }
    _exit(0);
}

int main(int argc, char **argv)
{
    double first[FT_ROUNDS_MAX], second[FT_ROUNDS_MAX], anon[FT_ROUNDS_MAX], us[2], t0;
    bench_stats_t st[3];
    size_t len, pages;
    int mib = 6, rounds = 7, opt, fd, pfd[2], status;
    unsigned char *own;
    pid_t pid;

    while ((opt = getopt(argc, argv, "m:r:")) != -1) {
        if (opt == 'm') {
            mib = bench_parse_int(optarg, 1);
        } else if (opt == 'r') {
            rounds = bench_parse_int(optarg, 1);
        } else {
            fprintf(stderr, "usage: %s [-m MIB (6)] [-r ROUNDS (7)]\n", argv[0]);
            return 2;
        }
    }
    if (mib < 1 || mib > 4096 || rounds < 1 || rounds > FT_ROUNDS_MAX) {
        fprintf(stderr, "bench-first-touch: -m 1-4096 MiB, -r 1-%d rounds\n", FT_ROUNDS_MAX);
        return 2;
    }
    len   = (size_t)mib << 20;
    pages = len / FT_PAGE;
    fd    = memfd_create("bench-first-touch", MFD_CLOEXEC);
    own   = malloc(len);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0 || own == NULL || pipe(pfd) != 0) {
        perror("bench-first-touch: setup");
        return 1;
    }
    memset(own, 1, len);
    {
        unsigned char *w = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (w == MAP_FAILED) {
            perror("bench-first-touch: mmap");
            return 1;
        }
        memset(w, 1, len); /* the pages exist before any child maps them */
        munmap(w, len);
    }
    printf("bench-first-touch: %d MiB (%zu pages), %d rounds, us per page\n", mib, pages,
           rounds);
    printf("%5s %14s %14s %14s\n", "round", "fresh_first", "fresh_second", "own_anon");
    for (int r = 0; r < rounds; ++r) {
        fflush(stdout);
        pid = fork();
        if (pid < 0) {
            perror("bench-first-touch: fork");
            return 1;
        }
        if (pid == 0) {
            ft_child(fd, len, pfd[1]);
        }
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0 || read(pfd[0], us, sizeof(us)) != (ssize_t)sizeof(us)) {
            fprintf(stderr, "bench-first-touch: round %d failed\n", r);
            return 1;
        }
        t0       = bench_now_ns();
        (void)ft_pass(own, len);
        anon[r]   = (bench_now_ns() - t0) / 1e3 / (double)pages;
        first[r]  = us[0] / (double)pages;
        second[r] = us[1] / (double)pages;
        printf("%5d %14.4f %14.4f %14.4f\n", r, first[r], second[r], anon[r]);
    }
    st[0] = bench_stats(first, rounds);
    st[1] = bench_stats(second, rounds);
    st[2] = bench_stats(anon, rounds);
    printf("median (min-max): fresh_first %.4f (%.4f-%.4f), fresh_second %.4f (%.4f-%.4f), "
           "own_anon %.4f (%.4f-%.4f)\n",
           st[0].median, st[0].min, st[0].max, st[1].median, st[1].min, st[1].max,
           st[2].median, st[2].min, st[2].max);
    printf("RESULT first-touch mib=%d first_us_per_page=%.4f second_us_per_page=%.4f "
           "anon_us_per_page=%.4f rounds=%d\n",
           mib, st[0].median, st[1].median, st[2].median, rounds);
    free(own);
    close(fd);
    return 0;
}
