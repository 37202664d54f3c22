/* Forwarding of child PEs' stdout/stderr to the root PE's streams, each line
 * prefixed "[NODE,N] " (ivmrun --tag-output). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "ctl/output.h"
#include "ctl/jobdata.h"
#include "ctl/remote.h"
#include "log.h"
#include "transport/link.h"

/* Write all of buf; gives up after a second of a blocked target. */
static void ivmd_output_write(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EAGAIN) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            if (poll(&p, 1, 1000) <= 0) {
                return;
            }
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return;
        }
        buf += n;
        len -= (size_t)n;
    }
}

/* "[NODE,N] ": the node the PE runs on and its id ("[NODE,parked] " for a
 * process of the warm pool), as ivmrun --tag-output promises. */
static int ivmd_output_prefix(ivmd_output_t *o, ivmd_job_t *job, int pe_id, char *buf, size_t len)
{
    const char *node = o->node;
    ivmd_pe_t *pe = (job != NULL && pe_id >= 0) ? ivmd_pe_find(job, pe_id) : NULL;
    ivmd_peer_t *peer;

    if (pe != NULL && pe->node >= 0 && (peer = ivmd_remote_peer(o->remote, pe->node)) != NULL) {
        node = peer->node;
    }
    if (pe_id < 0) {
        return snprintf(buf, len, "[%s,parked] ", node);
    }
    return snprintf(buf, len, "[%s,%d] ", node, pe_id);
}

void ivmd_output_write_job(ivmd_output_t *o, ivmd_job_t *job, int pe_id, int fd, const char *bytes,
                           size_t len)
{
    ivmd_job_data_t *jd = job->data;
    char prefix[IVM_HOST_MAX + 32];
    char *line;
    int plen = 0;

    if (fd < 0) {
        return;
    }
    if (jd->tag_output) {
        plen = ivmd_output_prefix(o, job, pe_id, prefix, sizeof(prefix));
    }
    line = malloc((size_t)plen + len);
    if (line == NULL) {
        return;
    }
    memcpy(line, prefix, (size_t)plen);
    memcpy(line + plen, bytes, len);
    ivmd_output_write(fd, line, (size_t)plen + len);
    free(line);
}

static void ivmd_output_emit(ivmd_output_t *o, ivmd_fwd_t *f, const char *text, size_t len,
                             int newline)
{
    if (f->target < 0) {
        /* A PE of a job rooted elsewhere: its root daemon writes the line. */
        ivmd_job_t *job = ivmd_job_find(o->reg, f->job_id);
        char *line = malloc(len + 1);
        if (job != NULL && line != NULL && job->data != NULL) {
            memcpy(line, text, len);
            if (newline) {
                line[len++] = '\n';
            }
            ivmd_remote_output(o->remote, job, f->pe_id, f->stream, line, len);
        }
        free(line);
        return;
    }
    {
    char prefix[IVM_HOST_MAX + 32];
    int plen = ivmd_output_prefix(o, NULL, f->pe_id, prefix, sizeof(prefix));
    char *line = malloc((size_t)plen + len + 1);

    if (line == NULL) {
        return;
    }
    memcpy(line, prefix, (size_t)plen);
    memcpy(line + plen, text, len);
    if (newline) {
        line[(size_t)plen + len++] = '\n';
    }
    ivmd_output_write(f->target, line, (size_t)plen + len);
    free(line);
    }
}

static void ivmd_output_close(ivmd_output_t *o, ivmd_fwd_t *f)
{
    ivmd_fwd_t **link;

    if (f->len > 0) {
        ivmd_output_emit(o, f, f->line, f->len, 1);
        f->len = 0;
    }
    ivmd_loop_unwatch(o->loop, &f->h);
    close(f->h.fd);
    if (f->target >= 0) {
        close(f->target);
    }
    for (link = &o->fwds; *link != NULL; link = &(*link)->next) {
        if (*link == f) {
            *link = f->next;
            break;
        }
    }
    f->next      = o->dead;
    o->dead = f;
}

static void ivmd_output_on_event(ivmd_t *d, void *arg, uint32_t events)
{
    ivmd_fwd_t *f = arg;
    ivmd_output_t *o = f->out;
    char *nl;
    ssize_t n;

    for (;;) {
        n = read(f->h.fd, f->line + f->len, sizeof(f->line) - f->len);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            return;
        }
        if (n <= 0) {
            ivmd_output_close(o, f);
            return;
        }
        f->len += (size_t)n;
        while ((nl = memchr(f->line, '\n', f->len)) != NULL) {
            size_t take = (size_t)(nl - f->line);
            ivmd_output_emit(o, f, f->line, take, 1);
            memmove(f->line, nl + 1, f->len - take - 1);
            f->len -= take + 1;
        }
        if (f->len == sizeof(f->line)) {
            ivmd_output_emit(o, f, f->line, f->len, 1);
            f->len = 0;
        }
    }
}

static ivmError_t ivmd_output_add(ivmd_output_t *o, ivmd_job_t *job, int stream, int target,
                                  int pe_id, int *write_end_p)
{
    ivmd_fwd_t *f;
    int p[2];

    if (pipe2(p, O_CLOEXEC) != 0) {
        ivm_warn("pipe for pe %d output: %m", pe_id);
        return IVM_ERROR_NO_MEMORY;
    }
    f = calloc(1, sizeof(*f));
    if (f == NULL) {
        goto err_close;
    }
    f->target = (target >= 0) ? fcntl(target, F_DUPFD_CLOEXEC, 0) : -1;
    if (target >= 0 && f->target < 0) {
        free(f);
        goto err_close;
    }
    f->job_id = job->id;
    f->stream = stream;
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    f->pe_id = pe_id;
    f->out   = o;
    f->h     = (ivmd_handler_t){.fd = p[0], .cb = ivmd_output_on_event, .arg = f};
    if (ivmd_loop_watch(o->loop, &f->h, EPOLLIN) != IVM_SUCCESS) {
        if (f->target >= 0) {
            close(f->target);
        }
        free(f);
        goto err_close;
    }
    f->next = o->fwds;
    o->fwds = f;
    *write_end_p = p[1];
    return IVM_SUCCESS;

err_close:
    close(p[0]);
    close(p[1]);
    return IVM_ERROR_NO_MEMORY;
}

ivmError_t ivmd_output_open(ivmd_output_t *o, ivmd_job_t *job, int pe_id, int *out_p, int *err_p)
{
    ivmd_job_data_t *jd = job->data;

    if (ivmd_output_add(o, job, 1, jd->out_fd, pe_id, out_p) != IVM_SUCCESS) {
        return IVM_ERROR_NO_MEMORY;
    }
    if (ivmd_output_add(o, job, 2, jd->err_fd, pe_id, err_p) != IVM_SUCCESS) {
        close(*out_p);
        ivmd_output_close(o, o->fwds);
        return IVM_ERROR_NO_MEMORY;
    }
    return IVM_SUCCESS;
}

void ivmd_output_reap(ivmd_output_t *o)
{
    ivmd_fwd_t *f;

    while ((f = o->dead) != NULL) {
        o->dead = f->next;
        free(f);
    }
}

void ivmd_output_retag(ivmd_output_t *o, uint32_t job_id, int from, int to)
{
    ivmd_fwd_t *f;

    for (f = o->fwds; f != NULL; f = f->next) {
        if (f->job_id == job_id && f->pe_id == from) {
            f->pe_id = to;
        }
    }
}

void ivmd_output_close_all(ivmd_output_t *o)
{
    while (o->fwds != NULL) {
        ivmd_output_close(o, o->fwds);
    }
    ivmd_output_reap(o);
}

void ivmd_output_init(ivmd_output_t *o, struct ivmd_remote *remote, ivmd_loop_t *loop,
                      ivmd_registry_t *reg, const char *node)
{
    o->remote = remote;
    o->loop = loop;
    o->reg  = reg;
    o->node = node;
    o->fwds = o->dead = NULL;
}
