/*
 * The daemon settings a launcher passes on, in one place. ivmrun takes them
 * as options and gives them to the ivmd it starts (--nodes) or to the
 * per-host bring-up program (ivm-boot, ivm-boot-srun), which takes them
 * under the same names and gives them to its ivmd. Each is read by name from
 * the starter's own option table (ivmrun_config_fields, the bootstrap
 * programs' table), which stays the one source of truth of the options.
 */
#include "ivmrun.h"

#include <string.h>

/* name: the option in ivmrun's and the bootstrap programs' tables; ivmd: the
 * daemon's option (NULL: for the bootstrap program only); started_only: it
 * configures a daemon that is started, so a running one ignores it. */
typedef struct ivmrun_fwd {
    const char *name;
    const char *boot;
    const char *ivmd;
    int         started_only;
} ivmrun_fwd_t;

static const ivmrun_fwd_t ivmrun_fwd_opts[] = {
    {"daemon",         "--daemon",         NULL,             0},
    {"log-level",      "--log-level",      "--log-level",    0},
    {"emu-gpus",       "--emu-gpus",       "--emu-gpus",     1},
    {"gpus",           "--gpus",           "--gpus",         1},
    {"gpu-shares",     "--gpu-shares",     "--gpu-shares",   1},
    {"daemon-poll-us", "--daemon-poll-us", "--poll-us",      1},
    {"peer-encrypt",   "--peer-encrypt",   "--peer-encrypt", 0},
    {"transport",      "--transport",      "--transport",    1},
    {"daemon-huge-pages", "--daemon-huge-pages", "--huge-pages", 1},
    {"daemon-tcp-congestion", "--daemon-tcp-congestion", "--tcp-congestion", 1},
    {NULL, NULL, NULL, 0}};

static const ivm_config_field_t *ivmrun_opts_field(const ivmrun_opts_t *o, const char *name)
{
    const ivm_config_field_t *f;

    for (f = o->fields; f->name != NULL; ++f) {
        if (strcmp(f->name, name) == 0) {
            return f;
        }
    }
    return NULL;
}

const char *ivmrun_opts_string(const ivmrun_opts_t *o, const char *name)
{
    const ivm_config_field_t *f = ivmrun_opts_field(o, name);

    if (f == NULL || f->type != IVM_CONFIG_STRING) {
        return NULL;
    }
    return *(char *const *)((const char *)o->values + f->offset);
}

double ivmrun_opts_double(const ivmrun_opts_t *o, const char *name)
{
    const ivm_config_field_t *f = ivmrun_opts_field(o, name);

    if (f == NULL || f->type != IVM_CONFIG_DOUBLE) {
        return 0;
    }
    return *(const double *)((const char *)o->values + f->offset);
}

/* 1 when the setting is given: a non-empty string, a set flag. */
static int ivmrun_opts_given(const ivmrun_opts_t *o, const ivm_config_field_t *f)
{
    const char *v = (const char *)o->values + f->offset;

    if (f->type == IVM_CONFIG_BOOL) {
        return *(const int *)v != 0;
    }
    return f->type == IVM_CONFIG_STRING && *(char *const *)v != NULL &&
           (*(char *const *)v)[0] != '\0';
}

void ivmrun_opts_forward(const ivmrun_opts_t *o, ivmrun_fwd_to_t to, char **argv,
                         int *argc_p)
{
    const ivm_config_field_t *f;
    const ivmrun_fwd_t *w;
    const char *opt;

    for (w = ivmrun_fwd_opts; w->name != NULL; ++w) {
        opt = (to == IVMRUN_FWD_IVMD) ? w->ivmd : w->boot;
        f   = ivmrun_opts_field(o, w->name);
        if (opt == NULL || f == NULL || !ivmrun_opts_given(o, f)) {
            continue;
        }
        argv[(*argc_p)++] = (char *)opt;
        if (f->type == IVM_CONFIG_STRING) {
            argv[(*argc_p)++] = *(char *const *)((const char *)o->values + f->offset);
        }
    }
}

int ivmrun_opts_started_only(const ivmrun_opts_t *o)
{
    const ivm_config_field_t *f;
    const ivmrun_fwd_t *w;

    for (w = ivmrun_fwd_opts; w->name != NULL; ++w) {
        f = ivmrun_opts_field(o, w->name);
        if (w->started_only && f != NULL && ivmrun_opts_given(o, f)) {
            return 1;
        }
    }
    return 0;
}

void ivmrun_arg_opt(char **argv, int *argc_p, const char *opt, const char *value)
{
    if (value != NULL && value[0] != '\0') {
        argv[(*argc_p)++] = (char *)opt;
        argv[(*argc_p)++] = (char *)value;
    }
}
