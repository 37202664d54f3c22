/* bench-dpc --burst (dpc_burst.c): PE bursts, cold and from a warm pool; and
 * the two waits both modes share. */
#ifndef IVM_BENCH_DPC_BURST_H
#define IVM_BENCH_DPC_BURST_H

#include <stdint.h>

/* The whole program in burst mode (argv has --burst); its exit status. */
int dpc_burst_main(int argc, char **argv);

/* The root daemon's parked processes (INFO); 0 without an answer. */
uint32_t dpc_parked(void);

/* Until only the root PE is left; exits the program after timeout_s. */
void dpc_wait_alone(double timeout_s);

#endif /* IVM_BENCH_DPC_BURST_H */
