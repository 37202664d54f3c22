/*
 * Slots, as Open MPI's hostfile gives them: how many PEs of a job a node
 * should run at once (slots=N) and may run at once (max_slots=N). ivmrun
 * reads them from --hostfile or --node-slots, the bring-up programs from
 * their --node-slots, and both put them in the CLUSTER table.
 */
#ifndef IVMRUN_SLOTS_H
#define IVMRUN_SLOTS_H

#include <stddef.h>
#include <stdint.h>

#define IVMRUN_SLOTS_MAX 65535 /* the CLUSTER table's uint16 */

typedef struct ivmrun_slots {
    uint16_t slots;     /* 0: not limited */
    uint16_t max_slots; /* 0: not limited; else >= slots */
} ivmrun_slots_t;

/* One hostfile word after the host name, len bytes at word: "slots=N" or
 * "max_slots=N" into *s; *seen keeps which keys were given (a repeated key
 * is refused). 0, or -1 with the reason in err. */
int ivmrun_slots_word(const char *word, size_t len, ivmrun_slots_t *s, unsigned *seen,
                      char *err, size_t err_len);

/* After a host's words: max_slots alone makes slots the same; max_slots
 * below slots is refused. 0, or -1 with the reason in err. */
int ivmrun_slots_finish(ivmrun_slots_t *s, char *err, size_t err_len);

/* --node-slots "S[:M],S[:M],...": exactly n entries into out[0..n-1]
 * (0 = not limited). 0, or -1 with the reason in err. */
int ivmrun_slots_parse(const char *list, int n, ivmrun_slots_t *out, char *err,
                       size_t err_len);

/* Slurm's SLURM_TASKS_PER_NODE ("2(x3),1": tasks per node, in the order of
 * the allocation's hosts) as slots: exactly n nodes into out[0..n-1], no
 * max_slots (Open MPI reads an allocation the same way). 0, or -1 with the
 * reason in err. */
int ivmrun_slots_slurm(const char *text, int n, ivmrun_slots_t *out, char *err,
                       size_t err_len);

/* The --node-slots text of s[0..n-1] (malloc'd), NULL without memory. */
char *ivmrun_slots_format(const ivmrun_slots_t *s, int n);

#endif /* IVMRUN_SLOTS_H */
