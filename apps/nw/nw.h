/*
 * nw: the kernels and input of NW (Needleman-Wunsch global alignment scores
 * of many sequence pairs), shared by the IVM version, the MPI baseline and
 * the serial reference.
 *
 * Pair k has sequences a (length la[k]) and b (lb[k]) over ACGT, lengths in
 * [NW_MIN_LEN, NW_MAX_LEN], stored one after the other (a then b) at byte
 * off[k] of the sequence buffer. Score: match +1, mismatch -1, gap -2
 * (linear); H[i][j] = max(H[i-1][j-1] + s(a_i, b_j), H[i-1][j] - 2,
 * H[i][j-1] - 2), H[i][0] = -2i, H[0][j] = -2j; the pair's result is
 * H[la][lb] (int32, exact).
 */
#ifndef IVM_APP_NW_H
#define IVM_APP_NW_H

#include <stddef.h>
#include <stdint.h>

#define NW_MIN_LEN 256
#define NW_MAX_LEN 768
#define NW_MATCH 1
#define NW_MISMATCH (-1)
#define NW_GAP (-2)

/* Layout of the pairs: off, la, lb (npairs entries each, may be NULL);
   returns the total bytes of the sequences. */
size_t nw_layout(uint64_t seed, int npairs, size_t *off, int *la, int *lb);

/* Fill the sequence buffer (nw_layout's total bytes) from the seed. */
void nw_init(uint64_t seed, int npairs, char *seq);

/* Scores of pairs [lo, hi) with OpenMP (a pair per thread): seq = the whole
   buffer, score points at pair lo's entry. */
void nw_pairs_cpu(const char *seq, const size_t *off, const int *la, const int *lb,
                  int32_t *score, int lo, int hi);

/* The same on a GPU (one block per pair, anti-diagonal wavefront): seq and
   score are device pointers, off/la/lb host arrays of every pair. 0, or -1
   after printing the CUDA error. Defined only when APP_HAVE_CUDA. */
int nw_pairs_cuda(const char *seq, const size_t *off, const int *la, const int *lb,
                  int32_t *score, int lo, int hi);

/* Serial reference with the full matrix: scores of every pair. 0, or -1
   (no memory). */
int nw_reference(uint64_t seed, int npairs, int32_t *score);

#endif /* IVM_APP_NW_H */
