/* Linked into every Criterion test program: its processes (the runner and
 * each test's) check their leaks at exit in the sanitizer pass, which turns
 * LeakSanitizer's own check at exit off (common/leakcheck.h). */
#include "leakcheck.h"

__attribute__((constructor)) static void ivmt_leak_check(void)
{
    ivm_leak_check_at_exit();
}
