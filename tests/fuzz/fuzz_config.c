/* libFuzzer target: the settings parsers of common/config.c (options and
 * IVM_* environment variables) on the real tables of ivmd and ivmrun.
 * Input: byte 0 (bit 0: ivmrun's table, else ivmd's; bit 1: environment, else
 * options), then NUL-separated words: the options (argv[1..]) or NAME=VALUE
 * environment entries. Afterwards the first two words go to ivm_config_set as
 * a name and a value (what ivm-ctl set-share and the daemons' runtime settings
 * use). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../ivmd/ivmd.h"
#include "../../ivmrun/ivmrun.h"

#define FUZZ_CONFIG_WORDS 64

#define FUZZ_IVMD_FIELD(...)   IVM_CONFIG_FIELD_ENTRY(ivmd_config, __VA_ARGS__)
#define FUZZ_IVMRUN_FIELD(...) IVM_CONFIG_FIELD_ENTRY(ivmrun_config, __VA_ARGS__)
static const ivm_config_field_t fuzz_ivmd_fields[] = {IVMD_CONFIG_TABLE(FUZZ_IVMD_FIELD){0}};
static const ivm_config_field_t fuzz_ivmrun_fields[] = {
    IVMRUN_CONFIG_TABLE(FUZZ_IVMRUN_FIELD){0}};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    union {
        ivmd_config_t   ivmd;
        ivmrun_config_t ivmrun;
    } cfg;
    const ivm_config_field_t *table;
    char *text, *words[FUZZ_CONFIG_WORDS + 1], err[256];
    int nwords = 0, first = 0, help = 0, k;
    size_t i;

    if (size < 1) {
        return 0;
    }
    table = (data[0] & 1) ? fuzz_ivmrun_fields : fuzz_ivmd_fields;
    text  = malloc(size);
    if (text == NULL) {
        return 0;
    }
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    words[nwords++] = "fuzz";
    for (i = 0; i < size - 1 && nwords < FUZZ_CONFIG_WORDS;) {
        words[nwords++] = text + i;
        i += strlen(text + i) + 1;
    }
    words[nwords] = NULL;

    memset(&cfg, 0, sizeof(cfg));
    if (ivm_config_defaults(table, &cfg) != IVM_SUCCESS) {
        abort();
    }
    err[0] = '\0';
    if (data[0] & 2) {
        for (k = 1; k < nwords; ++k) {
            if (strchr(words[k], '=') != NULL && words[k][0] != '=') {
                putenv(words[k]);
            }
        }
        if (ivm_config_load_env(table, &cfg, err, sizeof(err)) != IVM_SUCCESS &&
            err[0] == '\0') {
            abort(); /* a refusal says why */
        }
        clearenv();
    } else if (ivm_config_parse_args(table, &cfg, nwords, words, &first, &help, err,
                                     sizeof(err)) == IVM_SUCCESS) {
        if (first < 1 || first > nwords) {
            abort();
        }
    } else if (err[0] == '\0') {
        abort();
    }
    if (nwords >= 3) {
        (void)ivm_config_set(table, &cfg, words[1], words[2], err, sizeof(err));
    }
    ivm_config_release(table, &cfg);
    free(text);
    return 0;
}
