/*
 * IVM - Inter-node Virtual Memory.
 *
 * One shared virtual memory space over every CPU and GPU of a cluster, with
 * dynamic process creation. This is the whole public API; see docs/ for the
 * user guide and the architecture.
 */
#ifndef IVM_H
#define IVM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(IVM_BUILDING_LIBRARY) && defined(__GNUC__)
#define IVM_API __attribute__((visibility("default")))
#else
#define IVM_API
#endif

/** @brief Library version, as major*10000 + minor*100 + patch. */
#define IVM_VERSION_MAJOR 0
#define IVM_VERSION_MINOR 1
#define IVM_VERSION_PATCH 0
#define IVM_VERSION \
    (IVM_VERSION_MAJOR * 10000 + IVM_VERSION_MINOR * 100 + IVM_VERSION_PATCH)

/**
 * @brief The status table: X(name, value, text).
 *
 * Every IVM call returns one of these. Success is 0, errors are negative.
 * The table generates both the ::ivmError_t enum and ivmGetErrorString().
 */
#define IVM_STATUS_TABLE(X)                                                   \
    X(IVM_SUCCESS,              0,  "success")                                \
    X(IVM_ERROR_INVALID_VALUE, -1,  "invalid argument value")                 \
    X(IVM_ERROR_NOT_ENTERED,   -2,  "ivmEnter has not been called, or ivmExit was") \
    X(IVM_ERROR_NO_DAEMON,     -3,  "no IVM daemon reachable")                \
    X(IVM_ERROR_DAEMON_LOST,   -4,  "connection to the IVM daemon lost")      \
    X(IVM_ERROR_NOT_FOUND,     -5,  "no such object, PE, host or device")     \
    X(IVM_ERROR_EXISTS,        -6,  "an object of that name already exists")  \
    X(IVM_ERROR_NO_MEMORY,     -7,  "out of memory")                          \
    X(IVM_ERROR_NO_DEVICE,     -8,  "no such device on that node")            \
    X(IVM_ERROR_PE_FAILED,     -9,  "the PE died without calling ivmExit")    \
    X(IVM_ERROR_PERMISSION,    -10, "permission denied")                      \
    X(IVM_ERROR_TIMEOUT,       -11, "timed out")                              \
    X(IVM_ERROR_UNSUPPORTED,   -12, "operation not supported")                \
    X(IVM_ERROR_INTERNAL,      -13, "internal error")                         \
    X(IVM_ERROR_PROTOCOL,      -14, "malformed message")                      \
    X(IVM_ERROR_SPAWN,         -15, "the PE's executable could not be started") \
    X(IVM_ERROR_LIMIT,         -16, "a resource limit of the daemon was reached") \
    X(IVM_ERROR_ALREADY_ENTERED, -17, "ivmEnter was already called by this process")

#define IVM_STATUS_ENUM_ENTRY(name, value, text) name = (value),

/** @brief Status code of every IVM call. */
typedef enum ivmError {
    IVM_STATUS_TABLE(IVM_STATUS_ENUM_ENTRY)
} ivmError_t;

/** @brief PE identifier (>= 0). */
typedef int ivm_pe;

/** @brief "No PE": the value of a slot that ivmCreatePEs did not fill. */
#define IVM_PE_NULL (-1)

/** @brief Opaque device handle, made by ivmCreateDev(). */
typedef struct ivm_device_s *ivm_device;

/** @brief Host argument of ivmCreateDev() naming the caller's own node. */
#define IVM_THIS_HOST NULL

/** @brief Device type k-th CPU device of a node (k >= 0). */
#define IVM_CPU_N(k) (k)
/** @brief Device type k-th GPU device of a node (k >= 0). */
#define IVM_GPU_N(k) (0x1000 + (k))
/** @brief Device type meaning "the caller's own device". */
#define IVM_THIS_DEV (-2)
/** @brief Non-zero if devtype names a GPU device. */
#define IVM_DEV_IS_GPU(t) ((t) >= 0x1000)
/** @brief Index of a device type within its kind (CPU or GPU). */
#define IVM_DEV_INDEX(t) (IVM_DEV_IS_GPU(t) ? (t) - 0x1000 : (t))

#define IVM_CPU   IVM_CPU_N(0)
#define IVM_GPU_0 IVM_GPU_N(0)
#define IVM_GPU_1 IVM_GPU_N(1)
#define IVM_GPU_2 IVM_GPU_N(2)
#define IVM_GPU_3 IVM_GPU_N(3)
#define IVM_GPU_4 IVM_GPU_N(4)
#define IVM_GPU_5 IVM_GPU_N(5)
#define IVM_GPU_6 IVM_GPU_N(6)
#define IVM_GPU_7 IVM_GPU_N(7)

/** @brief Longest object name, not counting the terminating NUL. */
#define IVM_NAME_MAX 255
/** @brief Longest node (host) name, not counting the terminating NUL. */
#define IVM_HOST_MAX 63

/* ---------------------------------------------------------------------- */
/** @name Initialization and finalization */
/** @{ */

/**
 * @brief Register the calling process with IVM. First IVM call of every PE.
 *
 * A process started by the user becomes the root PE (id 0) of a new job; a
 * process started by ivmCreatePEs() takes the identity prepared for it. If no
 * daemon serves this user, the root PE starts a private one (singleton mode;
 * set IVM_AUTOSTART=0 to get ::IVM_ERROR_NO_DAEMON instead).
 * A second call is an error (::IVM_ERROR_ALREADY_ENTERED) and changes
 * nothing: the process stays the PE it is, as MPI_Init called twice.
 *
 * Warm PE pool: when the root PE's environment has IVM_PE_POOL=N (N > 0, or
 * ivmrun --pe-pool N), the daemon keeps N processes of the job's program per
 * CPU device parked inside this call, and ivmCreatePEs() hands them their PE
 * identity instead of starting new processes. The code a program runs before
 * ivmEnter() therefore runs when the pool is filled, in processes that are
 * not PEs yet and may never become one (parked processes left over are
 * killed when the job ends): keep it free of side effects other PEs or the
 * user could see, or make it depend on nothing a PE learns later. A parked
 * process has a negative IVM_PE_ID.
 *
 * @return ::IVM_SUCCESS, ::IVM_ERROR_NO_DAEMON, ::IVM_ERROR_PERMISSION,
 *         ::IVM_ERROR_PROTOCOL, ::IVM_ERROR_INVALID_VALUE (a bad IVM_PE_POOL
 *         or IVM_CPU_DEVICES of a root PE), ::IVM_ERROR_ALREADY_ENTERED,
 *         ::IVM_ERROR_NOT_ENTERED (after ivmExit()).
 */
IVM_API ivmError_t ivmEnter(void);

/**
 * @brief Deregister the calling process. Last IVM call of every PE.
 *
 * Waiters on this PE return ::IVM_SUCCESS. The caller's mappings are dropped.
 * When the root PE exits, the job ends: its remaining PEs are terminated and
 * every object of the job is released.
 *
 * @return ::IVM_SUCCESS or ::IVM_ERROR_NOT_ENTERED.
 */
IVM_API ivmError_t ivmExit(void);

/** @} */
/* ---------------------------------------------------------------------- */
/** @name Device management */
/** @{ */

/**
 * @brief Make a handle for device @p devtype of node @p host.
 *
 * A node's GPU devices are the GPUs its GPU daemon (ivm-gpud) reports:
 * real ones (ivmd --gpus), or emulated ones backed by host memory
 * (ivmd/ivmrun --emu-gpus N[:MEM]). A node without either has none.
 *
 * @param host    node name as the launcher names it (node0, ...), or
 *                ::IVM_THIS_HOST for the caller's node.
 * @param devtype IVM_CPU_N(k), IVM_GPU_N(k) or ::IVM_THIS_DEV.
 * @param dev     receives the handle; release it with ivmDestroyDev().
 * @return ::IVM_SUCCESS, ::IVM_ERROR_NOT_FOUND (unknown host or device
 *         index, e.g. a GPU the node lacks), ::IVM_ERROR_INVALID_VALUE (NULL
 *         @p dev, bad devtype), ::IVM_ERROR_DAEMON_LOST (a GPU of a node whose
 *         GPU daemon has died).
 */
IVM_API ivmError_t ivmCreateDev(const char *host, int devtype, ivm_device *dev);

/**
 * @brief Release a handle made by ivmCreateDev(). PEs on it keep running.
 * @return ::IVM_SUCCESS or ::IVM_ERROR_INVALID_VALUE (NULL handle).
 */
IVM_API ivmError_t ivmDestroyDev(ivm_device dev);

/** @} */
/* ---------------------------------------------------------------------- */
/** @name PE management */
/** @{ */

/**
 * @brief Start @p n PEs (the job's executable, with its arguments) on @p dev.
 *
 * Returns once the processes are started, without waiting for them to call
 * ivmEnter(). PE ids are assigned in increasing order and never reused in a
 * job. A slot whose id would exceed the limit of ivmSetMaxPesId() gets
 * ::IVM_PE_NULL and no PE; the call still succeeds.
 *
 * A PE on IVM_GPU_N(k) is bound to that GPU: its environment has IVM_GPU=k,
 * IVM_GPU_BACKEND=emu (emulated GPU: references are host memory) or cuda
 * and, on real GPUs, CUDA_VISIBLE_DEVICES naming that GPU only (it is device
 * 0 of the PE); its host threads run on the node's first CPU device.
 *
 * @param dev device handle.
 * @param n   number of PEs (>= 0).
 * @param pes receives the n PE ids; may be NULL.
 * @return ::IVM_SUCCESS, ::IVM_ERROR_INVALID_VALUE, ::IVM_ERROR_NOT_FOUND,
 *         ::IVM_ERROR_SPAWN (the executable could not be started; on the
 *         caller's node no PE of the call is left: those started before the
 *         failure are killed and every slot is ::IVM_PE_NULL),
 *         ::IVM_ERROR_LIMIT (the burst would pass the daemon's PE limits:
 *         nothing is started), ::IVM_ERROR_DAEMON_LOST (GPU PEs on a node
 *         whose GPU daemon has died).
 */
IVM_API ivmError_t ivmCreatePEs(ivm_device dev, int n, ivm_pe *pes);

/**
 * @brief Terminate the listed PEs. Their waiters get ::IVM_ERROR_PE_FAILED.
 *
 * ::IVM_PE_NULL entries are skipped, so the array filled by ivmCreatePEs() can
 * be passed as it is. PEs that already ended are left alone.
 *
 * @return ::IVM_SUCCESS, ::IVM_ERROR_NOT_FOUND (an id the job never had),
 *         ::IVM_ERROR_INVALID_VALUE (the caller itself, or n < 0).
 */
IVM_API ivmError_t ivmKillPEs(const ivm_pe *pes, int n);

/** @brief The caller's PE id (0 for the root PE). */
IVM_API ivmError_t ivmGetMyId(int *id);

/** @brief The caller's group id: the job's id, shared by all its PEs. */
IVM_API ivmError_t ivmGetMyGroupId(int *gid);

/** @brief The device type of the caller's device (IVM_CPU_N(k) or IVM_GPU_N(k)). */
IVM_API ivmError_t ivmGetMyDevType(int *devtype);

/**
 * @brief Set the largest PE id the job may create. Later ivmCreatePEs() slots
 * beyond it get ::IVM_PE_NULL. The limit may be raised or lowered at any time.
 * @return ::IVM_SUCCESS or ::IVM_ERROR_INVALID_VALUE (negative id).
 */
IVM_API ivmError_t ivmSetMaxPesId(int max_id);

/**
 * @brief Wait until PE @p pe posts a signal not yet consumed, or exits.
 *
 * Signals are counted per PE: none is lost whatever the order of ivmSignal()
 * and ivmWait().
 *
 * @return ::IVM_SUCCESS (a signal was consumed, or @p pe called ivmExit()),
 *         ::IVM_ERROR_PE_FAILED (@p pe died without ivmExit()),
 *         ::IVM_ERROR_NOT_FOUND (no PE of the job has or had that id).
 */
IVM_API ivmError_t ivmWait(ivm_pe pe);

/** @brief Post one signal from the calling PE (see ivmWait()). */
IVM_API ivmError_t ivmSignal(void);

/**
 * @brief Post one signal addressed to PE @p pe.
 *
 * Only @p pe can consume it, with ivmWaitFrom(caller). Signals are counted
 * per (sender, receiver) pair: none is lost whatever the order of the two
 * calls, and signals of one sender to one receiver are consumed in the order
 * they were posted. They are separate from ivmSignal()'s: ivmWait() never
 * takes an addressed signal, ivmWaitFrom() never takes an ivmSignal().
 * A signal to a PE that has ended is accepted and never consumed.
 * Returns once the signal is recorded (it does not wait for the receiver).
 * Between PEs of one node it is recorded in shared memory the node's PEs map
 * (no daemon round trip; IVM_SIGNAL_BOARD=0 for the whole job turns that off).
 *
 * Ordering: every IVM call the sender completed before ivmSignalTo() (an
 * ivmSyncPut() that returned, for instance) has taken effect when the
 * receiver's ivmWaitFrom() returns; ivmSyncPutSignal() does both in one call.
 *
 * Like OpenSHMEM's shmem_signal_wait_until on a per-pair counter, or an
 * MPI_Send of an empty message matched by a blocking MPI_Recv.
 *
 * @param pe the receiving PE (it may be the caller itself).
 * @return ::IVM_SUCCESS, ::IVM_ERROR_NOT_FOUND (no PE of the job has or had
 *         that id), ::IVM_ERROR_DAEMON_LOST.
 */
IVM_API ivmError_t ivmSignalTo(ivm_pe pe);

/**
 * @brief Wait until PE @p pe has posted a signal to the caller (ivmSignalTo())
 * not yet consumed, and consume it; or until @p pe has exited.
 *
 * The failure semantics are ivmWait()'s: a signal posted before the sender
 * ended is still consumed first; then ::IVM_SUCCESS if it called ivmExit(),
 * ::IVM_ERROR_PE_FAILED if it died without it (crash, kill, ivmKillPEs(),
 * its node lost).
 *
 * @return ::IVM_SUCCESS, ::IVM_ERROR_PE_FAILED, ::IVM_ERROR_NOT_FOUND (no PE
 *         of the job has or had that id), ::IVM_ERROR_DAEMON_LOST.
 */
IVM_API ivmError_t ivmWaitFrom(ivm_pe pe);

/** @brief Most PEs one ivmBarrier() list may name. */
#define IVM_BARRIER_PES_MAX 1024

/**
 * @brief Block until every PE of the list @p pes[0..n) has called
 * ivmBarrier() with the same set of PEs.
 *
 * The order of the list and repeated ids do not matter; the caller must be
 * in it. Successive barriers over one set complete in turn, as
 * shmem_barrier's over one active set or MPI_Barrier's over one
 * communicator. Ordering: every IVM call a member completed before it
 * entered the barrier has taken effect when any member leaves it.
 *
 * Between PEs of one node (at most 64 of them) the barrier runs in shared
 * memory, without a daemon round trip; otherwise through the daemons.
 *
 * A member that dies (or has died) without ivmExit() fails the barrier:
 * every member waiting in it, and every later arrival, gets
 * ::IVM_ERROR_PE_FAILED. A member that calls ivmExit() can never arrive, so
 * the same happens then (the detail message names the PE).
 *
 * @return ::IVM_SUCCESS, ::IVM_ERROR_INVALID_VALUE (n < 1, n above
 *         ::IVM_BARRIER_PES_MAX, NULL @p pes, the caller not in the list),
 *         ::IVM_ERROR_NOT_FOUND (an id the job never had),
 *         ::IVM_ERROR_PE_FAILED, ::IVM_ERROR_DAEMON_LOST.
 */
IVM_API ivmError_t ivmBarrier(const ivm_pe *pes, int n);

/**
 * @brief Barrier over the whole job: block until every PE of the job that is
 * alive (started and not ended) has called ivmBarrierAll().
 *
 * PEs created while a barrier is pending belong to it (they must arrive
 * too), and a PE that calls ivmExit() meanwhile leaves it. A PE that dies
 * without ivmExit() fails it: ::IVM_ERROR_PE_FAILED for every member
 * waiting. Like shmem_barrier_all(), or MPI_Barrier(MPI_COMM_WORLD).
 *
 * @return ::IVM_SUCCESS, ::IVM_ERROR_PE_FAILED, ::IVM_ERROR_DAEMON_LOST.
 */
IVM_API ivmError_t ivmBarrierAll(void);

/** @} */
/* ---------------------------------------------------------------------- */
/** @name Memory management */
/** @{ */

/**
 * @brief Create a zero-filled object named @p name of @p size bytes.
 *
 * The master copy lives on the caller's node (in host memory, also for a GPU
 * PE, which gets a device copy of it as by ivmMap()).
 *
 * @param name    unique within the job, at most ::IVM_NAME_MAX bytes.
 * @param ptr_out address of the caller's pointer variable (e.g. &vec with
 *                int *vec); receives the caller's reference.
 * @param size    bytes, > 0.
 * @return ::IVM_SUCCESS, ::IVM_ERROR_EXISTS, ::IVM_ERROR_INVALID_VALUE,
 *         ::IVM_ERROR_NO_MEMORY (also: a GPU PE's device copy did not fit,
 *         see ivmMap(); no object is left then), ::IVM_ERROR_DAEMON_LOST.
 */
IVM_API ivmError_t ivmMalloc(const char *name, void *ptr_out, size_t size);

/**
 * @brief Free an object allocated by the caller; @p ptr is the reference
 * returned by ivmMalloc(). The name disappears at once, the memory when the
 * last mapping of any PE goes.
 * @return ::IVM_SUCCESS, ::IVM_ERROR_INVALID_VALUE (not an ivmMalloc
 *         reference of the caller), ::IVM_ERROR_PERMISSION.
 */
IVM_API ivmError_t ivmFree(void *ptr);

/**
 * @brief Map bytes [0, size) of object @p name (size 0: the whole object).
 *
 * In a GPU PE the reference is a device pointer, usable in kernels, into
 * the GPU's copy of the region: every PE of one GPU mapping a region shares
 * one device copy (made and filled from the node copy on the first map;
 * later maps of a region inside it move no data). ivmHostPtr() gives the
 * node copy's view. A device copy that does not fit waits until memory is
 * released (copies no PE maps any more are evicted first, least recently
 * released first); after the admission time-out (60 s; ivmd
 * --gpu-admit-timeout, IVM_GPU_ADMIT_TIMEOUT) it fails, and at once if it is
 * larger than the GPU.
 *
 * @return ::IVM_SUCCESS, ::IVM_ERROR_NOT_FOUND, ::IVM_ERROR_INVALID_VALUE
 *         (range outside the object, NULL arguments), ::IVM_ERROR_NO_MEMORY
 *         (GPU PE: no device memory after the time-out, or more than the
 *         GPU has), ::IVM_ERROR_DAEMON_LOST (GPU PE: the node's GPU daemon
 *         died).
 */
IVM_API ivmError_t ivmMap(const char *name, void *ptr_out, size_t size);

/**
 * @brief Map bytes [offset, offset+size) of object @p name; the reference
 * points at byte @p offset. size 0 maps up to the end of the object.
 * @return as ivmMap().
 */
IVM_API ivmError_t ivmMapSubset(const char *name, void *ptr_out, size_t offset,
                                size_t size);

/**
 * @brief Drop the caller's mapping whose reference is @p ptr.
 * @return ::IVM_SUCCESS or ::IVM_ERROR_INVALID_VALUE.
 */
IVM_API ivmError_t ivmUnmap(void *ptr);

/**
 * @brief Push [addr, addr+size) from the caller's copy to the master copy.
 *
 * Costs nothing (no data moved, no daemon round trip) when the caller's copy
 * is the master. Blocking: on return the data is in the master copy.
 * A GPU PE's copy is its device copy: the bytes go device copy -> node copy
 * -> master (if the node copy is a mirror). Its syncs accept a device
 * reference or the host view from ivmHostPtr(), and always cost a round
 * trip to the daemon. Every sync call of a GPU PE (Put, Get and the group
 * calls) first waits for the device work the PE queued on its GPU's primary
 * context, the CUDA runtime's (cuCtxSynchronize: kernels and copies on every
 * stream, the legacy default stream included), as cudaMemcpy would: a
 * kernel's results, or a cudaMemcpy into the reference that returned before
 * its bytes landed, are what Put carries, and work queued before a Get does
 * not overwrite what Get brings. Work on contexts the application created
 * itself is not waited for. ivmUnmap()/ivmFree() of a GPU mapping wait the
 * same way, as cudaFree does.
 * @return ::IVM_SUCCESS, ::IVM_ERROR_INVALID_VALUE (range not inside one
 *         mapping of the caller), ::IVM_ERROR_DAEMON_LOST (the master's node
 *         or, for a GPU PE, the GPU daemon is gone), ::IVM_ERROR_INTERNAL (a
 *         GPU PE's earlier device work failed; the message says how).
 */
IVM_API ivmError_t ivmSyncPut(const void *addr, size_t size);

/** @brief Pull [addr, addr+size) from the master copy into the caller's copy
 * (for a GPU PE: master -> node copy -> device copy). */
IVM_API ivmError_t ivmSyncGet(void *addr, size_t size);

/**
 * @brief ivmSyncPut() of [addr, addr+size), then ivmSignalTo(@p pe) once the
 * bytes are in the master copy: a put with a completion notice, as NVSHMEM's
 * putmem_signal or an MPI_Put followed by a notification.
 *
 * When @p pe's ivmWaitFrom(caller) returns, the bytes are in the master; a PE
 * whose copy is the master (the master's node, a CPU PE) reads them at once,
 * one holding a mirror or a device copy calls ivmSyncGet() on the range
 * first. If the put fails, no signal is posted.
 *
 * @return as ivmSyncPut(); ::IVM_ERROR_NOT_FOUND (@p pe is no PE of the job:
 *         the bytes were put, no signal is posted).
 */
IVM_API ivmError_t ivmSyncPutSignal(const void *addr, size_t size, ivm_pe pe);

/**
 * @brief Write the range to the master (if the caller holds a mirror), then
 * from the master to every mirror covering any part of it (broadcast;
 * scatter when mirrors are subsets). The mirrors include the device copies
 * that PEs map on any node (a GPU PE's own copy is the source).
 */
IVM_API ivmError_t ivmSyncPutGroup(const void *addr, size_t size);

/**
 * @brief Gather: write every mirror's intersection with the range into the
 * master, the device copies that PEs map on any node included. Where
 * mirrors overlap, which one wins is unspecified.
 */
IVM_API ivmError_t ivmSyncGetGroup(void *addr, size_t size);

/** @} */
/* ---------------------------------------------------------------------- */
/** @name Additions to the dissertation's table */
/** @{ */
/**
 * @brief Start an ivmSyncPut() of [addr, addr+size) and return without
 * waiting for it, as OpenSHMEM's shmem_putmem_nbi or an MPI_Put before its
 * flush; ivmQuiet() completes it.
 *
 * The range is checked at once (::IVM_ERROR_INVALID_VALUE as ivmSyncPut()).
 * A CPU PE with an endpoint to the master's node (see IVM_PE_ENDPOINTS)
 * sends the bytes on it before the call returns, up to 256 KiB; otherwise
 * the put goes through the caller's node daemon, which reads the bytes from
 * the caller's copy when it handles the request (and a put the master's
 * daemon sends back is redone that way at the quiet): until ivmQuiet()
 * returns, the caller must not write the range (its node's other PEs neither), and
 * nothing is promised about when the bytes reach the master or in which
 * order against the caller's other calls. A caller whose copy is the
 * master (a CPU PE on the master's node) moves no data: the put is complete
 * at once. A GPU PE's device work is waited for at the call, as
 * ivmSyncPut() does. At most 64 posted calls (puts and gets) are
 * outstanding: the 65th waits for the oldest first. ivmUnmap(), ivmFree()
 * and ivmExit() wait for the outstanding ones; a failure among them is
 * returned by the next ivmQuiet(), or by ivmExit() when none came.
 *
 * @return ::IVM_SUCCESS (started), ::IVM_ERROR_INVALID_VALUE (range not
 *         inside one mapping of the caller), ::IVM_ERROR_DAEMON_LOST,
 *         ::IVM_ERROR_NOT_ENTERED.
 */
IVM_API ivmError_t ivmSyncPutNbi(const void *addr, size_t size);

/**
 * @brief Start an ivmSyncGet() of [addr, addr+size) and return without
 * waiting for it (shmem_getmem_nbi, MPI_Get before its flush); ivmQuiet()
 * completes it.
 *
 * Until ivmQuiet() returns, the range of the caller's copy is being
 * overwritten: neither the caller nor another PE of its node may read or
 * write it. Otherwise as ivmSyncPutNbi() (checked at once, through the
 * caller's daemon, complete at once when the caller's copy is the master,
 * 64 outstanding posted calls at most, waited for by ivmUnmap(), ivmFree()
 * and ivmExit()).
 *
 * @return as ivmSyncPutNbi().
 */
IVM_API ivmError_t ivmSyncGetNbi(void *addr, size_t size);

/**
 * @brief Wait until every ivmSyncPutNbi() and ivmSyncGetNbi() the PE started
 * before the call is complete: the puts' bytes in their master copies, the
 * gets' in the caller's copies (shmem_quiet, MPI_Win_flush_all).
 *
 * @return ::IVM_SUCCESS, or the first failure among those calls, with its
 *         message (as ivmSyncPut() and ivmSyncGet() report it;
 *         ::IVM_ERROR_DAEMON_LOST when the master's node was lost);
 *         ::IVM_ERROR_NOT_ENTERED.
 */
IVM_API ivmError_t ivmQuiet(void);


/** @brief Text of a status code; never NULL ("unknown status" if unknown). */
IVM_API const char *ivmGetErrorString(ivmError_t err);

/**
 * @brief The detailed message of the calling thread's last failed IVM call
 * (e.g. which name was not found); "" if none. Valid until the next IVM call
 * of the same thread.
 */
IVM_API const char *ivmGetLastErrorMessage(void);

/** @brief Number of PEs of the job alive now (started and not ended). */
IVM_API ivmError_t ivmGetNumPEs(int *n);

/** @brief The node argument of the discovery calls naming the caller's node. */
#define IVM_THIS_NODE (-1)

/** @brief Most devices ivmGetDevices() reports for one node. */
#define IVM_NODE_DEVICES_MAX 128

/** @brief One device of a node, as ivmGetDevices() reports it. */
typedef struct ivm_device_info {
    int devtype; /**< IVM_CPU_N(k) or IVM_GPU_N(k): pass it to ivmCreateDev() */
    int ncores;  /**< CPU device: its cores (OMP_NUM_THREADS of its PEs); GPU: 0 */
    int share;   /**< percent of its cores' time (CPU) or of its GPU; 100: whole */
    int numa;    /**< NUMA node holding all its cores; -1: several or unknown */
    int npes;    /**< PEs of the caller's job started on it and not ended, now */
    int reserved[3]; /**< zero */
} ivm_device_info;

/**
 * @brief Number of nodes of the cluster the job runs on (1 without a
 * cluster). Nodes are numbered 0 .. n-1 as the launcher's cluster table;
 * under ivmrun node 0 is the root PE's.
 * @return ::IVM_SUCCESS, ::IVM_ERROR_INVALID_VALUE (NULL @p n).
 */
IVM_API ivmError_t ivmGetNumNodes(int *n);

/**
 * @brief Index (0 .. ivmGetNumNodes()-1) of the caller's node.
 * @return ::IVM_SUCCESS, ::IVM_ERROR_INVALID_VALUE (NULL @p node).
 */
IVM_API ivmError_t ivmGetMyNode(int *node);

/**
 * @brief Name of node @p node (or ::IVM_THIS_NODE), as ivmCreateDev() takes
 * it: "node0" for a single daemon (ivmd --node), node0 .. nodeN-1 under
 * ivmrun --nodes N, the host names under ivmrun --hosts and --slurm.
 * @param name receives the NUL-terminated name; at most ::IVM_HOST_MAX + 1
 *             bytes are needed.
 * @return ::IVM_SUCCESS, ::IVM_ERROR_NOT_FOUND (no such node),
 *         ::IVM_ERROR_INVALID_VALUE (NULL @p name, or @p len too small: the
 *         name is cut to fit, NUL-terminated when @p len > 0),
 *         ::IVM_ERROR_DAEMON_LOST (the node's daemon is unreachable).
 */
IVM_API ivmError_t ivmGetNodeName(int node, char *name, size_t len);

/**
 * @brief The devices of node @p node (or ::IVM_THIS_NODE): its CPU devices
 * IVM_CPU_N(0..) first, then its GPU devices IVM_GPU_N(0..), each with its
 * cores, share, NUMA node and the number of the job's PEs on it now.
 *
 * The CPU devices of the root PE's node are the job's table (the root's
 * IVM_CPU_DEVICES or ivmrun --cpu-devices), those of the other nodes their
 * daemon's table: the devices ivmCreateDev() accepts.
 *
 * @param devs receives the first min(@p max, *ndevs) devices; may be NULL
 *             when @p max is 0 (to learn the count).
 * @param ndevs receives how many devices the node has.
 * @return ::IVM_SUCCESS, ::IVM_ERROR_NOT_FOUND (no such node),
 *         ::IVM_ERROR_INVALID_VALUE (NULL @p ndevs, @p max < 0, NULL @p devs
 *         with @p max > 0), ::IVM_ERROR_DAEMON_LOST (the node's daemon is
 *         unreachable).
 */
IVM_API ivmError_t ivmGetDevices(int node, ivm_device_info *devs, int max, int *ndevs);

/**
 * @brief The slots of node @p node (or ::IVM_THIS_NODE), as the launcher was
 * given them (Open MPI hostfile "slots=N max_slots=M", ivmrun --node-slots).
 * @p slots: how many PEs of the job the node should run at once (load
 * balancers such as the apps' DS-LB drivers keep to it); @p max_slots: how
 * many it may run at once: ivmCreatePEs() and ivmCreatePE() on a node whose
 * live PEs of the job would exceed it fail with ::IVM_ERROR_LIMIT. The root
 * PE counts on its node. 0 means not limited.
 * @return ::IVM_SUCCESS, ::IVM_ERROR_NOT_FOUND (no such node),
 *         ::IVM_ERROR_INVALID_VALUE (NULL @p slots or @p max_slots),
 *         ::IVM_ERROR_DAEMON_LOST (the node's daemon is unreachable).
 */
IVM_API ivmError_t ivmGetNodeSlots(int node, int *slots, int *max_slots);

/** @brief Size of a buffer that always holds ivmGetLibraryVersion()'s text. */
#define IVM_MAX_LIBRARY_VERSION_STRING 256

/**
 * @brief Version of the IVM library the program runs with (which may be newer
 * than the ivm.h it was compiled with: compare with ::IVM_VERSION_MAJOR).
 * May be called at any time, before ivmEnter() too. A NULL pointer is skipped.
 * @return ::IVM_SUCCESS.
 */
IVM_API ivmError_t ivmGetVersion(int *major, int *minor, int *patch);

/**
 * @brief The library's version, git revision and the optional parts built in
 * (CUDA, the MPI and Slurm bootstraps, ...), as one line of text, like
 * MPI_Get_library_version. May be called at any time.
 * @param buf  receives the NUL-terminated text.
 * @param len  bytes at @p buf; ::IVM_MAX_LIBRARY_VERSION_STRING always suffices.
 * @return ::IVM_SUCCESS, ::IVM_ERROR_INVALID_VALUE (NULL @p buf, or @p len too
 *         small: the text is then cut to fit, NUL-terminated when @p len > 0).
 */
IVM_API ivmError_t ivmGetLibraryVersion(char *buf, size_t len);

/**
 * @brief Host view of a reference: for a GPU PE the node copy's host pointer
 * for the same byte; for a CPU PE @p ref itself. The host view and the
 * device copy are separate copies: ivmSyncPut()/ivmSyncGet() move bytes
 * between them (and the master).
 * @return ::IVM_SUCCESS or ::IVM_ERROR_INVALID_VALUE (not inside a mapping).
 */
IVM_API ivmError_t ivmHostPtr(const void *ref, void *host_ptr_out);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* IVM_H */
