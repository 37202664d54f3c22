/*
 * Logging: one macro that checks the level before formatting and keeps errno.
 * Every line is prefixed with the program's identity, e.g. "[node1 ivmd]" or
 * "[node0 pe3]"; "%m" prints the errno text of the failing syscall.
 */
#ifndef IVM_COMMON_LOG_H
#define IVM_COMMON_LOG_H

#include <stdint.h>

typedef enum ivm_log_level {
    IVM_LOG_ERROR = 0,
    IVM_LOG_WARN  = 1,
    IVM_LOG_INFO  = 2,
    IVM_LOG_DEBUG = 3,
    IVM_LOG_TRACE = 4
} ivm_log_level_t;

extern int ivm_log_current_level;

#define IVM_LOG(level, ...)                                              \
    do {                                                                 \
        if ((int)(level) <= ivm_log_current_level) {                     \
            ivm_log_emit((level), __FILE__, __LINE__, __VA_ARGS__);      \
        }                                                                \
    } while (0)

#define ivm_error(...) IVM_LOG(IVM_LOG_ERROR, __VA_ARGS__)
#define ivm_warn(...)  IVM_LOG(IVM_LOG_WARN, __VA_ARGS__)
#define ivm_info(...)  IVM_LOG(IVM_LOG_INFO, __VA_ARGS__)
#define ivm_debug(...) IVM_LOG(IVM_LOG_DEBUG, __VA_ARGS__)
#define ivm_trace(...) IVM_LOG(IVM_LOG_TRACE, __VA_ARGS__)

void ivm_log_emit(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * Rate-limited lines, for messages that outside input can trigger (malformed
 * messages, refused connections, accept errors): per call site, a burst of
 * IVM_LOG_LIMIT_BURST lines, then at most one line per IVM_LOG_LIMIT_INTERVAL_MS
 * (a token bucket). The first line let through after some were dropped ends
 * with "(N similar lines suppressed)".
 */
#define IVM_LOG_LIMIT_BURST       10
#define IVM_LOG_LIMIT_INTERVAL_MS 1000

typedef struct ivm_log_limit {
    double   tokens;    /* lines that may pass now */
    uint64_t last_ns;   /* CLOCK_MONOTONIC of the last refill; 0: never used */
    uint64_t suppressed;/* lines dropped since the last one let through */
} ivm_log_limit_t;

/* 1 if a line may pass now (then *suppressed_p = lines dropped before it,
 * and the count restarts), 0 if it is dropped (and counted). now_ns is
 * CLOCK_MONOTONIC; burst and interval_ms as above. */
int ivm_log_limit_pass(ivm_log_limit_t *lim, uint64_t now_ns, unsigned burst,
                       unsigned interval_ms, uint64_t *suppressed_p);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t ivm_log_now_ns(void);

void ivm_log_emit_limited(ivm_log_limit_t *lim, int level, const char *file, int line,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define IVM_LOG_LIMITED(level, ...)                                          \
    do {                                                                     \
        static ivm_log_limit_t ivm_log_limit_site_;                          \
        if ((int)(level) <= ivm_log_current_level) {                         \
            ivm_log_emit_limited(&ivm_log_limit_site_, (level), __FILE__,    \
                                 __LINE__, __VA_ARGS__);                     \
        }                                                                    \
    } while (0)

#define ivm_warn_limited(...)  IVM_LOG_LIMITED(IVM_LOG_WARN, __VA_ARGS__)
#define ivm_error_limited(...) IVM_LOG_LIMITED(IVM_LOG_ERROR, __VA_ARGS__)

/* Set the "[...]" prefix of every line (copied; at most 63 bytes). */
void ivm_log_set_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parse a level name (error, warn, info, debug, trace) or number; -1 if bad. */
int ivm_log_level_parse(const char *text);

/* Set the level from IVM_LOG_LEVEL (unset or bad: keep the current one). */
void ivm_log_init_from_env(void);

#endif /* IVM_COMMON_LOG_H */
