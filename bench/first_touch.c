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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FT_PAGE       4096u
#define FT_ROUNDS_MAX 101

static double ft_now_us(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* One read of a byte per page; the sum keeps the loads. */
static unsigned long ft_pass(const volatile unsigned char *p, size_t len)
{
    unsigned long sum = 0;

    for (size_t off = 0; off < len; off += FT_PAGE) {
        sum += p[off];
    }
    return sum;
}

static int ft_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double ft_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), ft_cmp);
    return v[n / 2];
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
    t[0]  = ft_now_us();
    sum   = ft_pass(m, len);
    t[1]  = ft_now_us();
    sum  += ft_pass(m, len);
    t[2]  = ft_now_us();
    us[0] = t[1] - t[0];
    us[1] = t[2] - t[1];
    if (write(out, us, sizeof(us)) != (ssize_t)sizeof(us) || sum == 1) {
        _exit(1);
    }
    _exit(0);
}

int main(int argc, char **argv)
{
    double first[FT_ROUNDS_MAX], second[FT_ROUNDS_MAX], anon[FT_ROUNDS_MAX], us[2], t0;
    size_t mib = 6, len, pages;
    int rounds = 7, opt, fd, pfd[2], status;
    unsigned char *own;
    pid_t pid;

    while ((opt = getopt(argc, argv, "m:r:")) != -1) {
        if (opt == 'm') {
            mib = strtoul(optarg, NULL, 10);
        } else if (opt == 'r') {
            rounds = atoi(optarg);
        } else {
            fprintf(stderr, "usage: %s [-m MIB (6)] [-r ROUNDS (7)]\n", argv[0]);
            return 2;
        }
    }
    if (mib == 0 || mib > 4096 || rounds < 1 || rounds > FT_ROUNDS_MAX) {
        fprintf(stderr, "bench-first-touch: -m 1-4096 MiB, -r 1-%d rounds\n", FT_ROUNDS_MAX);
        return 2;
    }
    len   = mib << 20;
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
    printf("bench-first-touch: %zu MiB (%zu pages), %d rounds, us per page\n", mib, pages,
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
        t0       = ft_now_us();
        (void)ft_pass(own, len);
        anon[r]   = (ft_now_us() - t0) / (double)pages;
        first[r]  = us[0] / (double)pages;
        second[r] = us[1] / (double)pages;
        printf("%5d %14.4f %14.4f %14.4f\n", r, first[r], second[r], anon[r]);
    }
    printf("RESULT first-touch mib=%zu first_us_per_page=%.4f second_us_per_page=%.4f "
           "anon_us_per_page=%.4f rounds=%d\n",
           mib, ft_median(first, rounds), ft_median(second, rounds), ft_median(anon, rounds),
           rounds);
    free(own);
    close(fd);
    return 0;
}
