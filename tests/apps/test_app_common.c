/* Unit tests of apps/common/app.c (no daemon): argument parsing and its
 * errors, the seeded input stream, checksums, the verification helpers, the
 * RESULT line's exact format, the IVM_DSLB_SLOW knob parser and the kernel
 * picker's rules. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "dslb.h"

static app_args_t defaults(void)
{
    app_args_t a = { .app = "t", .size = 100, .seed = 1, .portions = 4, .iters = 1,
                     .threshold = 2.0, .max_per_dev = 1 };
    return a;
}

static int parse(app_args_t *a, const char *const *words)
{
    char *argv[32];
    int argc = 0;

    argv[argc++] = "t";
    while (*words != NULL && argc < 31)
        argv[argc++] = (char *)*words++;
    argv[argc] = NULL;
    return app_args_parse(argc, argv, a, NULL);
}

Test(app_common, args_defaults_and_every_option)
{
    app_args_t a = defaults();
    const char *none[] = {NULL};
    cr_assert_eq(parse(&a, none), 0);
    cr_assert_eq(a.size, 100);
    cr_assert_eq(a.portions, 4);
    cr_assert_float_eq(a.threshold, 2.0, 1e-12);

    const char *all[] = {"--size", "5000", "--seed", "77", "--portions", "49", "--iters", "3",
                         "--threshold", "1.5", "--max-per-dev", "2", "--local", "--verify",
                         "--serial", "--gpu-ranks", "1", "--layout", "equal", NULL};
    cr_assert_eq(a.layout_equal, 0);
    cr_assert_eq(parse(&a, all), 0);
    cr_assert(a.size == 5000 && a.seed == 77 && a.portions == 49 && a.iters == 3);
    cr_assert_float_eq(a.threshold, 1.5, 1e-12);
    cr_assert(a.max_per_dev == 2 && a.local && a.verify && a.serial && a.gpu_ranks == 1);
    cr_assert_eq(a.layout_equal, 1);
    const char *weighted[] = {"--layout", "weighted", NULL};
    cr_assert_eq(parse(&a, weighted), 0);
    cr_assert_eq(a.layout_equal, 0);
}

Test(app_common, args_errors)
{
    const char *bad[][4] = {
        {"--size", "0", NULL}, {"--size", "12x", NULL}, {"--portions", "-3", NULL},
        {"--threshold", "0.9", NULL}, {"--threshold", "nan", NULL}, {"--max-per-dev", "0", NULL},
        {"--iters", NULL}, {"--what", "1", NULL}, {"--portions", "2000000", NULL},
        {"--iters", "1048576", "--portions", "1048576"}, {"--layout", "tapered", NULL},
        {"--layout", NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        app_args_t a = defaults();
        const char *w[6] = {bad[i][0], bad[i][1], bad[i][2], bad[i][3], NULL};
        cr_assert_eq(parse(&a, w), -1, "case %zu accepted", i);
    }
}

Test(app_common, rand_is_deterministic_and_in_range)
{
    cr_assert_eq(app_rand_u64(5, 10), app_rand_u64(5, 10));
    cr_assert_neq(app_rand_u64(5, 10), app_rand_u64(6, 10));
    cr_assert_neq(app_rand_u64(5, 10), app_rand_u64(5, 11));
    double sum = 0.0;
    for (uint64_t i = 0; i < 10000; i++) {
        double u = app_rand_unit(3, i);
        cr_assert(u >= 0.0 && u < 1.0);
        sum += u;
    }
    cr_assert(sum / 10000 > 0.48 && sum / 10000 < 0.52, "mean %f", sum / 10000);
}

Test(app_common, checksums)
{
    /* FNV-1a 64 test vectors. */
    cr_assert_eq(app_fnv1a("", 0), 0xcbf29ce484222325ull);
    cr_assert_eq(app_fnv1a("a", 1), 0xaf63dc4c8601ec8cull);
    float f[3] = {1.0f, 2.0f, 3.0f};
    cr_assert_float_eq(app_weighted_sum_f(f, 3), 1.0 + 4.0 + 9.0, 1e-12);
    double d[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    cr_assert_float_eq(app_weighted_sum_d(d, 9), 36.0 + 1.0, 1e-12);
}

Test(app_common, verify_helpers)
{
    float want[4] = {1.0f, 2.0f, 3.0f, 4.0f}, got[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    int a[3] = {1, 2, 3}, b[3] = {1, 2, 4};

    cr_assert_eq(app_verify_f("t", "x", got, want, 4, 1e-6, 0.0), 0);
    got[2] = 3.01f;
    cr_assert_eq(app_verify_f("t", "x", got, want, 4, 1e-6, 0.0), -1);
    cr_assert_eq(app_verify_f("t", "x", got, want, 4, 1e-2, 0.0), 0);
    got[1] = 0.0f / 0.0f;
    cr_assert_eq(app_verify_f("t", "x", got, want, 4, 1.0, 1.0), -1, "NaN must fail");
    cr_assert_eq(app_verify_exact("t", "s", a, a, 3, sizeof(int)), 0);
    cr_assert_eq(app_verify_exact("t", "s", a, b, 3, sizeof(int)), -1);
}

/* r's result line must be `want`. */
static void expect_result_line(const app_result_t *r, const char *want)
{
    char buf[1024];
    FILE *f = fmemopen(buf, sizeof(buf), "w");

    cr_assert_not_null(f);
    app_result_print(f, r);
    fclose(f);
    cr_assert_str_eq(buf, want);
}

Test(app_common, result_line_format)
{
    app_result_t r;

    app_result_init(&r, "nw", "ivm", 300);
    r.pes = 36;
    r.seconds = 1.5;
    r.verified = 1;
    app_checksum_hex(&r, 0xabcull);
    cr_assert_eq(app_result_add_share(&r, "node0.cpu0", 3.0), 0);
    cr_assert_eq(app_result_add_share(&r, "node1.gpu0", 1.0), 1);
    cr_assert_eq(app_result_add_share(&r, "node0.cpu0", 4.0), 0);
    expect_result_line(&r, "RESULT app=nw version=ivm size=300 pes=36 seconds=1.500000 "
                           "checksum=0000000000000abc verified=yes "
                           "share=node0.cpu0:0.8750,node1.gpu0:0.1250\n");

    /* Speeds: printed when every device has its rate, as fractions. */
    r.share_rate[0] = 6.0;
    expect_result_line(&r, "RESULT app=nw version=ivm size=300 pes=36 seconds=1.500000 "
                           "checksum=0000000000000abc verified=yes "
                           "share=node0.cpu0:0.8750,node1.gpu0:0.1250\n");
    r.share_rate[1] = 2.0;
    expect_result_line(&r, "RESULT app=nw version=ivm size=300 pes=36 seconds=1.500000 "
                           "checksum=0000000000000abc verified=yes "
                           "share=node0.cpu0:0.8750,node1.gpu0:0.1250 "
                           "speed=node0.cpu0:0.7500,node1.gpu0:0.2500\n");

    app_result_init(&r, "dmm", "mpi", 8);
    app_checksum_real(&r, 1234.5);
    expect_result_line(&r, "RESULT app=dmm version=mpi size=8 pes=0 seconds=0.000000 "
                           "checksum=1.234500000e+03 verified=no share=-\n");

    char name[APP_NAME_MAX];
    app_dev_name("node2", IVM_GPU_N(1), name, sizeof(name));
    cr_assert_str_eq(name, "node2.gpu1");
    app_dev_name("", IVM_CPU_N(3), name, sizeof(name));
    cr_assert_str_eq(name, "cpu3");
}

Test(app_common, slow_knob)
{
    unsetenv("T_SLOW");
    cr_assert_float_eq(app_slow_factor("T_SLOW", 0), 1.0, 1e-12);
    setenv("T_SLOW", "1:4,3:2.5", 1);
    cr_assert_float_eq(app_slow_factor("T_SLOW", 1), 4.0, 1e-12);
    cr_assert_float_eq(app_slow_factor("T_SLOW", 3), 2.5, 1e-12);
    cr_assert_float_eq(app_slow_factor("T_SLOW", 2), 1.0, 1e-12);
    const char *bad[] = {"x:2", "1:0.5", "1", "1:2,", "1:2;2:3", "-1:2", "1:inf"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("T_SLOW", bad[i], 1);
        cr_assert_lt(app_slow_factor("T_SLOW", 9), 0.0, "'%s' accepted", bad[i]);
    }
    unsetenv("T_SLOW");
}

Test(app_common, kernel_picker)
{
    app_kernel_t k = APP_KERNEL_CUDA;
    int x = 0;

    unsetenv("IVM_GPU_BACKEND");
    unsetenv("CUDA_VISIBLE_DEVICES");
    cr_assert_eq(app_kernel_pick(IVM_CPU_N(2), &k), 0);
    cr_assert_eq(k, APP_KERNEL_CPU);
    setenv("CUDA_VISIBLE_DEVICES", "0", 1);
    cr_assert_eq(app_kernel_pick(IVM_CPU_N(0), &k), 0);
    cr_assert_eq(k, APP_KERNEL_CPU, "CPU devices always run the CPU kernel");
    k = APP_KERNEL_CUDA;
    cr_assert_eq(app_kernel_pick(IVM_GPU_N(0), &k), 0);
    cr_assert_eq(k, APP_KERNEL_CPU, "CUDA only on IVM_GPU_BACKEND=cuda, whatever "
                 "CUDA_VISIBLE_DEVICES says");
    setenv("IVM_GPU_BACKEND", "emu", 1);
    k = APP_KERNEL_CUDA;
    cr_assert_eq(app_kernel_pick(IVM_GPU_N(0), &k), 0);
    cr_assert_eq(k, APP_KERNEL_CPU, "emu GPUs run the CPU kernel");
    setenv("IVM_GPU_BACKEND", "opencl", 1);
    cr_assert_eq(app_kernel_pick(IVM_GPU_N(0), &k), -1, "an unknown backend is refused");
    cr_assert_eq(app_kernel_pick(IVM_CPU_N(0), &k), 0, "CPU devices ignore the variable");
    /* A host pointer is no CUDA device memory: CPU kernel without the variable. */
    unsetenv("IVM_GPU_BACKEND");
    cr_assert_eq(app_kernel_pick_ref(IVM_GPU_N(0), &x, &k), 0);
    cr_assert_eq(k, APP_KERNEL_CPU);
    setenv("IVM_GPU_BACKEND", "cuda", 1);
    if (app_have_cuda()) {
        cr_assert_eq(app_kernel_pick(IVM_GPU_N(0), &k), 0);
        cr_assert_eq(k, APP_KERNEL_CUDA);
    } else {
        cr_assert_eq(app_kernel_pick(IVM_GPU_N(0), &k), -1, "cuda GPU without CUDA build");
    }
    unsetenv("IVM_GPU_BACKEND");
    unsetenv("CUDA_VISIBLE_DEVICES");

    app_args_t a = defaults();
    a.gpu_ranks = 0;
    cr_assert_eq(app_kernel_pick_rank(&a, 0, &k), 0);
    cr_assert_eq(k, APP_KERNEL_CPU);
}

/* --weights: one positive number per rank; anything else is refused. */
Test(app_common, weights_option)
{
    app_args_t a = defaults();
    const char *good[] = {"--weights", "4,2,1.5", NULL};
    cr_assert_eq(parse(&a, good), 0);
    cr_assert_eq(a.nweights, 3);
    cr_assert_float_eq(a.weights[2], 1.5, 1e-12);

    const char *bad[][3] = {{"--weights", "4,,1", NULL}, {"--weights", "4,0", NULL},
                            {"--weights", "-1", NULL}, {"--weights", "2,x", NULL},
                            {"--weights", "", NULL}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        app_args_t b = defaults();
        cr_assert_eq(parse(&b, bad[i]), -1, "'%s' accepted", bad[i][1]);
    }
}

/* The slowest rank's time of a split: max over r of its work / weight. */
static double split_time(int P, const double *work, int R, const double *w, const int *first)
{
    double worst = 0.0;

    for (int r = 0; r < R; r++) {
        double sum = 0.0;
        for (int p = first[r]; p < first[r + 1]; p++)
            sum += work != NULL ? work[p] : 1.0;
        if (sum / w[r] > worst)
            worst = sum / w[r];
    }
    return worst;
}

/* The best contiguous split, by brute force over every cut (R = 3). */
static double split_best3(int P, const double *work, const double *w)
{
    double best = -1.0;
    int first[4] = {0, 0, 0, P};

    for (int a = 1; a < P - 1; a++)
        for (int b = a + 1; b < P; b++) {
            first[1] = a;
            first[2] = b;
            double t = split_time(P, work, 3, w, first);
            if (best < 0.0 || t < best)
                best = t;
        }
    return best;
}

Test(app_common, split_equal_is_the_old_formula)
{
    int first[5];

    app_split(10, NULL, 4, NULL, first);
    for (int r = 0; r <= 4; r++)
        cr_assert_eq(first[r], 10 * r / 4);
}

/* Weighted: every rank gets a portion, the split is contiguous and covers
   all, and its slowest rank is as fast as the best split's. */
Test(app_common, split_weighted_is_the_best_contiguous_split)
{
    const double speeds[][3] = {{4, 2, 1}, {1, 2, 4}, {1, 1, 1}, {10, 1, 1}, {3, 5, 2}};
    double work[48];

    for (int p = 0; p < 48; p++)
        work[p] = 1.0 + (double)((p * 37) % 11); /* uneven portions (NW-like) */
    for (size_t s = 0; s < sizeof(speeds) / sizeof(speeds[0]); s++) {
        for (int P = 3; P <= 48; P += 5) {
            for (int uneven = 0; uneven < 2; uneven++) {
                const double *wk = uneven ? work : NULL;
                int first[4];
                app_split(P, wk, 3, speeds[s], first);
                cr_assert(first[0] == 0 && first[3] == P, "P %d", P);
                for (int r = 0; r < 3; r++)
                    cr_assert_lt(first[r], first[r + 1], "rank %d empty (P %d)", r, P);
                double got = split_time(P, wk, 3, speeds[s], first);
                double best = split_best3(P, wk, speeds[s]);
                cr_assert_leq(got, best * (1.0 + 1e-9), "speeds %zu P %d uneven %d: %g, best %g",
                              s, P, uneven, got, best);
            }
        }
    }
}

/* DS-LB's rule: earliest finish time list scheduling of the portions left. */
Test(app_common, dslb_eft_deals_by_speed_and_free_time)
{
    double zero[3] = {0, 0, 0}, unit[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    int counts[3];

    /* Speeds 4:2:1, 7 equal portions: 4, 2, 1 (ties to the lower lane). */
    double rate[3] = {1, 2, 4};
    cr_assert_eq(dslb_eft(3, zero, rate, zero, unit, 7, 2, counts), 1);
    cr_assert(counts[0] == 4 && counts[1] == 2 && counts[2] == 1, "%d %d %d", counts[0],
              counts[1], counts[2]);
    /* The last portion goes to the fast lane, not to the idle slow one. */
    double fast_slow[2] = {1, 5};
    cr_assert_eq(dslb_eft(2, zero, fast_slow, zero, unit, 1, 1, counts), 0);
    cr_assert_eq(counts[0], 1);
    /* A fast lane busy for long leaves both to the slow one. */
    double busy[2] = {10, 0}, r2[2] = {1, 4};
    cr_assert_eq(dslb_eft(2, busy, r2, zero, unit, 2, 1, counts), 2);
    /* A gap is paid per portion: a chain whose successors start slowly
       takes fewer. */
    double gap[2] = {0, 3}, same[2] = {1, 1};
    dslb_eft(2, zero, same, gap, unit, 6, 0, counts);
    cr_assert(counts[0] == 5 && counts[1] == 1, "%d %d", counts[0], counts[1]);
    /* Uneven work: one big portion weighs as much as its units. */
    double big[3] = {6, 1, 1};
    dslb_eft(2, zero, same, zero, big, 3, 0, counts);
    cr_assert(counts[0] == 1 && counts[1] == 2, "%d %d", counts[0], counts[1]);
}

/* A deciding chain goes on only if the portion its successor claims (the
   next one, whatever its size) shortens the iteration. */
Test(app_common, dslb_go_judges_the_portion_it_would_claim)
{
    double zero[3] = {0, 0, 0}, same[2] = {1, 1};
    /* Alone: it goes on while portions are left. */
    double one[1] = {5};
    cr_assert_eq(dslb_go(1, zero, same, zero, one, 1, 0), 1);
    cr_assert_eq(dslb_go(1, zero, same, zero, one, 0, 0), 0);
    /* Speeds 4:1, a big portion then two small ones: the slow lane taking
       the big one would end at 4 where the fast one ends all at 1.5. */
    double rate[2] = {1, 4}, tail[3] = {1, 0.25, 0.25};
    cr_assert_eq(dslb_go(2, zero, rate, zero, tail, 3, 1), 0);
    cr_assert_eq(dslb_go(2, zero, rate, zero, tail, 3, 0), 1);
    /* The fast lane busy until 1.5: the slow one taking the next small
       portion (ends at 1) shortens 2.0 to 1.75... */
    double busy[2] = {1.5, 0}, small[2] = {0.25, 0.25};
    cr_assert_eq(dslb_go(2, busy, rate, zero, small, 2, 1), 1);
    /* ...but not when its successor starts 1.5 late (ends at 2.5). */
    double gap[2] = {0, 1.5};
    cr_assert_eq(dslb_go(2, busy, rate, gap, small, 2, 1), 0);
}

/* A large portion at 10 ms per unit, then five small ones at twice that
   (their start-up weighs more): the rate stays near the large one's, as
   the work done says, where an average per portion would be near 20 ms.
   Then the device slows for good: the rate follows it within a horizon's
   worth of work or two. */
Test(app_common, dslb_rate_weighs_portions_by_their_work)
{
    double wsum = 0.0, rate = dslb_rate_add(0.0, &wsum, 1.0, 100.0, 100.0);

    cr_assert_float_eq(rate, 0.01, 1e-12);
    cr_assert_float_eq(wsum, 100.0, 1e-12);
    for (int k = 0; k < 5; k++)
        rate = dslb_rate_add(rate, &wsum, 0.1, 5.0, 100.0);
    cr_assert(rate > 0.01 && rate < 0.0125, "rate %g after the small portions", rate);
    for (int k = 0; k < 4; k++)
        rate = dslb_rate_add(rate, &wsum, 3.0, 100.0, 100.0);
    cr_assert(rate > 0.029 && rate <= 0.03, "rate %g after the device slowed to 0.03", rate);
    /* A portion of no work counts as one unit; no horizon keeps nothing. */
    rate = dslb_rate_add(rate, &wsum, 0.5, 0.0, 0.0);
    cr_assert_float_eq(rate, 0.5, 1e-12);
    cr_assert_float_eq(wsum, 1.0, 1e-12);
}

/* The weighted cut: the first portions by the chains' speeds (the fastest's
   batch of its share, slower ones' more), the rest falling from DSLB_TAPER
   times the last one's size to it. */
Test(app_common, dslb_cut_weighs_first_portions_and_tapers_the_rest)
{
    double speed[3] = {4, 2, 1}, cut[9], f = 0.15;

    dslb_cut(8, 700.0, 3, speed, 1.0 - f, 0, cut);
    cr_assert_float_eq(cut[0], 0.0, 1e-9);
    cr_assert_float_eq(cut[1], 700.0 * (1.0 - f) * 4 / 7, 1e-9);
    cr_assert_float_eq(cut[2] - cut[1], 700.0 * (1.0 - f / 2) * 2 / 7, 1e-9);
    cr_assert_float_eq(cut[3] - cut[2], 700.0 * (1.0 - f / 4) * 1 / 7, 1e-9);
    cr_assert_float_eq(cut[8], 700.0, 1e-9);
    /* The tail: a round of 3 portions (one per chain), then one of 2, a
       DSLB_TAPER-th the size. */
    for (int p = 4; p < 8; p++)
        cr_assert_float_eq(cut[p + 1] - cut[p], (cut[4] - cut[3]) / (p < 6 ? 1.0 : DSLB_TAPER),
                           1e-9, "portion %d", p);
    cr_assert_float_eq((cut[4] - cut[3]) / (cut[8] - cut[7]), DSLB_TAPER, 1e-9);
    /* As many chains as portions or more: all the work by speed. */
    dslb_cut(2, 30.0, 3, speed, DSLB_FIRST_BATCH, 0, cut);
    cr_assert_float_eq(cut[1], 20.0, 1e-9);
    cr_assert_float_eq(cut[2], 30.0, 1e-9);
    /* No chain (no speed): every portion is the tail's. */
    dslb_cut(3, 6.0, 0, speed, DSLB_FIRST_BATCH, 0, cut);
    cr_assert(cut[1] > 2.0 && cut[3] == 6.0 && cut[2] - cut[1] < cut[1], "%g %g %g", cut[1],
              cut[2], cut[3]);
    /* Even (speeds only declared): every chain's first portion the same
       part of its share. */
    dslb_cut(8, 700.0, 3, speed, DSLB_FIRST_GUESS, 1, cut);
    cr_assert_float_eq(cut[1], 700.0 * DSLB_FIRST_GUESS * 4 / 7, 1e-9);
    cr_assert_float_eq(cut[2] - cut[1], 700.0 * DSLB_FIRST_GUESS * 2 / 7, 1e-9);
    cr_assert_float_eq(cut[3] - cut[2], 700.0 * DSLB_FIRST_GUESS * 1 / 7, 1e-9);
    cr_assert_float_eq(cut[8], 700.0, 1e-9);
}

/* The shape of the cut: from the first portions' error and the chains'
   gaps, the part of the first portions and how many portions. */
Test(app_common, dslb_shape_fits_the_tail_to_the_error_and_the_gaps)
{
    double speed[2] = {100.0, 100.0}, gap[2] = {0.01, 0.01}, none[2] = {0.0, 0.0}, batch;
    int n;

    /* Nothing measured: DSLB_FIRST_BATCH and every portion. */
    dslb_shape(8, 2, speed, none, 1, 1000.0, -1.0, &n, &batch);
    cr_assert_eq(n, 8);
    cr_assert_float_eq(batch, DSLB_FIRST_BATCH, 1e-12);
    /* 1 % error: a tail of 3 % (DSLB_TAIL_MIN) of each chain's 500, 30
       units; a gap is 1 unit of work, a tail portion at least 4: 7 tail
       portions, 9 in all. */
    dslb_shape(20, 2, speed, gap, 1, 1000.0, 0.01, &n, &batch);
    cr_assert_float_eq(batch, 1.0 - DSLB_TAIL_MIN, 1e-12);
    cr_assert_eq(n, 2 + 7);
    /* One chain's gap 3 times longer: 30 units hold 2 portions of 12; 10
       times: none, the first portions are all. */
    double slow_gap[2] = {0.03, 0.02};
    dslb_shape(20, 2, speed, slow_gap, 1, 1000.0, 0.01, &n, &batch);
    cr_assert_eq(n, 4);
    slow_gap[0] = 0.1;
    dslb_shape(20, 2, speed, slow_gap, 1, 1000.0, 0.01, &n, &batch);
    cr_assert_eq(n, 2);
    /* 4 % error: a tail of 8 %, 80 units, 20 portions of 4: P at most. */
    dslb_shape(12, 2, speed, gap, 1, 1000.0, 0.04, &n, &batch);
    cr_assert_float_eq(batch, 0.92, 1e-12);
    cr_assert_eq(n, 12);
    /* Chains of speeds 4 : 2 : 1 leave 3 % x 4/4, 2/4, 1/4 of their shares:
       3 % of 1000 x 21 / 28; gaps of 1 unit: 5 portions of 4. */
    double s3[3] = {400.0, 200.0, 100.0}, g3[3] = {0.0025, 0.005, 0.01};
    dslb_shape(20, 3, s3, g3, 1, 1000.0, 0.01, &n, &batch);
    cr_assert_eq(n, 3 + 5);
    /* 30 % error: the tail stops at 1 - DSLB_FIRST_BATCH. */
    dslb_shape(12, 2, speed, gap, 1, 1000.0, 0.3, &n, &batch);
    cr_assert_float_eq(batch, DSLB_FIRST_BATCH, 1e-12);
    /* Speeds only declared (the first iteration): DSLB_FIRST_GUESS. */
    dslb_shape(20, 2, speed, none, 0, 1000.0, -1.0, &n, &batch);
    cr_assert_eq(n, 20);
    cr_assert_float_eq(batch, DSLB_FIRST_GUESS, 1e-12);
    /* P leaving room for fewer tail portions: all of them, or none. */
    dslb_shape(3, 2, speed, gap, 1, 1000.0, 0.01, &n, &batch);
    cr_assert_eq(n, 3);
    dslb_shape(3, 2, speed, slow_gap, 1, 1000.0, 0.01, &n, &batch);
    cr_assert_eq(n, 2);
    /* As many chains as portions: P. */
    dslb_shape(2, 2, speed, gap, 1, 1000.0, 0.01, &n, &batch);
    cr_assert_eq(n, 2);
}

/* app_alloc_pages: small sizes come from malloc; from 2 MiB the block is
   aligned to 2 MiB (so that whole huge pages can back it), writable end to
   end and freed with free(). */
Test(app_common, alloc_pages_aligns_large_blocks)
{
    size_t sizes[] = {0, 100, (size_t)2 << 20, ((size_t)5 << 20) + 123};

    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        unsigned char *p = app_alloc_pages(sizes[i]);
        cr_assert_not_null(p, "size %zu", sizes[i]);
        if (sizes[i] >= ((size_t)2 << 20))
            cr_assert_eq((uintptr_t)p % ((size_t)2 << 20), 0, "size %zu at %p", sizes[i],
                         (void *)p);
        if (sizes[i] > 0) {
            memset(p, 0xa5, sizes[i]);
            cr_assert_eq(p[sizes[i] - 1], 0xa5);
        }
        free(p);
    }
}
