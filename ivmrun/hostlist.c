/* Real clusters: the host list, from --hosts a,b,c, an Open MPI hostfile
 * (--hostfile) or the Slurm allocation (--slurm), node<k> on the k-th host;
 * node0 is this machine, where the root PE runs. */
#include "bootstrap.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "proto.h"

#define IVMRUN_EXIT_FAILURE   1
#define IVMRUN_EXIT_USAGE     2
#define IVMRUN_HOST_NAME_MAX  255   /* bytes of one host name */

void ivmrun_hosts_release(ivmrun_boot_t *b)
{
    int k;

    for (k = 0; k < b->nhosts; ++k) {
        free(b->hosts[k]);
    }
    free(b->hosts);
    free(b->host_list);
    free(b->scancel);
    if (b->sockets != NULL) {
        for (k = 0; k < b->nhosts; ++k) {
            free(b->sockets[k]);
        }
        free(b->sockets);
    }
    b->sockets   = NULL;
    b->hosts     = NULL;
    b->host_list = NULL;
    b->scancel   = NULL;
    b->nhosts    = 0;
}

/* Append one host name (len bytes at name). 0, or an exit code. */
static int ivmrun_hosts_add(ivmrun_boot_t *b, const char *name, size_t len,
                            const char *where)
{
    char **hosts;
    size_t i;

    if (len == 0 || len > IVMRUN_HOST_NAME_MAX) {
        ivm_error("%s: %s host name", where, len == 0 ? "an empty" : "a too long");
        return IVMRUN_EXIT_USAGE;
    }
    for (i = 0; i < len; ++i) {
        /* mpirun reads "a:2" as two slots on a, and ',' separates hosts. */
        if (isspace((unsigned char)name[i]) || name[i] == ',' || name[i] == ':' ||
            !isprint((unsigned char)name[i])) {
            ivm_error("%s: bad host name '%.*s' (one node per host: give a host once "
                      "for each node on it, without ':N')", where, (int)len, name);
            return IVMRUN_EXIT_USAGE;
        }
    }
    if (b->nhosts >= IVM_CLUSTER_MAX_NODES) {
        ivm_error("%s: more than %d hosts", where, IVM_CLUSTER_MAX_NODES);
        return IVMRUN_EXIT_USAGE;
    }
    hosts = realloc(b->hosts, (size_t)(b->nhosts + 1) * sizeof(*hosts));
    if (hosts == NULL) {
        ivm_error("out of memory");
        return IVMRUN_EXIT_FAILURE;
    }
    b->hosts = hosts;
    b->hosts[b->nhosts] = strndup(name, len);
    if (b->hosts[b->nhosts] == NULL) {
        ivm_error("out of memory");
        return IVMRUN_EXIT_FAILURE;
    }
    ++b->nhosts;
    return 0;
}

/* --hosts a,b,c */
static int ivmrun_hosts_from_list(ivmrun_boot_t *b, const char *list)
{
    const char *p = list, *comma;
    int code;

    for (;;) {
        comma = strchr(p, ',');
        code  = ivmrun_hosts_add(b, p, comma != NULL ? (size_t)(comma - p) : strlen(p),
                                 "--hosts");
        if (code != 0) {
            return code;
        }
        if (comma == NULL) {
            return 0;
        }
        p = comma + 1;
    }
}

/* The words after a hostfile line's host name: slots=N, max_slots=N. */
static int ivmrun_hosts_file_slots(const char *word, const char *where, ivmrun_slots_t *s)
{
    char err[160];
    unsigned seen = 0;
    size_t len;

    for (;;) {
        word += strspn(word, " \t");
        if (*word == '\0') {
            break;
        }
        len = strcspn(word, " \t");
        if (ivmrun_slots_word(word, len, s, &seen, err, sizeof(err)) != 0) {
            ivm_error("%s: %s", where, err);
            return IVMRUN_EXIT_USAGE;
        }
        word += len;
    }
    if (ivmrun_slots_finish(s, err, sizeof(err)) != 0) {
        ivm_error("%s: %s", where, err);
        return IVMRUN_EXIT_USAGE;
    }
    return 0;
}

/* --hostfile F: Open MPI's syntax, "host [slots=N] [max_slots=N]" per line,
 * '#' to the end of a line is a comment. One node per line; its slots go to
 * slots[k] for the k-th node (*has_slots set when any line gives them). */
static int ivmrun_hosts_from_file(ivmrun_boot_t *b, const char *path, ivmrun_slots_t *slots,
                                  int *has_slots)
{
    char *line = NULL, *p, where[PATH_MAX + 32];
    size_t cap = 0, len;
    int lineno = 0, code = 0;
    FILE *f;

    f = fopen(path, "r");
    if (f == NULL) {
        ivm_error("cannot open the hostfile %s: %m", path);
        return IVMRUN_EXIT_USAGE;
    }
    while (code == 0 && getline(&line, &cap, f) >= 0) {
        ++lineno;
        line[strcspn(line, "#\r\n")] = '\0';
        p = line + strspn(line, " \t");
        if (*p == '\0') {
            continue;
        }
        len = strcspn(p, " \t");
        snprintf(where, sizeof(where), "%s:%d", path, lineno);
        code = ivmrun_hosts_add(b, p, len, where);
        if (code == 0) {
            ivmrun_slots_t *s = &slots[b->nhosts - 1];
            code = ivmrun_hosts_file_slots(p + len, where, s);
            *has_slots |= (s->slots != 0);
        }
    }
    if (code == 0 && ferror(f)) {
        ivm_error("cannot read the hostfile %s: %m", path);
        code = IVMRUN_EXIT_USAGE;
    }
    free(line);
    fclose(f);
    if (code == 0 && b->nhosts == 0) {
        ivm_error("the hostfile %s names no host", path);
        code = IVMRUN_EXIT_USAGE;
    }
    return code;
}

/* Run `scontrol show hostnames LIST`: its output, NUL-terminated, in *out_p
 * (the caller frees it). 0, or an exit code after logging why. */
static int ivmrun_hosts_scontrol(const char *list, char **out_p)
{
    char *argv[] = {"scontrol", "show", "hostnames", (char *)list, NULL};
    char *out = NULL, *tmp;
    size_t len = 0, cap = 0;
    int pipefd[2], err = 0, status = 0, code = 0;
    ivmrun_spawn_t spec;
    pid_t pid;
    ssize_t n;

    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        ivm_error("cannot create a pipe for scontrol: %m");
        return IVMRUN_EXIT_FAILURE;
    }
    ivmrun_spawn_init(&spec, argv[0], argv);
    spec.fd_out = pipefd[1];
    if (ivmrun_proc_spawn(&spec, &pid, &err) != IVM_SUCCESS) {
        ivm_error("--slurm: cannot run scontrol: %s", strerror(err));
        close(pipefd[0]);
        close(pipefd[1]);
        return IVMRUN_EXIT_FAILURE;
    }
    close(pipefd[1]);
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = (cap == 0) ? 8192 : 2 * cap;
            tmp = realloc(out, cap);
            if (tmp == NULL) {
                ivm_error("out of memory");
                code = IVMRUN_EXIT_FAILURE;
                break;
            }
            out = tmp;
        }
        n = read(pipefd[0], out + len, cap - len - 1);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        len += (size_t)n;
    }
    close(pipefd[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (code == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
        ivm_error("--slurm: 'scontrol show hostnames %s' failed", list);
        code = IVMRUN_EXIT_FAILURE;
    }
    if (code != 0) {
        free(out);
        return code;
    }
    out[len] = '\0';
    *out_p = out;
    return 0;
}

/* The root PE runs here, so this machine must be node0: move it first, and
 * its slots with it. */
static int ivmrun_hosts_self_first(ivmrun_boot_t *b, const char *list, const char *self,
                                   ivmrun_slots_t *slots)
{
    ivmrun_slots_t mine;
    int k, local = -1;
    char *tmp;

    for (k = 0; k < b->nhosts && local < 0; ++k) {
        if (self != NULL && strcmp(b->hosts[k], self) == 0) {
            local = k;
        }
    }
    for (k = 0; k < b->nhosts && local < 0; ++k) {
        if (ivmrun_host_is_local(b->hosts[k])) {
            local = k;
        }
    }
    if (local < 0) {
        ivm_error("--slurm: this machine is not one of the allocation's hosts (%s); "
                  "run ivmrun on one of them", list);
        return IVMRUN_EXIT_FAILURE;
    }
    tmp = b->hosts[local];
    memmove(b->hosts + 1, b->hosts, (size_t)local * sizeof(*b->hosts));
    b->hosts[0] = tmp;
    mine = slots[local];
    memmove(slots + 1, slots, (size_t)local * sizeof(*slots));
    slots[0] = mine;
    /* A Slurm node name need not be a host name that resolves here. */
    b->self_known = (self != NULL && strcmp(b->hosts[0], self) == 0);
    return 0;
}

/* --slurm: each host's slots from SLURM_TASKS_PER_NODE (in the order of
 * SLURM_JOB_NODELIST), as Open MPI takes them; a value that does not fit the
 * hosts is warned about and left out, not fatal. */
static void ivmrun_hosts_slurm_slots(const ivmrun_boot_t *b, ivmrun_slots_t *slots,
                                     int *has_slots)
{
    const char *tasks = getenv("SLURM_TASKS_PER_NODE");
    char err[160];

    if (tasks == NULL || tasks[0] == '\0') {
        return;
    }
    if (ivmrun_slots_slurm(tasks, b->nhosts, slots, err, sizeof(err)) != 0) {
        ivm_warn("--slurm: SLURM_TASKS_PER_NODE=%s left out: %s", tasks, err);
        memset(slots, 0, (size_t)b->nhosts * sizeof(*slots));
        return;
    }
    *has_slots = 1;
}

/* --slurm: `scontrol show hostnames $SLURM_JOB_NODELIST`, this machine first. */
static int ivmrun_hosts_from_slurm(ivmrun_boot_t *b, ivmrun_slots_t *slots, int *has_slots)
{
    const char *list = getenv("SLURM_JOB_NODELIST"), *self = getenv("SLURMD_NODENAME");
    char *out = NULL, *p, *nl;
    int code;

    if (list == NULL || list[0] == '\0') {
        ivm_error("--slurm: SLURM_JOB_NODELIST is not set (run ivmrun inside a Slurm "
                  "allocation: sbatch, salloc)");
        return IVMRUN_EXIT_USAGE;
    }
    code = ivmrun_hosts_scontrol(list, &out);
    for (p = out; code == 0 && *p != '\0'; p = nl) {
        nl = p + strcspn(p, "\n");
        if (nl > p) {
            code = ivmrun_hosts_add(b, p, (size_t)(nl - p), "--slurm");
        }
        nl += (*nl == '\n');
    }
    free(out);
    if (code != 0) {
        return code;
    }
    if (b->nhosts == 0) {
        ivm_error("--slurm: the allocation %s has no host", list);
        return IVMRUN_EXIT_FAILURE;
    }
    ivmrun_hosts_slurm_slots(b, slots, has_slots);
    return ivmrun_hosts_self_first(b, list, self, slots);
}

char *ivmrun_join(char *const *items, int n, char sep)
{
    size_t len = 1, pos = 0, l;
    char *out;
    int k;

    for (k = 0; k < n; ++k) {
        len += strlen(items[k]) + 1;
    }
    out = malloc(len);
    if (out == NULL) {
        return NULL;
    }
    for (k = 0; k < n; ++k) {
        if (k > 0) {
            out[pos++] = sep;
        }
        l = strlen(items[k]);
        memcpy(out + pos, items[k], l);
        pos += l;
    }
    out[pos] = '\0';
    return out;
}

/* Build b's host list from --hosts, --hostfile or --slurm (exactly one).
 * Returns 0, or an exit code after logging why. */
static int ivmrun_hosts_parse(ivmrun_cluster_t *c, const ivmrun_config_t *cfg)
{
    ivmrun_boot_t *b = &c->boot;
    int given = (cfg->hosts[0] != '\0') + (cfg->hostfile[0] != '\0') + (cfg->slurm != 0);
    int code;

    if (given > 1) {
        ivm_error("give only one of --hosts, --hostfile and --slurm");
        return IVMRUN_EXIT_USAGE;
    }
    if (cfg->hosts[0] != '\0') {
        code = ivmrun_hosts_from_list(b, cfg->hosts);
    } else if (cfg->hostfile[0] != '\0') {
        code = ivmrun_hosts_from_file(b, cfg->hostfile, c->slots, &c->has_slots);
    } else {
        code = ivmrun_hosts_from_slurm(b, c->slots, &c->has_slots);
    }
    if (code != 0) {
        ivmrun_hosts_release(b);
        return code;
    }
    if (!b->self_known && !ivmrun_host_is_local(b->hosts[0])) {
        ivm_error("the first host, %s, is not this machine: ivmrun runs the root PE "
                  "on node0, the first host, so run ivmrun there", b->hosts[0]);
        ivmrun_hosts_release(b);
        return IVMRUN_EXIT_USAGE;
    }
    b->host_list = ivmrun_join(b->hosts, b->nhosts, ',');
    if (b->host_list == NULL) {
        ivm_error("out of memory");
        ivmrun_hosts_release(b);
        return IVMRUN_EXIT_FAILURE;
    }
    ivm_debug("hosts: %s", b->host_list);
    return 0;
}

int ivmrun_hosts_check(ivmrun_cluster_t *c)
{
    const ivmrun_config_t *cfg = c->cfg;
    int code;

    if (cfg->nodes > 1) {
        ivm_error("--nodes simulates nodes on this machine; it cannot be combined "
                  "with --hosts, --hostfile or --slurm (one node per host)");
        return IVMRUN_EXIT_USAGE;
    }
    if (!(cfg->boot_wait > 0) || isinf(cfg->boot_wait)) {
        ivm_error("--boot-wait must be a number of seconds > 0 (got %g)",
                  cfg->boot_wait);
        return IVMRUN_EXIT_USAGE;
    }
    code = ivmrun_hosts_parse(c, cfg);
    if (code != 0) {
        return code;
    }
    c->boot.launcher = c->ops->name;
    c->n = 1; /* nodes[0]: node0's daemon, reported by the bootstrap */
    return 0;
}
