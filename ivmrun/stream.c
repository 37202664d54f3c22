#include "ivmrun.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

void ivmrun_stream_init(ivmrun_stream_t *s, int fd, int out_fd, const char *node)
{
    int n = snprintf(s->tag, sizeof(s->tag), "[%s,0] ", node);

    s->tag_len  = n > 0 && (size_t)n < sizeof(s->tag) ? (size_t)n : 0;
    s->fd       = fd;
    s->out_fd   = out_fd;
    s->mid_line = 0;
    s->len      = 0;
    s->out_len  = 0;
}

static void ivmrun_stream_close(ivmrun_stream_t *s)
{
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
    s->len     = 0;
    s->out_len = 0;
}

/* Lines the daemon already tagged ("[NODE,N] " or "[NODE,parked] ", from
 * child PEs sharing the pipe) pass through unchanged. */
static int ivmrun_stream_is_tagged(const char *line, size_t len)
{
    size_t i = 1, comma, end = len < IVM_HOST_MAX + 16 ? len : IVM_HOST_MAX + 16;

    if (len < 6 || line[0] != '[') {
        return 0;
    }
    while (i < end && line[i] != ',' && line[i] != ']' && line[i] != ' ') {
        ++i;
    }
    if (i == 1 || i >= end || line[i] != ',') {
        return 0;
    }
    comma = ++i;
    if (end - i >= 6 && memcmp(line + i, "parked", 6) == 0) {
        i += 6;
    } else {
        while (i < end && isdigit((unsigned char)line[i])) {
            ++i;
        }
    }
    return i > comma && i + 1 < len && line[i] == ']' && line[i + 1] == ' ';
}

/* Write the tagged lines gathered in out. Returns 0, or -1 if the output
 * is gone. */
static int ivmrun_stream_flush(ivmrun_stream_t *s)
{
    size_t len = s->out_len;

    s->out_len = 0;
    if (len > 0 && ivmrun_fd_write_all(s->out_fd, s->out, len) != 0) {
        ivm_debug("cannot forward output to fd %d: %m; closing the PE's pipe",
                  s->out_fd);
        return -1;
    }
    return 0;
}

/* Add a piece of output to out: tagged if it starts a line, with a newline
 * added if add_nl. Returns 0, or -1 if the output is gone. */
static int ivmrun_stream_emit(ivmrun_stream_t *s, const char *data, size_t len,
                              int add_nl)
{
    size_t tag = 0;

    if (!s->mid_line && !ivmrun_stream_is_tagged(data, len)) {
        tag = s->tag_len;
    }
    if (s->out_len + tag + len + 1 > sizeof(s->out) && ivmrun_stream_flush(s) != 0) {
        return -1;
    }
    memcpy(s->out + s->out_len, s->tag, tag);
    s->out_len += tag;
    memcpy(s->out + s->out_len, data, len);
    s->out_len += len;
    if (add_nl) {
        s->out[s->out_len++] = '\n';
    }
    s->mid_line = (s->out[s->out_len - 1] != '\n');
    return 0;
}

/* Forward the complete lines in buf; keep a partial last line unless the
 * buffer is full. */
static int ivmrun_stream_lines(ivmrun_stream_t *s)
{
    size_t start = 0;
    char *nl;

    while ((nl = memchr(s->buf + start, '\n', s->len - start)) != NULL) {
        size_t end = (size_t)(nl - s->buf) + 1;
        if (ivmrun_stream_emit(s, s->buf + start, end - start, 0) != 0) {
            return -1;
        }
        start = end;
    }
    if (start == 0 && s->len == sizeof(s->buf)) {
        /* A line longer than the buffer goes out in pieces. */
        if (ivmrun_stream_emit(s, s->buf, s->len, 0) != 0) {
            return -1;
        }
        start = s->len;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
    return ivmrun_stream_flush(s);
}

/* At EOF: a partial last line gets its tag and a newline. */
static void ivmrun_stream_finish(ivmrun_stream_t *s)
{
    if (s->len > 0) {
        ivmrun_stream_emit(s, s->buf, s->len, 1);
    } else if (s->mid_line) {
        s->out[s->out_len++] = '\n';
    }
    ivmrun_stream_flush(s);
    s->mid_line = 0;
    ivmrun_stream_close(s);
}

ssize_t ivmrun_stream_pump(ivmrun_stream_t *s)
{
    ssize_t n;

    if (s->fd < 0) {
        return 0;
    }
    n = read(s->fd, s->buf + s->len, sizeof(s->buf) - s->len);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            return -1;
        }
        ivm_warn("cannot read the root PE's output pipe: %m");
        ivmrun_stream_finish(s);
        return 0;
    }
    if (n == 0) {
        ivmrun_stream_finish(s);
        return 0;
    }
    s->len += (size_t)n;
    if (ivmrun_stream_lines(s) != 0) {
        /* Our own output is gone: close the pipe so the writers get EPIPE,
         * as they would have written to that output directly. */
        ivmrun_stream_close(s);
    }
    return n;
}

void ivmrun_stream_drain(ivmrun_stream_t *s)
{
    while (s->fd >= 0 && ivmrun_stream_pump(s) > 0) {
    }
    if (s->fd >= 0) {
        ivmrun_stream_finish(s);
    }
}
