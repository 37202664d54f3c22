/*
 * The per-host side of a real cluster's bring-up (boot.h), shared by ivm-boot
 * (MPI) and ivm-boot-srun (srun): options, the run directory, ivmd, the
 * CLUSTER table, the wait for the peers, the orderly stop.
 */
#include "boot.h"
#include "slots.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "client.h"
#include "log.h"
#include "proto.h"
#include "sock.h"
#include "status.h"
#include "version.h"

#define IVMBOOT_CONFIG_FIELD(...) IVM_CONFIG_FIELD_ENTRY(ivmboot_config, __VA_ARGS__)
static const ivm_config_field_t ivmboot_config_fields[] = {
    IVMBOOT_CONFIG_TABLE(IVMBOOT_CONFIG_FIELD) {0}};

#define IVMBOOT_INFO_WAIT 1000 /* ms an INFO round trip may take */
#define IVMBOOT_UP_POLL   20   /* ms between INFO rounds while the cluster forms */
#define IVMBOOT_STALE_S   10   /* s: an older socket nobody listens on is a dead daemon's */

int ivmboot_signals(ivmboot_t *b)
{
    int term = ivmrun_proc_signals(b->sigfd, NULL, NULL);
    char why[64];

    if (b->daemon.started && ivmrun_daemon_reap(&b->daemon) && !b->daemon_lost) {
        b->daemon_lost = 1;
        ivmrun_proc_status_text(b->daemon.status, why, sizeof(why));
        ivm_warn("the ivmd of node%d exited (%s)", b->rank, why);
    }
    return term;
}

void ivmboot_cleanup(ivmboot_t *b)
{
    ivmrun_daemon_close(&b->daemon, b->sigfd);
    if (b->dir[0] != '\0') {
        if (rmdir(b->dir) != 0 && errno != ENOENT) {
            ivm_warn("cannot remove the run directory %s: %m", b->dir);
        }
        b->dir[0] = '\0';
    }
}

/* Which entry of --hosts is this machine (copied to buf; 0 if none), and
 * are some entries other machines (then loopback addresses will not do)? */
static int ivmboot_my_host(const ivmboot_t *b, char *buf, size_t len, int *external_p)
{
    const char *p = b->cfg.hosts, *comma;
    char entry[IVMBOOT_NAME_MAX];
    int mine = 0;
    size_t n;

    *external_p = 0;
    for (;; p = comma + 1) {
        comma = strchr(p, ',');
        n     = (comma != NULL) ? (size_t)(comma - p) : strlen(p);
        if (n > 0 && n < sizeof(entry) && n < len) {
            memcpy(entry, p, n);
            entry[n] = '\0';
            if (ivmrun_host_is_local(entry)) {
                if (!mine) {
                    memcpy(buf, entry, n + 1);
                    mine = 1;
                }
            } else {
                *external_p = 1;
            }
        }
        if (comma == NULL || (mine && *external_p)) {
            return mine;
        }
    }
}

/* The address peers reach this node's daemon at. 0 or -1 (logged). */
static int ivmboot_addr(ivmboot_t *b, char *addr, size_t len)
{
    char name[IVMBOOT_NAME_MAX];
    int external = 0, k;

    if (b->cfg.addr[0] != '\0') {
        snprintf(addr, len, "%s", b->cfg.addr);
        return 0;
    }
    if (b->cfg.hosts[0] != '\0') {
        if (ivmboot_my_host(b, name, sizeof(name), &external)) {
            ivm_debug("this machine is '%s' of the host list", name);
            return ivmrun_host_addr(name, external, addr, len);
        }
        ivm_info("no entry of the host list %s is this machine (%s); using its name",
                 b->cfg.hosts, b->host);
        return ivmrun_host_addr(NULL, 1, addr, len);
    }
    /* No list: the ranks' host names say whether they share a machine. */
    for (k = 0; k < b->size; ++k) {
        external |= strcmp(b->table[k].host, b->host) != 0;
    }
    return ivmrun_host_addr(NULL, external, addr, len);
}

/* 1 if nothing listens on the Unix socket path (ECONNREFUSED), else 0. */
static int ivmboot_sock_dead(const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int fd, dead;

    if (strlen(path) >= sizeof(addr.sun_path)) {
        return 0;
    }
    strcpy(addr.sun_path, path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return 0;
    }
    dead = connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 && errno == ECONNREFUSED;
    close(fd);
    return dead;
}

/* The run directories that daemons killed outright left in base (SIGKILL
 * gives a daemon no chance to remove them: Slurm kills a step so when its
 * srun dies): boot-node<k>-XXXXXX unchanged for IVMBOOT_STALE_S, whose
 * sockets nothing listens on. base is this user's alone (0700). */
static void ivmboot_sweep(const char *base)
{
    char dir[PATH_MAX], path[PATH_MAX + 256];
    struct dirent *ent, *sent;
    struct stat st;
    DIR *dp, *sdp;
    time_t now = time(NULL);

    dp = opendir(base);
    if (dp == NULL) {
        return;
    }
    while ((ent = readdir(dp)) != NULL) {
        /* A directory changed in the last IVMBOOT_STALE_S may be another
         * bootstrap's that is just starting its daemon: left alone. */
        if (strncmp(ent->d_name, "boot-node", strlen("boot-node")) != 0 ||
            (size_t)snprintf(dir, sizeof(dir), "%s/%s", base, ent->d_name) >= sizeof(dir) ||
            lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) ||
            now - st.st_mtime <= IVMBOOT_STALE_S || (sdp = opendir(dir)) == NULL) {
            continue;
        }
        while ((sent = readdir(sdp)) != NULL) {
            snprintf(path, sizeof(path), "%s/%s", dir, sent->d_name);
            if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) &&
                now - st.st_mtime > IVMBOOT_STALE_S && ivmboot_sock_dead(path) &&
                unlink(path) == 0) {
                ivm_info("removed %s, left by a daemon that was killed", path);
            }
        }
        closedir(sdp);
        if (rmdir(dir) == 0) {
            ivm_debug("removed the stale run directory %s", dir);
        }
    }
    closedir(dp);
}

/* Make <socket dir>/boot-node<rank>-XXXXXX (0700) and name the socket in it. */
static int ivmboot_mkdir(ivmboot_t *b)
{
    char base[sizeof(b->dir)];
    int len;

    if (ivm_sock_dir(base, sizeof(base)) != IVM_SUCCESS) {
        ivm_error("the socket directory path (from IVM_SOCKET_DIR or XDG_RUNTIME_DIR) "
                  "is too long for a Unix socket");
        return -1;
    }
    if (ivm_sock_dir_prepare(base) != IVM_SUCCESS) {
        ivm_error("cannot make the run directory: the socket directory %s is unusable "
                  "(see above)", base);
        return -1;
    }
    ivmboot_sweep(base);
    len = snprintf(b->dir, sizeof(b->dir), "%s/boot-node%d-XXXXXX", base, b->rank);
    if (len < 0 || (size_t)len + strlen("/node.sock") + 12 > sizeof(b->dir)) {
        ivm_error("the socket directory %s is too long to hold the node's socket "
                  "(set IVM_SOCKET_DIR to a shorter path)", base);
        b->dir[0] = '\0';
        return -1;
    }
    if (mkdtemp(b->dir) == NULL) {
        ivm_error("cannot make a run directory in %s: %m", base);
        b->dir[0] = '\0';
        return -1;
    }
    len = snprintf(b->daemon.path, sizeof(b->daemon.path), "%s/node%d.sock", b->dir,
                   b->rank);
    if (len < 0 || (size_t)len >= sizeof(b->daemon.path)) {
        ivm_error("the socket path %s/node%d.sock is too long", b->dir, b->rank);
        return -1;
    }
    return 0;
}

/* ivmd gets this program's environment without the launcher's variables
 * (b->env_drop): a PE that is itself an MPI or Slurm program must not find
 * this bootstrap's launcher. */
static int ivmboot_env(ivmboot_t *b)
{
    extern char **environ;
    size_t n = 0, k, p, len;
    char **e;

    for (e = environ; *e != NULL; ++e) {
        ++n;
    }
    b->env = calloc(n + 1, sizeof(*b->env));
    if (b->env == NULL) {
        ivm_error("out of memory");
        return -1;
    }
    for (e = environ, k = 0; *e != NULL && b->env_drop != NULL; ++e) {
        for (p = 0; b->env_drop[p] != NULL; ++p) {
            if (strncmp(*e, b->env_drop[p], strlen(b->env_drop[p])) == 0) {
                len = strcspn(*e, "=");
                b->env[k] = strndup(*e, len);
                if (b->env[k] == NULL) {
                    ivm_error("out of memory");
                    return -1;
                }
                ++k;
                break;
            }
        }
    }
    return 0;
}

/* This node's --cpu-devices: the rank's spec of --node-cpu-devices, else
 * --cpu-devices. 0, or -1 if there is no spec for this rank. */
static int ivmboot_cpu_devices(ivmboot_t *b)
{
    char *p, *semi;
    int k;

    b->daemon.cpu_devices = b->cfg.cpu_devices;
    if (b->cfg.node_cpu_devices[0] == '\0') {
        return 0;
    }
    b->specs = strdup(b->cfg.node_cpu_devices);
    if (b->specs == NULL) {
        ivm_error("out of memory");
        return -1;
    }
    for (p = b->specs, k = 0;; p = semi + 1, ++k) {
        semi = strchr(p, ';');
        if (semi != NULL) {
            *semi = '\0';
        }
        if (k == b->rank) {
            b->daemon.cpu_devices = p;
            return 0;
        }
        if (semi == NULL) {
            break;
        }
    }
    ivm_error("--node-cpu-devices has no spec for node%d", b->rank);
    return -1;
}

int ivmboot_start(ivmboot_t *b, ivmboot_entry_t *me)
{
    int signo = 0;

    if (ivmboot_addr(b, me->addr, sizeof(me->addr)) != 0 || ivmboot_env(b) != 0 ||
        ivmboot_cpu_devices(b) != 0 || ivmboot_mkdir(b) != 0) {
        return -1;
    }
    snprintf(b->daemon.node, sizeof(b->daemon.node), "node%d", b->rank);
    b->daemon.listen      = 1;
    b->daemon.listen_addr = me->addr;
    b->daemon.pdeathsig   = SIGTERM;
    b->daemon.remove_dir  = 1; /* this program may die before it can remove it */
    b->daemon.env         = b->env;
    if (ivmrun_daemon_start(&b->daemon, &b->opts, b->sigfd, &b->child_mask, &signo) !=
        IVM_SUCCESS) {
        return signo != 0 ? signo : -1;
    }
    me->port = (uint16_t)b->daemon.port;
    ivm_info("ivmd (pid %d) listens on %s port %u", (int)b->daemon.pid, me->addr,
             me->port);
    return 0;
}

/* --node-slots into node k's entry of the table (all 0 without it). */
static int ivmboot_slots(const ivmboot_t *b, ivm_msg_cluster_node_t *nodes)
{
    ivmrun_slots_t *slots;
    char err[160];
    int k;

    if (b->cfg.node_slots[0] == '\0') {
        return 0;
    }
    slots = calloc((size_t)b->size, sizeof(*slots));
    if (slots == NULL) {
        ivm_error("out of memory");
        return -1;
    }
    if (ivmrun_slots_parse(b->cfg.node_slots, b->size, slots, err, sizeof(err)) != 0) {
        ivm_error("bad --node-slots '%s': %s", b->cfg.node_slots, err);
        free(slots);
        return -1;
    }
    for (k = 0; k < b->size; ++k) {
        nodes[k].slots     = slots[k].slots;
        nodes[k].max_slots = slots[k].max_slots;
    }
    free(slots);
    return 0;
}

int ivmboot_send_table(ivmboot_t *b, const uint8_t *secret)
{
    size_t len = sizeof(ivm_msg_cluster_req_t) + (size_t)b->size * sizeof(ivm_msg_cluster_node_t);
    ivm_msg_cluster_node_t *nodes;
    ivm_msg_cluster_req_t *req;
    ivmError_t status;
    int k;

    req = calloc(1, len);
    if (req == NULL) {
        ivm_error("out of memory");
        return -1;
    }
    memcpy(req->secret, secret, sizeof(req->secret));
    req->n = (uint32_t)b->size;
    nodes  = (ivm_msg_cluster_node_t *)(req + 1);
    for (k = 0; k < b->size; ++k) {
        ivm_proto_strset(nodes[k].node, sizeof(nodes[k].node), b->table[k].node);
        ivm_proto_strset(nodes[k].addr, sizeof(nodes[k].addr), b->table[k].addr);
        nodes[k].port = b->table[k].port;
    }
    status = ivmboot_slots(b, nodes) == 0 ? ivmrun_daemon_join(&b->daemon, req, len)
                                          : IVM_ERROR_INVALID_VALUE;
    explicit_bzero(req, len); /* the secret lives on in the daemon only */
    free(req);
    return status == IVM_SUCCESS ? 0 : -1;
}

int ivmboot_wait_peers(ivmboot_t *b)
{
    double start = ivmrun_time_now(), deadline = start + b->cfg.up_wait;
    struct pollfd pfd = {.fd = b->sigfd, .events = POLLIN};
    ivm_msg_info_rep_t info;
    int up = -1, term;

    for (;;) {
        if (ivm_client_info(b->daemon.path, IVMBOOT_INFO_WAIT, &info, NULL) == IVM_SUCCESS) {
            up = (int)info.peers_up;
            if (up == b->size - 1) {
                ivm_info("node%d sees its %d peer%s (%.0f ms)", b->rank, up,
                         up == 1 ? "" : "s", (ivmrun_time_now() - start) * 1000);
                return 0;
            }
        }
        if (ivmrun_time_now() >= deadline) {
            break;
        }
        if (poll(&pfd, 1, IVMBOOT_UP_POLL) > 0) {
            term = ivmboot_signals(b);
            if (term != 0) {
                return term;
            }
            if (b->daemon_lost) {
                return -1;
            }
        }
    }
    ivm_error("node%d (%s, %s port %u) sees %d of its %d peers after %g s (is TCP to "
              "the other hosts' addresses open? see --log-level debug)", b->rank,
              b->host, b->table[b->rank].addr, b->table[b->rank].port, up < 0 ? 0 : up,
              b->size - 1, b->cfg.up_wait);
    return -1;
}

int ivmboot_wait_stop(ivmboot_t *b, int any_input)
{
    struct pollfd pfds[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
                             {.fd = b->sigfd, .events = POLLIN}};
    char buf[4096];
    ssize_t n;
    int term;

    for (;;) {
        if (poll(pfds, 2, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            ivm_error("poll failed: %m");
            return -1;
        }
        if (pfds[1].revents & POLLIN) {
            term = ivmboot_signals(b);
            if (term != 0) {
                ivm_info("got signal %d; stopping", term);
                return term;
            }
        }
        if (pfds[0].revents != 0) {
            n = read(STDIN_FILENO, buf, sizeof(buf));
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
                continue;
            }
            if (n > 0 && !any_input) {
                continue;
            }
            ivm_info("%s; stopping", n > 0 ? "told to stop" : "end of input");
            return n > 0 ? 0 : -1;
        }
    }
}

int ivmboot_abandon(ivmboot_t *b, int signo)
{
    ivm_info("got signal %d; stopping node%d's daemon", signo, b->rank);
    ivmboot_cleanup(b);
    return 128 + signo;
}

int ivmboot_args(ivmboot_t *b, int argc, char **argv, const char *usage, int print_help)
{
    int first = 0, help = 0, level;
    char err[256];

    err[0] = '\0';
    if (ivm_config_defaults(ivmboot_config_fields, &b->cfg) != IVM_SUCCESS ||
        ivm_config_load_env(ivmboot_config_fields, &b->cfg, err, sizeof(err)) !=
            IVM_SUCCESS ||
        ivm_config_parse_args(ivmboot_config_fields, &b->cfg, argc, argv, &first, &help,
                              err, sizeof(err)) != IVM_SUCCESS) {
        ivm_error("%s", err);
        return 2;
    }
    if (help == IVM_CONFIG_ASK_VERSION) {
        if (print_help) {
            const char *prog = strrchr(argv[0], '/');

            ivm_version_print(stdout, prog != NULL ? prog + 1 : argv[0]);
        }
        return -1;
    }
    if (help) {
        if (print_help) {
            fputs(usage, stdout);
            ivm_config_print_help(ivmboot_config_fields, stdout);
        }
        return -1;
    }
    if (first < argc) {
        ivm_error("unexpected argument '%s' (see --help)", argv[first]);
        return 2;
    }
    if (b->cfg.log_level[0] != '\0') {
        level = ivm_log_level_parse(b->cfg.log_level);
        if (level < 0) {
            ivm_error("--log-level '%s' is not one of error, warn, info, debug, trace",
                      b->cfg.log_level);
            return 2;
        }
        ivm_log_current_level = level;
    }
    if (!(b->cfg.daemon_wait > 0) || isinf(b->cfg.daemon_wait) ||
        !(b->cfg.up_wait > 0) || isinf(b->cfg.up_wait)) {
        ivm_error("--daemon-wait and --up-wait must be numbers of seconds > 0");
        return 2;
    }
    b->opts.fields = ivmboot_config_fields;
    b->opts.values = &b->cfg;
    return 0;
}

int ivmboot_init(ivmboot_t *b)
{
    sigset_t mask;

    b->sigfd = -1;
    /* Blocked before any threads exist (MPI's), so that they inherit the
     * mask and the signals reach the signalfd. */
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &mask, &b->child_mask) != 0 ||
        (b->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
        ivm_error("cannot set up the signals: %m");
        return -1;
    }
    signal(SIGPIPE, SIG_IGN);
    if (gethostname(b->host, sizeof(b->host)) != 0) {
        snprintf(b->host, sizeof(b->host), "?");
    }
    b->host[sizeof(b->host) - 1] = '\0';
    return 0;
}

void ivmboot_release(ivmboot_t *b)
{
    int k;

    if (b->env != NULL) {
        for (k = 0; b->env[k] != NULL; ++k) {
            free(b->env[k]);
        }
        free(b->env);
        b->env = NULL;
    }
    free(b->specs);
    free(b->table);
    b->specs = NULL;
    b->table = NULL;
    ivm_config_release(ivmboot_config_fields, &b->cfg);
    if (b->sigfd >= 0) {
        close(b->sigfd);
        b->sigfd = -1;
    }
}
