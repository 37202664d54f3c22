/*
 * vecadd: vector addition with IVM (Listing 5-1 of the dissertation, made
 * correct).
 *
 * The root PE (id 0) allocates VECA, VECB and VECC in the shared virtual
 * space, fills A and B, starts one PE on each of two devices and waits for
 * both. Child PE k (id k+1) maps its half of the three vectors, adds them and
 * pushes exactly its half of C to the master copy with ivmSyncPut. The root
 * then checks C == A + B.
 *
 * Devices: CPU device 0, and CPU device 1 if the node has one (else CPU
 * device 0 again). With --gpu the second PE goes to GPU device 0; this C
 * example has no CUDA kernel, so a GPU PE adds on the host view of its
 * mapping (ivmHostPtr) and pushes that. The applications under apps/ show
 * real GPU kernels. With --host NAME both devices are those of node NAME
 * (default: the root's own node): the children then map their halves into
 * that node's copies, which the first map fills from the masters on the
 * root's node, and their ivmSyncPut sends C's halves back.
 *
 * Run:  ivmrun ./vecadd [--gpu] [--host NAME]   or just ./vecadd (singleton mode)
 *       ivmrun --nodes 2 ./vecadd --host node1  (children on another node)
 * Prints "vecadd: OK" and exits 0, or prints the first mismatch and exits 1.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ivm.h>

#define VECSIZE 5000
#define NCHILDREN 2

/* Abort the PE with the status text and the detailed message of a failed call. */
#define CHECK(call)                                                            \
    do {                                                                       \
        ivmError_t check_rc_ = (call);                                         \
        if (check_rc_ != IVM_SUCCESS) {                                        \
            const char *check_msg_ = ivmGetLastErrorMessage();                 \
            fprintf(stderr, "vecadd: %s:%d: %s failed: %s (%s)\n", __FILE__,   \
                    __LINE__, #call, ivmGetErrorString(check_rc_),             \
                    check_msg_);                                               \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* First element of child k's half: [half_start(k), half_start(k+1)). */
static size_t half_start(int k)
{
    return (size_t)k * VECSIZE / NCHILDREN;
}

static int run_root(int use_gpu, const char *host)
{
    int *vecA, *vecB, *vecC;
    const size_t bytes = VECSIZE * sizeof(int);
    ivm_device dev[NCHILDREN];
    ivm_pe pe[NCHILDREN];
    ivmError_t rc;

    CHECK(ivmMalloc("VECA", &vecA, bytes));
    CHECK(ivmMalloc("VECB", &vecB, bytes));
    CHECK(ivmMalloc("VECC", &vecC, bytes));
    for (int i = 0; i < VECSIZE; i++) {
        vecA[i] = i;
        vecB[i] = 3 * i + 7;
    }

    /* host is IVM_THIS_HOST (NULL) unless --host named a node. */
    CHECK(ivmCreateDev(host, IVM_CPU_N(0), &dev[0]));
    if (use_gpu) {
        CHECK(ivmCreateDev(host, IVM_GPU_N(0), &dev[1]));
    } else {
        rc = ivmCreateDev(host, IVM_CPU_N(1), &dev[1]);
        if (rc == IVM_ERROR_NOT_FOUND || rc == IVM_ERROR_NO_DEVICE)
            CHECK(ivmCreateDev(host, IVM_CPU_N(0), &dev[1]));
        else
            CHECK(rc);
    }

    for (int k = 0; k < NCHILDREN; k++) {
        CHECK(ivmCreatePEs(dev[k], 1, &pe[k]));
        if (pe[k] == IVM_PE_NULL) {
            fprintf(stderr, "vecadd: no PE was created on device %d\n", k);
            return 1;
        }
    }
    for (int k = 0; k < NCHILDREN; k++)
        CHECK(ivmWait(pe[k]));

    /* The root's references are the master copies: the children's puts are here. */
    for (int i = 0; i < VECSIZE; i++) {
        if (vecC[i] != vecA[i] + vecB[i]) {
            fprintf(stderr, "vecadd: mismatch at %d: C=%d, expected %d + %d = %d\n",
                    i, vecC[i], vecA[i], vecB[i], vecA[i] + vecB[i]);
            return 1;
        }
    }

    for (int k = 0; k < NCHILDREN; k++)
        CHECK(ivmDestroyDev(dev[k]));
    CHECK(ivmFree(vecC));
    CHECK(ivmFree(vecB));
    CHECK(ivmFree(vecA));
    printf("vecadd: OK (%d elements, %d PEs)\n", VECSIZE, NCHILDREN);
    return 0;
}

static int run_child(int id)
{
    int k = id - 1;
    int *vecA, *vecB, *vecC;    /* references: device pointers on a GPU PE */
    int *hA, *hB, *hC;          /* host views of the same bytes */

    if (k < 0 || k >= NCHILDREN) {
        fprintf(stderr, "vecadd: unexpected PE id %d\n", id);
        return 1;
    }
    size_t start = half_start(k);
    size_t count = half_start(k + 1) - start;
    size_t offset = start * sizeof(int), bytes = count * sizeof(int);

    /* Map only this PE's half: a PE on another node or GPU copies just that. */
    CHECK(ivmMapSubset("VECA", &vecA, offset, bytes));
    CHECK(ivmMapSubset("VECB", &vecB, offset, bytes));
    CHECK(ivmMapSubset("VECC", &vecC, offset, bytes));
    CHECK(ivmHostPtr(vecA, &hA));
    CHECK(ivmHostPtr(vecB, &hB));
    CHECK(ivmHostPtr(vecC, &hC));

    for (size_t i = 0; i < count; i++)
        hC[i] = hA[i] + hB[i];

    /* Exactly this PE's half of C, from the copy written above to the master. */
    CHECK(ivmSyncPut(hC, bytes));

    CHECK(ivmUnmap(vecC));
    CHECK(ivmUnmap(vecB));
    CHECK(ivmUnmap(vecA));
    CHECK(ivmSignal());
    return 0;
}

int main(int argc, char **argv)
{
    int use_gpu = 0, id, ret;
    const char *host = IVM_THIS_HOST;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--gpu") == 0) {
            use_gpu = 1;
        } else if (strcmp(argv[i], "--host") == 0 && i + 1 < argc && argv[i + 1][0] != '\0') {
            host = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--gpu] [--host NAME]\n", argv[0]);
            return 2;
        }
    }

    CHECK(ivmEnter());
    CHECK(ivmGetMyId(&id));
    ret = id == 0 ? run_root(use_gpu, host) : run_child(id);
    CHECK(ivmExit());
    return ret;
}
