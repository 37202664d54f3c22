/* Integration: the ivmrun launcher. Each run gets a private IVM_SOCKET_DIR;
 * afterwards no process of that run may be left. */
#include <criterion/criterion.h>

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

TestSuite(ivmrun, .timeout = 60);

/* ivmrun ARGS... with a private socket directory; checks nothing is left. */
static void ivmrun(const char *const *args, double timeout_s, ivmt_result_t *r)
{
    ivmt_launch_t c;

    ivmt_launch_start(IVMT_IVMRUN, args, &c);
    ivmt_launch_finish(&c, timeout_s, r);
}

static void expect_code(const ivmt_result_t *r, int code)
{
    char *why = ivmt_describe(NULL, r);

    cr_assert(!r->timed_out && r->exited && r->code == code, "expected ivmrun to exit %d: %s",
              code, why);
    free(why);
}

Test(ivmrun, exit_code_zero)
{
    const char *args[] = {IVMT_PE_PROC, "exit_code", "0", NULL};
    ivmt_result_t r;

    ivmrun(args, 30, &r);
    expect_code(&r, 0);
    ivmt_result_free(&r);
}

Test(ivmrun, exit_code_passthrough)
{
    const char *args[] = {IVMT_PE_PROC, "exit_code", "3", NULL};
    const char *args2[] = {IVMT_PE_PROC, "exit_code", "42", NULL};
    ivmt_result_t r;

    ivmrun(args, 30, &r);
    expect_code(&r, 3);
    ivmt_result_free(&r);
    ivmrun(args2, 30, &r);
    expect_code(&r, 42);
    ivmt_result_free(&r);
}

Test(ivmrun, killed_program_gives_128_plus_signal)
{
    const char *args[] = {IVMT_PE_PROC, "sigkill", NULL};
    ivmt_result_t r;

    ivmrun(args, 30, &r);
    expect_code(&r, 128 + SIGKILL);
    ivmt_result_free(&r);
}

Test(ivmrun, timeout_kills_everything)
{
    const char *args[] = {"--timeout", "1", IVMT_PE_PROC, "sleep", NULL};
    ivmt_result_t r;
    pid_t pids[2];
    int n;

    ivmrun(args, 30, &r);
    expect_code(&r, 124);
    cr_assert_lt(r.seconds, 10.0, "ivmrun --timeout 1 returned after %.1f s", r.seconds);
    n = ivmt_parse_pids(r.out, "PIDS", pids, 2);
    cr_assert_eq(n, 2, "the program did not get to print its pids:\n%s\n%s", r.out, r.err);
    cr_assert_eq(ivmt_wait_pids_gone(pids, n, ivmt_leftover_grace_s()), 0,
                 "the root PE or its child survived ivmrun --timeout");
    ivmt_result_free(&r);
}

/* SIGTERM to ivmrun: the job is torn down, ivmrun exits 128+15. */
Test(ivmrun, sigterm_is_relayed_and_cleans_up)
{
    const char *args[] = {IVMT_PE_PROC, "sleep", NULL};
    ivmt_launch_t c;
    ivmt_result_t r;
    pid_t pids[2];
    char *out;
    int n;

    ivmt_launch_start(IVMT_IVMRUN, args, &c);
    cr_assert(ivmt_wait_output(&c.proc, "PIDS ", 20), "the program never printed its pids");
    ivmt_sleep_ms(100);
    out = ivmt_proc_output(&c.proc);
    n = ivmt_parse_pids(out, "PIDS", pids, 2);
    free(out);
    kill(c.proc.pid, SIGTERM);
    ivmt_launch_finish(&c, 15, &r);
    expect_code(&r, 128 + SIGTERM);
    cr_assert_lt(r.seconds, 12.0);
    cr_assert_eq(n, 2);
    cr_assert_eq(ivmt_wait_pids_gone(pids, n, ivmt_leftover_grace_s()), 0,
                 "PEs survived SIGTERM to ivmrun");
    ivmt_result_free(&r);
}

/* Two overlapping ivmrun of IVMT_PE_PROC sleep in one socket directory, with
 * opts (NULL or "--socket", PATH) before the program: the first run ends
 * (SIGTERM) while the second's job runs, which must live on (checked once
 * between is called, if not NULL); then the second ends, and nothing of
 * either run is left, the directory empty. */
static void overlapping_runs(const char *const *opts, void (*between)(void *), void *arg)
{
    const char *args[8], *argv[9];
    const char *env[] = {NULL, "XDG_RUNTIME_DIR", NULL};
    ivmt_launch_t first;
    ivmt_proc_t second;
    ivmt_result_t r;
    pid_t pids[2];
    char *out;
    int n = 0;

    argv[0] = IVMT_IVMRUN;
    while (opts != NULL && opts[n] != NULL && n < 4) {
        args[n] = argv[n + 1] = opts[n];
        n++;
    }
    args[n] = argv[n + 1] = IVMT_PE_PROC;
    args[n + 1] = argv[n + 2] = "sleep";
    args[n + 2] = argv[n + 3] = NULL;
    ivmt_launch_start(IVMT_IVMRUN, args, &first);
    cr_assert(ivmt_wait_output(&first.proc, "PIDS ", 20), "the first run never printed its pids");
    env[0] = first.dir_env;
    ivmt_start(argv, env, &second);
    cr_assert(ivmt_wait_output(&second, "PIDS ", 20), "the second run never printed its pids");
    out = ivmt_proc_output(&second);
    n = ivmt_parse_pids(out, "PIDS", pids, 2);
    free(out);
    cr_assert_eq(n, 2);
    kill(first.proc.pid, SIGTERM);
    ivmt_finish(&first.proc, 15, &r);
    expect_code(&r, 128 + SIGTERM);
    ivmt_result_free(&r);
    ivmt_sleep_ms(300);
    cr_assert(kill(pids[0], 0) == 0 && kill(pids[1], 0) == 0,
              "the second run's root PE (pid %d) or its PE (pid %d) died with the first run",
              (int)pids[0], (int)pids[1]);
    if (between != NULL) {
        between(arg);
    }
    /* The second run's end: everything of both runs gone, the directory empty. */
    first.proc = second;
    kill(first.proc.pid, SIGTERM);
    ivmt_launch_finish_clean(&first, 15, &r);
    expect_code(&r, 128 + SIGTERM);
    ivmt_result_free(&r);
}

/* Two runs in one socket directory, neither with a daemon of its own: each
 * starts one for itself, so the end of the first (SIGTERM here) leaves the
 * second's job running. Both once took the default path, the second ran on
 * the first's daemon, and lost its PEs when the first run stopped it. */
Test(ivmrun, overlapping_runs_keep_their_own_daemons)
{
    overlapping_runs(NULL, NULL, NULL);
}

static void socket_still_there(void *sock)
{
    struct stat st;

    cr_assert_eq(lstat(sock, &st), 0, "the shared daemon's socket %s is gone",
                 (const char *)sock);
}

/* Two overlapping runs that name one socket (--socket PATH, no daemon there
 * yet): the first starts a daemon there and the second runs its job on it.
 * That daemon is shared: the first run's end leaves it serving the second
 * job (it once stopped it, and the second job lost its PEs), and it exits by
 * itself once the second run ends (ivmd --exit-when-idle): nothing of either
 * run is left, nor its socket. */
Test(ivmrun, overlapping_runs_share_the_daemon_of_a_named_socket)
{
    char sockdir[IVMT_PATH_MAX], sock[IVMT_PATH_MAX + 16];
    const char *opts[] = {"--socket", sock, NULL};
    struct stat st;

    ivmt_make_tmpdir(sockdir, sizeof(sockdir));
    snprintf(sock, sizeof(sock), "%s/shared.sock", sockdir);
    overlapping_runs(opts, socket_still_there, sock);
    cr_assert_neq(lstat(sock, &st), 0, "the shared daemon left its socket %s", sock);
    cr_assert_eq(rmdir(sockdir), 0, "%s: %s", sockdir, strerror(errno));
}

Test(ivmrun, missing_program_is_127)
{
    const char *args[] = {"/nonexistent/ivm-test-program", NULL};
    ivmt_result_t r;

    ivmrun(args, 30, &r);
    expect_code(&r, 127);
    ivmt_result_free(&r);
}

Test(ivmrun, bad_option_is_2)
{
    const char *args[] = {"--no-such-option", IVMT_PE_PROC, "exit_code", "0", NULL};
    const char *args2[] = {"--timeout", "soon", IVMT_PE_PROC, "exit_code", "0", NULL};
    ivmt_result_t r;

    ivmrun(args, 30, &r);
    expect_code(&r, 2);
    cr_assert(strstr(r.err, "no-such-option") != NULL, "the error names the option: %s",
              r.err);
    ivmt_result_free(&r);
    ivmrun(args2, 30, &r);
    expect_code(&r, 2);
    ivmt_result_free(&r);
}

Test(ivmrun, bad_x_is_2_and_names_why)
{
    static const struct {
        const char *arg, *why;
    } bad[] = {{"IVM_PE_ID=7", "IVM sets IVM_PE_ID"}, {"9LIVES=1", "variable name"},
               {"A-B=1", "not a variable name"}, {"=1", "VAR or VAR=value"}};
    const char *missing[] = {IVMT_PE_PROC, "exit_code", "0", "-x", NULL};
    ivmt_result_t r;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
        const char *args[] = {"-x", bad[i].arg, IVMT_PE_PROC, "exit_code", "0", NULL};

        ivmrun(args, 30, &r);
        expect_code(&r, 2);
        cr_assert(strstr(r.err, bad[i].why) != NULL, "-x %s: want '%s' in: %s", bad[i].arg,
                  bad[i].why, r.err);
        ivmt_result_free(&r);
    }
    /* After PROGRAM, -x is PROGRAM's argument: exit_code 0 ignores the rest. */
    ivmrun(missing, 30, &r);
    expect_code(&r, 0);
    ivmt_result_free(&r);
}

/* --hostfile lines whose slots are wrong, and bad --node-slots: exit 2, the
 * reason (with file:line for a hostfile) on stderr, nothing started. */
Test(ivmrun, bad_slots_are_2_and_name_why)
{
    static const struct {
        const char *line, *why;
    } bad[] = {{"localhost slots=0", ":2: slots must be a whole number 1..65535, got '0'"},
               {"localhost slots=x", ":2: slots must be a whole number 1..65535, got 'x'"},
               {"localhost slots=70000", "got '70000'"},
               {"localhost max_slots=", "max_slots must be a whole number"},
               {"localhost slots=4 max_slots=2", ":2: max_slots=2 is below slots=4"},
               {"localhost cpus=2", ":2: unknown key 'cpus' (known: slots, max_slots)"},
               {"localhost slots=1 slots=2", ":2: slots given twice"},
               {"localhost slots", "expected slots=N or max_slots=N"}};
    static const struct {
        const char *nodes, *slots, *why;
    } opt[] = {{"1", "1", "--node-slots is for several nodes"},
               {"2", "1", "1 entry for 2 nodes"},
               {"2", "1,2,3", "3 entries for 2 nodes"},
               {"2", "1,x", "'x' is not SLOTS or SLOTS:MAX_SLOTS"},
               {"2", "1,2:", "'2:' is not SLOTS"},
               {"2", "3:2,0", "max_slots=2 is below slots=3"}};
    char path[] = "/tmp/ivmt-hostfile-XXXXXX";
    ivmt_result_t r;
    FILE *f;
    int fd;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
        const char *args[] = {"--hostfile", path, IVMT_PE_PROC, "exit_code", "0", NULL};

        strcpy(path, "/tmp/ivmt-hostfile-XXXXXX");
        fd = mkstemp(path);
        cr_assert(fd >= 0 && (f = fdopen(fd, "w")) != NULL, "mkstemp: %s", strerror(errno));
        fprintf(f, "# a comment, then the bad line\n%s\n", bad[i].line);
        fclose(f);
        ivmrun(args, 30, &r);
        unlink(path);
        expect_code(&r, 2);
        cr_assert(strstr(r.err, bad[i].why) != NULL, "'%s': want '%s' in: %s", bad[i].line,
                  bad[i].why, r.err);
        ivmt_result_free(&r);
    }
    for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); ++i) {
        const char *args[] = {"--nodes", opt[i].nodes, "--node-slots", opt[i].slots,
                              IVMT_PE_PROC, "exit_code", "0", NULL};

        ivmrun(args, 30, &r);
        expect_code(&r, 2);
        cr_assert(strstr(r.err, opt[i].why) != NULL, "--nodes %s --node-slots %s: want '%s' "
                  "in: %s", opt[i].nodes, opt[i].slots, opt[i].why, r.err);
        ivmt_result_free(&r);
    }
}

/* --bind-to: two PEs on a device of cores 0-1 get core 0 and core 1 each
 * (core), the device's cores (device, the default; numa on a one-node
 * machine), or every core (none, on a device of core 0 only). */
static void bind_run(const char *devices, const char *bind, const char *want1,
                     const char *want2)
{
    const char *args[] = {"--cpu-devices", devices, "--bind-to", bind, IVMT_PE_API, "bind",
                          NULL};
    char line1[64], line2[64];
    ivmt_result_t r;
    char *why;

    ivmrun(args, 30, &r);
    expect_code(&r, 0);
    why = ivmt_describe(NULL, &r);
    snprintf(line1, sizeof(line1), "AFFINITY 1 %s\n", want1);
    snprintf(line2, sizeof(line2), "AFFINITY 2 %s\n", want2);
    cr_assert(strstr(r.out, line1) != NULL && strstr(r.out, line2) != NULL,
              "--bind-to %s on %s: want '%s' and '%s': %s", bind, devices, want1, want2, why);
    free(why);
    ivmt_result_free(&r);
}

Test(ivmrun, bind_to_core_device_numa_none)
{
    const char *bad[] = {"--bind-to", "socket", IVMT_PE_API, "bind", NULL};
    cpu_set_t set;
    ivmt_result_t r;

    cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
    if (!CPU_ISSET(0, &set) || !CPU_ISSET(1, &set) || CPU_COUNT(&set) != 2) {
        cr_skip_test("needs exactly cores 0 and 1");
    }
    bind_run("0-1", "core", "0", "1");
    bind_run("0-1", "device", "0-1", "0-1");
    bind_run("0-1", "numa", "0-1", "0-1");
    bind_run("0", "device", "0", "0");
    bind_run("0", "none", "0-1", "0-1");
    ivmrun(bad, 30, &r);
    expect_code(&r, 2);
    cr_assert(strstr(r.err, "--bind-to 'socket'") != NULL, "%s", r.err);
    ivmt_result_free(&r);
}

/* CPU devices named by hardware units (hwloc), and the master copy's pages
 * on the NUMA node of the allocating PE's device. A synthetic topology of two
 * NUMA nodes of one core each (HWLOC_SYNTHETIC, read by ivmrun, the daemon it
 * starts and the PEs) stands for a two-socket machine; on the real one-node
 * machine the same run places nothing. */
Test(ivmrun, cpu_devices_by_numa_node_and_master_placement)
{
    const char *args[] = {"--cpu-devices", "numa", IVMT_PE_API, "numa", NULL};
    const char *bad[] = {"--cpu-devices", "numa:0", IVMT_PE_API, "numa", NULL};
    ivmt_result_t r;
    char *why;

    setenv("HWLOC_SYNTHETIC", "pack:1 numa:2 core:1 pu:1", 1);
    ivmrun(args, 30, &r);
    expect_code(&r, 0);
    why = ivmt_describe(NULL, &r);
    cr_assert(strstr(r.out, "POLICY prefer:0\n") != NULL,
              "the root (device 0 = NUMA node 0) allocated elsewhere: %s", why);
    free(why);
    ivmt_result_free(&r);
    ivmrun(bad, 30, &r);
    expect_code(&r, 2);
    cr_assert(strstr(r.err, "share") != NULL, "%s", r.err);
    ivmt_result_free(&r);

    unsetenv("HWLOC_SYNTHETIC");
    ivmrun(args, 30, &r);
    expect_code(&r, 0);
    why = ivmt_describe(NULL, &r);
    if (strstr(r.out, "POLICY default\n") == NULL) {
        cr_assert(strstr(r.out, "POLICY prefer:") != NULL, "%s", why);
    }
    free(why);
    ivmt_result_free(&r);
}

/* --gpus naming GPUs the node lacks is said, not silently ignored: here
 * there is no driver at all, on a one-GPU machine GPU 3 does not exist. */
Test(ivmrun, gpus_that_do_not_exist_are_warned_about)
{
    const char *args[] = {"--gpus", "0,3", IVMT_PE_PROC, "exit_code", "0", NULL};
    ivmt_result_t r;

    ivmrun(args, 30, &r);
    expect_code(&r, 0);
    cr_assert(strstr(r.err, "warn: --gpus 0,3") != NULL, "no warning: %s", r.err);
    ivmt_result_free(&r);
}

static int count_lines_starting(const char *out, const char *prefix)
{
    int n = 0;
    size_t len = strlen(prefix);

    for (const char *p = out; p != NULL && *p != '\0';) {
        if (strncmp(p, prefix, len) == 0) {
            ++n;
        }
        p = strchr(p, '\n');
        if (p != NULL) {
            ++p;
        }
    }
    return n;
}

Test(ivmrun, tag_output)
{
    const char *args[] = {"--tag-output", IVMT_PE_PROC, "hello", NULL};
    ivmt_result_t r;
    char *why;

    ivmrun(args, 30, &r);
    expect_code(&r, 0);
    why = ivmt_describe(NULL, &r);
    cr_assert_eq(count_lines_starting(r.out, "[node0,0] hello from pe 0\n"), 1, "%s", why);
    cr_assert_eq(count_lines_starting(r.out, "[node0,1] hello from pe 1\n"), 1, "%s", why);
    cr_assert_eq(count_lines_starting(r.out, "[node0,2] hello from pe 2\n"), 1, "%s", why);
    cr_assert_eq(count_lines_starting(r.out, "[node0,0] OK hello\n"), 1, "%s", why);
    cr_assert_eq(count_lines_starting(r.out, "hello"), 0, "untagged lines: %s", why);
    free(why);
    ivmt_result_free(&r);
}

Test(ivmrun, no_tag_output_by_default)
{
    const char *args[] = {IVMT_PE_PROC, "hello", NULL};
    ivmt_result_t r;
    char *why;

    ivmrun(args, 30, &r);
    expect_code(&r, 0);
    why = ivmt_describe(NULL, &r);
    for (int i = 0; i < 3; ++i) {
        char line[64];
        snprintf(line, sizeof(line), "hello from pe %d\n", i);
        cr_assert_eq(count_lines_starting(r.out, line), 1, "'%s' %s", line, why);
    }
    cr_assert_null(strstr(r.out, "[node0,"), "%s", why);
    free(why);
    ivmt_result_free(&r);
}

Test(ivmrun, scenario_under_ivmrun)
{
    const char *args[] = {IVMT_PE_MEM, "share", NULL};
    ivmt_result_t r;

    ivmrun(args, 30, &r);
    ivmt_expect_pe_ok(NULL, &r, "share");
    ivmt_result_free(&r);
}

Test(ivmrun, cpu_devices_option)
{
    const char *args[] = {"--cpu-devices", "0,1", IVMT_PE_API, "devices", NULL};
    ivmt_result_t r;
    cpu_set_t set;

    cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
    if (!CPU_ISSET(0, &set) || !CPU_ISSET(1, &set)) {
        cr_skip_test("needs cores 0 and 1");
    }
    ivmrun(args, 30, &r);
    ivmt_expect_pe_ok(NULL, &r, "devices");
    ivmt_result_free(&r);
}

#ifdef IVMT_VECADD
Test(ivmrun, example_vecadd)
{
    const char *args[] = {IVMT_VECADD, NULL};
    ivmt_result_t r;
    char *why;

    ivmrun(args, 40, &r);
    expect_code(&r, 0);
    why = ivmt_describe(NULL, &r);
    cr_assert_eq(count_lines_starting(r.out, "vecadd: OK"), 1, "%s", why);
    free(why);
    ivmt_result_free(&r);
}
#endif

#ifdef IVMT_DSLB
Test(ivmrun, example_dslb)
{
    const char *args[] = {IVMT_DSLB, NULL};
    ivmt_result_t r;
    char *why;

    ivmrun(args, 50, &r);
    expect_code(&r, 0);
    why = ivmt_describe(NULL, &r);
    cr_assert_eq(count_lines_starting(r.out, "dslb: OK"), 1, "%s", why);
    free(why);
    ivmt_result_free(&r);
}
#endif
