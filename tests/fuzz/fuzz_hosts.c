/* libFuzzer target: ivmrun's host list parsers (ivmrun/hostlist.c): --hosts
 * a,b,c, the Open MPI hostfile of --hostfile (with its slots= and
 * max_slots=, which must come out as the daemons accept them), and the host
 * names that `scontrol show hostnames $SLURM_JOB_NODELIST` prints for --slurm.
 * hostlist.c is compiled into this file so that its static parsers can be called;
 * its two calls that leave the process are replaced here: running scontrol
 * (its output is the input) and resolving a name (only "localhost" and the
 * Slurm node name "fuzz0" are this machine).
 * Input: byte 0 (0: --hosts, 1: --hostfile, 2: --slurm, as byte 0 % 3), then
 * the text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ivmrun_proc_spawn    fuzz_hosts_proc_spawn
#define ivmrun_host_is_local fuzz_hosts_is_local
#include "../../ivmrun/hostlist.c"

static const uint8_t *fuzz_hosts_out;
static size_t fuzz_hosts_out_len;

/* "scontrol": writes the input to the pipe ivmrun reads and closes it. The
 * pid is this process's own: waitpid then fails with ECHILD and ivmrun sees
 * the status it started with, 0, a success. */
ivmError_t ivmrun_proc_spawn(const ivmrun_spawn_t *spec, pid_t *pid_p, int *errno_p)
{
    size_t off = 0;
    ssize_t n;

    while (off < fuzz_hosts_out_len) {
        n = write(spec->fd_out, fuzz_hosts_out + off, fuzz_hosts_out_len - off);
        if (n <= 0) {
            break;
        }
        off += (size_t)n;
    }
    close(spec->fd_out);
    *pid_p = getpid();
    return IVM_SUCCESS;
}

int ivmrun_host_is_local(const char *name)
{
    return strcmp(name, "localhost") == 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    setenv("SLURM_JOB_NODELIST", "fuzz[0-3]", 1);
    setenv("SLURMD_NODENAME", "fuzz0", 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static ivmrun_slots_t slots[IVM_CLUSTER_MAX_NODES];
    ivmrun_boot_t b;
    char *text, path[64];
    int mode, fd, code, k, has_slots = 0;

    /* The pipe to "scontrol" holds 64 KiB; the writer must not block. */
    if (size < 1 || size > 60000) {
        return 0;
    }
    mode = data[0] % 3;
    memset(&b, 0, sizeof(b));
    memset(slots, 0, sizeof(slots));
    if (mode == 0) {
        text = malloc(size);
        if (text == NULL) {
            return 0;
        }
        memcpy(text, data + 1, size - 1);
        text[size - 1] = '\0';
        code = ivmrun_hosts_from_list(&b, text);
        free(text);
    } else if (mode == 1) {
        fd = memfd_create("fuzz-hostfile", MFD_CLOEXEC);
        if (fd < 0 || write(fd, data + 1, size - 1) != (ssize_t)(size - 1)) {
            abort();
        }
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        code = ivmrun_hosts_from_file(&b, path, slots, &has_slots);
        close(fd);
    } else {
        fuzz_hosts_out     = data + 1;
        fuzz_hosts_out_len = size - 1;
        code = ivmrun_hosts_from_slurm(&b, slots, &has_slots);
    }
    if (code == 0) {
        if (b.nhosts < 1 || b.nhosts > IVM_CLUSTER_MAX_NODES) {
            abort();
        }
        for (k = 0; k < b.nhosts; ++k) {
            if (b.hosts[k] == NULL || b.hosts[k][0] == '\0' ||
                strlen(b.hosts[k]) > IVMRUN_HOST_NAME_MAX || strpbrk(b.hosts[k], ",: \t\n")) {
                abort(); /* a host name mpirun would read differently */
            }
            if ((slots[k].max_slots != 0 && (slots[k].slots == 0 ||
                                             slots[k].slots > slots[k].max_slots)) ||
                (slots[k].slots != 0 && !has_slots)) {
                abort(); /* slots the daemons would refuse, or lost */
            }
        }
        if (mode == 2 && strcmp(b.hosts[0], "fuzz0") != 0 && strcmp(b.hosts[0], "localhost")) {
            abort(); /* --slurm puts this machine first */
        }
        b.host_list = ivmrun_join(b.hosts, b.nhosts, ',');
    }
    ivmrun_hosts_release(&b);
    return 0;
}
