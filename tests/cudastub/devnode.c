/*
 * libcudastub-devnode.so, LD_PRELOADed with the CUDA stand-in where a
 * program looks for the driver's device node before it loads the driver
 * (ivmd starts ivm-gpud's cuda backend only when /dev/nvidiactl exists):
 * access() says /dev/nvidiactl exists, as it does where a driver is
 * installed. Everything else goes to the C library. Tests only.
 */
#include <dlfcn.h>
#include <string.h>

__attribute__((visibility("default"))) int access(const char *path, int mode)
{
    static int (*real_access)(const char *, int);

    if (path != NULL && strcmp(path, "/dev/nvidiactl") == 0) {
        return 0;
    }
    if (real_access == NULL) {
        real_access = (int (*)(const char *, int))dlsym(RTLD_NEXT, "access");
    }
    return real_access(path, mode);
}
