/*
 * The event loop (transport layer): one epoll set, a handler per fd,
 * hooks run before each sleep, an idle task (run when nothing else is to
 * be done), and --poll-us polling after a reply. It knows nothing of what
 * its handlers serve: every callback gets the daemon context as an opaque
 * pointer, registered by the layers above.
 */
#ifndef IVMD_TRANSPORT_LOOP_H
#define IVMD_TRANSPORT_LOOP_H

#include <stdint.h>

#include "status.h"

/* The daemon context, opaque to the transport. */
typedef struct ivmd ivmd_t;

/* An fd watched by the loop. */
typedef void (*ivmd_io_cb_t)(ivmd_t *d, void *arg, uint32_t events);
typedef struct ivmd_handler {
    int          fd;
    ivmd_io_cb_t cb;
    void        *arg;
} ivmd_handler_t;

typedef void (*ivmd_loop_hook_t)(ivmd_t *d, void *arg);
/* The idle task's wish: none, soon (once the loop was idle for the task's
 * delay), or now (as soon as no event is pending). */
typedef int (*ivmd_loop_want_t)(ivmd_t *d, void *arg);
#define IVMD_LOOP_IDLE_NONE 0
#define IVMD_LOOP_IDLE_SOON 1
#define IVMD_LOOP_IDLE_NOW  2
/* Work in flight (a peer's answer awaited): keep polling with --poll-us. */
typedef int (*ivmd_loop_busy_t)(ivmd_t *d, void *arg);

#define IVMD_LOOP_HOOKS_MAX 8

typedef struct ivmd_loop_hook_entry {
    ivmd_loop_hook_t fn;
    void            *arg;
} ivmd_loop_hook_entry_t;

typedef struct ivmd_loop {
    ivmd_t                *d;          /* handed to every callback */
    int                    epfd;
    const int             *stop;       /* the loop ends once *stop is set */
    int                    quit;       /* ... or once ivmd_loop_quit was called */
    long                   poll_us;    /* --poll-us */
    uint64_t               poll_until_ns; /* poll, not sleep, until then */
    uint64_t               polled;     /* loop turns whose events came while polling */
    ivmd_loop_hook_entry_t before_sleep[IVMD_LOOP_HOOKS_MAX];
    int                    nbefore_sleep;
    ivmd_loop_want_t       idle_want;
    ivmd_loop_hook_t       idle_run;
    void                  *idle_arg;
    long                   idle_us;    /* the delay of IVMD_LOOP_IDLE_SOON */
    ivmd_loop_busy_t       busy;
    void                  *busy_arg;
} ivmd_loop_t;

uint64_t ivmd_now_ns(void);

/* The epoll set; callbacks get d; the loop runs until *stop. */
ivmError_t ivmd_loop_init(ivmd_loop_t *l, ivmd_t *d, const int *stop, long poll_us);
void ivmd_loop_fini(ivmd_loop_t *l);
ivmError_t ivmd_loop_watch(ivmd_loop_t *l, ivmd_handler_t *h, uint32_t events);
void ivmd_loop_rewatch(ivmd_loop_t *l, ivmd_handler_t *h, uint32_t events);
void ivmd_loop_unwatch(ivmd_loop_t *l, ivmd_handler_t *h);
/* fn(d, arg) before each sleep, in registration order (closed connections
 * and forwarders are freed there, so no event of a batch sees freed memory). */
ivmError_t ivmd_loop_on_before_sleep(ivmd_loop_t *l, ivmd_loop_hook_t fn, void *arg);
/* The idle task: want(d, arg) says whether run(d, arg) is wanted (never on
 * the path of an event: only when the loop has nothing else to do). */
void ivmd_loop_set_idle(ivmd_loop_t *l, ivmd_loop_want_t want, ivmd_loop_hook_t run,
                        void *arg, long idle_us);
void ivmd_loop_set_busy(ivmd_loop_t *l, ivmd_loop_busy_t busy, void *arg);
/* --poll-us: a PE was answered now; the loop polls for a while. */
void ivmd_loop_poll_after(ivmd_loop_t *l);
/* End the loop after this turn (its before-sleep hooks run once more). */
void ivmd_loop_quit(ivmd_loop_t *l);
/* 0 once *stop was set or quit called, -1 on a failed epoll_wait. */
int ivmd_loop_run_until_stop(ivmd_loop_t *l);

#endif /* IVMD_TRANSPORT_LOOP_H */
