
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

void ivm_log_emit(int level, const char *file, int line, const char *fmt, ...)
{
    int saved_errno = errno;
    char msg[1024];
    struct timespec ts;
    va_list ap;

    clock_gettime(CLOCK_REALTIME, &ts);
    errno = saved_errno; /* keep %m meaningful */
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (ivm_log_current_level >= IVM_LOG_DEBUG) {
        fprintf(stderr, "[%s] %ld.%06ld %s %s:%d: %s\n", ivm_log_prefix,
                (long)ts.tv_sec, (long)(ts.tv_nsec / 1000), ivm_log_names[level],
                file, line, msg);
    } else {
        fprintf(stderr, "[%s] %s: %s\n", ivm_log_prefix, ivm_log_names[level], msg);
    }
    errno = saved_errno;
}
