/*
 * The emu backend: N emulated GPUs whose device memory is host memory. A
 * device allocation is a memfd of the size; the "device pointer" a PE gets is
 * its mmap of that fd; copies are memcpy between gpud's mapping and the node
 * copy. Capacity is only a number the admission module enforces. It exists so
 * that every GPU-path decision is exercised on machines without a GPU.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpud.h"
#include "log.h"
#include "status.h"

#define GPUD_EMU_GRANULARITY (64u * 1024u)
#define GPUD_EMU_DEFAULT_MEM (1ull << 30)

typedef struct gpud_emu {
    uint32_t ngpus;
    uint64_t capacity; /* bytes per GPU */
} gpud_emu_t;

struct gpud_mem {
    int      fd;
    void    *ptr;
    uint64_t size;
};

/* "N" or "N:MEM" with MEM a byte count with an optional K, M or G suffix. */
static ivmError_t gpud_emu_parse(const char *spec, uint32_t *n_p, uint64_t *mem_p)
{
    unsigned long long n;
    uint64_t mem = GPUD_EMU_DEFAULT_MEM;
    char *end;

    errno = 0;
    n = strtoull(spec, &end, 10);
    if (end == spec || errno != 0 || n < 1 || n > IVM_GPUD_MAX_GPUS ||
        (*end != '\0' && *end != ':')) {
        ivm_error("--emu-gpus '%s': expected N[:MEM] with N from 1 to %d", spec,
                  IVM_GPUD_MAX_GPUS);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (*end == ':' && (gpud_parse_size(end + 1, &mem) != IVM_SUCCESS ||
                        mem < GPUD_EMU_GRANULARITY)) {
        ivm_error("--emu-gpus '%s': MEM must be a size from 64K (K/M/G suffix)", spec);
        return IVM_ERROR_INVALID_VALUE;
    }
    *n_p   = (uint32_t)n;
    *mem_p = mem - mem % GPUD_EMU_GRANULARITY;
    return IVM_SUCCESS;
}

static ivmError_t gpud_emu_init(const gpud_config_t *cfg, void **ctx_p, uint32_t *ngpus_p)
{
    gpud_emu_t *e = calloc(1, sizeof(*e));
    ivmError_t status;

    if (e == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    status = gpud_emu_parse(cfg->emu_gpus, &e->ngpus, &e->capacity);
    if (status != IVM_SUCCESS) {
        free(e);
        return status;
    }
    ivm_info("emu (emulated GPU, host memory): %u GPUs of %llu bytes", e->ngpus,
             (unsigned long long)e->capacity);
    *ctx_p   = e;
    *ngpus_p = e->ngpus;
    return IVM_SUCCESS;
}

static void gpud_emu_fini(void *ctx)
{
    free(ctx);
}

static ivmError_t gpud_emu_gpu_info(void *ctx, uint32_t gpu, uint64_t *capacity_p,
                                    uint64_t *granularity_p, char *name, size_t name_len)
{
    gpud_emu_t *e = ctx;

    *capacity_p    = e->capacity;
    *granularity_p = GPUD_EMU_GRANULARITY;
    snprintf(name, name_len, "emu%u (emulated GPU, host memory)", gpu);
    return IVM_SUCCESS;
}

/* An emulated GPU needs nothing in a PE's environment. */
static void gpud_emu_gpu_env(void *ctx, uint32_t gpu, char *env, char *share_env)
{
    (void)ctx;
    (void)gpu;
    env[0]       = '\0';
    share_env[0] = '\0';
}

static ivmError_t gpud_emu_alloc(void *ctx, uint32_t gpu, uint64_t size, gpud_mem_t **mem_p)
{
    gpud_mem_t *m = calloc(1, sizeof(*m));
    char name[32];
    ivmError_t status = IVM_ERROR_NO_MEMORY;

    if (m == NULL) {
        return IVM_ERROR_NO_MEMORY;
    }
    snprintf(name, sizeof(name), "ivm-emu-gpu%u", gpu);
    m->fd = memfd_create(name, MFD_CLOEXEC);
    if (m->fd < 0) {
        ivm_error("memfd_create: %m");
        goto err_free;
    }
    if (ftruncate(m->fd, (off_t)size) != 0) {
        ivm_error("ftruncate emulated device memory to %llu bytes: %m",
                  (unsigned long long)size);
        goto err_close;
    }
    m->ptr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
    if (m->ptr == MAP_FAILED) {
        ivm_error("mmap emulated device memory (%llu bytes): %m", (unsigned long long)size);
        goto err_close;
    }
    m->size = size;
    *mem_p  = m;
    return IVM_SUCCESS;
err_close:
    close(m->fd);
err_free:
    free(m);
    return status;
}

static ivmError_t gpud_emu_export_fd(void *ctx, gpud_mem_t *mem, int *fd_p)
{
    int fd = fcntl(mem->fd, F_DUPFD_CLOEXEC, 0);

    if (fd < 0) {
        ivm_error("dup of emulated device memory fd: %m");
        return ivm_status_from_errno(errno);
    }
    *fd_p = fd;
    return IVM_SUCCESS;
}

static ivmError_t gpud_emu_copy(void *ctx, gpud_mem_t *mem, uint64_t mem_off, void *host,
                                uint64_t size, uint32_t dir)
{
    char *dev = (char *)mem->ptr + mem_off;

    if (dir == IVM_GPUD_COPY_H2D) {
        memcpy(dev, host, size);
    } else {
        memcpy(host, dev, size);
    }
    return IVM_SUCCESS;
}

static void gpud_emu_free(void *ctx, gpud_mem_t *mem)
{
    munmap(mem->ptr, mem->size);
    close(mem->fd);
    free(mem);
}

static ivmError_t gpud_emu_host_register(void *ctx, void *ptr, uint64_t size)
{
    return IVM_SUCCESS; /* host memory already */
}

static void gpud_emu_host_unregister(void *ctx, void *ptr)
{
}

const gpud_backend_ops_t gpud_backend_emu = {
    .name            = "emu",
    .desc            = "emu (emulated GPU, host memory)",
    .kind            = IVM_GPUD_BACKEND_EMU,
    .copy_flag       = IVM_GPUD_COPY_EMU,
    .init            = gpud_emu_init,
    .fini            = gpud_emu_fini,
    .gpu_info        = gpud_emu_gpu_info,
    .gpu_env         = gpud_emu_gpu_env,
    .alloc           = gpud_emu_alloc,
    .export_fd       = gpud_emu_export_fd,
    .copy            = gpud_emu_copy,
    .free            = gpud_emu_free,
    .host_register   = gpud_emu_host_register,
    .host_unregister = gpud_emu_host_unregister,
};
