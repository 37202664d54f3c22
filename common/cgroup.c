#include "cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "status.h"

#define IVM_CGROUP_PERIOD_MIN_US 4000u    /* a 25% share: 1 ms every 4 ms */
#define IVM_CGROUP_PERIOD_MAX_US 1000000u /* the kernel's limit */
#define IVM_CGROUP_QUOTA_MIN_US  1000u    /* the kernel's limit */
#define IVM_CGROUP_RMDIR_TRIES   20       /* EBUSY retries, 5 ms apart */

static void ivm_cgroup_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void ivm_cgroup_errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* The one translation of the errno values a cgroup operation meets. */
static ivmError_t ivm_cgroup_status(int e)
{
    switch (e) {
    case EACCES:
    case EPERM:
    case EROFS:
        return IVM_ERROR_PERMISSION;
    case ENOENT:
    case ESRCH:
        return IVM_ERROR_NOT_FOUND;
    case EINVAL:
        return IVM_ERROR_INVALID_VALUE;
    default:
        return e == 0 ? IVM_ERROR_INTERNAL : ivm_status_from_errno(e);
    }
}

static void ivm_cgroup_sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ms * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Write text to a cgroup file (path); errno is kept for the caller. */
static ivmError_t ivm_cgroup_write(const char *path, const char *text, char *err,
                                   size_t errlen)
{
    size_t len = strlen(text);
    int fd = open(path, O_WRONLY | O_CLOEXEC), e;
    ssize_t n;

    if (fd < 0) {
        e = errno;
        ivm_cgroup_errf(err, errlen, "cannot open %s: %s", path, strerror(e));
        errno = e;
        return ivm_cgroup_status(e);
    }
    n = write(fd, text, len);
    e = n < 0 ? errno : 0;
    close(fd);
    if (n != (ssize_t)len) {
        ivm_cgroup_errf(err, errlen, "cannot write '%s' to %s: %s", text, path,
                        e != 0 ? strerror(e) : "short write");
        errno = e;
        return ivm_cgroup_status(e);
    }
    return IVM_SUCCESS;
}

/* Read a small cgroup file into buf (NUL-terminated). */
static ivmError_t ivm_cgroup_read(const char *path, char *buf, size_t len, char *err,
                                  size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC), e;
    ssize_t n;

    if (fd < 0) {
        e = errno;
        ivm_cgroup_errf(err, errlen, "cannot open %s: %s", path, strerror(e));
        return ivm_cgroup_status(e);
    }
    n = read(fd, buf, len - 1);
    e = errno;
    close(fd);
    if (n < 0) {
        ivm_cgroup_errf(err, errlen, "cannot read %s: %s", path, strerror(e));
        return ivm_cgroup_status(e);
    }
    buf[n] = '\0';
    return IVM_SUCCESS;
}

/* Whether word is one of the separated words of list (seps: separators). */
static int ivm_cgroup_has_word(const char *list, const char *word, const char *seps)
{
    size_t wlen = strlen(word);
    const char *p = list;

    while (*p != '\0') {
        size_t n = strcspn(p, seps);
        if (n == wlen && strncmp(p, word, wlen) == 0) {
            return 1;
        }
        p += n;
        p += (*p != '\0');
    }
    return 0;
}

/* Undo mountinfo's octal escapes (\040 for a blank) in place. */
static void ivm_cgroup_unescape(char *s)
{
    char *out = s;

    while (*s != '\0') {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            *out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 4;
        } else {
            *out++ = *s++;
        }
    }
    *out = '\0';
}

typedef struct ivm_cgroup_mount {
    int  version;
    char root[IVM_CGROUP_PATH_MAX];  /* the mount's root inside its hierarchy */
    char point[IVM_CGROUP_PATH_MAX]; /* where it is mounted */
} ivm_cgroup_mount_t;

/* One mountinfo line: a cgroup v1 mount with the cpu controller (1), a
 * cgroup2 mount whose cgroup.controllers lists cpu (2), or neither (0). */
static int ivm_cgroup_mount_parse(char *line, ivm_cgroup_mount_t *m)
{
    char *dash = strstr(line, " - "), *f[5], *save = NULL, *fstype, *superopts;
    char path[IVM_CGROUP_PATH_MAX + 32], ctl[512], scratch[8];
    int i;

    if (dash == NULL) {
        return 0;
    }
    *dash = '\0';
    f[0] = strtok_r(line, " ", &save);
    for (i = 1; i < 5 && f[i - 1] != NULL; ++i) {
        f[i] = strtok_r(NULL, " ", &save);
    }
    save   = NULL;
    fstype = strtok_r(dash + 3, " ", &save);
    (void)strtok_r(NULL, " ", &save); /* source */
    superopts = strtok_r(NULL, " \n", &save);
    if (i < 5 || f[4] == NULL || fstype == NULL || superopts == NULL ||
        strlen(f[3]) >= sizeof(m->root) || strlen(f[4]) >= sizeof(m->point)) {
        return 0;
    }
    strcpy(m->root, f[3]);
    strcpy(m->point, f[4]);
    ivm_cgroup_unescape(m->root);
    ivm_cgroup_unescape(m->point);
    if (strcmp(fstype, "cgroup") == 0 && ivm_cgroup_has_word(superopts, "cpu", ",")) {
        return m->version = 1;
    }
    if (strcmp(fstype, "cgroup2") == 0) {
        snprintf(path, sizeof(path), "%s/cgroup.controllers", m->point);
        if (ivm_cgroup_read(path, ctl, sizeof(ctl), scratch, sizeof(scratch)) == IVM_SUCCESS &&
            ivm_cgroup_has_word(ctl, "cpu", " \n")) {
            return m->version = 2;
        }
    }
    return 0;
}

/* The mount of the hierarchy with the cpu controller (v1 preferred: while
 * a v1 hierarchy holds it, the unified one cannot). */
static ivmError_t ivm_cgroup_mount_find(ivm_cgroup_mount_t *m, char *err, size_t errlen)
{
    ivm_cgroup_mount_t cand, v2 = {.version = 0};
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char line[4096];
    int found = 0;

    if (f == NULL) {
        ivm_cgroup_errf(err, errlen, "cannot read /proc/self/mountinfo: %s", strerror(errno));
        return IVM_ERROR_UNSUPPORTED;
    }
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        switch (ivm_cgroup_mount_parse(line, &cand)) {
        case 1:
            *m    = cand;
            found = 1;
            break;
        case 2:
            if (v2.version == 0) {
                v2 = cand;
            }
            break;
        default:
            break;
        }
    }
    fclose(f);
    if (!found && v2.version == 0) {
        ivm_cgroup_errf(err, errlen, "no cgroup hierarchy with the cpu controller is mounted "
                        "(none in /proc/self/mountinfo)");
        return IVM_ERROR_UNSUPPORTED;
    }
    if (!found) {
        *m = v2;
    }
    return IVM_SUCCESS;
}

/* The caller's cgroup path in the hierarchy of version (from
 * /proc/self/cgroup) into buf. */
static ivmError_t ivm_cgroup_self_path(int version, char *buf, size_t len, char *err,
                                       size_t errlen)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    char line[4096], *c1, *c2;
    int found = 0;

    if (f == NULL) {
        ivm_cgroup_errf(err, errlen, "cannot read /proc/self/cgroup: %s", strerror(errno));
        return IVM_ERROR_UNSUPPORTED;
    }
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        c1 = strchr(line, ':');
        c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL) {
            continue;
        }
        *c2 = '\0';
        if (version == 2 ? (strcmp(line, "0:") == 0)
                         : ivm_cgroup_has_word(c1 + 1, "cpu", ",")) {
            found = snprintf(buf, len, "%s", c2 + 1) < (int)len;
        }
    }
    fclose(f);
    if (!found) {
        ivm_cgroup_errf(err, errlen, "/proc/self/cgroup names no cgroup of this process in "
                        "the %s hierarchy", version == 2 ? "unified" : "cpu");
        return IVM_ERROR_UNSUPPORTED;
    }
    return IVM_SUCCESS;
}

ivmError_t ivm_cgroup_root_find(ivm_cgroup_root_t *root, char *err, size_t errlen)
{
    char self[IVM_CGROUP_PATH_MAX], path[IVM_CGROUP_PATH_MAX + 32], ctl[512];
    ivm_cgroup_mount_t m;
    const char *rest;
    ivmError_t status;
    size_t rlen;

    status = ivm_cgroup_mount_find(&m, err, errlen);
    if (status == IVM_SUCCESS) {
        status = ivm_cgroup_self_path(m.version, self, sizeof(self), err, errlen);
    }
    if (status != IVM_SUCCESS) {
        return status;
    }
    /* The path is from the hierarchy's root; the mount shows m.root there. */
    rlen = strcmp(m.root, "/") == 0 ? 0 : strlen(m.root);
    rest = (strncmp(self, m.root, rlen) == 0 && (self[rlen] == '/' || self[rlen] == '\0'))
               ? self + rlen : self;
    if (snprintf(root->parent, sizeof(root->parent), "%s%s", m.point,
                 strcmp(rest, "/") == 0 ? "" : rest) >= (int)sizeof(root->parent)) {
        ivm_cgroup_errf(err, errlen, "the cgroup path %s%s is too long", m.point, rest);
        return IVM_ERROR_INVALID_VALUE;
    }
    root->version = m.version;
    if (m.version == 2) {
        snprintf(path, sizeof(path), "%s/cgroup.controllers", root->parent);
        status = ivm_cgroup_read(path, ctl, sizeof(ctl), err, errlen);
        if (status == IVM_SUCCESS && !ivm_cgroup_has_word(ctl, "cpu", " \n")) {
            ivm_cgroup_errf(err, errlen, "the cpu controller is not available in %s (its "
                            "parent's cgroup.subtree_control lacks cpu)", root->parent);
            return IVM_ERROR_UNSUPPORTED;
        }
        return status;
    }
    return IVM_SUCCESS;
}

void ivm_cgroup_period(uint32_t cpu_pct, uint64_t *period_us_p, uint64_t *quota_us_p)
{
    uint64_t period, quota;

    if (cpu_pct == 0) {
        *period_us_p = *quota_us_p = 0;
        return;
    }
    period = ((uint64_t)IVM_CGROUP_QUOTA_MIN_US * 100 + cpu_pct - 1) / cpu_pct;
    if (period < IVM_CGROUP_PERIOD_MIN_US) {
        period = IVM_CGROUP_PERIOD_MIN_US;
    }
    if (period > IVM_CGROUP_PERIOD_MAX_US) {
        period = IVM_CGROUP_PERIOD_MAX_US;
    }
    quota = period * cpu_pct / 100;
    *period_us_p = period;
    *quota_us_p  = quota < IVM_CGROUP_QUOTA_MIN_US ? IVM_CGROUP_QUOTA_MIN_US : quota;
}

ivmError_t ivm_cgroup_path(const ivm_cgroup_root_t *root, const char *rel, const char *file,
                           char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s%s%s%s%s", root->parent, rel[0] != '\0' ? "/" : "", rel,
                     file != NULL ? "/" : "", file != NULL ? file : "");

    return (n < 0 || (size_t)n >= len) ? IVM_ERROR_INVALID_VALUE : IVM_SUCCESS;
}

/* The start time of pid (clock ticks since boot, /proc/<pid>/stat field 22). */
static int ivm_cgroup_proc_start(pid_t pid, unsigned long long *start_p)
{
    char path[64], buf[1024], *p;
    int fd, field;
    ssize_t n;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return -1;
    }
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* the command name may hold blanks and parentheses */
    for (field = 2; p != NULL && field < 22; ++field) { /* to the blank before field 22 */
        p = strchr(p + 1, ' ');
    }
    return (p != NULL && sscanf(p + 1, "%llu", start_p) == 1) ? 0 : -1;
}

ivmError_t ivm_cgroup_owner_dir(const char *prefix, pid_t pid, char *buf, size_t len)
{
    unsigned long long start;
    int n;

    if (pid == 0) {
        pid = getpid();
    }
    if (ivm_cgroup_proc_start(pid, &start) != 0) {
        return IVM_ERROR_NOT_FOUND;
    }
    n = snprintf(buf, len, "%s/%s-%d-%llu", IVM_CGROUP_TOP, prefix, (int)pid, start);
    return (n < 0 || (size_t)n >= len) ? IVM_ERROR_INVALID_VALUE : IVM_SUCCESS;
}

int ivm_cgroup_owner_stale(const char *prefix, const char *name)
{
    size_t plen = strlen(prefix);
    unsigned long long start, now;
    int pid, used = -1;

    if (strncmp(name, prefix, plen) != 0 || name[plen] != '-' ||
        sscanf(name + plen, "-%d-%llu%n", &pid, &start, &used) != 2 ||
        name[plen + (size_t)used] != '\0' || pid <= 0) {
        return -1;
    }
    return (ivm_cgroup_proc_start((pid_t)pid, &now) != 0 || now != start) ? 1 : 0;
}

/* v2: make sure dir's children have the cpu controller. */
static ivmError_t ivm_cgroup_enable_cpu(const ivm_cgroup_root_t *root, const char *dir,
                                       char *err, size_t errlen)
{
    char path[IVM_CGROUP_PATH_MAX + 32], ctl[512];
    ivmError_t status;

    if (root->version != 2) {
        return IVM_SUCCESS;
    }
    snprintf(path, sizeof(path), "%s/cgroup.subtree_control", dir);
    status = ivm_cgroup_read(path, ctl, sizeof(ctl), err, errlen);
    if (status != IVM_SUCCESS || ivm_cgroup_has_word(ctl, "cpu", " \n")) {
        return status;
    }
    status = ivm_cgroup_write(path, "+cpu", err, errlen);
    if (status != IVM_SUCCESS && errno == EBUSY) {
        size_t used = strlen(err);
        snprintf(err + used, errlen > used ? errlen - used : 0,
                 " (cgroup v2 gives no controller to the children of a cgroup that holds "
                 "processes: run this program in a cgroup of its own)");
    }
    return status;
}

/* mkdir each missing directory of rel under the parent; *made_p: the last
 * one (the group itself) was made here. ENOENT: an ancestor was removed
 * meanwhile (an owner removing an empty "ivm"), for the caller to retry. */
static ivmError_t ivm_cgroup_mkdirs(const ivm_cgroup_root_t *root, const char *rel,
                                    int *made_p, char *err, size_t errlen)
{
    char dir[IVM_CGROUP_PATH_MAX];
    size_t len = strlen(root->parent), n;
    const char *p = rel;
    ivmError_t status;
    int e;

    memcpy(dir, root->parent, len + 1);
    while (*p != '\0') {
        n = strcspn(p, "/");
        status = ivm_cgroup_enable_cpu(root, dir, err, errlen); /* dir: the one above */
        if (status != IVM_SUCCESS) {
            return status;
        }
        if (len + 1 + n >= sizeof(dir)) {
            ivm_cgroup_errf(err, errlen, "the cgroup path %s/%s is too long", root->parent,
                            rel);
            return IVM_ERROR_INVALID_VALUE;
        }
        dir[len++] = '/';
        memcpy(dir + len, p, n);
        len += n;
        dir[len] = '\0';
        *made_p = mkdir(dir, 0755) == 0;
        if (!*made_p && errno != EEXIST) {
            e = errno;
            ivm_cgroup_errf(err, errlen, "cannot create cgroup %s: %s", dir, strerror(e));
            return ivm_cgroup_status(e);
        }
        p += n + (p[n] == '/');
    }
    return IVM_SUCCESS;
}

ivmError_t ivm_cgroup_create(const ivm_cgroup_root_t *root, const char *rel, uint32_t cpu_pct,
                             char *err, size_t errlen)
{
    char dir[IVM_CGROUP_PATH_MAX];
    ivmError_t status;
    int made = 0, tries;

    if (rel[0] == '\0' || rel[0] == '/' || strstr(rel, "//") != NULL ||
        rel[strlen(rel) - 1] == '/') {
        ivm_cgroup_errf(err, errlen, "'%s' is not a relative cgroup path", rel);
        return IVM_ERROR_INVALID_VALUE;
    }
    for (tries = 0; tries < 3; ++tries) {
        status = ivm_cgroup_mkdirs(root, rel, &made, err, errlen);
        if (status != IVM_ERROR_NOT_FOUND) {
            break;
        }
    }
    if (status != IVM_SUCCESS) {
        return status;
    }
    status = ivm_cgroup_set_limit(root, rel, cpu_pct, err, errlen);
    if (status != IVM_SUCCESS && made &&
        ivm_cgroup_path(root, rel, NULL, dir, sizeof(dir)) == IVM_SUCCESS) {
        rmdir(dir);
    }
    return status;
}

/* Write value to file of group rel; with optional, a missing file is no
 * error (an older kernel without it). */
static ivmError_t ivm_cgroup_set(const ivm_cgroup_root_t *root, const char *rel,
                                 const char *file, const char *value, int optional,
                                 char *err, size_t errlen)
{
    char path[IVM_CGROUP_PATH_MAX + 32];

    if (ivm_cgroup_path(root, rel, file, path, sizeof(path)) != IVM_SUCCESS) {
        ivm_cgroup_errf(err, errlen, "the cgroup path %s/%s is too long", root->parent, rel);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (optional && access(path, F_OK) != 0 && errno == ENOENT) {
        return IVM_SUCCESS;
    }
    return ivm_cgroup_write(path, value, err, errlen);
}

ivmError_t ivm_cgroup_set_limit(const ivm_cgroup_root_t *root, const char *rel,
                                uint32_t cpu_pct, char *err, size_t errlen)
{
    uint64_t period, quota;
    char text[64];
    ivmError_t status;

    ivm_cgroup_period(cpu_pct, &period, &quota);
    if (root->version == 2) {
        if (cpu_pct == 0) {
            snprintf(text, sizeof(text), "max");
        } else {
            snprintf(text, sizeof(text), "%llu %llu", (unsigned long long)quota,
                     (unsigned long long)period);
        }
        status = ivm_cgroup_set(root, rel, "cpu.max", text, 0, err, errlen);
        return status != IVM_SUCCESS
                   ? status : ivm_cgroup_set(root, rel, "cpu.max.burst", "0", 1, err, errlen);
    }
    /* No limit first: a period and quota are then never refused for the
     * pair they make with the old value of the other. */
    status = ivm_cgroup_set(root, rel, "cpu.cfs_quota_us", "-1", 0, err, errlen);
    if (status == IVM_SUCCESS && cpu_pct != 0) {
        snprintf(text, sizeof(text), "%llu", (unsigned long long)period);
        status = ivm_cgroup_set(root, rel, "cpu.cfs_period_us", text, 0, err, errlen);
        snprintf(text, sizeof(text), "%llu", (unsigned long long)quota);
        if (status == IVM_SUCCESS) {
            status = ivm_cgroup_set(root, rel, "cpu.cfs_quota_us", text, 0, err, errlen);
        }
    }
    if (status == IVM_SUCCESS) {
        status = ivm_cgroup_set(root, rel, "cpu.cfs_burst_us", "0", 1, err, errlen);
    }
    return status;
}

ivmError_t ivm_cgroup_get_limit(const ivm_cgroup_root_t *root, const char *rel,
                                uint64_t *quota_us_p, uint64_t *period_us_p, char *err,
                                size_t errlen)
{
    char path[IVM_CGROUP_PATH_MAX + 32], text[128];
    long long quota = -1, period = 0;
    ivmError_t status;

    if (ivm_cgroup_path(root, rel, "cpu.cfs_period_us", path, sizeof(path)) != IVM_SUCCESS) {
        ivm_cgroup_errf(err, errlen, "the cgroup path %s/%s is too long", root->parent, rel);
        return IVM_ERROR_INVALID_VALUE;
    }
    ivm_cgroup_path(root, rel, root->version == 2 ? "cpu.max" : "cpu.cfs_quota_us", path,
                    sizeof(path));
    status = ivm_cgroup_read(path, text, sizeof(text), err, errlen);
    if (status == IVM_SUCCESS && root->version == 2) {
        if (sscanf(text, "%lld %lld", &quota, &period) != 2 &&
            sscanf(text, "max %lld", &period) != 1) {
            ivm_cgroup_errf(err, errlen, "%s holds '%s', not 'QUOTA PERIOD'", path, text);
            return IVM_ERROR_INTERNAL;
        }
    } else if (status == IVM_SUCCESS) {
        quota = strtoll(text, NULL, 10);
        ivm_cgroup_path(root, rel, "cpu.cfs_period_us", path, sizeof(path));
        status = ivm_cgroup_read(path, text, sizeof(text), err, errlen);
        period = strtoll(text, NULL, 10);
    }
    if (status != IVM_SUCCESS) {
        return status;
    }
    *quota_us_p  = quota > 0 ? (uint64_t)quota : 0;
    *period_us_p = period > 0 ? (uint64_t)period : 0;
    return IVM_SUCCESS;
}

ivmError_t ivm_cgroup_attach(const ivm_cgroup_root_t *root, const char *rel, pid_t pid,
                             char *err, size_t errlen)
{
    char text[32];

    snprintf(text, sizeof(text), "%d", (int)(pid == 0 ? getpid() : pid));
    return ivm_cgroup_set(root, rel, "cgroup.procs", text, 0, err, errlen);
}

int ivm_cgroup_join(const char *procs_path)
{
    int fd = open(procs_path, O_WRONLY | O_CLOEXEC), e = 0;

    if (fd < 0) {
        return errno;
    }
    if (write(fd, "0", 1) != 1) {
        e = errno != 0 ? errno : EIO;
    }
    close(fd);
    return e;
}

/* Move every process of the group at dir to the parent's cgroup.procs. */
static ivmError_t ivm_cgroup_evacuate(const ivm_cgroup_root_t *root, const char *dir,
                                      char *err, size_t errlen)
{
    char path[IVM_CGROUP_PATH_MAX + 32], to[IVM_CGROUP_PATH_MAX + 32], pid[32];
    ivmError_t status = IVM_SUCCESS;
    FILE *f;

    snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
    snprintf(to, sizeof(to), "%s/cgroup.procs", root->parent);
    f = fopen(path, "re");
    if (f == NULL) {
        return IVM_SUCCESS; /* gone, or unreadable: the rmdir that follows says which */
    }
    while (status == IVM_SUCCESS && fgets(pid, sizeof(pid), f) != NULL) {
        pid[strcspn(pid, "\n")] = '\0';
        status = ivm_cgroup_write(to, pid, err, errlen);
        if (status == IVM_ERROR_NOT_FOUND && errno == ESRCH) {
            status = IVM_SUCCESS; /* it exited meanwhile */
        }
    }
    fclose(f);
    return status;
}

/* Remove the group at dir and its subgroups, depth first. */
static ivmError_t ivm_cgroup_remove(const ivm_cgroup_root_t *root, const char *dir, int depth,
                                    char *err, size_t errlen)
{
    char sub[IVM_CGROUP_PATH_MAX];
    ivmError_t status = IVM_SUCCESS;
    struct dirent *de;
    DIR *dp = opendir(dir);
    int tries, e;

    if (dp == NULL) {
        e = errno;
        if (e == ENOENT) {
            return IVM_SUCCESS;
        }
        ivm_cgroup_errf(err, errlen, "cannot list cgroup %s: %s", dir, strerror(e));
        return ivm_cgroup_status(e);
    }
    while (status == IVM_SUCCESS && (de = readdir(dp)) != NULL) {
        if (de->d_type != DT_DIR || strcmp(de->d_name, ".") == 0 ||
            strcmp(de->d_name, "..") == 0) {
            continue;
        }
        if (depth > 16 || snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name) >=
                              (int)sizeof(sub)) {
            ivm_cgroup_errf(err, errlen, "cgroup %s/%s is too deep or its path too long", dir,
                            de->d_name);
            status = IVM_ERROR_INVALID_VALUE;
            break;
        }
        status = ivm_cgroup_remove(root, sub, depth + 1, err, errlen);
    }
    closedir(dp);
    for (tries = 0; status == IVM_SUCCESS; ++tries) {
        status = ivm_cgroup_evacuate(root, dir, err, errlen);
        if (status != IVM_SUCCESS || rmdir(dir) == 0 || errno == ENOENT) {
            break;
        }
        e = errno;
        if (e != EBUSY || tries + 1 >= IVM_CGROUP_RMDIR_TRIES) {
            ivm_cgroup_errf(err, errlen, "cannot remove cgroup %s: %s", dir, strerror(e));
            return ivm_cgroup_status(e);
        }
        ivm_cgroup_sleep_ms(5);
    }
    return status;
}

ivmError_t ivm_cgroup_destroy(const ivm_cgroup_root_t *root, const char *rel, char *err,
                              size_t errlen)
{
    char dir[IVM_CGROUP_PATH_MAX];

    if (rel[0] == '\0' || ivm_cgroup_path(root, rel, NULL, dir, sizeof(dir)) != IVM_SUCCESS) {
        ivm_cgroup_errf(err, errlen, "'%s' names no group under %s", rel, root->parent);
        return IVM_ERROR_INVALID_VALUE;
    }
    return ivm_cgroup_remove(root, dir, 0, err, errlen);
}

void ivm_cgroup_top_remove(const ivm_cgroup_root_t *root)
{
    char dir[IVM_CGROUP_PATH_MAX];

    if (ivm_cgroup_path(root, IVM_CGROUP_TOP, NULL, dir, sizeof(dir)) == IVM_SUCCESS) {
        rmdir(dir); /* fails while another owner's directory is in it */
    }
}

ivmError_t ivm_cgroup_sweep(const ivm_cgroup_root_t *root, const char *prefix, int *removed_p,
                            char *err, size_t errlen)
{
    char top[IVM_CGROUP_PATH_MAX], rel[IVM_CGROUP_PATH_MAX], err1[256];
    ivmError_t status = IVM_SUCCESS, one;
    struct dirent *de;
    int removed = 0;
    DIR *dp;

    if (ivm_cgroup_path(root, IVM_CGROUP_TOP, NULL, top, sizeof(top)) != IVM_SUCCESS) {
        ivm_cgroup_errf(err, errlen, "the cgroup path %s/%s is too long", root->parent,
                        IVM_CGROUP_TOP);
        return IVM_ERROR_INVALID_VALUE;
    }
    dp = opendir(top);
    if (dp == NULL) {
        int e = errno;
        if (e == ENOENT) {
            goto out;
        }
        ivm_cgroup_errf(err, errlen, "cannot list %s: %s", top, strerror(e));
        return ivm_cgroup_status(e);
    }
    while ((de = readdir(dp)) != NULL) {
        if (de->d_type != DT_DIR || ivm_cgroup_owner_stale(prefix, de->d_name) != 1 ||
            snprintf(rel, sizeof(rel), "%s/%s", IVM_CGROUP_TOP, de->d_name) >=
                (int)sizeof(rel)) {
            continue;
        }
        one = ivm_cgroup_destroy(root, rel, err1, sizeof(err1));
        if (one == IVM_SUCCESS) {
            ++removed;
        } else if (status == IVM_SUCCESS) {
            status = one;
            snprintf(err, errlen, "%s", err1);
        }
    }
    closedir(dp);
out:
    if (removed_p != NULL) {
        *removed_p = removed;
    }
    return status;
}
