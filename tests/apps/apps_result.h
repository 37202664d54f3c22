/* Reading the applications' RESULT line in the apps tests. */
#ifndef IVMT_APPS_RESULT_H
#define IVMT_APPS_RESULT_H

/* The value of key=... on the first "RESULT app=" line of out (malloc'd);
 * NULL when there is no such line or it has no such key. */
char *apps_result_field(const char *out, const char *key);

/* Share of device `name` in a share list ("node0.cpu0:0.5,node1.gpu0:0.5");
 * -1 if the device is not listed. */
double apps_share_of(const char *share, const char *name);

/* Under ASan (ASAN_OPTIONS set: the sanitizer pass of scripts/run-tests.sh),
 * turn leak detection off for the processes this test starts from now on:
 * Open MPI's plugins, unloaded at exit, leak where LeakSanitizer can name no
 * library to suppress. Memory errors are still reported. Call it before
 * running mpirun. */
void apps_mpi_sanitizer_env(void);

#endif /* IVMT_APPS_RESULT_H */
