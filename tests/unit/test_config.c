/* Unit tests of the settings table (common/config.c): defaults, IVM_*
 * environment variables, command-line options and their errors. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#define TEST_CONFIG_TABLE(X)                                                   \
    X(name, "test-name", STRING, "dflt", "a string setting")                 \
    X(count, "test-count", INT, "42", "an integer setting")                  \
    X(verbose, "test-verbose", BOOL, "0", "a flag")                          \
    X(ratio, "test-ratio", DOUBLE, "0.5", "a real setting")

IVM_CONFIG_STRUCT(test_config, TEST_CONFIG_TABLE);
#define TEST_CONFIG_FIELD(...) IVM_CONFIG_FIELD_ENTRY(test_config, __VA_ARGS__)
static const ivm_config_field_t fields[] = {TEST_CONFIG_TABLE(TEST_CONFIG_FIELD){0}};

static test_config_t cfg;
static char err[256];

static void clear_env(void)
{
    unsetenv("IVM_TEST_NAME");
    unsetenv("IVM_TEST_COUNT");
    unsetenv("IVM_TEST_VERBOSE");
    unsetenv("IVM_TEST_RATIO");
}

static void setup(void)
{
    clear_env();
    memset(&cfg, 0, sizeof(cfg));
    err[0] = '\0';
    cr_assert_eq(ivm_config_defaults(fields, &cfg), IVM_SUCCESS);
}

static void teardown(void)
{
    ivm_config_release(fields, &cfg);
    clear_env();
}

/* Parse a NULL-terminated option vector; argv[0] is a program name. */
static ivmError_t parse(char **argv, int *first_p, int *help_p)
{
    int argc = 0;

    while (argv[argc] != NULL) {
        ++argc;
    }
    return ivm_config_parse_args(fields, &cfg, argc, argv, first_p, help_p, err,
                                 sizeof(err));
}

TestSuite(config, .init = setup, .fini = teardown, .timeout = 10);

Test(config, defaults)
{
    cr_assert_str_eq(cfg.name, "dflt");
    cr_assert_eq(cfg.count, 42);
    cr_assert_eq(cfg.verbose, 0);
    cr_assert_float_eq(cfg.ratio, 0.5, 1e-12);
}

Test(config, environment)
{
    setenv("IVM_TEST_NAME", "from-env", 1);
    setenv("IVM_TEST_COUNT", "-7", 1);
    setenv("IVM_TEST_VERBOSE", "yes", 1);
    setenv("IVM_TEST_RATIO", "2.25", 1);
    cr_assert_eq(ivm_config_load_env(fields, &cfg, err, sizeof(err)), IVM_SUCCESS, "%s",
                 err);
    cr_assert_str_eq(cfg.name, "from-env");
    cr_assert_eq(cfg.count, -7);
    cr_assert_eq(cfg.verbose, 1);
    cr_assert_float_eq(cfg.ratio, 2.25, 1e-12);
}

Test(config, environment_unset_keeps_defaults)
{
    setenv("IVM_TEST_COUNT", "5", 1);
    cr_assert_eq(ivm_config_load_env(fields, &cfg, err, sizeof(err)), IVM_SUCCESS);
    cr_assert_eq(cfg.count, 5);
    cr_assert_str_eq(cfg.name, "dflt");
    cr_assert_eq(cfg.verbose, 0);
}

Test(config, environment_bad_values)
{
    setenv("IVM_TEST_COUNT", "twelve", 1);
    cr_assert_eq(ivm_config_load_env(fields, &cfg, err, sizeof(err)),
                 IVM_ERROR_INVALID_VALUE);
    cr_assert(strstr(err, "twelve") != NULL, "the message names the bad value: '%s'", err);
    cr_assert_eq(cfg.count, 42, "a bad value is not stored");
    unsetenv("IVM_TEST_COUNT");
    setenv("IVM_TEST_VERBOSE", "perhaps", 1);
    cr_assert_eq(ivm_config_load_env(fields, &cfg, err, sizeof(err)),
                 IVM_ERROR_INVALID_VALUE);
    unsetenv("IVM_TEST_VERBOSE");
    setenv("IVM_TEST_RATIO", "1.5x", 1);
    cr_assert_eq(ivm_config_load_env(fields, &cfg, err, sizeof(err)),
                 IVM_ERROR_INVALID_VALUE);
}

Test(config, option_with_separate_value)
{
    char *argv[] = {"prog", "--test-count", "7", "--test-name", "abc", NULL};
    int first = -1, help = -1;

    cr_assert_eq(parse(argv, &first, &help), IVM_SUCCESS, "%s", err);
    cr_assert_eq(cfg.count, 7);
    cr_assert_str_eq(cfg.name, "abc");
    cr_assert_eq(first, 5, "no positional argument: first = argc");
    cr_assert_eq(help, 0);
}

Test(config, option_with_equals)
{
    char *argv[] = {"prog", "--test-count=9", "--test-name=a=b", "--test-ratio=1e3", NULL};
    int first = -1, help = -1;

    cr_assert_eq(parse(argv, &first, &help), IVM_SUCCESS, "%s", err);
    cr_assert_eq(cfg.count, 9);
    cr_assert_str_eq(cfg.name, "a=b", "only the first '=' separates");
    cr_assert_float_eq(cfg.ratio, 1000.0, 1e-9);
    cr_assert_eq(first, 4);
}

Test(config, help_and_version_requests)
{
    char *help[] = {"prog", "--test-count", "3", "--help", NULL};
    char *version[] = {"prog", "-V", "--test-count=4", NULL};
    char *both[] = {"prog", "--version", "-h", NULL};
    int first, ask = -1;

    cr_assert_eq(parse(help, &first, &ask), IVM_SUCCESS, "%s", err);
    cr_assert_eq(ask, IVM_CONFIG_ASK_HELP);
    cr_assert_eq(parse(version, &first, &ask), IVM_SUCCESS, "%s", err);
    cr_assert_eq(ask, IVM_CONFIG_ASK_VERSION);
    cr_assert_eq(cfg.count, 4, "options after --version still parse");
    cr_assert_eq(parse(both, &first, &ask), IVM_SUCCESS, "%s", err);
    cr_assert_eq(ask, IVM_CONFIG_ASK_HELP, "--help wins over --version");
}

Test(config, empty_string_value)
{
    char *argv[] = {"prog", "--test-name=", NULL};
    int first, help;

    cr_assert_eq(parse(argv, &first, &help), IVM_SUCCESS, "%s", err);
    cr_assert_str_eq(cfg.name, "");
}

Test(config, flags)
{
    char *on[] = {"prog", "--test-verbose", NULL};
    char *off[] = {"prog", "--no-test-verbose", NULL};
    char *eq_no[] = {"prog", "--test-verbose=no", NULL};
    char *eq_true[] = {"prog", "--test-verbose=true", NULL};
    int first, help;

    cr_assert_eq(parse(on, &first, &help), IVM_SUCCESS, "%s", err);
    cr_assert_eq(cfg.verbose, 1);
    cr_assert_eq(first, 2, "a flag takes no value from the next argument");
    cr_assert_eq(parse(off, &first, &help), IVM_SUCCESS, "%s", err);
    cr_assert_eq(cfg.verbose, 0);
    cr_assert_eq(parse(eq_true, &first, &help), IVM_SUCCESS, "%s", err);
    cr_assert_eq(cfg.verbose, 1);
    cr_assert_eq(parse(eq_no, &first, &help), IVM_SUCCESS, "%s", err);
    cr_assert_eq(cfg.verbose, 0);
}

Test(config, flag_does_not_swallow_positional)
{
    char *argv[] = {"prog", "--test-verbose", "file.txt", NULL};
    int first, help;

    cr_assert_eq(parse(argv, &first, &help), IVM_SUCCESS, "%s", err);
    cr_assert_eq(cfg.verbose, 1);
    cr_assert_eq(first, 2);
}

Test(config, no_prefix_only_for_flags)
{
    char *argv[] = {"prog", "--no-test-count", NULL};
    int first, help;

    cr_assert_eq(parse(argv, &first, &help), IVM_ERROR_INVALID_VALUE);
    cr_assert_eq(cfg.count, 42);
}

Test(config, bad_flag_value)
{
    char *argv[] = {"prog", "--test-verbose=maybe", NULL};
    int first, help;

    cr_assert_eq(parse(argv, &first, &help), IVM_ERROR_INVALID_VALUE);
    cr_assert_neq(err[0], '\0');
}

Test(config, unknown_option)
{
    char *argv[] = {"prog", "--test-count", "3", "--bogus-option", "x", NULL};
    int first, help;

    cr_assert_eq(parse(argv, &first, &help), IVM_ERROR_INVALID_VALUE);
    cr_assert(strstr(err, "bogus-option") != NULL, "message names the option: '%s'", err);
}

Test(config, unknown_option_with_value)
{
    char *argv[] = {"prog", "--bogus=1", NULL};
    int first, help;

    cr_assert_eq(parse(argv, &first, &help), IVM_ERROR_INVALID_VALUE);
    cr_assert(strstr(err, "bogus") != NULL, "'%s'", err);
}

Test(config, option_prefix_is_not_a_match)
{
    char *argv[] = {"prog", "--test-coun=3", NULL};
    char *argv2[] = {"prog", "--test-countx=3", NULL};
    int first, help;

    cr_assert_eq(parse(argv, &first, &help), IVM_ERROR_INVALID_VALUE);
    cr_assert_eq(parse(argv2, &first, &help), IVM_ERROR_INVALID_VALUE);
}

Test(config, bad_int)
{
    static const char *const bad[] = {"abc", "12abc", "", "1.5", " "};
    int first, help;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
        char *argv[] = {"prog", "--test-count", (char *)bad[i], NULL};
        err[0] = '\0';
        cr_assert_eq(parse(argv, &first, &help), IVM_ERROR_INVALID_VALUE, "value '%s'",
                     bad[i]);
        cr_assert_neq(err[0], '\0', "an error message for '%s'", bad[i]);
        cr_assert_eq(cfg.count, 42, "'%s' not stored", bad[i]);
    }
}

Test(config, int_out_of_range)
{
    char *argv[] = {"prog", "--test-count=99999999999999999999999", NULL};
    int first, help;

    cr_assert_eq(parse(argv, &first, &help), IVM_ERROR_INVALID_VALUE);
}

Test(config, missing_value)
{
    char *argv[] = {"prog", "--test-count", NULL};
    int first, help;

    cr_assert_eq(parse(argv, &first, &help), IVM_ERROR_INVALID_VALUE);
    cr_assert(strstr(err, "test-count") != NULL, "'%s'", err);
}

Test(config, stops_at_first_positional)
{
    char *argv[] = {"prog", "--test-count", "3", "program", "--test-verbose", "arg", NULL};
    int first, help;

    cr_assert_eq(parse(argv, &first, &help), IVM_SUCCESS, "%s", err);
    cr_assert_eq(first, 3);
    cr_assert_eq(cfg.count, 3);
    cr_assert_eq(cfg.verbose, 0, "options after the program belong to the program");
}

Test(config, single_dash_is_positional)
{
    char *argv[] = {"prog", "-", "--test-verbose", NULL};
    char *argv2[] = {"prog", "-x", NULL};
    int first, help;

    cr_assert_eq(parse(argv, &first, &help), IVM_SUCCESS, "%s", err);
    cr_assert_eq(first, 1);
    cr_assert_eq(cfg.verbose, 0);
    cr_assert_eq(parse(argv2, &first, &help), IVM_SUCCESS, "%s", err);
    cr_assert_eq(first, 1);
}

Test(config, double_dash_ends_options)
{
    char *argv[] = {"prog", "--test-verbose", "--", "--test-count", "5", NULL};
    int first, help;

    cr_assert_eq(parse(argv, &first, &help), IVM_SUCCESS, "%s", err);
    cr_assert_eq(first, 3, "first argument after \"--\"");
    cr_assert_eq(cfg.verbose, 1);
    cr_assert_eq(cfg.count, 42);
}

Test(config, double_dash_last)
{
    char *argv[] = {"prog", "--", NULL};
    int first, help;

    cr_assert_eq(parse(argv, &first, &help), IVM_SUCCESS, "%s", err);
    cr_assert_eq(first, 2);
}

Test(config, help)
{
    char *argv[] = {"prog", "--help", NULL};
    char *argv2[] = {"prog", "-h", "--test-count", "1", NULL};
    char *argv3[] = {"prog", NULL};
    int first, help = 0;

    cr_assert_eq(parse(argv, &first, &help), IVM_SUCCESS);
    cr_assert_eq(help, 1);
    help = 0;
    cr_assert_eq(parse(argv2, &first, &help), IVM_SUCCESS);
    cr_assert_eq(help, 1);
    cr_assert_eq(cfg.count, 1);
    help = 7;
    cr_assert_eq(parse(argv3, &first, &help), IVM_SUCCESS);
    cr_assert_eq(help, 0);
    cr_assert_eq(first, 1);
}

Test(config, precedence_default_env_args)
{
    char *argv[] = {"prog", "--test-count", "3", NULL};
    int first, help;

    setenv("IVM_TEST_COUNT", "2", 1);
    setenv("IVM_TEST_NAME", "env", 1);
    cr_assert_eq(ivm_config_load_env(fields, &cfg, err, sizeof(err)), IVM_SUCCESS);
    cr_assert_eq(parse(argv, &first, &help), IVM_SUCCESS, "%s", err);
    cr_assert_eq(cfg.count, 3, "the command line wins over the environment");
    cr_assert_str_eq(cfg.name, "env", "the environment wins over the default");
}

Test(config, set_by_name)
{
    cr_assert_eq(ivm_config_set(fields, &cfg, "test-name", "set", err, sizeof(err)),
                 IVM_SUCCESS);
    cr_assert_str_eq(cfg.name, "set");
    cr_assert_eq(ivm_config_set(fields, &cfg, "test-count", "0x10", err, sizeof(err)),
                 IVM_SUCCESS);
    cr_assert_eq(cfg.count, 16);
    cr_assert_eq(ivm_config_set(fields, &cfg, "nope", "1", err, sizeof(err)),
                 IVM_ERROR_INVALID_VALUE);
    cr_assert_eq(ivm_config_set(fields, &cfg, "test-ratio", "x", err, sizeof(err)),
                 IVM_ERROR_INVALID_VALUE);
}

Test(config, help_text_lists_options_and_environment)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);

    cr_assert_not_null(out);
    ivm_config_print_help(fields, out);
    fclose(out);
    cr_assert(strstr(text, "--test-count") != NULL, "%s", text);
    cr_assert(strstr(text, "IVM_TEST_COUNT") != NULL, "%s", text);
    cr_assert(strstr(text, "IVM_TEST_VERBOSE") != NULL, "%s", text);
    cr_assert(strstr(text, "an integer setting") != NULL, "%s", text);
    cr_assert(strstr(text, "42") != NULL, "the default is shown: %s", text);
    free(text);
}

Test(config, release_frees_strings)
{
    ivm_config_release(fields, &cfg);
    cr_assert_null(cfg.name);
}
