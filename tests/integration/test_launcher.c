/*
 * Launcher death ends the run: ivmrun SIGKILLed while a job holds a PE on
 * every node (pe_faults hold_nodes). Within about a second nothing of the run
 * may be left: no process (PEs, root, daemons ivmrun started, the guard), no
 * socket or run directory, no cgroup of a daemon that is gone. A daemon that
 * ivmrun did not start stays up, but the dead launcher's job ends on it.
 * (The mpirun and srun paths: ivmrun/test-hosts.sh, ivmrun/test-slurm.sh.)
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define LAUNCHER_GONE_LIMIT 2.0 /* s: "within about a second", on a loaded machine */
#define LAUNCHER_MAX_PIDS   64

/* The process is gone: no such pid, or a zombie (dead; here init may reap
 * its orphans only now and then). */
static int proc_gone(pid_t pid)
{
    char path[64], stat[256], *paren;
    FILE *f;

    if (kill(pid, 0) != 0 && errno == ESRCH) {
        return 1;
    }
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return 1;
    }
    stat[0] = '\0';
    if (fgets(stat, sizeof(stat), f) == NULL) {
        stat[0] = '\0';
    }
    fclose(f);
    paren = strrchr(stat, ')');
    return paren != NULL && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

/* What of the run is still there (malloc'd; "" when nothing): the PEs in
 * pids, processes whose environment or command line names the run's
 * directory, and, with dir_empty, entries of that directory. */
static char *run_left(const ivmt_launch_t *c, const pid_t *pids, int n, int dir_empty)
{
    const char *entries[] = {c->dir_env, NULL};
    pid_t found[LAUNCHER_MAX_PIDS], alive[LAUNCHER_MAX_PIDS];
    int nfound, nalive = 0;
    char *text = NULL, *procs;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    cr_assert_not_null(f);
    for (int i = 0; i < n; ++i) {
        if (!proc_gone(pids[i])) {
            alive[nalive++] = pids[i];
        }
    }
    if (nalive > 0) {
        procs = ivmt_describe_procs(alive, nalive);
        fprintf(f, "PEs: %s\n", procs);
        free(procs);
    }
    nfound = ivmt_find_procs(0, c->proc.pid, entries, c->dir, found, LAUNCHER_MAX_PIDS);
    if (nfound > 0) {
        procs = ivmt_describe_procs(found, nfound);
        fprintf(f, "processes of the run: %s\n", procs);
        free(procs);
    }
    if (dir_empty) {
        char cmd[IVMT_PATH_MAX + 32];
        FILE *ls;
        snprintf(cmd, sizeof(cmd), "ls -A '%s'", c->dir);
        ls = popen(cmd, "r");
        if (ls != NULL) {
            char line[512];
            while (fgets(line, sizeof(line), ls) != NULL) {
                fprintf(f, "in %s: %s", c->dir, line);
            }
            pclose(ls);
        }
    }
    fclose(f);
    return text;
}

/* The test failed: end what is left of the run (SIGTERM first, so that
 * daemons remove their cgroups). */
static void run_kill(const ivmt_launch_t *c, const pid_t *pids, int n)
{
    const char *entries[] = {c->dir_env, NULL};
    pid_t found[LAUNCHER_MAX_PIDS];
    int nfound = ivmt_find_procs(0, c->proc.pid, entries, c->dir, found, LAUNCHER_MAX_PIDS);

    for (int sig = SIGTERM;; sig = SIGKILL) {
        for (int i = 0; i < nfound; ++i) {
            kill(found[i], sig);
        }
        for (int i = 0; i < n; ++i) {
            kill(pids[i], sig);
        }
        if (sig == SIGKILL) {
            break;
        }
        ivmt_sleep_ms(500);
    }
    ivmt_remove_dir(c->dir);
}

/* Wait until run_left is empty; the seconds since t0, or fail after the limit. */
static double wait_run_gone(const ivmt_launch_t *c, const pid_t *pids, int n, int dir_empty,
                            double t0, const char *what)
{
    for (;;) {
        char *left = run_left(c, pids, n, dir_empty);
        double dt = ivmt_now() - t0;
        if (left[0] == '\0') {
            free(left);
            return dt;
        }
        if (dt > LAUNCHER_GONE_LIMIT) {
            run_kill(c, pids, n);
            cr_assert_fail("%s: %.2f s after the kill, this is left:\n%s", what, dt, left);
        }
        free(left);
        ivmt_sleep_ms(5);
    }
}

/* Start `ivmrun ARGS... pe_faults hold_nodes` and wait for its PIDS line. */
static int start_holding(ivmt_launch_t *c, const char *const *args, pid_t *pids, int max)
{
    ivmt_launch_start(IVMT_IVMRUN, args, c);
    if (!ivmt_wait_output(&c->proc, "PIDS ", 60)) {
        ivmt_result_t r;
        char *desc;
        ivmt_launch_finish(c, 5, &r);
        desc = ivmt_describe(NULL, &r);
        cr_assert_fail("the job never held its PEs:\n%s", desc);
    }
    {
        char *out = ivmt_proc_output(&c->proc);
        int n = ivmt_parse_pids(out, "PIDS", pids, max);
        free(out);
        return n;
    }
}

/* SIGKILL the launcher; everything gone within the limit; it died by signal 9. */
static void kill_and_check(ivmt_launch_t *c, const pid_t *pids, int n, const char *what)
{
    ivmt_result_t r;
    double t0, dt;

    t0 = ivmt_now();
    cr_assert_eq(kill(c->proc.pid, SIGKILL), 0);
    dt = wait_run_gone(c, pids, n, 1, t0, what);
    cr_log_info("%s: the run was gone %.0f ms after the SIGKILL of ivmrun", what, dt * 1000);
    ivmt_launch_finish_clean(c, 10, &r);
    cr_expect_eq(r.signo, SIGKILL, "%s: ivmrun ended with status %d signal %d", what, r.code,
                 r.signo);
    ivmt_result_free(&r);
}

TestSuite(launcher, .timeout = 120);

/* --nodes 3: the three daemons ivmrun started, their PEs and the root are
 * gone, and so is the run directory. With cgroup CPU limits, every node's
 * device is a share, so the PEs sit in cgroups, which must go too. */
Test(launcher, nodes3_ivmrun_killed)
{
    const char *plain[] = {"--nodes", "3", "--timeout", "100", IVMT_PE_FAULTS, "hold_nodes",
                           NULL};
    const char *shares[] = {"--nodes", "3", "--node-cpu-devices", "0:60;0:60;0:60",
                            "--timeout", "100", IVMT_PE_FAULTS, "hold_nodes", NULL};
    char why[256];
    int cg = ivmt_cgroup_writable(why, sizeof(why));
    pid_t pids[LAUNCHER_MAX_PIDS];
    ivmt_launch_t c;
    int n;

    if (!cg) {
        cr_log_warn("no cgroup CPU limits here (%s): run without CPU shares", why);
    }
    n = start_holding(&c, cg ? shares : plain, pids, LAUNCHER_MAX_PIDS);
    cr_assert_eq(n, 4, "PIDS of the root and one PE per node expected, got %d", n);
    kill_and_check(&c, pids, n, "--nodes 3");
}

/* --nodes 1, a daemon ivmrun started for the run: it stops too. */
Test(launcher, started_daemon_ivmrun_killed)
{
    const char *args[] = {"--timeout", "100", IVMT_PE_FAULTS, "hold_nodes", NULL};
    pid_t pids[LAUNCHER_MAX_PIDS];
    ivmt_launch_t c;
    int n;

    n = start_holding(&c, args, pids, LAUNCHER_MAX_PIDS);
    cr_assert_eq(n, 2, "PIDS of the root and its PE expected, got %d", n);
    kill_and_check(&c, pids, n, "--nodes 1");
}

/* A daemon started by hand, shared: it stays up, and the dead launcher's job
 * ends on it (PEs killed, objects released). PROGRAM is a shell that runs the
 * root PE in the background and itself waits in `sleep`: the guard kills the
 * root's whole process group, the shell, sleep and the root. */
Test(launcher, shared_daemon_ivmrun_killed, .init = ivmt_fixture_start,
     .fini = ivmt_fixture_stop)
{
    const char *args[] = {"--socket", ivmt_d.sock, "--timeout", "100", "sh", "-c",
                          "\"$0\" hold_nodes & exec sleep 100", IVMT_PE_FAULTS, NULL};
    pid_t pids[LAUNCHER_MAX_PIDS];
    ivm_msg_info_rep_t info;
    const char *why = "";
    ivmt_launch_t c;
    double t0;
    int n;

    n = start_holding(&c, args, pids, LAUNCHER_MAX_PIDS);
    cr_assert_eq(n, 2, "PIDS of the root and its PE expected, got %d", n);
    cr_assert_eq(ivmt_info(ivmt_d.sock, &info, &why), 0, "%s", why);
    cr_assert_eq(info.jobs, 1);
    t0 = ivmt_now();
    cr_assert_eq(kill(c.proc.pid, SIGKILL), 0);
    wait_run_gone(&c, pids, n, 0, t0, "shared daemon");
    for (;;) {
        cr_assert_eq(ivmt_info(ivmt_d.sock, &info, &why), 0, "the shared daemon: %s", why);
        if (info.jobs == 0 && info.pes == 0 && info.objects == 0) {
            break;
        }
        cr_assert_leq(ivmt_now() - t0, LAUNCHER_GONE_LIMIT,
                      "the shared daemon still holds %u job(s), %u PE(s), %u object(s) "
                      "%.2f s after ivmrun was killed", info.jobs, info.pes, info.objects,
                      ivmt_now() - t0);
        ivmt_sleep_ms(5);
    }
    cr_log_info("shared daemon: the job was gone %.0f ms after the SIGKILL of ivmrun",
                (ivmt_now() - t0) * 1000);
    {
        ivmt_result_t r;
        ivmt_launch_finish(&c, 10, &r);
        cr_expect_eq(r.signo, SIGKILL);
        cr_expect(strstr(r.err, "guard killed the root PE") != NULL,
                  "the guard said nothing on stderr: %s", r.err);
        ivmt_result_free(&r);
    }
    ivmt_daemon_finish(&ivmt_d);
}
