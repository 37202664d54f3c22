/* Unit tests of logging (common/log.c): level names, IVM_LOG_LEVEL, the line
 * prefix, level filtering, %m and errno kept across the macro. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static int saved_stderr = -1;
static char path[64];

/* Send stderr to a file for the duration of the test. */
static void capture_start(void)
{
    int fd;

    snprintf(path, sizeof(path), "/tmp/ivmt-log.XXXXXX");
    fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    fflush(stderr);
    saved_stderr = dup(2);
    dup2(fd, 2);
    close(fd);
}

static char *capture_end(void)
{
    static char buf[8192];
    ssize_t n;
    int fd;

    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    fd = open(path, O_RDONLY);
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    unlink(path);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

TestSuite(log, .timeout = 10);

Test(log, level_names)
{
    cr_assert_eq(ivm_log_level_parse("error"), IVM_LOG_ERROR);
    cr_assert_eq(ivm_log_level_parse("warn"), IVM_LOG_WARN);
    cr_assert_eq(ivm_log_level_parse("INFO"), IVM_LOG_INFO, "case-insensitive");
    cr_assert_eq(ivm_log_level_parse("debug"), IVM_LOG_DEBUG);
    cr_assert_eq(ivm_log_level_parse("trace"), IVM_LOG_TRACE);
    cr_assert_eq(ivm_log_level_parse("3"), IVM_LOG_DEBUG, "numbers too");
    cr_assert_eq(ivm_log_level_parse("0"), IVM_LOG_ERROR);
    cr_assert_eq(ivm_log_level_parse("5"), -1);
    cr_assert_eq(ivm_log_level_parse("-1"), -1);
    cr_assert_eq(ivm_log_level_parse(""), -1);
    cr_assert_eq(ivm_log_level_parse("verbose"), -1);
    cr_assert_eq(ivm_log_level_parse("2x"), -1);
}

Test(log, level_from_environment)
{
    ivm_log_current_level = IVM_LOG_WARN;
    setenv("IVM_LOG_LEVEL", "debug", 1);
    ivm_log_init_from_env();
    cr_assert_eq(ivm_log_current_level, IVM_LOG_DEBUG);
    setenv("IVM_LOG_LEVEL", "nonsense", 1);
    ivm_log_init_from_env();
    cr_assert_eq(ivm_log_current_level, IVM_LOG_DEBUG, "a bad value keeps the level");
    unsetenv("IVM_LOG_LEVEL");
    ivm_log_init_from_env();
    cr_assert_eq(ivm_log_current_level, IVM_LOG_DEBUG, "unset keeps the level");
}

Test(log, prefix_filtering_and_errno)
{
    char *out;

    ivm_log_current_level = IVM_LOG_WARN;
    ivm_log_set_prefix("node%d pe%d", 3, 7);
    capture_start();
    ivm_warn("hello %d", 5);
    ivm_info("not shown %d", 1);
    ivm_debug("not shown either");
    errno = ENOENT;
    ivm_error("open failed: %m");
    cr_assert_eq(errno, ENOENT, "the macro keeps errno");
    out = capture_end();
    cr_assert(strstr(out, "[node3 pe7] warn: hello 5\n") != NULL, "'%s'", out);
    cr_assert(strstr(out, "[node3 pe7] error: open failed: No such file or directory\n") != NULL,
              "%%m prints the errno text: '%s'", out);
    cr_assert_null(strstr(out, "not shown"), "below the level: '%s'", out);
}

Test(log, filtered_messages_are_not_formatted)
{
    static int calls;
    char *out;

    ivm_log_current_level = IVM_LOG_ERROR;
    calls = 0;
    capture_start();
    ivm_debug("%d", ++calls);
    out = capture_end();
    cr_assert_eq(calls, 0, "arguments of a filtered message are not evaluated");
    cr_assert_str_eq(out, "");
}

Test(log, debug_lines_name_their_source)
{
    char *out;

    ivm_log_current_level = IVM_LOG_DEBUG;
    ivm_log_set_prefix("%s", "ivmd");
    capture_start();
    ivm_debug("detail");
    out = capture_end();
    cr_assert(strstr(out, "[ivmd]") != NULL && strstr(out, "test_log.c:") != NULL &&
                  strstr(out, "detail") != NULL,
              "'%s'", out);
}

Test(log, long_prefix_is_cut_safely)
{
    char longp[200];
    char *out;

    memset(longp, 'p', sizeof(longp) - 1);
    longp[sizeof(longp) - 1] = '\0';
    ivm_log_current_level = IVM_LOG_WARN;
    ivm_log_set_prefix("%s", longp);
    capture_start();
    ivm_warn("x");
    out = capture_end();
    cr_assert(strstr(out, "] warn: x\n") != NULL, "'%s'", out);
    cr_assert_lt(strlen(out), 100);
}

Test(log, limiter_burst_then_rate_then_suppressed_count)
{
    const uint64_t s = 1000000000u;
    ivm_log_limit_t lim = {0};
    uint64_t sup = 99;
    int i, passed = 0;

    for (i = 0; i < 100; ++i) {
        passed += ivm_log_limit_pass(&lim, 5 * s, 10, 1000, &sup);
    }
    cr_assert_eq(passed, 10, "a burst of 10 passes, the rest of the same instant does not");
    cr_assert_eq(ivm_log_limit_pass(&lim, 5 * s + s / 2, 10, 1000, &sup), 0,
                 "half an interval later: still no token");
    cr_assert_eq(ivm_log_limit_pass(&lim, 6 * s + 1, 10, 1000, &sup), 1,
                 "one interval later one line passes");
    cr_assert_eq(sup, 91, "and says how many were dropped before it (%llu)",
                 (unsigned long long)sup);
    cr_assert_eq(ivm_log_limit_pass(&lim, 6 * s + 2, 10, 1000, &sup), 0);
    cr_assert_eq(ivm_log_limit_pass(&lim, 100 * s, 10, 1000, &sup), 1);
    cr_assert_eq(sup, 1, "the count restarts once reported");
    passed = 0;
    for (i = 0; i < 20; ++i) {
        passed += ivm_log_limit_pass(&lim, 100 * s, 10, 1000, &sup);
    }
    cr_assert_eq(passed, 9, "a long quiet time refills the burst, never beyond it");
}

Test(log, limited_macro_bounds_a_flood)
{
    char *out, *p;
    int i, lines = 0;

    ivm_log_current_level = IVM_LOG_WARN;
    ivm_log_set_prefix("%s", "ivmd");
    capture_start();
    for (i = 0; i < 5000; ++i) {
        ivm_warn_limited("refused %d", i);
    }
    out = capture_end();
    for (p = out; (p = strchr(p, '\n')) != NULL; ++p) {
        ++lines;
    }
    cr_assert_eq(lines, IVM_LOG_LIMIT_BURST, "5000 calls in a moment: the burst only: '%s'",
                 out);
    cr_assert(strstr(out, "[ivmd] warn: refused 0\n") != NULL, "'%s'", out);
}
