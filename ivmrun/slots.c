/* Slots (slots.h): the hostfile's "slots=N max_slots=N" and --node-slots. */
#include "slots.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IVMRUN_SLOTS_SEEN     1u
#define IVMRUN_MAX_SLOTS_SEEN 2u

/* A count, len bytes at p: decimal digits only, 0 .. IVMRUN_SLOTS_MAX
 * (zero only where allow_zero). 0, or -1. */
static int ivmrun_slots_number(const char *p, size_t len, int allow_zero, uint16_t *out)
{
    unsigned long v = 0;
    size_t i;

    if (len == 0 || len > 5) {
        return -1;
    }
    for (i = 0; i < len; ++i) {
        if (p[i] < '0' || p[i] > '9') {
            return -1;
        }
        v = v * 10 + (unsigned long)(p[i] - '0');
    }
    if (v > IVMRUN_SLOTS_MAX || (v == 0 && !allow_zero)) {
        return -1;
    }
    *out = (uint16_t)v;
    return 0;
}

int ivmrun_slots_word(const char *word, size_t len, ivmrun_slots_t *s, unsigned *seen,
                      char *err, size_t err_len)
{
    const char *eq = memchr(word, '=', len);
    size_t klen = (eq != NULL) ? (size_t)(eq - word) : len;
    unsigned bit;
    uint16_t *field;

    if (eq == NULL) {
        snprintf(err, err_len, "expected slots=N or max_slots=N after the host name, "
                 "got '%.*s'", (int)len, word);
        return -1;
    }
    if (klen == 5 && memcmp(word, "slots", 5) == 0) {
        bit   = IVMRUN_SLOTS_SEEN;
        field = &s->slots;
    } else if (klen == 9 && memcmp(word, "max_slots", 9) == 0) {
        bit   = IVMRUN_MAX_SLOTS_SEEN;
        field = &s->max_slots;
    } else {
        snprintf(err, err_len, "unknown key '%.*s' (known: slots, max_slots)", (int)klen,
                 word);
        return -1;
    }
    if (*seen & bit) {
        snprintf(err, err_len, "%.*s given twice", (int)klen, word);
        return -1;
    }
    *seen |= bit;
    if (ivmrun_slots_number(eq + 1, len - klen - 1, 0, field) != 0) {
        snprintf(err, err_len, "%.*s must be a whole number 1..%d, got '%.*s'", (int)klen,
                 word, IVMRUN_SLOTS_MAX, (int)(len - klen - 1), eq + 1);
        return -1;
    }
    return 0;
}

int ivmrun_slots_finish(ivmrun_slots_t *s, char *err, size_t err_len)
{
    if (s->slots == 0) {
        s->slots = s->max_slots; /* Open MPI's reading of max_slots alone */
    }
    if (s->max_slots != 0 && s->max_slots < s->slots) {
        snprintf(err, err_len, "max_slots=%u is below slots=%u", (unsigned)s->max_slots,
                 (unsigned)s->slots);
        return -1;
    }
    return 0;
}

/* One --node-slots entry, "S" or "S:M", len bytes at p. */
static int ivmrun_slots_entry(const char *p, size_t len, ivmrun_slots_t *s, char *err,
                              size_t err_len)
{
    const char *colon = memchr(p, ':', len);
    size_t slen = (colon != NULL) ? (size_t)(colon - p) : len;

    s->slots     = 0;
    s->max_slots = 0;
    if (ivmrun_slots_number(p, slen, 1, &s->slots) != 0 ||
        (colon != NULL && ivmrun_slots_number(colon + 1, len - slen - 1, 1, &s->max_slots) != 0)) {
        snprintf(err, err_len, "'%.*s' is not SLOTS or SLOTS:MAX_SLOTS (whole numbers "
                 "0..%d, 0 = not limited)", (int)len, p, IVMRUN_SLOTS_MAX);
        return -1;
    }
    return ivmrun_slots_finish(s, err, err_len);
}

int ivmrun_slots_parse(const char *list, int n, ivmrun_slots_t *out, char *err,
                       size_t err_len)
{
    const char *p = list, *comma;
    size_t len;
    int k = 0;

    for (;;) {
        comma = strchr(p, ',');
        len   = (comma != NULL) ? (size_t)(comma - p) : strlen(p);
        if (k < n && ivmrun_slots_entry(p, len, &out[k], err, err_len) != 0) {
            return -1;
        }
        ++k;
        if (comma == NULL) {
            break;
        }
        p = comma + 1;
    }
    if (k != n) {
        snprintf(err, err_len, "%d entr%s for %d node%s (give one per node, ','-separated)",
                 k, k == 1 ? "y" : "ies", n, n == 1 ? "" : "s");
        return -1;
    }
    return 0;
}

int ivmrun_slots_slurm(const char *text, int n, ivmrun_slots_t *out, char *err,
                       size_t err_len)
{
    const char *p = text, *end;
    uint16_t tasks, times;
    size_t len;
    int k = 0;

    for (;;) {
        end = p + strcspn(p, ",");
        len = strcspn(p, "(,");
        times = 1;
        if (ivmrun_slots_number(p, len, 0, &tasks) != 0 ||
            (p[len] == '(' && (strncmp(p + len, "(x", 2) != 0 || end[-1] != ')' ||
                               ivmrun_slots_number(p + len + 2, (size_t)(end - p) - len - 3, 0,
                                                   &times) != 0))) {
            snprintf(err, err_len, "'%.*s' is not N or N(xM)", (int)(end - p), p);
            return -1;
        }
        for (; times > 0 && k < n; --times, ++k) {
            out[k].slots     = tasks;
            out[k].max_slots = 0;
        }
        if (times > 0 || *end == '\0') {
            break;
        }
        p = end + 1;
    }
    if (k != n || times > 0 || *end != '\0') {
        snprintf(err, err_len, "it does not give one count per host of the %d", n);
        return -1;
    }
    return 0;
}

char *ivmrun_slots_format(const ivmrun_slots_t *s, int n)
{
    size_t cap = (size_t)n * 12 + 1, pos = 0;
    char *out = malloc(cap);
    int k;

    if (out == NULL) {
        return NULL;
    }
    out[0] = '\0';
    for (k = 0; k < n; ++k) {
        pos += (size_t)snprintf(out + pos, cap - pos, "%s%u:%u", k > 0 ? "," : "",
                                (unsigned)s[k].slots, (unsigned)s[k].max_slots);
    }
    return out;
}
