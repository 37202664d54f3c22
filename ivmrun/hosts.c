/* Real clusters: the host list (--hosts, --hostfile, --slurm) and the
 * bootstrap. With --hosts/--hostfile ivmrun runs `mpirun ... ivm-boot` with
 * one rank per host; ivm-boot starts the hosts' daemons, joins them into one
 * cluster and prints node0's socket path; node0 is this machine (the first
 * host), where the root PE runs. At the end ivmrun closes ivm-boot's stdin,
 * which stops it. With --slurm, srun and ivm-boot-srun do it (srun.c). */
#include "ivmrun.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "log.h"
#include "proto.h"
#include "sock.h"
#include "status.h"

#define IVMRUN_EXIT_FAILURE   1
#define IVMRUN_EXIT_USAGE     2
#define IVMRUN_HOST_NAME_MAX  255   /* bytes of one host name */
#define IVMRUN_BOOT_LINE_MAX  4096  /* bytes of one line of ivm-boot's output */
#define IVMRUN_BOOT_STOP_WAIT 10.0  /* s from closing ivm-boot's stdin to SIGTERM */
#define IVMRUN_BOOT_KILL_WAIT 5.0   /* s from SIGTERM to SIGKILL */
#define IVMRUN_BOOT_INFO_WAIT 2000  /* ms for node0's INFO round trip */
/* Open MPI (4.x): seconds mpirun waits from SIGTERM to SIGKILL of a rank. */
#define IVMRUN_MPIRUN_SIGKILL_VAR "OMPI_MCA_odls_base_sigkill_timeout"

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

/* --hostfile F: Open MPI's syntax, "host [slots=N] [max_slots=N]" per line,
 * '#' to the end of a line is a comment. One node per line. */
static int ivmrun_hosts_from_file(ivmrun_boot_t *b, const char *path)
{
    char *line = NULL, *p, *word, where[PATH_MAX + 32];
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
        /* What follows the name (slots=N, max_slots=N) is for placing MPI
         * ranks; ivmrun places one node per line, so it only checks the form. */
        for (word = p + len; code == 0;) {
            word += strspn(word, " \t");
            if (*word == '\0') {
                break;
            }
            len = strcspn(word, " \t");
            if (memchr(word, '=', len) == NULL) {
                ivm_error("%s: expected NAME=VALUE after the host name, got '%.*s'",
                          where, (int)len, word);
                code = IVMRUN_EXIT_USAGE;
            }
            word += len;
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

/* --slurm: `scontrol show hostnames $SLURM_JOB_NODELIST`, this machine first. */
static int ivmrun_hosts_from_slurm(ivmrun_boot_t *b)
{
    const char *list = getenv("SLURM_JOB_NODELIST"), *self = getenv("SLURMD_NODENAME");
    char *argv[] = {"scontrol", "show", "hostnames", (char *)list, NULL};
    char *out = NULL, *p, *nl, *tmp;
    size_t len = 0, cap = 0;
    int pipefd[2], err = 0, status = 0, code = 0, k, local = -1;
    ivmrun_spawn_t spec;
    pid_t pid;
    ssize_t n;

    if (list == NULL || list[0] == '\0') {
        ivm_error("--slurm: SLURM_JOB_NODELIST is not set (run ivmrun inside a Slurm "
                  "allocation: sbatch, salloc)");
        return IVMRUN_EXIT_USAGE;
    }
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        ivm_error("cannot create a pipe for scontrol: %m");
        return IVMRUN_EXIT_FAILURE;
    }
    memset(&spec, 0, sizeof(spec));
    spec.file    = argv[0];
    spec.argv    = argv;
    spec.fd_in   = -1;
    spec.fd_out  = pipefd[1];
    spec.fd_err  = -1;
    spec.keep_fd = -1;
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
    if (code == 0) {
        out[len] = '\0';
        for (p = out; *p != '\0' && code == 0; p = nl) {
            nl = p + strcspn(p, "\n");
            if (nl > p) {
                code = ivmrun_hosts_add(b, p, (size_t)(nl - p), "--slurm");
            }
            nl += (*nl == '\n');
        }
    }
    free(out);
    if (code != 0) {
        return code;
    }
    if (b->nhosts == 0) {
        ivm_error("--slurm: the allocation %s has no host", list);
        return IVMRUN_EXIT_FAILURE;
    }
    /* The root PE runs here, so this machine must be node0. */
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
    /* A Slurm node name need not be a host name that resolves here. */
    b->self_known = (self != NULL && strcmp(b->hosts[0], self) == 0);
    return 0;
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

int ivmrun_hosts_parse(ivmrun_boot_t *b, const ivmrun_config_t *cfg)
{
    int given = (cfg->hosts[0] != '\0') + (cfg->hostfile[0] != '\0') + (cfg->slurm != 0);
    int code;

    if (given > 1) {
        ivm_error("give only one of --hosts, --hostfile and --slurm");
        return IVMRUN_EXIT_USAGE;
    }
    if (cfg->hosts[0] != '\0') {
        code = ivmrun_hosts_from_list(b, cfg->hosts);
    } else if (cfg->hostfile[0] != '\0') {
        code = ivmrun_hosts_from_file(b, cfg->hostfile);
    } else {
        code = ivmrun_hosts_from_slurm(b);
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
    b->launcher  = cfg->slurm ? "srun" : "mpirun";
    b->host_list = ivmrun_join(b->hosts, b->nhosts, ',');
    if (b->host_list == NULL) {
        ivm_error("out of memory");
        ivmrun_hosts_release(b);
        return IVMRUN_EXIT_FAILURE;
    }
    ivm_debug("hosts: %s", b->host_list);
    return 0;
}

int ivmrun_boot_reap(ivmrun_boot_t *b)
{
    return ivmrun_proc_reap(&b->pid, &b->status);
}

int ivmrun_boot_find(const ivmrun_config_t *cfg, const char *name, char *buf, size_t len)
{
    char path[PATH_MAX + 16];
    const char *dirs, *colon;
    int dlen;

    if (cfg->boot != NULL && cfg->boot[0] != '\0') {
        snprintf(buf, len, "%s", cfg->boot);
        if (strchr(buf, '/') != NULL && access(buf, X_OK) != 0) {
            ivm_error("--boot %s: %m", buf);
            return -1;
        }
        if (strchr(buf, '/') != NULL) {
            return 0;
        }
    } else if (ivmrun_proc_beside_self(name, buf, len)) {
        return 0;
    } else {
        snprintf(buf, len, "%s", name);
    }
    dirs = getenv("PATH");
    for (; dirs != NULL && *dirs != '\0'; dirs = colon + 1) {
        colon = strchr(dirs, ':');
        dlen  = (int)(colon != NULL ? colon - dirs : (ptrdiff_t)strlen(dirs));
        if (dlen > 0 &&
            (size_t)snprintf(path, sizeof(path), "%.*s/%s", dlen, dirs, buf) < sizeof(path) &&
            access(path, X_OK) == 0) {
            return 0; /* mpirun and srun look it up the same way on each host */
        }
        if (colon == NULL) {
            break;
        }
    }
    if (strcmp(name, "ivm-boot") == 0) {
        ivm_error("%s not found beside ivmrun or in PATH: it is built only where CMake "
                  "finds MPI (install Open MPI's development files and rebuild), or "
                  "name it with --boot", buf);
    } else {
        ivm_error("%s not found beside ivmrun or in PATH (name it with --boot)", buf);
    }
    return -1;
}

/* Read ivm-boot's stdout while it stops: nothing but a late ready line
 * (when ivmrun gave up before it came) can arrive there now; drop it. */
static void ivmrun_boot_drain(ivmrun_boot_t *b)
{
    char buf[4096];
    ssize_t n;

    if (b->out_fd < 0) {
        return;
    }
    while ((n = read(b->out_fd, buf, sizeof(buf))) > 0 ||
           (n < 0 && errno == EINTR)) {
    }
    if (n == 0) {
        close(b->out_fd);
        b->out_fd = -1;
    }
}

void ivmrun_boot_close(ivmrun_boot_t *b, int sigfd)
{
    struct pollfd pfds[2];
    double start = ivmrun_time_now(), left, deadline;
    int sent_term = 0, nfds, waited = (b->pid > 0);
    char why[64];

    if (b->in_fd >= 0) {
        ivm_info("stopping the cluster's daemons (closing %s's input)", b->launcher);
        /* The line tells ivm-boot that this is an orderly stop; EOF on the
         * bootstrap's stdin then stops every node. */
        if (b->stop_line &&
            ivmrun_fd_write_all(b->in_fd, IVMRUN_BOOT_STOP, strlen(IVMRUN_BOOT_STOP)) != 0) {
            ivm_debug("cannot write to %s's input: %m", b->launcher);
        }
        close(b->in_fd);
        b->in_fd = -1;
    }
    deadline = start + IVMRUN_BOOT_STOP_WAIT;
    /* Terminating signals read here are dropped: teardown is under way. */
    while (b->pid > 0) {
        ivmrun_boot_reap(b);
        if (b->pid <= 0) {
            break;
        }
        left = deadline - ivmrun_time_now();
        if (left <= 0) {
            if (!sent_term) {
                ivm_warn("%s (pid %d) still runs %g s after the bootstrap was told to "
                         "stop; sending it SIGTERM", b->launcher, (int)b->pid,
                         IVMRUN_BOOT_STOP_WAIT);
                kill(b->pid, SIGTERM);
                sent_term = 1;
                deadline  = ivmrun_time_now() + IVMRUN_BOOT_KILL_WAIT;
                continue;
            }
            ivm_warn("%s (pid %d) did not exit %g s after SIGTERM; killing it",
                     b->launcher, (int)b->pid, IVMRUN_BOOT_KILL_WAIT);
            kill(-b->pid, SIGKILL); /* its process group */
            kill(b->pid, SIGKILL);
            while (waitpid(b->pid, &b->status, 0) < 0 && errno == EINTR) {
            }
            b->pid = 0;
            break;
        }
        nfds           = 0;
        pfds[nfds].fd     = sigfd;
        pfds[nfds++].events = POLLIN;
        if (b->out_fd >= 0) {
            pfds[nfds].fd       = b->out_fd;
            pfds[nfds++].events = POLLIN;
        }
        if (poll(pfds, (nfds_t)nfds, (int)(left * 1000) + 1) > 0) {
            if (pfds[0].revents & POLLIN) {
                ivmrun_proc_signals(sigfd, &b->pid, &b->status);
            }
            if (nfds > 1 && pfds[1].revents != 0) {
                ivmrun_boot_drain(b);
            }
        }
    }
    if (b->out_fd >= 0) {
        ivmrun_boot_drain(b);
        if (b->out_fd >= 0) {
            close(b->out_fd);
            b->out_fd = -1;
        }
    }
    if (b->step[0] != '\0' && (!waited || sent_term)) {
        ivmrun_srun_cancel(b, sigfd); /* its tasks may still run */
    }
    if (!waited) {
        return; /* it ended before, and that was reported then */
    }
    if (sent_term || !WIFEXITED(b->status) || WEXITSTATUS(b->status) != 0) {
        ivmrun_proc_status_text(b->status, why, sizeof(why));
        ivm_warn("%s (the cluster's bootstrap) ended with %s", b->launcher, why);
    } else {
        ivm_info("the cluster's daemons are stopped (%.0f ms)",
                 (ivmrun_time_now() - start) * 1000);
    }
}

int ivmrun_boot_split(char *args, char **argv, int *argc_p, int max)
{
    char *save = NULL, *word;

    for (word = strtok_r(args, " \t", &save); word != NULL;
         word = strtok_r(NULL, " \t", &save)) {
        if (*argc_p >= max) {
            return -1;
        }
        argv[(*argc_p)++] = word;
    }
    return 0;
}

ivmError_t ivmrun_boot_check(const ivmrun_boot_t *b, ivmrun_daemon_t *d)
{
    ivm_msg_info_rep_t info;
    ivmError_t status = ivm_client_info(d->path, IVMRUN_BOOT_INFO_WAIT, &info, NULL);

    if (status != IVM_SUCCESS) {
        ivm_error("node0's daemon (%s) does not answer on this machine (%s): node0's "
                  "bootstrap must run here, on the first host (%s); check the "
                  "host names and the %s options", d->path,
                  ivm_status_string(status), b->hosts[0], b->launcher);
        return status;
    }
    if ((int)info.peers != b->nhosts - 1 || (int)info.peers_up != b->nhosts - 1) {
        ivm_error("node0's daemon (%s) sees %u of %d peers up", d->path, info.peers_up,
                  b->nhosts - 1);
        return IVM_ERROR_INTERNAL;
    }
    return IVM_SUCCESS;
}

/* Append the per-host bring-up program (exe) and its options, the same for
 * ivm-boot under mpirun and ivm-boot-srun under srun; NULL-terminates argv.
 * *specs_arg_p is allocated when per-node CPU devices are given (the caller
 * frees it). Needs IVMRUN_BOOT_NODE_ARGS free slots. */
int ivmrun_boot_node_args(const ivmrun_boot_t *b, const ivmrun_config_t *cfg,
                          char *const *specs, char *exe, char *dwait, char *uwait,
                          char **argv, int *argc_p, char **specs_arg_p)
{
    int argc = *argc_p;

    argv[argc++] = exe;
    argv[argc++] = "--hosts";
    argv[argc++] = b->host_list;
    argv[argc++] = "--daemon-wait";
    argv[argc++] = dwait;
    argv[argc++] = "--up-wait";
    argv[argc++] = uwait;
    ivmrun_arg_opt(argv, &argc, "--daemon", cfg->daemon);
    ivmrun_arg_opt(argv, &argc, "--log-level", cfg->log_level);
    ivmrun_arg_opt(argv, &argc, "--emu-gpus", cfg->emu_gpus);
    ivmrun_arg_opt(argv, &argc, "--gpus", cfg->gpus);
    ivmrun_arg_opt(argv, &argc, "--gpu-shares", cfg->gpu_shares);
    ivmrun_arg_opt(argv, &argc, "--daemon-poll-us", cfg->daemon_poll_us);
    if (cfg->peer_encrypt) {
        argv[argc++] = "--peer-encrypt";
    }
    if (specs != NULL) {
        *specs_arg_p = ivmrun_join(specs, b->nhosts, ';');
        if (*specs_arg_p == NULL) {
            ivm_error("out of memory");
            return -1;
        }
        argv[argc++] = "--node-cpu-devices";
        argv[argc++] = *specs_arg_p;
    } else {
        ivmrun_arg_opt(argv, &argc, "--cpu-devices", cfg->cpu_devices);
    }
    argv[argc] = NULL;
    *argc_p = argc;
    return 0;
}

/* Append the words of a user's extra launcher arguments (--mpirun-args,
 * --srun-args) to argv; *extra_p holds them (the caller frees it). */
int ivmrun_boot_extra(const char *args, const char *opt, char **argv, int *argc_p,
                      int max_args, char **extra_p)
{
    if (args[0] == '\0') {
        return 0;
    }
    *extra_p = strdup(args);
    if (*extra_p == NULL) {
        ivm_error("out of memory");
        return -1;
    }
    if (ivmrun_boot_split(*extra_p, argv, argc_p, max_args - IVMRUN_BOOT_NODE_ARGS) != 0) {
        ivm_error("%s: too many words", opt);
        return -1;
    }
    return 0;
}

/* Start the launcher argv[0] (mpirun or srun) of the per-host bring-up in its
 * own process group, its stdin and stdout on pipes (b->in_fd, b->out_fd),
 * with env's changes to its environment (as ivmrun_spawn_t.env; may be NULL);
 * hint follows the error when the launcher is missing. */
int ivmrun_boot_launch(ivmrun_boot_t *b, char **argv, char *const *env,
                       const sigset_t *child_mask, const char *hint)
{
    int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1}, err = 0;
    ivmrun_spawn_t spec;

    if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0) {
        ivm_error("cannot create the pipes for %s: %m", argv[0]);
        goto fail;
    }
    memset(&spec, 0, sizeof(spec));
    spec.file       = argv[0];
    spec.argv       = argv;
    spec.fd_in      = in_pipe[0];
    spec.fd_out     = out_pipe[1];
    spec.fd_err     = -1;
    spec.keep_fd    = -1;
    spec.new_pgroup = 1; /* the terminal's ^C is for ivmrun, which stops it in order */
    spec.sigmask    = child_mask;
    spec.env        = env;
    if (ivmrun_proc_spawn(&spec, &b->pid, &err) != IVM_SUCCESS) {
        ivm_error("cannot run '%s' to start the cluster's daemons: %s%s", argv[0],
                  strerror(err), err == ENOENT ? hint : "");
        b->pid = 0;
        goto fail;
    }
    close(in_pipe[0]);
    close(out_pipe[1]);
    b->in_fd  = in_pipe[1];
    b->out_fd = out_pipe[0];
    return 0;

fail:
    for (int k = 0; k < 2; ++k) {
        if (in_pipe[k] >= 0) {
            close(in_pipe[k]);
        }
        if (out_pipe[k] >= 0) {
            close(out_pipe[k]);
        }
    }
    return -1;
}

/* mpirun's command line into argv (MAX_ARGS entries at most): one ivm-boot
 * rank per host entry; *extra_p and *specs_p get what argv points into. */
static int ivmrun_boot_mpirun_argv(ivmrun_boot_t *b, const ivmrun_config_t *cfg,
                                   char *const *specs, char *exe, char *np, size_t np_len,
                                   char *dwait, char *uwait, size_t wait_len, char **argv,
                                   int max_args, char **extra_p, char **specs_p)
{
    int argc = 0;

    snprintf(np, np_len, "%d", b->nhosts);
    snprintf(dwait, wait_len, "%g", cfg->daemon_wait);
    /* ivm-boot gives up first, saying which node misses which peers. */
    snprintf(uwait, wait_len, "%g", cfg->boot_wait * 0.8);
    argv[argc++] = cfg->mpirun;
    if (geteuid() == 0) {
        argv[argc++] = "--allow-run-as-root";
    }
    /* One rank per entry: --map-by node places rank k on the k-th host, and
     * a host named n times holds n ranks; no binding, as ivmd pins PEs itself. */
    argv[argc++] = "-np";
    argv[argc++] = np;
    argv[argc++] = "--host";
    argv[argc++] = b->host_list;
    argv[argc++] = "--map-by";
    argv[argc++] = "node";
    argv[argc++] = "--bind-to";
    argv[argc++] = "none";
    if (getenv("IVM_SOCKET_DIR") != NULL) {
        argv[argc++] = "-x";
        argv[argc++] = "IVM_SOCKET_DIR";
    }
    if (ivmrun_boot_extra(cfg->mpirun_args, "--mpirun-args", argv, &argc, max_args,
                          extra_p) != 0) {
        return -1;
    }
    return ivmrun_boot_node_args(b, cfg, specs, exe, dwait, uwait, argv, &argc, specs_p);
}

/* mpirun's output ended before the ready line: ivm-boot failed (it said why)
 * or did not start. */
static ivmError_t ivmrun_boot_ended(ivmrun_boot_t *b, const char *line, size_t got)
{
    char why[64];

    if (got > 0) {
        (void)ivmrun_fd_write_all(STDOUT_FILENO, line, got);
    }
    close(b->out_fd);
    b->out_fd = -1;
    while (b->pid > 0) {
        while (waitpid(b->pid, &b->status, 0) < 0 && errno == EINTR) {
        }
        b->pid = 0;
    }
    ivmrun_proc_status_text(b->status, why, sizeof(why));
    ivm_error("the cluster's daemons did not come up: mpirun ended with %s "
              "(see the messages above)", why);
    return IVM_ERROR_NO_DAEMON;
}

/* The lines in line[0..*got_p): other output is passed on; the ready line
 * names node0's daemon. Returns IVM_SUCCESS once it came (what follows it is
 * passed on), IVM_ERROR_TIMEOUT while it has not, another error if it is
 * unusable. */
static ivmError_t ivmrun_boot_lines(ivmrun_boot_t *b, ivmrun_daemon_t *d, char *line,
                                    size_t line_size, size_t *got_p, double start)
{
    size_t rlen = strlen(IVMRUN_BOOT_READY), got = *got_p;
    ivmError_t status;
    char *nl;

    while ((nl = memchr(line, '\n', got)) != NULL) {
        *nl = '\0';
        if (strncmp(line, IVMRUN_BOOT_READY, rlen) == 0) {
            if (strlen(line + rlen) >= sizeof(d->path)) {
                ivm_error("ivm-boot reported a socket path that is too long: %s", line + rlen);
                return IVM_ERROR_INTERNAL;
            }
            snprintf(d->path, sizeof(d->path), "%s", line + rlen);
            snprintf(d->node, sizeof(d->node), "node0");
            d->pid     = 0;
            d->started = 0; /* ivm-boot stops it */
            status = ivmrun_boot_check(b, d);
            if (status != IVM_SUCCESS) {
                return status;
            }
            ivm_info("cluster of %d node%s is up (%.0f ms); node0's daemon is %s", b->nhosts,
                     b->nhosts == 1 ? "" : "s", (ivmrun_time_now() - start) * 1000, d->path);
            /* Anything after the line is passed on at the end. */
            got -= (size_t)(nl + 1 - line);
            if (got > 0) {
                (void)ivmrun_fd_write_all(STDOUT_FILENO, nl + 1, got);
            }
            fcntl(b->out_fd, F_SETFL, O_NONBLOCK);
            return IVM_SUCCESS;
        }
        /* Not ours: somebody's output, passed on. */
        *nl = '\n';
        (void)ivmrun_fd_write_all(STDOUT_FILENO, line, (size_t)(nl + 1 - line));
        got -= (size_t)(nl + 1 - line);
        memmove(line, nl + 1, got);
        line[got] = '\0';
    }
    if (got == line_size - 1) { /* a line too long to be ours */
        (void)ivmrun_fd_write_all(STDOUT_FILENO, line, got);
        got = 0;
    }
    *got_p = got;
    return IVM_ERROR_TIMEOUT;
}

/* Wait for ivm-boot's ready line on mpirun's output, at most --boot-wait
 * seconds, serving signals on sigfd meanwhile. */
static ivmError_t ivmrun_boot_wait_up(ivmrun_boot_t *b, ivmrun_daemon_t *d,
                                      const ivmrun_config_t *cfg, int sigfd, int *signo_p,
                                      double start)
{
    char line[IVMRUN_BOOT_LINE_MAX];
    double deadline = start + cfg->boot_wait;
    struct pollfd pfds[2] = {{.fd = b->out_fd, .events = POLLIN},
                             {.fd = sigfd, .events = POLLIN}};
    size_t got = 0;
    ivmError_t status;

    for (;;) {
        double left = deadline - ivmrun_time_now();
        ssize_t n;
        int term;

        if (left <= 0) {
            ivm_error("the cluster's daemons did not come up within %g s (--boot-wait); "
                      "stopping them", cfg->boot_wait);
            return IVM_ERROR_TIMEOUT;
        }
        if (poll(pfds, 2, (int)(left * 1000) + 1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            ivm_error("poll failed while waiting for ivm-boot: %m");
            return IVM_ERROR_INTERNAL;
        }
        if ((pfds[1].revents & POLLIN) &&
            (term = ivmrun_proc_signals(sigfd, &b->pid, &b->status)) != 0) {
            ivm_info("got signal %d while the cluster was forming; stopping it", term);
            *signo_p = term;
            return IVM_ERROR_INTERNAL;
        }
        if (!(pfds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            continue;
        }
        n = read(b->out_fd, line + got, sizeof(line) - 1 - got);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) {
                continue;
            }
            ivm_error("cannot read ivm-boot's output: %m");
            return IVM_ERROR_INTERNAL;
        }
        if (n == 0) {
            return ivmrun_boot_ended(b, line, got);
        }
        got += (size_t)n;
        line[got] = '\0';
        status = ivmrun_boot_lines(b, d, line, sizeof(line), &got, start);
        if (status != IVM_ERROR_TIMEOUT) {
            return status;
        }
    }
}

ivmError_t ivmrun_boot_open(ivmrun_boot_t *b, ivmrun_daemon_t *d,
                            const ivmrun_config_t *cfg, char *const *specs,
                            int sigfd, const sigset_t *child_mask, int *signo_p)
{
    enum { MAX_ARGS = 96 };
    char *mpirun_env[] = {IVMRUN_MPIRUN_SIGKILL_VAR "=0", NULL};
    char exe[PATH_MAX], np[16], dwait[32], uwait[32];
    char *argv[MAX_ARGS], *extra = NULL, *specs_arg = NULL;
    double start = ivmrun_time_now();
    ivmError_t status = IVM_ERROR_INTERNAL;

    if (cfg->slurm) {
        return ivmrun_srun_open(b, d, cfg, specs, sigfd, child_mask, signo_p);
    }
    b->pid      = 0;
    b->in_fd    = -1;
    b->out_fd   = -1;
    b->launcher = "mpirun";
    b->stop_line = 1;
    if (ivmrun_boot_find(cfg, "ivm-boot", exe, sizeof(exe)) != 0) {
        return IVM_ERROR_NO_DAEMON;
    }
    if (ivmrun_boot_mpirun_argv(b, cfg, specs, exe, np, sizeof(np), dwait, uwait,
                                sizeof(dwait), argv, MAX_ARGS, &extra, &specs_arg) != 0) {
        goto out;
    }
    /* When a rank dies, mpirun ends the others: SIGTERM, and SIGKILL a second
     * later by default, and it exits only then. With no wait it is all over
     * at once: what matters was done by then or is done anyway (each ivmd
     * stops when its ivm-boot dies, and removes its run directory), and
     * mpirun still removes MPI's shared-memory segments. */
    if (getenv(IVMRUN_MPIRUN_SIGKILL_VAR) != NULL) {
        mpirun_env[0] = NULL; /* the user's setting holds */
    }
    if (ivmrun_boot_launch(b, argv, mpirun_env, child_mask,
                           " (install Open MPI, or name it with --mpirun)") != 0) {
        goto out;
    }
    ivm_info("started %s (pid %d): ivm-boot '%s' on %d host%s (%s)", cfg->mpirun,
             (int)b->pid, exe, b->nhosts, b->nhosts == 1 ? "" : "s", b->host_list);
    status = ivmrun_boot_wait_up(b, d, cfg, sigfd, signo_p, start);
    if (status != IVM_SUCCESS) {
        ivmrun_boot_close(b, sigfd);
    }
out:
    free(extra);
    free(specs_arg);
    return status;
}
