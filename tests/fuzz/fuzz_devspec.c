/* libFuzzer target: the device spec parsers of common/devspec.c (CPU device
 * tables: ivmd --cpu-devices, a job's IVM_CPU_DEVICES, ENTER's cpu_devices;
 * GPU shares: --gpu-shares), then what the daemon does with a parsed table:
 * format each device, check a share change (ivm-ctl set-share).
 * Input: byte 0 (bit 0: GPU shares, else CPU devices; bits 1..7: the bound
 * on core / GPU numbers, 0 = none), byte 1 (the device and share of the
 * share check), the spec text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "devspec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static ivm_cpu_device_t devs[IVM_DEVSPEC_MAX_DEVICES];
    ivm_gpu_share_t shares[IVM_DEVSPEC_MAX_GPU_DEVICES];
    char err[256], buf[512], *spec;
    int bound, n = -1, k;

    if (size < 2) {
        return 0;
    }
    bound = data[0] >> 1;
    spec  = malloc(size - 2 + 1);
    if (spec == NULL) {
        return 0;
    }
    memcpy(spec, data + 2, size - 2);
    spec[size - 2] = '\0';
    err[0] = '\0';
    if (data[0] & 1) {
        if (ivm_devspec_gpu_shares_parse(spec, bound, shares, IVM_DEVSPEC_MAX_GPU_DEVICES,
                                         &n, err, sizeof(err)) == IVM_SUCCESS) {
            if (n < 0 || n > IVM_DEVSPEC_MAX_GPU_DEVICES) {
                abort();
            }
            for (k = 0; k < n; ++k) {
                if (shares[k].percent < 1 || shares[k].percent > 100 || shares[k].phys < 0 ||
                    (bound > 0 && shares[k].phys >= bound)) {
                    abort();
                }
            }
        } else if (err[0] == '\0' || n != -1) {
            abort(); /* a refusal says why and leaves the count alone */
        }
    } else if (ivm_devspec_parse(spec, bound, devs, IVM_DEVSPEC_MAX_DEVICES, &n, err,
                                 sizeof(err)) == IVM_SUCCESS) {
        if (n < 1 || n > IVM_DEVSPEC_MAX_DEVICES) {
            abort();
        }
        for (k = 0; k < n; ++k) {
            if (devs[k].percent < 1 || devs[k].percent > 100 || devs[k].ncores < 1) {
                abort();
            }
            ivm_devspec_format(&devs[k], buf, sizeof(buf));
            ivm_devspec_format(&devs[k], buf, 8);
        }
        (void)ivm_devspec_has_shares(devs, n);
        (void)ivm_devspec_share_check(devs, n, data[1] % (n + 1), (int)(data[1] >> 1) - 10,
                                      err, sizeof(err));
    } else if (err[0] == '\0' || n != -1) {
        abort();
    }
    free(spec);
    return 0;
}
