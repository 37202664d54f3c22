/*
 * The wire protocol between PEs (libivm) and ivmd, on the per-user Unix socket.
 *
 * Every message is a fixed 16-byte header followed by `length` payload bytes.
 * Requests carry a type below IVM_MSG_REPLY; the reply to a request has the
 * same type with IVM_MSG_REPLY set and the request's sequence number, and
 * starts with an ivm_msg_status_t. Replies may arrive out of order (a WAIT is
 * answered when the waited-for PE signals), hence the sequence numbers.
 *
 * File descriptors (object memory, the root PE's stdout/stderr) travel as
 * SCM_RIGHTS ancillary data on the first byte of the message they belong to.
 *
 * All fields are fixed-width and little-endian (the host's order: this
 * socket never leaves the node). Strings are fixed-size, NUL-terminated.
 */
#ifndef IVM_COMMON_PROTO_H
#define IVM_COMMON_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "ivm.h"

#define IVM_PROTO_MAGIC     0x314d5649u /* "IVM1" in memory order */
#define IVM_PROTO_VERSION   1
#define IVM_MSG_REPLY       0x8000u
#define IVM_MSG_MAX_PAYLOAD (1u << 20) /* bytes; bounds ENTER's environment blob */
#define IVM_MSG_MAX_FDS     4
#define IVM_CREATE_PES_MAX  1024 /* PEs per CREATE_PES request and reply */
#define IVM_KILL_PES_MAX    1024 /* PEs per KILL_PES request */
/* IVM_BARRIER_PES_MAX (PEs per BARRIER request) and IVM_NODE_DEVICES_MAX
 * (devices per NODE_DEVS reply) are public: ivm.h. */

typedef struct ivm_msg_hdr {
    uint32_t magic;   /* IVM_PROTO_MAGIC */
    uint16_t version; /* IVM_PROTO_VERSION */
    uint16_t type;    /* ivm_msg_type_t, | IVM_MSG_REPLY for replies */
    uint32_t length;  /* payload bytes after this header */
    uint32_t seq;     /* request number chosen by the sender, echoed in the reply */
} ivm_msg_hdr_t;

_Static_assert(sizeof(ivm_msg_hdr_t) == 16, "header is 16 bytes");
_Static_assert(offsetof(ivm_msg_hdr_t, length) == 8, "length at byte 8");

/* X(name, value, request struct, reply struct, variable-length request,
 *   the caller polls for the reply (IVM_SPIN_US) before it sleeps). Not
 *   polled: WAIT (its reply may take any time), CREATE_PES (a cold spawn takes
 *   hundreds of us; a warm one wakes the new PE) and SIGNAL, SIGNAL_TO,
 *   PUT_SIGNAL, SIGNAL_POKE (they wake the waiter): a polling caller would keep the
 *   process it has just woken off the CPU. SYNC neither: a sync that reaches
 *   the daemon crosses to another node and back (30 us and more), which a
 *   spin seldom covers, while it holds off the daemons woken on its CPU (8 B
 *   remote Put p90 89 us polled, 38 us not; docs/BENCHMARKS.md, issue 17). */
#define IVM_MSG_TABLE(X)                                                        \
    X(ENTER,       1,  ivm_msg_enter_req_t,      ivm_msg_enter_rep_t,      1, 1) \
    X(EXIT,        2,  ivm_msg_empty_t,          ivm_msg_status_t,         0, 1) \
    X(CREATE_DEV,  3,  ivm_msg_create_dev_req_t, ivm_msg_create_dev_rep_t, 0, 1) \
    X(CREATE_PES,  4,  ivm_msg_create_pes_req_t, ivm_msg_create_pes_rep_t, 0, 0) \
    X(KILL_PES,    5,  ivm_msg_kill_pes_req_t,   ivm_msg_status_t,         1, 1) \
    X(SET_MAX_ID,  6,  ivm_msg_pe_req_t,         ivm_msg_status_t,         0, 1) \
    X(WAIT,        7,  ivm_msg_pe_req_t,         ivm_msg_status_t,         0, 0) \
    X(SIGNAL,      8,  ivm_msg_empty_t,          ivm_msg_status_t,         0, 0) \
    X(NUM_PES,     9,  ivm_msg_empty_t,          ivm_msg_value_rep_t,      0, 1) \
    X(MALLOC,      10, ivm_msg_malloc_req_t,     ivm_msg_map_rep_t,        0, 1) \
    X(MAP,         11, ivm_msg_map_req_t,        ivm_msg_map_rep_t,        0, 1) \
    X(UNMAP,       12, ivm_msg_obj_req_t,        ivm_msg_status_t,         0, 1) \
    X(FREE,        13, ivm_msg_obj_req_t,        ivm_msg_status_t,         0, 1) \
    X(INFO,        14, ivm_msg_empty_t,          ivm_msg_info_rep_t,       0, 1) \
    X(SHUTDOWN,    15, ivm_msg_empty_t,          ivm_msg_status_t,         0, 1) \
    X(CLUSTER,     16, ivm_msg_cluster_req_t,    ivm_msg_status_t,         1, 1) \
    X(SYNC,        17, ivm_msg_sync_req_t,       ivm_msg_status_t,         0, 0) \
    X(OBJ_INFO,    18, ivm_msg_obj_info_req_t,   ivm_msg_obj_info_rep_t,   0, 1) \
    X(GPU_INFO,    19, ivm_msg_gpu_info_req_t,   ivm_msg_gpu_info_rep_t,   0, 1) \
    X(CPU_INFO,    20, ivm_msg_cpu_info_req_t,   ivm_msg_cpu_info_rep_t,   0, 1) \
    X(SET_SHARE,   21, ivm_msg_set_share_req_t,  ivm_msg_status_t,         0, 1) \
    X(LIST,        22, ivm_msg_list_req_t,       ivm_msg_list_rep_t,       0, 1) \
    X(NODE_DEVS,   23, ivm_msg_node_req_t,       ivm_msg_node_devs_rep_t,  0, 1) \
    X(SIGNAL_TO,   24, ivm_msg_pe_req_t,         ivm_msg_status_t,         0, 0) \
    X(WAIT_FROM,   25, ivm_msg_pe_req_t,         ivm_msg_status_t,         0, 0) \
    X(BARRIER,     26, ivm_msg_barrier_req_t,    ivm_msg_status_t,         1, 0) \
    X(BOARD,       27, ivm_msg_empty_t,          ivm_msg_status_t,         0, 1) \
    X(PUT_SIGNAL,  28, ivm_msg_put_signal_req_t, ivm_msg_status_t,         0, 0) \
    X(SIGNAL_POKE, 29, ivm_msg_empty_t,          ivm_msg_status_t,         0, 0) \
    X(ENDPOINT,    30, ivm_msg_endpoint_req_t,   ivm_msg_endpoint_rep_t,   0, 1)

#define IVM_MSG_ENUM_ENTRY(name, value, req, rep, var, poll) IVM_MSG_##name = (value),
typedef enum ivm_msg_type {
    IVM_MSG_NONE = 0,
    IVM_MSG_TABLE(IVM_MSG_ENUM_ENTRY)
    IVM_MSG_LAST
} ivm_msg_type_t;

typedef struct ivm_msg_empty {
    uint32_t reserved; /* zero */
} ivm_msg_empty_t;

/* Start of every reply. */
typedef struct ivm_msg_status {
    int32_t status;    /* ivmError_t */
    uint32_t reserved; /* zero */
} ivm_msg_status_t;

/* Reply payloads may be followed by a NUL-terminated detail text (the message
 * for a failed call): `length` then exceeds the fixed reply size. */
#define IVM_MSG_DETAIL_MAX 256

/*
 * ENTER: register the connection as a PE.
 * Root PE (flags & IVM_ENTER_ROOT): creates a job. The fixed part is followed
 * by `blob_len` bytes: exe, cwd, argc argv strings, envc environment strings,
 * each NUL-terminated, in that order. The root's stdout and stderr come as two
 * SCM_RIGHTS fds (children are started with them).
 * Child PE: job_id, pe_id and token come from the environment the daemon
 * prepared (IVM_JOB_ID, IVM_PE_ID, IVM_PE_TOKEN); blob_len is 0.
 * Parked process of the warm PE pool (flags & IVM_ENTER_POOL): the daemon
 * started it with a negative IVM_PE_ID (its pool slot) and a token; the reply
 * is deferred until the daemon hands it a PE identity (ivmCreatePEs), and then
 * names that PE as for a spawned child. A parked process that can fork (one
 * thread, no CUDA context: IVM_ENTER_FORKABLE) may instead be told to fork
 * the PE (reply flags IVM_ENTER_REP_FORK, token 0, its stdout and stderr as
 * two SCM_RIGHTS fds): that connection is the PE's from then on and the child
 * runs as that PE on it at once; the parked process parks again with a new
 * pool ENTER on a new connection, naming the child's pid in forked_pid (0:
 * the fork failed). Before it parks, a parked process may send a pool ENTER
 * with IVM_ENTER_BOARD (same slot and token): answered at once with the
 * job's signal board on this node (BOARD below, made if it was not) as one
 * SCM_RIGHTS fd, the connection not parked, so that the process maps the
 * board while it waits. See docs/CONTRACTS.md, "Warm pool".
 */
#define IVM_ENTER_ROOT       0x1u
#define IVM_ENTER_TAG_OUTPUT 0x2u /* prefix children's output lines with [NODE,N] */
#define IVM_ENTER_POOL       0x4u /* a parked process of the warm PE pool */
#define IVM_ENTER_FORKABLE   0x8u /* pool: single-threaded, may fork PEs */
#define IVM_ENTER_BOARD      0x40u /* pool: only the job's signal board, answered at once */
/* Bits 4-5 of a root's ENTER flags and of SPAWN flags: how the job's CPU PEs
 * are bound (ivmrun --bind-to): to their device's cores (0), to one core of
 * it each, to the NUMA node(s) of its cores, or not at all. */
#define IVM_BIND_SHIFT       4
#define IVM_BIND_MASK        (0x3u << IVM_BIND_SHIFT)
#define IVM_BIND_DEVICE      0u
#define IVM_BIND_CORE        1u
#define IVM_BIND_NUMA        2u
#define IVM_BIND_NONE        3u
#define IVM_BIND_GET(flags)  (((flags) & IVM_BIND_MASK) >> IVM_BIND_SHIFT)
#define IVM_PE_POOL_MAX      64   /* parked processes per job and device, at most */
typedef struct ivm_msg_enter_req {
    uint32_t flags;      /* IVM_ENTER_* */
    uint32_t pid;        /* caller's pid, checked against SO_PEERCRED */
    uint32_t job_id;     /* child: job to join; root: 0 */
    int32_t  pe_id;      /* child: its PE id; root: 0 */
    uint64_t token;      /* child: secret the daemon put in its environment */
    uint32_t argc;       /* root: argument strings in the blob */
    uint32_t envc;       /* root: environment strings in the blob */
    uint32_t blob_len;   /* bytes following this struct */
    uint32_t pe_pool;    /* root: parked processes per device, CPU or GPU (IVM_PE_POOL),
                            0 .. IVM_PE_POOL_MAX; others: zero */
    char     cpu_devices[128]; /* root: --cpu-devices spec for the job, "" = default */
    uint32_t forked_pid; /* pool, parking again: pid of the PE it forked (0: fork failed);
                            others: zero */
    uint32_t reserved;   /* zero */
} ivm_msg_enter_req_t;

_Static_assert(sizeof(ivm_msg_enter_req_t) == 176, "enter request size");

typedef struct ivm_msg_enter_rep {
    int32_t  status;     /* ivmError_t */
    uint32_t job_id;     /* the job; also the group id */
    int32_t  pe_id;      /* the caller's PE id */
    int32_t  devtype;    /* the caller's device (IVM_CPU_N / IVM_GPU_N) */
    uint32_t ncores;     /* cores of the caller's device (CPU) */
    uint32_t flags;      /* IVM_ENTER_REP_*; zero otherwise */
    char     node[IVM_HOST_MAX + 1]; /* the caller's node name */
    uint64_t token;      /* zero (IVM_ENTER_REP_FORK: the PE never enters itself) */
} ivm_msg_enter_rep_t;

#define IVM_ENTER_REP_FORK 0x1u /* to a forkable parked process: fork PE pe_id */

_Static_assert(sizeof(ivm_msg_enter_rep_t) == 96, "enter reply size");

typedef struct ivm_msg_create_dev_req {
    int32_t devtype;     /* IVM_CPU_N(k), IVM_GPU_N(k) or IVM_THIS_DEV */
    uint32_t reserved;   /* zero */
    char     host[IVM_HOST_MAX + 1]; /* node name; "" = the caller's node */
} ivm_msg_create_dev_req_t;

typedef struct ivm_msg_create_dev_rep {
    int32_t  status;     /* ivmError_t */
    int32_t  devtype;    /* resolved device type (never IVM_THIS_DEV) */
    uint32_t ncores;     /* cores of the device (CPU), 0 for GPUs */
    uint32_t reserved;   /* zero */
    char     host[IVM_HOST_MAX + 1]; /* resolved node name */
} ivm_msg_create_dev_rep_t;

typedef struct ivm_msg_create_pes_req {
    int32_t  devtype;    /* resolved device type */
    int32_t  n;          /* 0 .. IVM_CREATE_PES_MAX */
    char     host[IVM_HOST_MAX + 1]; /* resolved node name */
} ivm_msg_create_pes_req_t;

/* A successful reply ends after pes[n - 1] (no detail follows it): a warm
 * PE's creation moves 12 bytes, not 4 KiB. A failed one has the full struct,
 * then the detail, like every reply. */
typedef struct ivm_msg_create_pes_rep {
    int32_t  status;     /* ivmError_t */
    int32_t  n;          /* slots filled below (= request's n) */
    int32_t  pes[IVM_CREATE_PES_MAX]; /* PE ids or IVM_PE_NULL */
} ivm_msg_create_pes_rep_t;

/* KILL_PES: fixed part followed by n int32 PE ids. */
typedef struct ivm_msg_kill_pes_req {
    int32_t  n;          /* 1 .. IVM_KILL_PES_MAX */
    uint32_t reserved;   /* zero */
} ivm_msg_kill_pes_req_t;

/* WAIT (pe to wait on), SET_MAX_ID (largest PE id), SIGNAL_TO (the PE the
 * signal is for) and WAIT_FROM (the PE whose signal to the caller it waits for). */
typedef struct ivm_msg_pe_req {
    int32_t  pe;         /* PE id */
    uint32_t reserved;   /* zero */
} ivm_msg_pe_req_t;

/* BARRIER: fixed part followed by n int32 PE ids, sorted, without
 * duplicates, the caller among them; n = 0: every PE of the job alive now. */
typedef struct ivm_msg_barrier_req {
    int32_t  n;          /* 0 .. IVM_BARRIER_PES_MAX */
    uint32_t reserved;   /* zero */
} ivm_msg_barrier_req_t;

/* NODE_DEVS: the job's node `node` (a cluster index; IVM_THIS_NODE: the
 * caller's) and its devices, with the job's PEs running on each now. Served
 * by the job's root daemon (forwarded there like WAIT). */
typedef struct ivm_msg_node_req {
    int32_t  node;       /* cluster index, or IVM_THIS_NODE (-1) */
    uint32_t reserved;   /* zero */
} ivm_msg_node_req_t;

typedef struct ivm_msg_devinfo {
    int32_t  devtype;    /* IVM_CPU_N(k) or IVM_GPU_N(k) */
    uint32_t ncores;     /* CPU: cores; GPU: 0 */
    uint32_t share;      /* percent of its cores' time (CPU) or of the GPU, 1..100 */
    int32_t  numa;       /* NUMA node of all its cores; -1: several or unknown */
    uint32_t npes;       /* the job's PEs started on it and not ended */
} ivm_msg_devinfo_t;

typedef struct ivm_msg_node_devs_rep {
    int32_t  status;     /* ivmError_t */
    uint32_t nnodes;     /* nodes of the cluster (1 without one) */
    int32_t  node;       /* the node described (IVM_THIS_NODE resolved) */
    int32_t  self;       /* the caller's node */
    uint32_t ndevs;      /* entries of devs: CPU devices first, then GPUs */
    uint16_t slots;      /* PEs of the job the node should run at once; 0: any */
    uint16_t max_slots;  /* PEs of the job the node may run at once; 0: any */
    char     name[IVM_HOST_MAX + 1]; /* the node's name */
    ivm_msg_devinfo_t devs[IVM_NODE_DEVICES_MAX];
} ivm_msg_node_devs_rep_t;

_Static_assert(sizeof(ivm_msg_devinfo_t) == 20, "devinfo size");
_Static_assert(sizeof(ivm_msg_node_devs_rep_t) == 88 + 20 * IVM_NODE_DEVICES_MAX,
               "node devs reply size");

/*
 * BOARD: the job's signal board on this node, as one SCM_RIGHTS memfd the PE
 * maps shared (not forwarded: each node's daemon keeps its own). PEs of one
 * node whose ids are below IVM_BOARD_PES and both marked LOCAL exchange
 * addressed signals (ivmSignalTo/ivmWaitFrom) here, without the daemon:
 *   sender:   count[to][me] += 1; wake[to] += 1; futex-wake wake[to] if
 *             sleepers[to] > 0;
 *   receiver: consume count[me][from] by compare-and-swap; else, if
 *             state[from] says EXITED (success) or FAILED, recheck the count
 *             once and answer; else sleepers[me] += 1, futex-wait on wake[me],
 *             sleepers[me] -= 1, and loop.
 * The daemon alone writes state: LOCAL when it hands a PE id of this node
 * out (before any other PE can know the id), EXITED or FAILED when the PE
 * ends, after which it bumps and wakes every wake word. The path of a pair
 * (board or daemon) therefore never changes, and both ends agree on it.
 *
 * On the job's root node (flags IVM_BOARD_F_SIGNALS) the board also holds
 * every LOCAL PE's own signal count (ivmSignal / ivmWait): sig[pe] is the
 * count, for any path. A PE posts its own signals there (sig += 1, swake +=
 * 1, futex-wake swake if ssleepers > 0), a waiter of this node consumes them
 * there as a receiver does count[][] (swake / ssleepers, and pe's state for
 * its end); the daemon consumes them there for the WAITs it queues (other
 * nodes' PEs, a PE without the board) and posts there the SIGNALs it gets.
 * dwait[pe] is 1 while WAITs on pe are queued in the daemon, written by the
 * daemon after it queues one and before it looks at sig again; a PE that
 * posts reads dwait after posting and, if it is not 0, sends SIGNAL_POKE so
 * that the daemon serves its queue (one of the two always sees the other).
 */
#define IVM_BOARD_PES    1024u
#define IVM_BOARD_MAGIC  0x32445242u /* "BRD2" */
#define IVM_BOARD_F_SIGNALS 0x1u     /* flags: sig[] holds the LOCAL PEs' own signals */
#define IVM_BOARD_F_PAIRS   0x2u     /* flags: addressed signals and barriers between LOCAL
                                        PEs go on the board (count[], barriers[]): unless
                                        the job's environment has IVM_SIGNAL_BOARD=0, so
                                        that both ends of a pair always agree */
#define IVM_BOARD_LOCAL  0x1u        /* a PE of this node */
#define IVM_BOARD_EXITED 0x2u        /* it called ivmExit */
#define IVM_BOARD_FAILED 0x4u        /* it died without ivmExit */
/* A barrier over a set of PEs of this node (ivmBarrier with every member on
 * the board, at most IVM_BOARD_SET_MAX of them): a slot claimed for the set's
 * key (a hash of its sorted ids, never 0) by compare-and-swap, never freed; a
 * set that finds no slot uses BARRIER, for every member alike. A member adds
 * itself to `arrived`; the last one sets it back to 0, bumps `gen` and wakes
 * the sleepers; the others wait for `gen` to change, and fail when a member's
 * state says it ended (the daemon futex-wakes every slot's gen when a PE ends,
 * without changing it). */
#define IVM_BOARD_BARRIERS 64u
#define IVM_BOARD_SET_MAX  64
typedef struct ivm_board_barrier {
    uint64_t key;          /* the set's hash; 0: free */
    uint32_t arrived;      /* members in the current generation */
    uint32_t gen;          /* generation, the futex word */
    uint32_t sleepers;     /* threads asleep on gen */
    uint32_t reserved[11]; /* zero; one cache line per slot */
} ivm_board_barrier_t;

_Static_assert(sizeof(ivm_board_barrier_t) == 64, "a barrier slot is a cache line");

typedef struct ivm_board {
    uint32_t magic;                   /* IVM_BOARD_MAGIC */
    uint32_t pes;                     /* IVM_BOARD_PES */
    uint32_t flags;                   /* IVM_BOARD_F_* */
    uint32_t reserved[13];            /* zero */
    uint32_t state[IVM_BOARD_PES];    /* IVM_BOARD_* of each PE id */
    uint32_t wake[IVM_BOARD_PES];     /* futex word of each receiver, bumped on news */
    uint32_t sleepers[IVM_BOARD_PES]; /* threads of each receiver asleep on it */
    uint32_t sig[IVM_BOARD_PES];      /* F_SIGNALS: each PE's own signals, not consumed */
    uint32_t swake[IVM_BOARD_PES];    /* futex word of the waiters on each PE's signals */
    uint32_t ssleepers[IVM_BOARD_PES]; /* threads asleep on it */
    uint32_t dwait[IVM_BOARD_PES];    /* 1: WAITs on each PE queued in the daemon */
    ivm_board_barrier_t barriers[IVM_BOARD_BARRIERS];
    uint32_t count[IVM_BOARD_PES][IVM_BOARD_PES]; /* [receiver][sender]: not consumed */
} ivm_board_t;

_Static_assert(offsetof(ivm_board_t, state) == 64, "board states at byte 64");

typedef struct ivm_msg_value_rep {
    int32_t  status;     /* ivmError_t */
    int32_t  value;      /* NUM_PES: PEs of the job alive now */
} ivm_msg_value_rep_t;

typedef struct ivm_msg_malloc_req {
    uint64_t size;       /* bytes, > 0 */
    char     name[IVM_NAME_MAX + 1]; /* object name */
} ivm_msg_malloc_req_t;

typedef struct ivm_msg_map_req {
    uint64_t offset;     /* bytes from the object's start */
    uint64_t size;       /* bytes; 0 = to the end of the object */
    char     name[IVM_NAME_MAX + 1]; /* object name */
} ivm_msg_map_req_t;

/* Reply to MALLOC and MAP, with the object's memory fd as SCM_RIGHTS. For a
 * GPU PE (flag IVM_MAP_GPU_*) two fds: the node copy, then the device copy
 * (gpu_size bytes holding the object from byte gpu_offset on). */
typedef struct ivm_msg_map_rep {
    int32_t  status;     /* ivmError_t */
    uint32_t flags;      /* IVM_MAP_* */
    uint64_t obj_id;     /* object id, unique per daemon */
    uint64_t obj_size;   /* bytes of the whole object */
    uint64_t offset;     /* bytes: first byte mapped */
    uint64_t size;       /* bytes mapped (resolved when the request said 0) */
    uint64_t gpu_ref;    /* GPU PE: the daemon's id of this device-copy reference; else 0 */
    uint64_t gpu_offset; /* GPU PE: object offset of the device copy's first byte */
    uint64_t gpu_size;   /* GPU PE: bytes of the device allocation (to import and map) */
    uint64_t master_id;  /* IVM_MAP_DIRECT: the object's id at the master's daemon */
    int32_t  master_node; /* IVM_MAP_DIRECT: cluster index of the master's node */
    uint32_t reserved;   /* zero */
} ivm_msg_map_rep_t;

#define IVM_MAP_MASTER   0x1u /* the (node copy) fd is the master copy */
#define IVM_MAP_GPU_EMU  0x2u /* device copy on an emulated GPU: a memfd to mmap */
#define IVM_MAP_GPU_CUDA 0x4u /* device copy on a CUDA GPU: a POSIX-fd shareable handle */
#define IVM_MAP_READ_FIRST 0x8u /* populate the map read-only, then open it for writing: the
                                   daemon measured a first read of a page cheaper so here
                                   (IVM_MAP_READ_FIRST overrides; ivmd/data/copies.h) */
#define IVM_MAP_DIRECT   0x10u /* a mirror whose master is on node master_node: the PE may put
                                   small ranges there through its own endpoint (ENDPOINT) */
#define IVM_MAP_GPU (IVM_MAP_GPU_EMU | IVM_MAP_GPU_CUDA)

/* SYNC: the sync calls on a mirror, and the group calls on any copy. */
#define IVM_SYNC_PUT       1
#define IVM_SYNC_GET       2
#define IVM_SYNC_PUT_GROUP 3
#define IVM_SYNC_GET_GROUP 4
typedef struct ivm_msg_sync_req {
    uint64_t obj_id;     /* from the MALLOC/MAP reply */
    uint64_t offset;     /* bytes from the object's start */
    uint64_t size;       /* bytes */
    uint32_t op;         /* IVM_SYNC_* */
    uint32_t reserved;   /* zero */
    uint64_t gpu_ref;    /* GPU PE: the mapping's gpu_ref (its device copy); else 0 */
} ivm_msg_sync_req_t;

_Static_assert(sizeof(ivm_msg_sync_req_t) == 40, "sync request size");

/* PUT_SIGNAL (ivmSyncPutSignal on a mirror, the pair not on a signal board):
 * the PE's daemon puts the range into the master and, once the master has
 * the bytes, posts the signal (itself at the job's root daemon, else as a
 * forwarded PUT_SIGNAL that the root serves as the signal alone). One
 * request, one reply. */
typedef struct ivm_msg_put_signal_req {
    ivm_msg_sync_req_t sync; /* op IVM_SYNC_PUT, gpu_ref 0 */
    int32_t  pe;             /* the PE the signal is for */
    uint32_t reserved;       /* zero */
} ivm_msg_put_signal_req_t;

_Static_assert(sizeof(ivm_msg_put_signal_req_t) == 48, "put-signal request size");

/* GPU_INFO (no ivmEnter needed): ivm-gpud's figures for one GPU of this node. */
typedef struct ivm_msg_gpu_info_req {
    uint32_t gpu;        /* physical GPU index on this node (not a share device) */
    uint32_t reserved;   /* zero */
} ivm_msg_gpu_info_req_t;

#define IVM_GPU_INFO_ALIVE 0x1u /* ivm-gpud runs (else it was lost) */
typedef struct ivm_msg_gpu_info_rep {
    int32_t  status;       /* ivmError_t */
    uint32_t flags;        /* IVM_GPU_INFO_* */
    uint32_t ngpus;        /* physical GPUs of this node (ivm-gpud's) */
    uint32_t gpud_pid;     /* ivm-gpud's pid */
    char     backend[16];  /* "emu" or "cuda" */
    char     name[64];     /* the GPU's name */
    uint64_t capacity;     /* bytes of device memory handed out at most */
    uint64_t used;         /* bytes allocated now (mapped and cached copies) */
    uint64_t cached_bytes; /* bytes of copies no PE maps (evictable) */
    uint64_t allocations;  /* device allocations made since ivm-gpud started */
    uint64_t evictions;    /* cached copies freed to make room */
    uint32_t copies;       /* device copies alive */
    uint32_t mapped_refs;  /* references held on them, summed */
    uint32_t waiting;      /* maps waiting for memory now */
    uint32_t wait_timeouts;/* maps that timed out waiting, since start */
    uint64_t granularity;  /* bytes; device copies are multiples of it */
} ivm_msg_gpu_info_rep_t;

_Static_assert(sizeof(ivm_msg_gpu_info_rep_t) == 160, "gpu info reply size");

/* CPU_INFO (no ivmEnter needed): CPU device `dev` of the daemon's table (the
 * table of jobs that bring none), as the daemon enforces it now. */
typedef struct ivm_msg_cpu_info_req {
    uint32_t dev;        /* CPU device index, 0 .. ndevs-1 */
    uint32_t reserved;   /* zero */
} ivm_msg_cpu_info_req_t;

#define IVM_CPU_INFO_CORES_MAX 128
typedef struct ivm_msg_cpu_info_rep {
    int32_t  status;     /* ivmError_t */
    uint32_t ndevs;      /* CPU devices in the daemon's table */
    uint32_t ncores;     /* cores of device dev (OMP_NUM_THREADS of its PEs) */
    uint32_t share;      /* percent of each of its cores' time, 1..100 (100: whole cores) */
    uint32_t pes;        /* PEs the daemon started on it that run now, all jobs */
    uint32_t groups;     /* cgroups of it now (one per job with a process on it) */
    uint64_t quota_us;   /* its CPU bandwidth limit: microseconds per period; 0: none */
    uint64_t period_us;  /* the period, microseconds; 0: no limit */
    char     cores[IVM_CPU_INFO_CORES_MAX]; /* its cores as a spec entry ("0-3+8"),
                                               truncated to fit */
    int32_t  numa;       /* the NUMA node of all its cores; -1: several or unknown */
    uint32_t numa_nodes; /* NUMA nodes of the machine */
} ivm_msg_cpu_info_rep_t;

_Static_assert(sizeof(ivm_msg_cpu_info_rep_t) == 176, "cpu info reply size");
_Static_assert(offsetof(ivm_msg_cpu_info_rep_t, quota_us) == 24, "cpu info quota at byte 24");

/* LIST (no ivmEnter needed; ivm-info): entry `index` of one of the daemon's
 * tables, with the table's size in `total`. An index past the end is
 * IVM_ERROR_NOT_FOUND. Per kind, the reply's fields mean:
 *   JOBS     id: job; count: PEs alive here; count2: objects here; size: their
 *            bytes; state: 1 when its root PE runs on this node; pid: the root
 *            PE's pid (0 when not here or gone); node: the root's node; name:
 *            the program
 *   PES      (of job) id: PE; pid; devtype; state: IVM_LIST_PE_*; node: where
 *            it runs
 *   OBJECTS  (of job) id: object here; size; count: live mappings here;
 *            count2: mirrors elsewhere (master) or regions held (mirror);
 *            tx_bytes, rx_bytes: moved to / from other nodes; state: 1 for the
 *            master, 0 for a mirror; node: the master's node; name
 *   PEERS    id: cluster index; state: 1 when its link is up; count: 1 for
 *            this daemon; count2: its slots, size: its max_slots (0: not
 *            limited); node; name: "addr:port" */
#define IVM_LIST_JOBS        1u
#define IVM_LIST_PES         2u
#define IVM_LIST_OBJECTS     3u
#define IVM_LIST_PEERS       4u
#define IVM_LIST_PE_STARTED  0u /* started, ivmEnter not yet seen */
#define IVM_LIST_PE_RUNNING  1u
#define IVM_LIST_PE_EXITED   2u
#define IVM_LIST_PE_FAILED   3u
typedef struct ivm_msg_list_req {
    uint32_t kind;       /* IVM_LIST_* */
    uint32_t job;        /* PES and OBJECTS: the job */
    uint32_t index;      /* entry wanted, from 0 */
    uint32_t reserved;   /* zero */
} ivm_msg_list_req_t;

typedef struct ivm_msg_list_rep {
    int32_t  status;     /* ivmError_t */
    uint32_t total;      /* entries of the table now */
    uint64_t id;
    uint64_t size;
    uint64_t tx_bytes;
    uint64_t rx_bytes;
    int32_t  pid;
    int32_t  devtype;
    uint32_t state;
    uint32_t count;
    uint32_t count2;
    uint32_t reserved;   /* zero */
    char     node[IVM_HOST_MAX + 1];
    char     name[IVM_NAME_MAX + 1];
} ivm_msg_list_rep_t;

_Static_assert(sizeof(ivm_msg_list_rep_t) == 384, "list reply size");

/* SET_SHARE (no ivmEnter needed): give CPU device `dev` of the daemon's
 * table a new share of its cores' time. Refused (IVM_ERROR_INVALID_VALUE)
 * when a core of it would then be shared by devices whose shares add up to
 * more than 100; the cgroups of the device that exist now get the new limit,
 * and so do later ones. Jobs with their own table (IVM_CPU_DEVICES) keep
 * theirs. */
typedef struct ivm_msg_set_share_req {
    uint32_t dev;        /* CPU device index, 0 .. ndevs-1 */
    uint32_t percent;    /* the new share, 1..100 (100: whole cores, no limit) */
} ivm_msg_set_share_req_t;

_Static_assert(sizeof(ivm_msg_set_share_req_t) == 8, "set share request size");

/* OBJ_INFO (no ivmEnter needed): this node's copy of a job's object, and the
 * bytes of it this daemon sent to and received from other nodes. */
typedef struct ivm_msg_obj_info_req {
    uint32_t job;        /* job id */
    uint32_t reserved;   /* zero */
    char     name[IVM_NAME_MAX + 1]; /* object name */
} ivm_msg_obj_info_req_t;

#define IVM_OBJ_INFO_MASTER 0x1u /* this node holds the master */
typedef struct ivm_msg_obj_info_rep {
    int32_t  status;     /* ivmError_t */
    uint32_t flags;      /* IVM_OBJ_INFO_* */
    uint64_t size;       /* bytes of the object */
    uint64_t held;       /* bytes held here (the whole size for a master) */
    uint64_t tx_bytes;   /* bytes of it sent to other nodes */
    uint64_t rx_bytes;   /* bytes of it received from other nodes */
    uint32_t mirrors;    /* master: mirror regions recorded elsewhere */
    uint32_t reserved;   /* zero */
} ivm_msg_obj_info_rep_t;

_Static_assert(sizeof(ivm_msg_obj_info_rep_t) == 48, "obj info reply size");

/* UNMAP and FREE. */
typedef struct ivm_msg_obj_req {
    uint64_t obj_id;     /* from the MALLOC/MAP reply */
    uint64_t gpu_ref;    /* GPU PE: the mapping's gpu_ref; else 0 */
} ivm_msg_obj_req_t;

typedef struct ivm_msg_info_rep {
    int32_t  status;     /* ivmError_t */
    uint32_t pid;        /* the daemon's pid */
    uint32_t jobs;       /* jobs alive */
    uint32_t pes;        /* PEs alive, all jobs */
    uint32_t objects;    /* objects alive, all jobs */
    uint32_t conns;      /* client connections open */
    uint64_t shm_bytes;  /* bytes of object memory held */
    char     node[IVM_HOST_MAX + 1]; /* node name */
    uint32_t peers;      /* peer daemons of the cluster */
    uint32_t peers_up;   /* of those, connected and authenticated */
    uint64_t tx_bytes;   /* object bytes sent to other nodes' daemons */
    uint64_t rx_bytes;   /* object bytes received from other nodes' daemons */
    uint32_t parked;     /* warm-pool processes parked in ivmEnter, all jobs (no PEs) */
    uint32_t pooled;     /* PEs started from a warm pool since the daemon started */
    uint32_t poll_us;    /* ivmd --poll-us */
    uint32_t psync_relayed; /* addressed signals and waits of other nodes' PEs that this
                               daemon, their job's root, sent back to their node with
                               the place they lacked (0 while every pair takes the
                               direct way: one daemon hop) */
    uint64_t polled;     /* loop turns whose events came while polling (--poll-us) */
    uint64_t buf_bytes;  /* object bytes copied through the daemon's buffers to or from
                            peers (TCP chunks: read out of or written into a copy) */
    uint64_t rdma_bytes; /* object bytes this daemon moved one-sided (UCX put, get) */
    char     transport[8]; /* the data transport: "tcp" or "ucx" */
    char     ucx_tls[64];  /* UCX: the transports/devices UCX found, comma-separated */
    uint32_t touch_ns[4];  /* first touch of a page of a fresh populated map, ns, measured at
                              start: read and write through a writable mapping, read and
                              write through one populated read-only (ivmd/data/copies.h) */
    uint32_t map_flags;    /* IVM_MAP_READ_FIRST when the daemon asks PEs for it, else 0 */
    uint32_t huge_pages;   /* 1: objects' memory is put in 2 MiB pages (ivmd --huge-pages) */
    uint64_t huge_bytes;   /* bytes of object copies reserved in 2 MiB pages since the start */
    uint64_t huge_failed;  /* copies left partly in 4 KiB pages since the start */
    uint64_t ep_puts;      /* puts PEs of other nodes made into masters here through their
                              own endpoints (ENDPOINT, EP_PUT) */
    uint64_t ep_gets;      /* and gets from masters here (EP_GET) */
    uint64_t places_told;  /* the job's root daemon: PEs it described to other nodes in job
                              tables (PLACED or PE_ENDED), sent to a node after its SPAWNs
                              of a job until one started a PE there (and again after its
                              link was lost): about each job's PEs once per node */
    uint64_t signals_carried; /* ivmSignal calls of this node's PEs that came to this
                                 daemon (SIGNAL); those a PE posted on the job's signal
                                 board itself are not counted */
} ivm_msg_info_rep_t;

_Static_assert(sizeof(ivm_msg_map_rep_t) == 80, "map reply size");

/*
 * ENDPOINT: where and how this PE reaches node `node`'s daemon for its own
 * puts (peer message EP_HELLO). Refused (IVM_ERROR_UNSUPPORTED) outside a
 * cluster, for this daemon's own node, and with --no-pe-endpoints;
 * IVM_ERROR_DAEMON_LOST while the node is not up.
 */
typedef struct ivm_msg_endpoint_req {
    uint32_t node;       /* cluster index of the node */
    uint32_t reserved;   /* zero */
} ivm_msg_endpoint_req_t;

typedef struct ivm_msg_endpoint_rep {
    int32_t  status;     /* ivmError_t */
    uint32_t flags;      /* IVM_PEER_ENCRYPT: seal with encryption */
    uint32_t self;       /* cluster index of the PE's node */
    uint32_t timeout_ms; /* a reply not there by then: the node counts as lost */
    uint16_t port;       /* TCP port of the node's daemon */
    uint16_t reserved;   /* zero */
    char     addr[64];   /* its numeric address, NUL-terminated */
    uint8_t  key[32];    /* the job's endpoint key (HKDF of the cluster secret) */
    uint32_t reserved2;  /* zero */
} ivm_msg_endpoint_rep_t;

_Static_assert(sizeof(ivm_msg_endpoint_rep_t) == 120, "endpoint reply size");
_Static_assert(sizeof(ivm_msg_info_rep_t) == 304, "info reply size");

/*
 * CLUSTER (owner uid only, on the Unix socket): the cluster this daemon is
 * part of. Fixed part followed by n ivm_msg_cluster_node_t, one of which
 * names this daemon. Accepted once (again only with the same contents).
 */
#define IVM_CLUSTER_MAX_NODES 256
#define IVM_SECRET_LEN        32

typedef struct ivm_msg_cluster_node {
    char     node[IVM_HOST_MAX + 1]; /* node name */
    char     addr[64];   /* numeric IPv4 or IPv6 address, NUL-terminated */
    uint16_t port;       /* TCP port of its daemon */
    uint16_t slots;      /* PEs of a job it should run at once (hostfile slots=); 0: any */
    uint16_t max_slots;  /* PEs of a job it may run at once (max_slots=), >= slots; 0: any */
    uint16_t reserved;   /* zero */
} ivm_msg_cluster_node_t;

typedef struct ivm_msg_cluster_req {
    uint8_t  secret[IVM_SECRET_LEN]; /* the cluster secret */
    uint32_t n;          /* nodes that follow, 1 .. IVM_CLUSTER_MAX_NODES */
    uint32_t reserved;   /* zero */
} ivm_msg_cluster_req_t;

_Static_assert(sizeof(ivm_msg_cluster_node_t) == 136, "cluster node size");
_Static_assert(offsetof(ivm_msg_cluster_node_t, slots) == 130, "cluster node slots at 130");
_Static_assert(sizeof(ivm_msg_cluster_req_t) == 40, "cluster request size");

/*
 * The peer protocol, between daemons over TCP. Same header; types from 64 up;
 * a peer connection accepts nothing else, a PE connection none of these.
 * Authentication (HMAC-SHA-256 with the cluster secret, see docs):
 *   dialer   -> HELLO{version, node, nonce_a, flags}
 *   acceptor -> CHALLENGE{version, node, nonce_b, flags, mac_b}
 *   dialer   -> AUTH{mac_a}
 * Before AUTH is accepted only these three types are. Daemons of different
 * IVM versions, or that disagree on IVM_PEER_ENCRYPT, refuse each other.
 * After AUTH, both ends derive one key per direction (HKDF-SHA-256 from the
 * secret, salted with nonce_a || nonce_b, bound to both names) and every
 * message carries a 16-byte ChaCha20-Poly1305 tag after its payload (not counted
 * in the header's length) over header and payload, with a per-direction
 * message counter XORed into a per-direction IV as the implicit nonce; with
 * IVM_PEER_ENCRYPT the payload is encrypted too. A message whose tag does not
 * check closes the link.
 */
#define IVM_PEER_NONCE_LEN   32
#define IVM_PEER_VERSION_LEN 16
#define IVM_PEER_ENCRYPT     0x1u /* HELLO/CHALLENGE flags: the link is encrypted */

/* The layout of the peer messages (the structs below, each field little-
 * endian on the wire): HELLO and CHALLENGE carry it, bound into the
 * handshake's MACs, and daemons of different layouts refuse each other.
 * Raise it with any change of a peer message's fields. */
#define IVM_PEER_LAYOUT 6u

/* X(name, value, struct, largest tail after the struct in bytes, fields):
 * `fields` names the struct's multi-byte fields (IVM_PEER_FIELDS_*), which
 * ivm_peer_pack/ivm_peer_unpack turn little-endian and back. */
#define IVM_PEER_TABLE(X)                                                   \
    X(HELLO,      64, ivm_peer_hello_t,      256,                     HELLO)     \
    X(CHALLENGE,  65, ivm_peer_challenge_t,  0,                       CHALLENGE) \
    X(AUTH,       66, ivm_peer_auth_t,       0,                       NONE)      \
    X(PING,       67, ivm_peer_ping_t,       0,                       PING)      \
    X(PONG,       68, ivm_peer_ping_t,       0,                       PING)      \
    X(NODEINFO,   69, ivm_peer_nodeinfo_t,   0,                       NODEINFO)  \
    X(FWD,        70, ivm_peer_fwd_t,        IVM_PEER_FWD_MAX,        FWD)       \
    X(FWD_REP,    71, ivm_peer_fwd_t,        IVM_PEER_FWD_MAX,        FWD)       \
    X(PE_STATE,   72, ivm_peer_pe_state_t,   0,                       PE_STATE)  \
    X(SPAWN,      73, ivm_peer_spawn_t,      IVM_MSG_MAX_PAYLOAD / 2, SPAWN)     \
    X(SPAWN_REP,  74, ivm_peer_spawn_rep_t,  0,                       SPAWN_REP) \
    X(JOB_END,    75, ivm_peer_job_t,        0,                       JOB)       \
    X(OUTPUT,     76, ivm_peer_output_t,     IVM_PEER_OUTPUT_MAX,     OUTPUT)    \
    X(OBJ_REG,    77, ivm_peer_obj_t,        0,                       OBJ)       \
    X(OBJ_LOOKUP, 78, ivm_peer_obj_t,        0,                       OBJ)       \
    X(OBJ_REP,    79, ivm_peer_obj_t,        0,                       OBJ)       \
    X(READ,       80, ivm_peer_xfer_t,       0,                       XFER)      \
    X(DATA,       81, ivm_peer_xfer_t,       IVM_PEER_CHUNK,          XFER)      \
    X(ACK,        82, ivm_peer_xfer_t,       0,                       XFER)      \
    X(GROUP,      83, ivm_peer_xfer_t,       0,                       XFER)      \
    X(BYE,        84, ivm_peer_job_t,        0,                       JOB)       \
    X(UCX_ADDR,   85, ivm_peer_ucx_addr_t,   IVM_PEER_UCX_ADDR_MAX,   UCX_ADDR)  \
    X(UCX_RKEY,   86, ivm_peer_ucx_rkey_t,   IVM_PEER_UCX_RKEY_MAX,   UCX_RKEY)  \
    X(ROUTE,      87, ivm_peer_route_t,      0,                       ROUTE)     \
    X(SIGNAL,     88, ivm_peer_signal_t,     0,                       SIGNAL)    \
    X(PLACED,     89, ivm_peer_placed_t,     IVM_PEER_PLACED_MAX * 4, PLACED)    \
    X(PE_ENDED,   90, ivm_peer_pe_ended_t,   0,                       PE_ENDED)  \
    X(EP_HELLO,   91, ivm_peer_ep_hello_t,   0,                       EP_HELLO)  \
    X(EP_WELCOME, 92, ivm_peer_ep_welcome_t, 0,                       EP_WELCOME) \
    X(EP_PUT,     93, ivm_peer_xfer_t,       IVM_PEER_CHUNK,          XFER)      \
    X(EP_ACK,     94, ivm_peer_xfer_t,       0,                       XFER)      \
    X(EP_GET,     95, ivm_peer_xfer_t,       0,                       XFER)      \
    X(EP_DATA,    96, ivm_peer_xfer_t,       IVM_PEER_CHUNK,          XFER)

#define IVM_PEER_ENUM_ENTRY(name, value, type, tail, fields) IVM_PEER_##name = (value),
typedef enum ivm_peer_type {
    IVM_PEER_FIRST = 64,
    IVM_PEER_TABLE(IVM_PEER_ENUM_ENTRY)
    IVM_PEER_LAST
} ivm_peer_type_t;

/* The version comes first so that a daemon of another IVM, whose HELLO may be
 * laid out otherwise (HELLO admits 256 bytes more), can still be named. */
typedef struct ivm_peer_hello {
    char     version[IVM_PEER_VERSION_LEN]; /* the dialer's IVM version ("0.1.0") */
    char     node[IVM_HOST_MAX + 1];        /* the dialer's node name */
    uint8_t  nonce[IVM_PEER_NONCE_LEN];     /* nonce_a, random */
    uint32_t flags;                         /* IVM_PEER_ENCRYPT */
    uint32_t layout;                        /* the dialer's IVM_PEER_LAYOUT */
} ivm_peer_hello_t;

typedef struct ivm_peer_challenge {
    char     version[IVM_PEER_VERSION_LEN]; /* the acceptor's IVM version */
    char     node[IVM_HOST_MAX + 1];        /* the acceptor's node name */
    uint8_t  nonce[IVM_PEER_NONCE_LEN];     /* nonce_b, random */
    uint32_t flags;                         /* IVM_PEER_ENCRYPT */
    uint32_t layout;                        /* the acceptor's IVM_PEER_LAYOUT */
    uint8_t  mac[32];   /* HMAC("B" nonce_a nonce_b node_a node_b flags version layout) */
} ivm_peer_challenge_t;

typedef struct ivm_peer_auth {
    uint8_t mac[32];    /* HMAC("A" nonce_b nonce_a node_a node_b flags version layout) */
} ivm_peer_auth_t;

typedef struct ivm_peer_ping {
    uint64_t sent_ns;    /* sender's CLOCK_MONOTONIC, nanoseconds */
} ivm_peer_ping_t;

/* A node's devices, sent once after authentication. */
typedef struct ivm_peer_nodeinfo {
    uint32_t ndevs;      /* CPU devices */
    uint32_t ngpus;      /* GPU devices (a GPU or a --gpu-shares share each) */
    uint16_t ncores[64]; /* cores of each CPU device */
    uint8_t  share[64];  /* each CPU device's share of its cores' time, percent */
    int8_t   numa[64];   /* each CPU device's NUMA node, -1: several or unknown */
    uint8_t  gpu_share[64]; /* each GPU device's share of its GPU, percent */
} ivm_peer_nodeinfo_t;

/* FWD: a PE request from a node daemon to the job's root daemon; FWD_REP: the
 * reply, back. Followed by the PE message itself (header and payload). */
#define IVM_PEER_FWD_MAX (16 + sizeof(ivm_msg_create_pes_rep_t) + IVM_MSG_DETAIL_MAX + 1024)
typedef struct ivm_peer_fwd {
    uint32_t job;        /* job id */
    int32_t  pe;         /* the PE that sent the request */
} ivm_peer_fwd_t;

/* PE_STATE: a node daemon tells the root daemon what became of its PE. */
#define IVM_PE_STATE_ENTERED 1
#define IVM_PE_STATE_EXITED  2 /* called ivmExit */
#define IVM_PE_STATE_FAILED  3 /* died without ivmExit, or could not start */
#define IVM_PE_STATE_GONE    4 /* its process is reaped */
typedef struct ivm_peer_pe_state {
    uint32_t job;        /* job id */
    int32_t  pe;         /* PE id */
    uint32_t state;      /* IVM_PE_STATE_* */
    uint32_t reserved;   /* zero */
} ivm_peer_pe_state_t;

/* SPAWN: root daemon -> node daemon: start PEs. Followed by n int32 PE ids,
 * then blob_len bytes: exe, cwd, argc args, envc env strings, NUL-terminated. */
#define IVM_SPAWN_TAG_OUTPUT 0x1u
typedef struct ivm_peer_spawn {
    uint64_t op;         /* the root daemon's operation, echoed in SPAWN_REP */
    uint32_t job;        /* job id */
    int32_t  devtype;    /* device of the new PEs */
    int32_t  n;          /* PE ids that follow, 1 .. IVM_CREATE_PES_MAX */
    uint32_t flags;      /* IVM_SPAWN_* */
    uint32_t argc;       /* argument strings in the blob */
    uint32_t envc;       /* environment strings in the blob */
    uint32_t blob_len;   /* bytes after the ids */
    uint32_t pe_pool;    /* parked processes per device (CPU, GPU) the node keeps for the
                            job, 0 .. IVM_PE_POOL_MAX */
} ivm_peer_spawn_t;

typedef struct ivm_peer_spawn_rep {
    uint64_t op;         /* from SPAWN */
    int32_t  status;     /* ivmError_t */
    int32_t  started;    /* PEs started, in order; the rest failed */
    char     detail[IVM_MSG_DETAIL_MAX]; /* why, if status != 0 */
} ivm_peer_spawn_rep_t;

typedef struct ivm_peer_job {
    uint32_t job;        /* job id */
    uint32_t reserved;   /* zero */
} ivm_peer_job_t;

/* OUTPUT: a remote PE's stdout (1) or stderr (2) bytes, for the root's streams. */
#define IVM_PEER_OUTPUT_MAX 4096
typedef struct ivm_peer_output {
    uint32_t job;        /* job id */
    int32_t  pe;         /* PE id */
    uint32_t stream;     /* 1 or 2 */
    uint32_t len;        /* bytes that follow */
} ivm_peer_output_t;

/* OBJ_REG (register a master made on a node), OBJ_LOOKUP (find by name) and
 * OBJ_REP (the root daemon's answer). */
typedef struct ivm_peer_obj {
    uint64_t op;         /* the asking daemon's operation */
    uint32_t job;        /* job id */
    int32_t  status;     /* OBJ_REP: ivmError_t */
    uint32_t master_node;/* index of the master's node in the cluster table */
    uint32_t reserved;   /* zero */
    uint64_t master_id;  /* object id at the master's daemon */
    uint64_t size;       /* bytes */
    char     name[IVM_NAME_MAX + 1]; /* object name */
} ivm_peer_obj_t;

/* READ (send me [off, off+len) of your object `obj`), DATA (bytes for the
 * receiver's object `obj` at `off`; followed by len bytes), ACK (operation
 * done), GROUP (master: scatter or gather [off, off+len) over the mirrors). */
#define IVM_PEER_CHUNK     (256u * 1024u)
#define IVM_XFER_HOLD      0x1u /* READ: the asker keeps a mirror of the range */
#define IVM_XFER_LAST      0x2u /* DATA: last chunk of the operation */
#define IVM_XFER_REPLY     0x4u /* DATA: answers the receiver's READ */
#define IVM_XFER_SCATTER   0x8u /* GROUP: master to mirrors */
#define IVM_XFER_GATHER    0x10u/* GROUP: mirrors to master */
#define IVM_XFER_PLACED    0x20u/* DATA: no bytes follow; the sender wrote the range into
                                   the receiver's copy one-sided (UCX) before sending it */
#define IVM_XFER_CHAIN     0x40u/* DATA: a piece of a pipelined scatter (ROUTE): the receiver
                                   forwards it and ACKs the master once it has the route's
                                   whole range; its LAST flag means nothing */
#define IVM_XFER_SIGNAL    0x80u/* DATA of a put (ivmSyncPutSignal) into the master: with LAST,
                                   the receiver posts the signal sig_from -> sig_to once the
                                   bytes are in the copy, before its ACK (none if it fails) */
typedef struct ivm_peer_xfer {
    uint64_t op;         /* the initiating daemon's operation */
    uint32_t job;        /* job id */
    uint32_t flags;      /* IVM_XFER_* */
    uint64_t obj;        /* object id at the receiving daemon */
    uint64_t dst;        /* READ: object id at the asker, for the DATA replies */
    uint64_t off;        /* bytes from the object's start */
    uint64_t len;        /* bytes */
    int32_t  status;     /* ACK: ivmError_t */
    uint32_t reserved;   /* zero */
    int32_t  sig_from;   /* DATA flagged IVM_XFER_SIGNAL: the signalling PE (sender's node) */
    int32_t  sig_to;     /* DATA flagged IVM_XFER_SIGNAL: the PE signalled (receiver's node) */
} ivm_peer_xfer_t;

/* UCX_ADDR: the sender's UCP worker address (len bytes follow), sent once
 * the link is up by a daemon whose data transport is UCX; the receiver makes
 * its endpoint to the sender from it. A daemon on TCP ignores it. */
#define IVM_PEER_UCX_ADDR_MAX 16384
typedef struct ivm_peer_ucx_addr {
    uint32_t len;        /* bytes of the address that follow */
    uint32_t reserved;   /* zero */
} ivm_peer_ucx_addr_t;

/* UCX_RKEY: the sender's copy `obj` of job `job` is registered for one-sided
 * access: its base address in the sender's daemon, its size and the packed
 * remote key (len bytes follow). Sent once per (copy, node), before the
 * message that makes the receiver use it (the READ of a mirror's fill, or the
 * fill's answer); a len of 0 withdraws the key (the copy is gone). */
#define IVM_PEER_UCX_RKEY_MAX 4096
typedef struct ivm_peer_ucx_rkey {
    uint64_t obj;        /* object id at the sender */
    uint64_t base;       /* address of the copy's byte 0 in the sender's daemon */
    uint64_t size;       /* bytes registered */
    uint32_t job;        /* job id */
    uint32_t len;        /* bytes of the packed key that follow */
} ivm_peer_ucx_rkey_t;

/* ROUTE: a pipelined scatter (PutGroup) of the master's operation `op`: the
 * receiver, nodes[0], holds copy objs[0] of [off, off+len); the DATA pieces
 * flagged IVM_XFER_CHAIN that its sender writes into it next, it forwards to
 * the rest of the route, nodes[1 .. count), split into `fanout` subtrees
 * (a ROUTE to each subtree's first node first), and it ACKs the master's node
 * once it holds the whole range. Sent on the same link before the pieces. */
#define IVM_PEER_ROUTE_MAX 64
typedef struct ivm_peer_route {
    uint64_t op;         /* the master daemon's operation (the pieces' and ACKs' op) */
    uint32_t job;        /* job id */
    uint32_t master;     /* index of the master's node in the cluster table (ACK it) */
    uint64_t off;        /* bytes from the object's start */
    uint64_t len;        /* bytes, every node of the route holds them */
    uint32_t count;      /* entries used in nodes[] and objs[], 1 .. IVM_PEER_ROUTE_MAX */
    uint32_t fanout;     /* subtrees each node forwards to, 1 (a chain) .. 8 */
    uint32_t nodes[IVM_PEER_ROUTE_MAX]; /* node indexes; [0] is the receiver */
    uint64_t objs[IVM_PEER_ROUTE_MAX];  /* each node's copy, by its object id there */
} ivm_peer_route_t;

/* SIGNAL: an addressed signal (ivmSignalTo, ivmSyncPutSignal's) of PE
 * `from`, hosted by the sending daemon, to PE `to`, hosted by the receiving
 * one, which keeps the pair: it wakes the oldest WAIT_FROM or is counted. No
 * reply. */
typedef struct ivm_peer_signal {
    uint32_t job;        /* job id */
    int32_t  from;       /* the sender PE, on the sending daemon's node */
    int32_t  to;         /* the receiver PE, on the receiving daemon's node */
    uint32_t reserved;   /* zero */
} ivm_peer_signal_t;

/* PLACED: root daemon -> node daemons: the job's PEs `ids` (n int32 follow)
 * are on node `node`. Sent to every peer before the ids can leave the root
 * (the CREATE_PES reply), and the whole table after each SPAWN. */
#define IVM_PEER_PLACED_MAX 256
typedef struct ivm_peer_placed {
    uint32_t job;        /* job id */
    uint32_t node;       /* cluster index of the PEs' node */
    int32_t  n;          /* PE ids that follow, 1 .. IVM_PEER_PLACED_MAX */
    uint32_t reserved;   /* zero */
} ivm_peer_placed_t;

/* PE_ENDED: PE `pe` of node `node` ended. Sent by the daemon that ends it to
 * every peer, after the PE's SIGNALs on the same links (flags FINAL: nothing
 * of the PE can follow); by the root daemon, without FINAL, with the table
 * after a SPAWN or when it teaches a node a PE, and with FINAL for PEs whose
 * SPAWN failed (they never ran). */
#define IVM_PE_ENDED_FINAL 0x1u
typedef struct ivm_peer_pe_ended {
    uint32_t job;        /* job id */
    int32_t  pe;         /* PE id */
    uint32_t node;       /* cluster index of the PE's node */
    uint32_t state;      /* IVM_PE_STATE_EXITED or IVM_PE_STATE_FAILED */
    uint32_t flags;      /* IVM_PE_ENDED_* */
    uint32_t reserved;   /* zero */
} ivm_peer_pe_ended_t;

/*
 * A PE's endpoint: a PE's own connection to another node's daemon, for its
 * small puts into masters held there (docs/architecture.md, "Direct puts").
 * The PE dials the daemon's peer port:
 *   PE     -> EP_HELLO{job, pe, node, nonce_p}          (in clear)
 *   daemon -> EP_WELCOME{status, nonce_d}               (in clear)
 * Both then derive one key per direction with HKDF-SHA-256 from the job's
 * endpoint key (itself HKDF of the cluster secret and the job id, which the
 * PE got from its own daemon over its private socket), salted with
 * nonce_p || nonce_d and bound to job and PE, and every later message is
 * sealed as on a peer link (IVM_PEER_ENCRYPT as the cluster says). A PE
 * without the key cannot make a message the daemon accepts; a replayed
 * handshake meets a fresh nonce_d.
 *   PE     -> EP_PUT{op = the PE's request number, job, flags (0 or
 *             IVM_XFER_SIGNAL with sig_from, sig_to), obj = the master's
 *             id there, off, len} + len bytes (at most IVM_PEER_CHUNK)
 *   daemon -> EP_ACK{op, job, status}, once the master has the bytes (and
 *             the signal is posted). IVM_ERROR_UNSUPPORTED: not taken
 *             (nothing written): the PE puts through its own daemon.
 *   PE     -> EP_GET{op, job, obj, off, len} (len at most IVM_PEER_CHUNK)
 *   daemon -> EP_DATA{op, job, status, off, len} + the master's len bytes
 *             (none unless status is 0); the PE writes them into its node
 *             copy, as its daemon would.
 */
typedef struct ivm_peer_ep_hello {
    uint32_t job;        /* job id */
    int32_t  pe;         /* the dialing PE */
    uint32_t node;       /* cluster index of the PE's node */
    uint32_t layout;     /* the PE's IVM_PEER_LAYOUT */
    uint8_t  nonce[IVM_PEER_NONCE_LEN]; /* nonce_p, random */
} ivm_peer_ep_hello_t;

typedef struct ivm_peer_ep_welcome {
    int32_t  status;     /* ivmError_t: 0, or why the daemon refuses */
    uint32_t flags;      /* IVM_PEER_ENCRYPT: the payloads are encrypted too */
    uint8_t  nonce[IVM_PEER_NONCE_LEN]; /* nonce_d, random */
} ivm_peer_ep_welcome_t;

/* The multi-byte fields of each peer message, F(struct, field) or, for an
 * array of them, A(struct, field), in order;
 * the rest is bytes (names, nonces, MACs, data). The tail of SPAWN starts
 * with its n int32 PE ids, converted too, as is PLACED's (its n ids); the tail of FWD and FWD_REP is a
 * PE message in the PE protocol's own (host) layout. */
#define IVM_PEER_FIELDS_NONE(F, A)
#define IVM_PEER_FIELDS_HELLO(F, A) F(ivm_peer_hello_t, flags) F(ivm_peer_hello_t, layout)
#define IVM_PEER_FIELDS_CHALLENGE(F, A) \
    F(ivm_peer_challenge_t, flags) F(ivm_peer_challenge_t, layout)
#define IVM_PEER_FIELDS_PING(F, A) F(ivm_peer_ping_t, sent_ns)
#define IVM_PEER_FIELDS_NODEINFO(F, A) \
    F(ivm_peer_nodeinfo_t, ndevs) F(ivm_peer_nodeinfo_t, ngpus) A(ivm_peer_nodeinfo_t, ncores)
#define IVM_PEER_FIELDS_FWD(F, A) F(ivm_peer_fwd_t, job) F(ivm_peer_fwd_t, pe)
#define IVM_PEER_FIELDS_PE_STATE(F, A)                                                     \
    F(ivm_peer_pe_state_t, job) F(ivm_peer_pe_state_t, pe) F(ivm_peer_pe_state_t, state) \
    F(ivm_peer_pe_state_t, reserved)
#define IVM_PEER_FIELDS_SPAWN(F, A)                                                         \
    F(ivm_peer_spawn_t, op) F(ivm_peer_spawn_t, job) F(ivm_peer_spawn_t, devtype)        \
    F(ivm_peer_spawn_t, n) F(ivm_peer_spawn_t, flags) F(ivm_peer_spawn_t, argc)          \
    F(ivm_peer_spawn_t, envc) F(ivm_peer_spawn_t, blob_len) F(ivm_peer_spawn_t, pe_pool)
#define IVM_PEER_FIELDS_SPAWN_REP(F, A) \
    F(ivm_peer_spawn_rep_t, op) F(ivm_peer_spawn_rep_t, status) F(ivm_peer_spawn_rep_t, started)
#define IVM_PEER_FIELDS_JOB(F, A) F(ivm_peer_job_t, job) F(ivm_peer_job_t, reserved)
#define IVM_PEER_FIELDS_OUTPUT(F, A)                                                        \
    F(ivm_peer_output_t, job) F(ivm_peer_output_t, pe) F(ivm_peer_output_t, stream)     \
    F(ivm_peer_output_t, len)
#define IVM_PEER_FIELDS_OBJ(F, A)                                                           \
    F(ivm_peer_obj_t, op) F(ivm_peer_obj_t, job) F(ivm_peer_obj_t, status)               \
    F(ivm_peer_obj_t, master_node) F(ivm_peer_obj_t, reserved)                           \
    F(ivm_peer_obj_t, master_id) F(ivm_peer_obj_t, size)
#define IVM_PEER_FIELDS_XFER(F, A)                                                          \
    F(ivm_peer_xfer_t, op) F(ivm_peer_xfer_t, job) F(ivm_peer_xfer_t, flags)             \
    F(ivm_peer_xfer_t, obj) F(ivm_peer_xfer_t, dst) F(ivm_peer_xfer_t, off)              \
    F(ivm_peer_xfer_t, len) F(ivm_peer_xfer_t, status) F(ivm_peer_xfer_t, reserved)       \
    F(ivm_peer_xfer_t, sig_from) F(ivm_peer_xfer_t, sig_to)

#define IVM_PEER_FIELDS_UCX_ADDR(F, A) \
    F(ivm_peer_ucx_addr_t, len) F(ivm_peer_ucx_addr_t, reserved)
#define IVM_PEER_FIELDS_UCX_RKEY(F, A)                                                      \
    F(ivm_peer_ucx_rkey_t, obj) F(ivm_peer_ucx_rkey_t, base) F(ivm_peer_ucx_rkey_t, size) \
    F(ivm_peer_ucx_rkey_t, job) F(ivm_peer_ucx_rkey_t, len)

#define IVM_PEER_FIELDS_ROUTE(F, A)                                                         \
    F(ivm_peer_route_t, op) F(ivm_peer_route_t, job) F(ivm_peer_route_t, master)         \
    F(ivm_peer_route_t, off) F(ivm_peer_route_t, len) F(ivm_peer_route_t, count)         \
    F(ivm_peer_route_t, fanout) A(ivm_peer_route_t, nodes) A(ivm_peer_route_t, objs)
#define IVM_PEER_FIELDS_SIGNAL(F, A)                                                        \
    F(ivm_peer_signal_t, job) F(ivm_peer_signal_t, from) F(ivm_peer_signal_t, to)        \
    F(ivm_peer_signal_t, reserved)
#define IVM_PEER_FIELDS_PLACED(F, A)                                                        \
    F(ivm_peer_placed_t, job) F(ivm_peer_placed_t, node) F(ivm_peer_placed_t, n)         \
    F(ivm_peer_placed_t, reserved)
#define IVM_PEER_FIELDS_PE_ENDED(F, A)                                                      \
    F(ivm_peer_pe_ended_t, job) F(ivm_peer_pe_ended_t, pe) F(ivm_peer_pe_ended_t, node)  \
    F(ivm_peer_pe_ended_t, state) F(ivm_peer_pe_ended_t, flags)                          \
    F(ivm_peer_pe_ended_t, reserved)

#define IVM_PEER_FIELDS_EP_HELLO(F, A)                                                      \
    F(ivm_peer_ep_hello_t, job) F(ivm_peer_ep_hello_t, pe) F(ivm_peer_ep_hello_t, node)  \
    F(ivm_peer_ep_hello_t, layout)
#define IVM_PEER_FIELDS_EP_WELCOME(F, A) \
    F(ivm_peer_ep_welcome_t, status) F(ivm_peer_ep_welcome_t, flags)

_Static_assert(sizeof(ivm_peer_ep_hello_t) == 48, "endpoint hello size");
_Static_assert(sizeof(ivm_peer_ep_welcome_t) == 40, "endpoint welcome size");
_Static_assert(sizeof(ivm_peer_hello_t) == 120, "hello size");
_Static_assert(sizeof(ivm_peer_route_t) == 808, "route size");
_Static_assert(sizeof(ivm_peer_ucx_rkey_t) == 32, "ucx rkey size");
_Static_assert(sizeof(ivm_peer_xfer_t) == 64, "xfer size");
_Static_assert(sizeof(ivm_peer_obj_t) == 296, "obj size");
_Static_assert(sizeof(ivm_peer_challenge_t) == 152, "challenge size");
_Static_assert(sizeof(ivm_peer_signal_t) == 16, "signal size");
_Static_assert(sizeof(ivm_peer_placed_t) == 16, "placed size");
_Static_assert(sizeof(ivm_peer_pe_ended_t) == 24, "pe ended size");

/* Bytes a peer may send before it is authenticated. */
#define IVM_PEER_PREAUTH_MAX 4096

/* Validation. */

/* Check magic, version, type range and payload bounds of a header.
 * Returns IVM_SUCCESS or IVM_ERROR_PROTOCOL with *why_p set. */
ivmError_t ivm_proto_check_hdr(const ivm_msg_hdr_t *hdr, const char **why_p);

/* Check a request payload's length (and, for variable-length types, its inner
 * counts) for a header that passed ivm_proto_check_hdr. */
ivmError_t ivm_proto_check_req(const ivm_msg_hdr_t *hdr, const void *payload,
                               const char **why_p);

/* Whether a caller polls for the reply to a request of this type (the
 * table's last column); 0 for an unknown type. */
int ivm_proto_reply_polled(uint16_t type);

/* Bytes of a type's fixed reply struct, after which a reply may carry a
 * detail text; sizeof(ivm_msg_status_t) for a type the table lacks. */
uint32_t ivm_proto_rep_size(uint16_t type);

/* Check a reply payload's length against its type. */
ivmError_t ivm_proto_check_rep(const ivm_msg_hdr_t *hdr, const char **why_p);

/* Check a whole reply payload that passed ivm_proto_check_rep: a short
 * CREATE_PES reply must be a success holding exactly its n PE ids. */
ivmError_t ivm_proto_check_rep_body(const ivm_msg_hdr_t *hdr, const void *payload,
                                    const char **why_p);

/* Check a peer message: magic, version, type among the peer types, exact
 * payload length for the type. */
ivmError_t ivm_proto_check_peer(const ivm_msg_hdr_t *hdr, const char **why_p);

/* The peer wire's byte order: a header, and a message's fixed part (and
 * SPAWN's PE ids) of len payload bytes, turned into explicit little-endian
 * fields in place (pack, before sending) or back into the host's (unpack,
 * after receiving). A no-op on little-endian hosts. */
void ivm_peer_hdr_pack(ivm_msg_hdr_t *hdr);
void ivm_peer_hdr_unpack(ivm_msg_hdr_t *hdr);
void ivm_peer_pack(uint16_t type, void *payload, uint32_t len);
void ivm_peer_unpack(uint16_t type, void *payload, uint32_t len);

/* Name of a message type, for logs ("CREATE_PES", "?"). */
const char *ivm_proto_type_name(uint32_t type);

/* Fill a header. */
void ivm_proto_hdr_init(ivm_msg_hdr_t *hdr, uint16_t type, uint32_t length,
                        uint32_t seq);

/* Copy a string into a fixed field; fails if it does not fit. */
int ivm_proto_strset(char *dst, size_t dst_size, const char *src);

/* Non-zero if the fixed string field holds a NUL. */
int ivm_proto_strok(const char *field, size_t size);

/* Any reply struct of the table: its size is the largest's (a reply buffer
 * holds that and IVM_MSG_DETAIL_MAX bytes of detail). */
#define IVM_MSG_ANY_REP_MEMBER(name, value, req, rep, var, poll) rep r_##name;
typedef union ivm_msg_any_rep {
    IVM_MSG_TABLE(IVM_MSG_ANY_REP_MEMBER)
} ivm_msg_any_rep_t;

/* Every reply starts with a status and is at least that long: a PE reads a
 * header and a status in one go without touching the next message. */
#define IVM_MSG_REP_MIN_CHECK(name, value, req, rep, var, poll)                          \
    _Static_assert(sizeof(rep) >= sizeof(ivm_msg_status_t),                        \
                   #name " reply is at least a status");
IVM_MSG_TABLE(IVM_MSG_REP_MIN_CHECK)

#endif /* IVM_COMMON_PROTO_H */
