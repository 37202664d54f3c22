#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const ivm_config_field_t *ivm_config_find(const ivm_config_field_t *table,
                                                 const char *name, size_t len)
{
    for (; table->name != NULL; ++table) {
        if (strlen(table->name) == len && strncmp(table->name, name, len) == 0) {
            return table;
        }
    }
    return NULL;
}

static ivmError_t ivm_config_assign(const ivm_config_field_t *f, void *cfg,
                                    const char *value, char *err, size_t errlen)
{
    char *slot = (char *)cfg + f->offset;
    char *end;

    switch (f->type) {
    case IVM_CONFIG_STRING: {
        char *copy = strdup(value);
        if (copy == NULL) {
            snprintf(err, errlen, "out of memory");
            return IVM_ERROR_NO_MEMORY;
        }
        free(*(char **)slot);
        *(char **)slot = copy;
        return IVM_SUCCESS;
    }
    case IVM_CONFIG_INT: {
        long v;
        errno = 0;
        v = strtol(value, &end, 0);
        if (*value == '\0' || *end != '\0' || errno != 0) {
            snprintf(err, errlen, "%s: '%s' is not an integer", f->name, value);
            return IVM_ERROR_INVALID_VALUE;
        }
        *(long *)slot = v;
        return IVM_SUCCESS;
    }
    case IVM_CONFIG_DOUBLE: {
        double v;
        errno = 0;
        v = strtod(value, &end);
        if (*value == '\0' || *end != '\0' || errno != 0) {
            snprintf(err, errlen, "%s: '%s' is not a number", f->name, value);
            return IVM_ERROR_INVALID_VALUE;
        }
        *(double *)slot = v;
        return IVM_SUCCESS;
    }
    case IVM_CONFIG_BOOL:
        if (!strcmp(value, "1") || !strcasecmp(value, "yes") ||
            !strcasecmp(value, "true") || !strcasecmp(value, "on")) {
            *(int *)slot = 1;
        } else if (!strcmp(value, "0") || !strcasecmp(value, "no") ||
                   !strcasecmp(value, "false") || !strcasecmp(value, "off")) {
            *(int *)slot = 0;
        } else {
            snprintf(err, errlen, "%s: '%s' is not a boolean (1/0, yes/no)", f->name,
                     value);
            return IVM_ERROR_INVALID_VALUE;
        }
        return IVM_SUCCESS;
    }
    snprintf(err, errlen, "%s: unknown setting type", f->name);
    return IVM_ERROR_INTERNAL;
}

ivmError_t ivm_config_defaults(const ivm_config_field_t *table, void *cfg)
{
    char err[128];
    ivmError_t status;

    for (; table->name != NULL; ++table) {
        status = ivm_config_assign(table, cfg, table->defval, err, sizeof(err));
        if (status != IVM_SUCCESS) {
            return status;
        }
    }
    return IVM_SUCCESS;
}

static void ivm_config_env_name(const char *name, char *buf, size_t len)
{
    size_t i = 0;

    snprintf(buf, len, "IVM_");
    for (i = 4; *name != '\0' && i + 1 < len; ++name, ++i) {
        buf[i] = (*name == '-') ? '_' : (char)toupper((unsigned char)*name);
    }
    buf[i] = '\0';
}

ivmError_t ivm_config_load_env(const ivm_config_field_t *table, void *cfg,
                               char *err, size_t errlen)
{
    char env_name[96];
    const char *value;
    ivmError_t status;

    for (; table->name != NULL; ++table) {
        ivm_config_env_name(table->name, env_name, sizeof(env_name));
        value = getenv(env_name);
        if (value == NULL) {
            continue;
        }
        status = ivm_config_assign(table, cfg, value, err, errlen);
        if (status != IVM_SUCCESS) {
            return status;
        }
    }
    return IVM_SUCCESS;
}

ivmError_t ivm_config_set(const ivm_config_field_t *table, void *cfg,
                          const char *name, const char *value, char *err,
                          size_t errlen)
{
    const ivm_config_field_t *f = ivm_config_find(table, name, strlen(name));

    if (f == NULL) {
        snprintf(err, errlen, "unknown setting '%s'", name);
        return IVM_ERROR_INVALID_VALUE;
    }
    return ivm_config_assign(f, cfg, value, err, errlen);
}

/* -h/--help, --help-man, -V/--version: sets *help_p (a help request wins
 * over --version) and returns 1; 0 for any other argument. */
static int ivm_config_help_flag(const char *arg, int *help_p)
{
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
        *help_p = IVM_CONFIG_ASK_HELP;
        return 1;
    }
    if (strcmp(arg, "--help-man") == 0) {
        *help_p = IVM_CONFIG_ASK_MAN;
        return 1;
    }
    if (strcmp(arg, "-V") == 0 || strcmp(arg, "--version") == 0) {
        if (*help_p == 0) {
            *help_p = IVM_CONFIG_ASK_VERSION;
        }
        return 1;
    }
    return 0;
}

/* One option argv[*i_p] ("--name", "--name=value", "--name value" taking
 * argv[*i_p + 1], "--no-name" for a boolean) assigned into cfg; *i_p is left
 * on the last argument it used. */
static ivmError_t ivm_config_parse_option(const ivm_config_field_t *table, void *cfg,
                                          int argc, char **argv, int *i_p, char *err,
                                          size_t errlen)
{
    const char *arg = argv[*i_p] + 2;
    const char *eq  = strchr(arg, '=');
    size_t len      = (eq != NULL) ? (size_t)(eq - arg) : strlen(arg);
    const ivm_config_field_t *f = ivm_config_find(table, arg, len);
    const char *value;

    if (f == NULL && eq == NULL && strncmp(arg, "no-", 3) == 0) {
        f = ivm_config_find(table, arg + 3, len - 3);
        if (f != NULL && f->type == IVM_CONFIG_BOOL) {
            *(int *)((char *)cfg + f->offset) = 0;
            return IVM_SUCCESS;
        }
        f = NULL;
    }
    if (f == NULL) {
        snprintf(err, errlen, "unknown option --%.*s (see --help)", (int)len, arg);
        return IVM_ERROR_INVALID_VALUE;
    }
    if (eq != NULL) {
        value = eq + 1;
    } else if (f->type == IVM_CONFIG_BOOL) {
        value = "1";
    } else if (*i_p + 1 < argc) {
        value = argv[++*i_p];
    } else {
        snprintf(err, errlen, "option --%s needs a value", f->name);
        return IVM_ERROR_INVALID_VALUE;
    }
    return ivm_config_assign(f, cfg, value, err, errlen);
}

ivmError_t ivm_config_parse_args(const ivm_config_field_t *table, void *cfg,
                                 int argc, char **argv, int *first_arg_p,
                                 int *help_p, char *err, size_t errlen)
{
    const char *arg;
    ivmError_t status;
    int i;

    *help_p = 0;
    for (i = 1; i < argc; ++i) {
        arg = argv[i];
        if (strcmp(arg, "--") == 0) {
            ++i;
            break;
        }
        if (ivm_config_help_flag(arg, help_p)) {
            continue;
        }
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            break;
        }
        status = ivm_config_parse_option(table, cfg, argc, argv, &i, err, errlen);
        if (status != IVM_SUCCESS) {
            return status;
        }
    }
    *first_arg_p = i;
    return IVM_SUCCESS;
}

void ivm_config_print_help(const ivm_config_field_t *table, FILE *out)
{
    static const char *const kinds[] = {"TEXT", "N", "", "X"};
    char env_name[96];
    char opt[96];

    for (; table->name != NULL; ++table) {
        ivm_config_env_name(table->name, env_name, sizeof(env_name));
        snprintf(opt, sizeof(opt), "--%s%s%s", table->name,
                 table->type == IVM_CONFIG_BOOL ? "" : " ", kinds[table->type]);
        fprintf(out, "  %-28s %s\n  %-28s (env %s, default '%s')\n", opt, table->help,
                "", env_name, table->defval);
    }
}

/* Text for roff: backslashes and hyphens escaped, no request at a line start. */
static void ivm_config_roff(FILE *out, const char *text)
{
    if (text[0] == '.' || text[0] == '\'') {
        fputs("\\&", out);
    }
    for (; *text != '\0'; ++text) {
        if (*text == '\\') {
            fputs("\\e", out);
        } else if (*text == '-') {
            fputs("\\-", out);
        } else {
            fputc(*text, out);
        }
    }
}

void ivm_config_print_man(const ivm_config_field_t *table, FILE *out)
{
    static const char *const kinds[] = {"TEXT", "N", "", "X"};
    char env_name[96];
    size_t len;

    for (; table->name != NULL; ++table) {
        ivm_config_env_name(table->name, env_name, sizeof(env_name));
        fputs(table->type == IVM_CONFIG_BOOL ? ".TP\n.B \\-\\-" : ".TP\n.BI \\-\\-", out);
        ivm_config_roff(out, table->name);
        if (table->type != IVM_CONFIG_BOOL) {
            fprintf(out, " \" %s\"", kinds[table->type]);
        }
        fputc('\n', out);
        ivm_config_roff(out, table->help);
        len = strlen(table->help);
        fputs(len > 0 && table->help[len - 1] == '.' ? "\nEnvironment:\n.BR " :
                                                       ".\nEnvironment:\n.BR ", out);
        ivm_config_roff(out, env_name);
        fputs(" ;\ndefault: ", out);
        if (table->defval[0] == '\0') {
            fputs("empty", out);
        } else {
            fputs("\\(lq", out);
            ivm_config_roff(out, table->defval);
            fputs("\\(rq", out);
        }
        fputs(".\n", out);
    }
}

void ivm_config_release(const ivm_config_field_t *table, void *cfg)
{
    for (; table->name != NULL; ++table) {
        if (table->type == IVM_CONFIG_STRING) {
            char **slot = (char **)((char *)cfg + table->offset);
            free(*slot);
            *slot = NULL;
        }
    }
}
