/*
 * Settings tables. Each program lists its settings once, as an X-macro
 *   X(field, "option-name", TYPE, "default", "help text")
 * with TYPE one of STRING (char *), INT (long), BOOL (int), DOUBLE (double).
 * IVM_CONFIG_STRUCT generates the struct, IVM_CONFIG_FIELDS the table that the
 * functions below read: defaults, then IVM_<OPTION_NAME> environment variables,
 * then --option-name VALUE / --option-name=VALUE / --flag / --no-flag.
 */
#ifndef IVM_COMMON_CONFIG_H
#define IVM_COMMON_CONFIG_H

#include <stddef.h>
#include <stdio.h>

#include "ivm.h"

typedef enum ivm_config_type {
    IVM_CONFIG_STRING,
    IVM_CONFIG_INT,
    IVM_CONFIG_BOOL,
    IVM_CONFIG_DOUBLE
} ivm_config_type_t;

typedef struct ivm_config_field {
    const char        *name;   /* option name, e.g. "socket-dir" */
    ivm_config_type_t  type;
    size_t             offset; /* of the value in the settings struct */
    const char        *defval; /* default, as text */
    const char        *help;
} ivm_config_field_t;

#define IVM_CONFIG_CTYPE_STRING char *
#define IVM_CONFIG_CTYPE_INT    long
#define IVM_CONFIG_CTYPE_BOOL   int
#define IVM_CONFIG_CTYPE_DOUBLE double

#define IVM_CONFIG_STRUCT_MEMBER(field, name, type, def, help) \
    IVM_CONFIG_CTYPE_##type field;
#define IVM_CONFIG_STRUCT(struct_name, TABLE) \
    typedef struct struct_name { TABLE(IVM_CONFIG_STRUCT_MEMBER) } struct_name##_t

#define IVM_CONFIG_FIELD_ENTRY(struct_name, field, name, type, def, help) \
    {name, IVM_CONFIG_##type, offsetof(struct_name##_t, field), def, help},
/* Usage:
 *   IVM_CONFIG_STRUCT(ivmd_config, IVMD_CONFIG_TABLE);
 *   #define IVMD_CONFIG_FIELD(...) IVM_CONFIG_FIELD_ENTRY(ivmd_config, __VA_ARGS__)
 *   static const ivm_config_field_t fields[] = {
 *       IVMD_CONFIG_TABLE(IVMD_CONFIG_FIELD) {0}};
 */

/* Set every field to its default. */
ivmError_t ivm_config_defaults(const ivm_config_field_t *table, void *cfg);

/* Apply IVM_<NAME> environment variables. On a bad value: IVM_ERROR_INVALID_VALUE
 * with a message in err (size errlen). */
ivmError_t ivm_config_load_env(const ivm_config_field_t *table, void *cfg,
                               char *err, size_t errlen);

/* Apply options from argv[1..]; stops at the first argument that is not an
 * option (or after "--") and stores its index in *first_arg_p (argc if none).
 * *help_p is IVM_CONFIG_ASK_HELP after "--help"/"-h", else
 * IVM_CONFIG_ASK_VERSION after "--version"/"-V", else 0. Unknown options and
 * bad values fail with a message in err. */
#define IVM_CONFIG_ASK_HELP    1
#define IVM_CONFIG_ASK_VERSION 2
/* "--help-man" (build time: the OPTIONS section of the program's man page). */
#define IVM_CONFIG_ASK_MAN     3
ivmError_t ivm_config_parse_args(const ivm_config_field_t *table, void *cfg,
                                 int argc, char **argv, int *first_arg_p,
                                 int *help_p, char *err, size_t errlen);

/* Set one field by option name from text. */
ivmError_t ivm_config_set(const ivm_config_field_t *table, void *cfg,
                          const char *name, const char *value, char *err,
                          size_t errlen);

/* Print the options, their environment variables and defaults. */
void ivm_config_print_help(const ivm_config_field_t *table, FILE *out);

/* Print the options as a man page's OPTIONS entries (roff .TP paragraphs). */
void ivm_config_print_man(const ivm_config_field_t *table, FILE *out);

/* Free the strings of a settings struct. */
void ivm_config_release(const ivm_config_field_t *table, void *cfg);

#endif /* IVM_COMMON_CONFIG_H */
