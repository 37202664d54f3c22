/*
 * nw: input, CPU kernel and serial reference (see nw.h).
 */
#include "nw.h"

#include <stdlib.h>

#include "app.h"

#define NW_LEN_STREAM 0x4e57u      /* seed offset of the lengths' stream */

size_t nw_layout(uint64_t seed, int npairs, size_t *off, int *la, int *lb)
{
    size_t total = 0;
    int span = NW_MAX_LEN - NW_MIN_LEN + 1;

    for (int k = 0; k < npairs; k++) {
        int a = NW_MIN_LEN + (int)(app_rand_u64(seed + NW_LEN_STREAM, 2 * (uint64_t)k) % span);
        int b = NW_MIN_LEN + (int)(app_rand_u64(seed + NW_LEN_STREAM, 2 * (uint64_t)k + 1) % span);
        if (off != NULL)
            off[k] = total;
        if (la != NULL)
            la[k] = a;
        if (lb != NULL)
            lb[k] = b;
        total += (size_t)a + (size_t)b;
    }
    return total;
}

void nw_init(uint64_t seed, int npairs, char *seq)
{
    static const char acgt[4] = { 'A', 'C', 'G', 'T' };
    size_t total = nw_layout(seed, npairs, NULL, NULL, NULL);

    for (size_t i = 0; i < total; i++)
        seq[i] = acgt[app_rand_u64(seed, i) >> 62];
}

/* One pair with one row of the matrix (row buffer of lb + 1 ints). */
static int32_t nw_pair(const char *a, int la, const char *b, int lb, int32_t *row)
{
    for (int j = 0; j <= lb; j++)
        row[j] = NW_GAP * j;
    for (int i = 1; i <= la; i++) {
        int32_t diag = row[0];
        row[0] = NW_GAP * i;
        for (int j = 1; j <= lb; j++) {
            int32_t up = row[j];
            int32_t h = diag + (a[i - 1] == b[j - 1] ? NW_MATCH : NW_MISMATCH);
            if (up + NW_GAP > h)
                h = up + NW_GAP;
            if (row[j - 1] + NW_GAP > h)
                h = row[j - 1] + NW_GAP;
            row[j] = h;
            diag = up;
        }
    }
    return row[lb];
}

void nw_pairs_cpu(const char *seq, const size_t *off, const int *la, const int *lb,
                  int32_t *score, int lo, int hi)
{
#pragma omp parallel
    {
        int32_t row[NW_MAX_LEN + 1];
#pragma omp for schedule(dynamic, 1)
        for (int k = lo; k < hi; k++) {
            const char *a = seq + off[k];
            score[k - lo] = nw_pair(a, la[k], a + la[k], lb[k], row);
        }
    }
}

int nw_reference(uint64_t seed, int npairs, int32_t *score)
{
    size_t total = nw_layout(seed, npairs, NULL, NULL, NULL);
    size_t *off = malloc((size_t)npairs * sizeof(*off));
    int *la = malloc((size_t)npairs * sizeof(int)), *lb = malloc((size_t)npairs * sizeof(int));
    char *seq = malloc(total);
    int32_t *H = malloc((size_t)(NW_MAX_LEN + 1) * (NW_MAX_LEN + 1) * sizeof(int32_t));
    int ret = -1;

    if (off == NULL || la == NULL || lb == NULL || seq == NULL || H == NULL)
        goto out;
    nw_layout(seed, npairs, off, la, lb);
    nw_init(seed, npairs, seq);
    for (int k = 0; k < npairs; k++) {
        const char *a = seq + off[k], *b = a + la[k];
        int w = lb[k] + 1;
        for (int i = 0; i <= la[k]; i++)
            H[(size_t)i * w] = NW_GAP * i;
        for (int j = 0; j <= lb[k]; j++)
            H[j] = NW_GAP * j;
        for (int i = 1; i <= la[k]; i++) {
            for (int j = 1; j <= lb[k]; j++) {
                int32_t m = H[(size_t)(i - 1) * w + j - 1] +
                            (a[i - 1] == b[j - 1] ? NW_MATCH : NW_MISMATCH);
                int32_t u = H[(size_t)(i - 1) * w + j] + NW_GAP;
                int32_t l = H[(size_t)i * w + j - 1] + NW_GAP;
                H[(size_t)i * w + j] = m > u ? (m > l ? m : l) : (u > l ? u : l);
            }
        }
        score[k] = H[(size_t)la[k] * w + lb[k]];
    }
    ret = 0;
out:
    free(H);
    free(seq);
    free(lb);
    free(la);
    free(off);
    return ret;
}
