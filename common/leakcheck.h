/* Leak checks in sanitizer builds, asked for by the processes that want them.
 *
 * run-tests.sh's sanitizer pass turns LeakSanitizer's check at every
 * process's exit off (ASAN_OPTIONS leak_check_at_exit=0): stopping a
 * process's threads for the check costs about 20 ms on a 2-vCPU VM, and the
 * pass's tests start thousands of PEs (bursts, DS-LB chains): 100 of its
 * 350 s. The processes whose leaks matter ask for the check here instead:
 * the daemons, the launchers and tools, the test programs, and the first
 * IVM_LEAK_CHECK_PES PEs of every job (libivm: every PE of a test's few-PE
 * scenario, a sample of a burst). Where the option is left on (a sanitizer
 * build run by hand), the check runs once: the first call disarms
 * LeakSanitizer's own. Without ASan, a no-op. */
#ifndef IVM_COMMON_LEAKCHECK_H
#define IVM_COMMON_LEAKCHECK_H

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#include <stdlib.h>
#endif

/* PEs of a job, by PE id, that check their leaks at exit. */
#define IVM_LEAK_CHECK_PES 8

/* Check this process's leaks when it exits (atexit: also through exit()). */
static inline void ivm_leak_check_at_exit(void)
{
#if defined(__SANITIZE_ADDRESS__)
    atexit(__lsan_do_leak_check);
#endif
}

#endif /* IVM_COMMON_LEAKCHECK_H */
