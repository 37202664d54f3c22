/* Unit tests of the environment ivmd passes on to a GPU PE (ivmd/gpu/start.c,
 * ivmd_gpu_env and ivmd_gpu_env_overrides): the pairs ivm-gpud's GHELLO named
 * for the device's physical GPU, the share variable only below 100 %. No
 * daemon: the module's state is filled by hand. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "gpu/gpud.h"

static ivmd_gpud_t client;
static ivmd_gpu_t gm;

/* GPU 0 emulated-like (nothing named), GPU 1 "cuda-like"; devices: a 50 %
 * share of GPU 1, all of GPU 1, all of GPU 0. */
static void setup(void)
{
    memset(&client, 0, sizeof(client));
    memset(&gm, 0, sizeof(gm));
    client.ngpus = 2;
    snprintf(client.gpus[1].env, sizeof(client.gpus[1].env), "CUDA_VISIBLE_DEVICES=3");
    snprintf(client.gpus[1].share_env, sizeof(client.gpus[1].share_env),
             "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
    client.ndevs   = 3;
    client.devs[0] = (ivm_gpu_share_t){.phys = 1, .percent = 50};
    client.devs[1] = (ivm_gpu_share_t){.phys = 1, .percent = 100};
    client.devs[2] = (ivm_gpu_share_t){.phys = 0, .percent = 100};
    gm.g = &client;
}

TestSuite(gpu_env, .init = setup);

Test(gpu_env, a_share_gets_the_gpu_and_its_percent)
{
    char env[4][160];

    cr_assert_eq(ivmd_gpu_env(&gm, 0, env, 4), 2);
    cr_assert_str_eq(env[0], "CUDA_VISIBLE_DEVICES=3");
    cr_assert_str_eq(env[1], "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50");
}

Test(gpu_env, a_whole_gpu_gets_no_share_variable)
{
    char env[4][160];

    cr_assert_eq(ivmd_gpu_env(&gm, 1, env, 4), 1);
    cr_assert_str_eq(env[0], "CUDA_VISIBLE_DEVICES=3");
}

Test(gpu_env, a_gpu_that_names_nothing_adds_nothing)
{
    char env[4][160];

    cr_assert_eq(ivmd_gpu_env(&gm, 2, env, 4), 0);
    cr_assert_eq(ivmd_gpu_env(&gm, 3, env, 4), 0, "no device 3");
    cr_assert_eq(ivmd_gpu_env(&gm, 0, env, 1), 1, "at most max pairs");
    gm.g = NULL;
    cr_assert_eq(ivmd_gpu_env(&gm, 0, env, 4), 0, "no ivm-gpud");
}

Test(gpu_env, the_jobs_own_values_of_those_variables_are_dropped)
{
    cr_assert(ivmd_gpu_env_overrides(&gm, 0, "CUDA_VISIBLE_DEVICES=0,1"));
    cr_assert(ivmd_gpu_env_overrides(&gm, 0, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=10"));
    cr_assert(ivmd_gpu_env_overrides(&gm, 1, "CUDA_VISIBLE_DEVICES=0"));
    cr_assert(!ivmd_gpu_env_overrides(&gm, 1, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=10"),
              "a whole GPU keeps the job's MPS setting");
    cr_assert(!ivmd_gpu_env_overrides(&gm, 0, "CUDA_VISIBLE_DEVICES_X=1"));
    cr_assert(!ivmd_gpu_env_overrides(&gm, 0, "PATH=/bin"));
    cr_assert(!ivmd_gpu_env_overrides(&gm, 2, "CUDA_VISIBLE_DEVICES=0"),
              "a GPU that names nothing keeps the job's environment");
}
