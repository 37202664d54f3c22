
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

int ivm_log_current_level = IVM_LOG_WARN;

static char ivm_log_prefix[64] = "ivm";

static const char *const ivm_log_names[] = {"error", "warn", "info", "debug", "trace"};

void ivm_log_set_prefix(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(ivm_log_prefix, sizeof(ivm_log_prefix), fmt, ap);
    va_end(ap);
}

int ivm_log_level_parse(const char *text)
{
    char *end;
    long value;
    int i;

    for (i = 0; i < (int)(sizeof(ivm_log_names) / sizeof(ivm_log_names[0])); ++i) {
        if (strcasecmp(text, ivm_log_names[i]) == 0) {
            return i;
        }
    }
    value = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || value < IVM_LOG_ERROR || value > IVM_LOG_TRACE) {
        return -1;
    }
    return (int)value;
}

void ivm_log_init_from_env(void)
{
    const char *text = getenv("IVM_LOG_LEVEL");
    int level;

    if (text == NULL || *text == '\0') {
        return;
    }
    level = ivm_log_level_parse(text);
    if (level >= 0) {
        ivm_log_current_level = level;
    }
}

static void ivm_log_vemit(int level, const char *file, int line, uint64_t suppressed,
                          const char *fmt, va_list ap)
{
    int saved_errno = errno;
    char msg[1024];
    char tail[64] = "";
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    errno = saved_errno; /* keep %m meaningful */
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (suppressed > 0) {
        snprintf(tail, sizeof(tail), " (%llu similar line%s suppressed)",
                 (unsigned long long)suppressed, suppressed == 1 ? "" : "s");
    }
    if (ivm_log_current_level >= IVM_LOG_DEBUG) {
        fprintf(stderr, "[%s] %ld.%06ld %s %s:%d: %s%s\n", ivm_log_prefix,
                (long)ts.tv_sec, (long)(ts.tv_nsec / 1000), ivm_log_names[level],
                file, line, msg, tail);
    } else {
        fprintf(stderr, "[%s] %s: %s%s\n", ivm_log_prefix, ivm_log_names[level], msg, tail);
    }
    errno = saved_errno;
}

void ivm_log_emit(int level, const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    ivm_log_vemit(level, file, line, 0, fmt, ap);
    va_end(ap);
}

uint64_t ivm_log_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int ivm_log_limit_pass(ivm_log_limit_t *lim, uint64_t now_ns, unsigned burst,
                       unsigned interval_ms, uint64_t *suppressed_p)
{
    double interval_ns = (double)interval_ms * 1e6;

    if (lim->last_ns == 0) {
        lim->tokens  = (double)burst;
        lim->last_ns = now_ns;
    } else if (now_ns > lim->last_ns) {
        lim->tokens += interval_ns > 0 ? (double)(now_ns - lim->last_ns) / interval_ns
                                       : (double)burst;
        if (lim->tokens > (double)burst) {
            lim->tokens = (double)burst;
        }
        lim->last_ns = now_ns;
    }
    if (lim->tokens < 1.0) {
        ++lim->suppressed;
        return 0;
    }
    lim->tokens -= 1.0;
    *suppressed_p   = lim->suppressed;
    lim->suppressed = 0;
    return 1;
}

void ivm_log_emit_limited(ivm_log_limit_t *lim, int level, const char *file, int line,
                          const char *fmt, ...)
{
    int saved_errno = errno;
    uint64_t suppressed;
    va_list ap;

    if (!ivm_log_limit_pass(lim, ivm_log_now_ns(), IVM_LOG_LIMIT_BURST,
                            IVM_LOG_LIMIT_INTERVAL_MS, &suppressed)) {
        errno = saved_errno;
        return;
    }
    errno = saved_errno;
    va_start(ap, fmt);
    ivm_log_vemit(level, file, line, suppressed, fmt, ap);
    va_end(ap);
}
