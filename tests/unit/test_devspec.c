/* Unit tests of CPU device specs (common/devspec.c). */
#include <criterion/criterion.h>

#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "devspec.h"

#define MAXD IVM_DEVSPEC_MAX_DEVICES

static ivm_cpu_device_t devs[MAXD + 1];
static char err[256];

static ivmError_t parse(const char *spec, int ncpus_max, int *n_p)
{
    err[0] = '\0';
    *n_p = -1;
    return ivm_devspec_parse(spec, ncpus_max, devs, MAXD, n_p, err, sizeof(err));
}

/* The device holds exactly the cores [lo, hi]. */
static void assert_range(const ivm_cpu_device_t *dev, int lo, int hi)
{
    cr_assert_eq(dev->ncores, hi - lo + 1);
    cr_assert_eq(CPU_COUNT(&dev->cores), hi - lo + 1);
    for (int c = lo; c <= hi; ++c) {
        cr_assert(CPU_ISSET(c, &dev->cores), "core %d", c);
    }
}

TestSuite(devspec, .timeout = 10);

Test(devspec, three_devices)
{
    int n;

    cr_assert_eq(parse("0-7,8-11,12", 0, &n), IVM_SUCCESS, "%s", err);
    cr_assert_eq(n, 3);
    assert_range(&devs[0], 0, 7);
    assert_range(&devs[1], 8, 11);
    assert_range(&devs[2], 12, 12);
}

Test(devspec, joined_ranges)
{
    int n;

    cr_assert_eq(parse("0-3+8-11", 0, &n), IVM_SUCCESS, "%s", err);
    cr_assert_eq(n, 1);
    cr_assert_eq(devs[0].ncores, 8);
    for (int c = 0; c < 16; ++c) {
        int want = (c <= 3) || (c >= 8 && c <= 11);
        cr_assert_eq(!!CPU_ISSET(c, &devs[0].cores), want, "core %d", c);
    }
    cr_assert_eq(parse("0+2,1+3", 0, &n), IVM_SUCCESS, "%s", err);
    cr_assert_eq(n, 2);
    cr_assert(CPU_ISSET(0, &devs[0].cores) && CPU_ISSET(2, &devs[0].cores));
    cr_assert(CPU_ISSET(1, &devs[1].cores) && CPU_ISSET(3, &devs[1].cores));
    cr_assert_eq(devs[0].ncores, 2);
}

Test(devspec, single_cores)
{
    int n;

    cr_assert_eq(parse("0,1", 2, &n), IVM_SUCCESS, "%s", err);
    cr_assert_eq(n, 2);
    assert_range(&devs[0], 0, 0);
    assert_range(&devs[1], 1, 1);
}

Test(devspec, bound_is_exclusive)
{
    int n;

    cr_assert_eq(parse("0-3", 4, &n), IVM_SUCCESS, "%s", err);
    cr_assert_eq(parse("0-4", 4, &n), IVM_ERROR_INVALID_VALUE, "core 4 of a 4-core node");
    cr_assert(strstr(err, "4") != NULL, "'%s'", err);
    cr_assert_eq(parse("4", 4, &n), IVM_ERROR_INVALID_VALUE);
    cr_assert_eq(parse("0,1+9", 8, &n), IVM_ERROR_INVALID_VALUE);
    cr_assert_eq(parse("99999", 0, &n), IVM_ERROR_INVALID_VALUE,
                 "beyond CPU_SETSIZE even without a bound");
    cr_assert_eq(parse("0-99999999999999999999", 0, &n), IVM_ERROR_INVALID_VALUE);
}

Test(devspec, errors)
{
    static const char *const bad[] = {
        "",        /* empty */
        "3-1",     /* reversed range */
        "0-3,2",   /* core 2 in two devices */
        "0-3,3-5", /* core 3 in two devices */
        "1+1",     /* twice in one device */
        "0-3+2",   /* overlap inside one device */
        "1,",      /* trailing comma */
        "1,,2",    /* empty device */
        ",1",      /* leading comma */
        "abc",     /* garbage */
        "1x",      /* trailing garbage */
        "1-",      /* open range */
        "-1",      /* negative */
        "1--2",
        "1+",      /* trailing plus */
        "+1",
        "1 2",     /* blank */
        " 1",
        "1;2",
        "0x3",
    };
    int n;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
        cr_assert_eq(parse(bad[i], 0, &n), IVM_ERROR_INVALID_VALUE, "spec '%s'", bad[i]);
        cr_assert_neq(err[0], '\0', "an error message for '%s'", bad[i]);
        cr_assert_eq(n, -1, "no count written for '%s'", bad[i]);
    }
    err[0] = '\0';
    n = -1;
    cr_assert_eq(ivm_devspec_parse(NULL, 0, devs, MAXD, &n, err, sizeof(err)),
                 IVM_ERROR_INVALID_VALUE);
    cr_assert_eq(n, -1);
}

Test(devspec, too_many_devices)
{
    char spec[1024] = "";
    size_t used = 0;
    int n;

    for (int i = 0; i <= MAXD; ++i) {
        used += (size_t)snprintf(spec + used, sizeof(spec) - used, "%s%d", i ? "," : "", i);
    }
    cr_assert_eq(parse(spec, 0, &n), IVM_ERROR_INVALID_VALUE, "%d devices", MAXD + 1);
    /* exactly the maximum is fine */
    *strrchr(spec, ',') = '\0';
    cr_assert_eq(parse(spec, 0, &n), IVM_SUCCESS, "%s", err);
    cr_assert_eq(n, MAXD);
    /* a smaller caller array is respected */
    err[0] = '\0';
    cr_assert_eq(ivm_devspec_parse("0,1,2", 0, devs, 2, &n, err, sizeof(err)),
                 IVM_ERROR_INVALID_VALUE);
}

/* format(dev) parsed again is one device with the same cores. */
static void assert_round_trip(const char *spec, const char *const *expect_text)
{
    ivm_cpu_device_t orig[MAXD];
    char text[256];
    int n, n2;

    cr_assert_eq(ivm_devspec_parse(spec, 0, orig, MAXD, &n, err, sizeof(err)), IVM_SUCCESS,
                 "%s: %s", spec, err);
    for (int i = 0; i < n; ++i) {
        ivm_devspec_format(&orig[i], text, sizeof(text));
        if (expect_text != NULL) {
            cr_assert_str_eq(text, expect_text[i], "device %d of '%s'", i, spec);
        }
        cr_assert_eq(parse(text, 0, &n2), IVM_SUCCESS, "'%s' (from '%s'): %s", text, spec,
                     err);
        cr_assert_eq(n2, 1, "'%s' formats device %d as '%s', which is %d devices", spec, i,
                     text, n2);
        cr_assert(CPU_EQUAL(&devs[0].cores, &orig[i].cores), "'%s' device %d -> '%s'", spec,
                  i, text);
        cr_assert_eq(devs[0].ncores, orig[i].ncores);
        cr_assert_eq(devs[0].percent, orig[i].percent, "'%s' device %d -> '%s'", spec, i,
                     text);
    }
}

Test(devspec, format_round_trip)
{
    static const char *const t1[] = {"0-7", "8-11", "12"};
    static const char *const t2[] = {"0-3+8-11"};
    static const char *const t3[] = {"5", "0+2+4", "1+3"};

    assert_round_trip("0-7,8-11,12", t1);
    assert_round_trip("0-3+8-11", t2);
    assert_round_trip("5,0+2+4,1+3", t3);
    assert_round_trip("8-11+0-3", t2);
    assert_round_trip("100-200+3+1000", NULL);
}

Test(devspec, format_truncates_safely)
{
    ivm_cpu_device_t dev;
    char text[8];
    int n;

    cr_assert_eq(parse("0+2+4+6+8+10+12+14", 0, &n), IVM_SUCCESS, "%s", err);
    dev = devs[0];
    memset(text, 'z', sizeof(text));
    ivm_devspec_format(&dev, text, 5);
    cr_assert(memchr(text, '\0', 5) != NULL, "NUL-terminated within the buffer");
    cr_assert_eq(text[5], 'z', "nothing written past len");
}

Test(devspec, default_device)
{
    ivm_cpu_device_t dev;
    cpu_set_t mine;

    ivm_devspec_default(&dev);
    cr_assert_eq(sched_getaffinity(0, sizeof(mine), &mine), 0);
    cr_assert_gt(dev.ncores, 0);
    cr_assert_eq(dev.ncores, CPU_COUNT(&mine));
    cr_assert(CPU_EQUAL(&dev.cores, &mine));
    cr_assert_eq(dev.percent, 100);
}

/* ------------------------------------------------------------ CPU shares */

Test(devspec, cpu_shares_valid)
{
    int n;

    cr_assert_eq(parse("0,1:50,1:25", 2, &n), IVM_SUCCESS, "%s", err);
    cr_assert_eq(n, 3);
    assert_range(&devs[0], 0, 0);
    assert_range(&devs[1], 1, 1);
    assert_range(&devs[2], 1, 1);
    cr_assert_eq(devs[0].percent, 100, "an entry without :PCT is whole cores");
    cr_assert_eq(devs[1].percent, 50);
    cr_assert_eq(devs[2].percent, 25);
    cr_assert_eq(parse("0-3:50", 0, &n), IVM_SUCCESS, "%s", err);
    cr_assert_eq(n, 1);
    assert_range(&devs[0], 0, 3);
    cr_assert_eq(devs[0].percent, 50);
    cr_assert_eq(parse("0+2:30,0-3:70", 0, &n), IVM_SUCCESS, "%s", err);
    cr_assert_eq(n, 2);
    cr_assert_eq(devs[0].ncores, 2, "OMP_NUM_THREADS counts the cores, not the share");
    cr_assert_eq(parse("1:100,0", 0, &n), IVM_SUCCESS, "%s", err);
    cr_assert_eq(devs[0].percent, 100);
    cr_assert_eq(parse("0:1,0:99", 0, &n), IVM_SUCCESS, "%s", err);
    cr_assert_eq(parse("0:25,0:25", 0, &n), IVM_SUCCESS, "shares may leave a core part idle");
    cr_assert_eq(ivm_devspec_has_shares(devs, n), 1);
    cr_assert_eq(parse("0-1,2", 0, &n), IVM_SUCCESS, "%s", err);
    cr_assert_eq(ivm_devspec_has_shares(devs, n), 0);
}

/* Each bad spec fails with a message naming the spec, the entry and why. */
Test(devspec, cpu_shares_bad_specs_say_why)
{
    static const struct {
        const char *spec;
        const char *why;
    } bad[] = {
        {"0,1:50,1:75", "entry '1:75': core 1 is shared by devices whose shares add up to "
                        "125% (at most 100%)"},
        {"0,0:1", "entry '0:1': core 0 is shared by devices whose shares add up to 101%"},
        {"0-3,2", "entry '2': core 2 is shared by devices whose shares add up to 200%"},
        {"0-1:50,1:60", "core 1 is shared by devices whose shares add up to 110%"},
        {"0:0", "entry '0:0': share '0' is not a percentage of 1..100"},
        {"0:101", "share '101' is not a percentage of 1..100"},
        {"0:", "share '' is not a percentage of 1..100"},
        {"0:-5", "share '-5' is not a percentage of 1..100"},
        {"1:50x", "entry '1:50x': unexpected 'x'"},
        {"1:50:50", "unexpected ':'"},
        {":50", "entry ':50': expected a core number"},
        {"1+1:50", "core 1 appears twice in the device"},
        {"0,,1", "entry '': empty device"},
        {"0,", "trailing ','"},
    };
    int n;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
        cr_assert_eq(parse(bad[i].spec, 0, &n), IVM_ERROR_INVALID_VALUE, "'%s' accepted",
                     bad[i].spec);
        cr_assert(strstr(err, bad[i].why) != NULL, "'%s': message '%s' lacks '%s'",
                  bad[i].spec, err, bad[i].why);
        cr_assert(strstr(err, bad[i].spec) != NULL, "'%s': message '%s' lacks the spec",
                  bad[i].spec, err);
        cr_assert_eq(n, -1, "'%s': *ndevs_p written on failure", bad[i].spec);
    }
}

Test(devspec, cpu_share_check)
{
    int n;

    cr_assert_eq(parse("0,1:50,1:25", 0, &n), IVM_SUCCESS, "%s", err);
    cr_assert_eq(ivm_devspec_share_check(devs, n, 2, 50, err, sizeof(err)), IVM_SUCCESS, "%s",
                 err);
    cr_assert_eq(ivm_devspec_share_check(devs, n, 2, 51, err, sizeof(err)),
                 IVM_ERROR_INVALID_VALUE);
    cr_assert(strstr(err, "core 1 would be shared by devices whose shares add up to 101%") !=
                  NULL, "%s", err);
    cr_assert_eq(ivm_devspec_share_check(devs, n, 1, 75, err, sizeof(err)), IVM_SUCCESS, "%s",
                 err);
    cr_assert_eq(ivm_devspec_share_check(devs, n, 0, 100, err, sizeof(err)), IVM_SUCCESS, "%s",
                 err);
    cr_assert_eq(ivm_devspec_share_check(devs, n, 0, 0, err, sizeof(err)),
                 IVM_ERROR_INVALID_VALUE);
    cr_assert_eq(ivm_devspec_share_check(devs, n, 0, 101, err, sizeof(err)),
                 IVM_ERROR_INVALID_VALUE);
    cr_assert_eq(ivm_devspec_share_check(devs, n, 3, 50, err, sizeof(err)),
                 IVM_ERROR_NOT_FOUND);
    cr_assert(strstr(err, "no CPU device 3") != NULL, "%s", err);
}

Test(devspec, cpu_share_format)
{
    static const char *const t1[] = {"0", "1:50", "1:25"};
    static const char *const t2[] = {"0-3+8:50"};
    ivm_cpu_device_t dev;
    char text[8];
    int n;

    assert_round_trip("0,1:50,1:25", t1);
    assert_round_trip("0-3+8:50", t2);
    cr_assert_eq(parse("1:5", 0, &n), IVM_SUCCESS, "%s", err);
    dev = devs[0];
    memset(text, 'z', sizeof(text));
    ivm_devspec_format(&dev, text, 3);
    cr_assert_str_eq(text, "1:");
    cr_assert_eq(text[3], 'z', "nothing written past len");
}

/* ------------------------------------------------------------ GPU shares */

static ivm_gpu_share_t shares[IVM_DEVSPEC_MAX_GPU_DEVICES + 1];

static ivmError_t parse_shares(const char *spec, int ngpus_max, int *n_p)
{
    err[0] = '\0';
    *n_p = -1;
    return ivm_devspec_gpu_shares_parse(spec, ngpus_max, shares, IVM_DEVSPEC_MAX_GPU_DEVICES,
                                        n_p, err, sizeof(err));
}

Test(devspec, gpu_shares_valid)
{
    int n;

    cr_assert_eq(parse_shares("0:50,0:50,1", 2, &n), IVM_SUCCESS, "%s", err);
    cr_assert_eq(n, 3);
    cr_assert(shares[0].phys == 0 && shares[0].percent == 50);
    cr_assert(shares[1].phys == 0 && shares[1].percent == 50);
    cr_assert(shares[2].phys == 1 && shares[2].percent == 100);
    cr_assert_eq(parse_shares("1:30,0,1:70", 0, &n), IVM_SUCCESS, "%s", err);
    cr_assert_eq(n, 3);
    cr_assert(shares[1].phys == 0 && shares[1].percent == 100 && shares[2].percent == 70);
    cr_assert_eq(parse_shares("0:25,0:25", 1, &n), IVM_SUCCESS, "%s", err);
    cr_assert_eq(n, 2, "shares may leave part of a GPU unused");
}

/* Each bad spec fails with a message naming what is wrong. */
Test(devspec, gpu_shares_bad_specs_say_why)
{
    static const struct {
        const char *spec;
        int         ngpus;
        const char *why;
    } bad[] = {
        {"", 0, "empty spec"},
        {"0:60,0:50", 0, "the shares of GPU 0 add up to 110%"},
        {"0,0:1", 0, "the shares of GPU 0 add up to 101%"},
        {"0:0", 0, "no percentage of 1..100"},
        {"0:101", 0, "no percentage of 1..100"},
        {"0:", 0, "no percentage of 1..100"},
        {"x", 0, "does not start with a GPU index"},
        {"-1", 0, "does not start with a GPU index"},
        {"256", 0, "does not start with a GPU index"},
        {"0:50x", 0, "is not G or G:PERCENT"},
        {"0-1", 0, "is not G or G:PERCENT"},
        {"0,", 0, "trailing ','"},
        {"0,,1", 0, "does not start with a GPU index"},
        {"2:50", 2, "there is no GPU 2 (this node has 2)"},
    };
    int n;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
        cr_assert_eq(parse_shares(bad[i].spec, bad[i].ngpus, &n), IVM_ERROR_INVALID_VALUE,
                     "'%s' accepted", bad[i].spec);
        cr_assert(strstr(err, bad[i].why) != NULL, "'%s': message '%s' lacks '%s'",
                  bad[i].spec, err, bad[i].why);
        cr_assert_eq(n, -1, "'%s': *n_p written on failure", bad[i].spec);
    }
}

Test(devspec, gpu_shares_too_many)
{
    char spec[IVM_DEVSPEC_MAX_GPU_DEVICES * 8];
    int n;

    spec[0] = '\0';
    for (int i = 0; i <= IVM_DEVSPEC_MAX_GPU_DEVICES; ++i) {
        snprintf(spec + strlen(spec), sizeof(spec) - strlen(spec), "%s%d:1", i ? "," : "",
                 i % 4);
    }
    cr_assert_eq(parse_shares(spec, 0, &n), IVM_ERROR_INVALID_VALUE);
    cr_assert(strstr(err, "more than 64 GPU devices"), "%s", err);
}
