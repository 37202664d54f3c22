/* Unit tests of apps/common/app.c (no daemon): argument parsing and its
 * errors, the seeded input stream, checksums, the verification helpers, the
 * RESULT line's exact format, the IVM_DSLB_SLOW knob parser and the kernel
 * picker's rules. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"

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
                         "--serial", "--gpu-ranks", "1", NULL};
    cr_assert_eq(parse(&a, all), 0);
    cr_assert(a.size == 5000 && a.seed == 77 && a.portions == 49 && a.iters == 3);
    cr_assert_float_eq(a.threshold, 1.5, 1e-12);
    cr_assert(a.max_per_dev == 2 && a.local && a.verify && a.serial && a.gpu_ranks == 1);
}

Test(app_common, args_errors)
{
    const char *bad[][4] = {
        {"--size", "0", NULL}, {"--size", "12x", NULL}, {"--portions", "-3", NULL},
        {"--threshold", "0.9", NULL}, {"--threshold", "nan", NULL}, {"--max-per-dev", "0", NULL},
        {"--iters", NULL}, {"--what", "1", NULL}, {"--portions", "2000000", NULL},
        {"--iters", "1048576", "--portions", "1048576"},
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

Test(app_common, result_line_format)
{
    app_result_t r;
    char buf[1024];
    FILE *f = fmemopen(buf, sizeof(buf), "w");

    app_result_init(&r, "nw", "ivm", 300);
    r.pes = 36;
    r.seconds = 1.5;
    r.verified = 1;
    app_checksum_hex(&r, 0xabcull);
    cr_assert_eq(app_result_add_share(&r, "node0.cpu0", 3.0), 0);
    cr_assert_eq(app_result_add_share(&r, "node1.gpu0", 1.0), 0);
    cr_assert_eq(app_result_add_share(&r, "node0.cpu0", 4.0), 0);
    app_result_print(f, &r);
    fclose(f);
    cr_assert_str_eq(buf, "RESULT app=nw version=ivm size=300 pes=36 seconds=1.500000 "
                          "checksum=0000000000000abc verified=yes "
                          "share=node0.cpu0:0.8750,node1.gpu0:0.1250\n");

    f = fmemopen(buf, sizeof(buf), "w");
    app_result_init(&r, "dmm", "mpi", 8);
    app_checksum_real(&r, 1234.5);
    app_result_print(f, &r);
    fclose(f);
    cr_assert_str_eq(buf, "RESULT app=dmm version=mpi size=8 pes=0 seconds=0.000000 "
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
