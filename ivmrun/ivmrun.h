/*
 * ivmrun: the launcher. It finds or starts the node daemon, runs PROGRAM as
 * the root PE, forwards (and optionally tags) its output, enforces the
 * timeout, relays signals, returns the root's exit status and cleans up.
 */
#ifndef IVMRUN_IVMRUN_H
#define IVMRUN_IVMRUN_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/un.h>

#include "config.h"
#include "ivm.h"

/* X(field, "option-name", TYPE, "default", "help text") */
#define IVMRUN_CONFIG_TABLE(X)                                                      \
    X(cpu_devices, "cpu-devices", STRING, "",                                       \
      "CPU devices of the job, e.g. 0-7,8-11,12 (default: the daemon's table)")    \
    X(tag_output,  "tag-output",  BOOL,   "0",                                      \
      "prefix every output line with \"[pe N] \"")                                  \
    X(timeout,     "timeout",     DOUBLE, "0",                                      \
      "kill the job after this many seconds and exit 124 (0 = no limit)")          \
    X(nodes,       "nodes",       INT,    "1",                                      \
      "nodes to simulate on this machine (only 1 is implemented)")                 \
    X(log_level,   "log-level",   STRING, "",                                       \
      "error|warn|info|debug|trace, also given to the root PE (-v = info)")        \
    X(socket,      "socket",      STRING, "",                                       \
      "daemon socket (default: <socket dir>/" "ivmd.sock)")                         \
    X(daemon,      "daemon",      STRING, "",                                       \
      "ivmd to start when none runs (default: ivmd beside ivmrun, else PATH)")     \
    X(daemon_wait, "daemon-wait", DOUBLE, "10",                                     \
      "seconds to wait for a started ivmd to become ready")

IVM_CONFIG_STRUCT(ivmrun_config, IVMRUN_CONFIG_TABLE);

extern const ivm_config_field_t ivmrun_config_fields[];

/* How one child process is started. */
typedef struct ivmrun_spawn {
    const char        *file;     /* path, or a name looked up in PATH */
    char *const       *argv;     /* argv[0] included, NULL-terminated */
    int                fd_in;    /* becomes stdin; -1 = inherit */
    int                fd_out;   /* becomes stdout; -1 = inherit */
    int                fd_err;   /* becomes stderr; -1 = inherit */
    int                keep_fd;  /* left open across exec; -1 = none */
    int                new_session; /* setsid() in the child */
    int                new_pgroup;  /* own process group (ignored with new_session) */
    const sigset_t    *sigmask;  /* the child's signal mask */
    char *const       *env;      /* "NAME=VALUE" to set, "NAME" to unset; NULL-terminated or NULL */
} ivmrun_spawn_t;

/* Fork and exec spec. On success *pid_p is the child. If the exec fails, the
 * child is reaped, *errno_p says why and IVM_ERROR_SPAWN is returned. */
ivmError_t ivmrun_proc_spawn(const ivmrun_spawn_t *spec, pid_t *pid_p, int *errno_p);

/* Describe a wait status: "exit status 3", "signal 9 (Killed)". */
void ivmrun_proc_status_text(int status, char *buf, size_t len);

/* Monotonic clock, in seconds. */
double ivmrun_time_now(void);

/* Write all of buf to fd (restarting on EINTR). 0 or -1 with errno. */
int ivmrun_fd_write_all(int fd, const void *buf, size_t len);

/* The node daemon as ivmrun sees it. */
typedef struct ivmrun_daemon {
    char  path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* its socket */
    pid_t pid;       /* > 0 while a daemon we started is not yet reaped */
    int   started;   /* we started it, so we stop it */
    int   status;    /* its wait status once reaped */
} ivmrun_daemon_t;

/* Use the daemon listening on d->path, or start one. sigfd delivers SIGCHLD
 * and the terminating signals while waiting; if one of the latter arrives,
 * IVM_ERROR_INTERNAL is returned with *signo_p set. Errors are logged. */
ivmError_t ivmrun_daemon_open(ivmrun_daemon_t *d, const ivmrun_config_t *cfg,
                              int sigfd, const sigset_t *child_mask, int *signo_p);

/* Reap the daemon we started if it has exited (after a SIGCHLD). Returns 1
 * if it was reaped now. */
int ivmrun_daemon_reap(ivmrun_daemon_t *d);

/* Stop the daemon if we started it (SIGTERM, SIGKILL after 5 s), and remove
 * its socket if it left it behind. A shared daemon is left alone. */
void ivmrun_daemon_close(ivmrun_daemon_t *d, int sigfd);

/* Jobs the daemon holds now, or -1 if it cannot be asked. */
int ivmrun_daemon_jobs(const ivmrun_daemon_t *d);

/* Forwarding of one of the root PE's output pipes with "[pe 0] " tags. */
#define IVMRUN_STREAM_BUF 65536

typedef struct ivmrun_stream {
    int    fd;        /* read end of the pipe (non-blocking); -1 once closed */
    int    out_fd;    /* where the tagged lines go */
    int    mid_line;  /* the output so far ends inside a line */
    size_t len;       /* bytes held in buf */
    size_t out_len;   /* bytes held in out */
    char   buf[IVMRUN_STREAM_BUF];      /* read from the pipe, not yet a full line */
    char   out[IVMRUN_STREAM_BUF + 64]; /* tagged lines not yet written */
} ivmrun_stream_t;

void ivmrun_stream_init(ivmrun_stream_t *s, int fd, int out_fd);

/* Read what is available and forward complete lines. Returns the bytes read
 * (0 at EOF, which also flushes a partial last line and closes the pipe),
 * or -1 if nothing was available. */
ssize_t ivmrun_stream_pump(ivmrun_stream_t *s);

/* Forward everything readable now, then flush and close the pipe. */
void ivmrun_stream_drain(ivmrun_stream_t *s);

#endif /* IVMRUN_IVMRUN_H */
