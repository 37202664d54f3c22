/* bench-dpc --burst (dpc_burst.c): PE bursts, cold and from a warm pool. */
#ifndef IVM_BENCH_DPC_BURST_H
#define IVM_BENCH_DPC_BURST_H

/* The whole program in burst mode (argv has --burst); its exit status. */
int dpc_burst_main(int argc, char **argv);

#endif /* IVM_BENCH_DPC_BURST_H */
