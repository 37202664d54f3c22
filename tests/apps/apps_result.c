/* Reading the applications' RESULT line in the apps tests. */
#include "apps_result.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *apps_result_field(const char *out, const char *key)
{
    const char *line = strstr(out, "RESULT app=");
    const char *v, *eol;
    char pat[64];

    if (line == NULL) {
        return NULL;
    }
    snprintf(pat, sizeof(pat), " %s=", key);
    v   = strstr(line, pat);
    eol = strchr(line, '\n');
    if (v == NULL || (eol != NULL && v > eol)) {
        return NULL;
    }
    v += strlen(pat);
    return strndup(v, strcspn(v, " \n"));
}

double apps_share_of(const char *share, const char *name)
{
    size_t n = strlen(name);

    for (const char *p = share; p != NULL && *p != '\0';) {
        if (strncmp(p, name, n) == 0 && p[n] == ':') {
            return strtod(p + n + 1, NULL);
        }
        p = strchr(p, ',');
        p = p != NULL ? p + 1 : NULL;
    }
    return -1.0;
}

void apps_mpi_sanitizer_env(void)
{
    const char *opts = getenv("ASAN_OPTIONS");
    char buf[1024];

    if (opts != NULL && (size_t)snprintf(buf, sizeof(buf), "%s:detect_leaks=0", opts) <
                            sizeof(buf)) {
        setenv("ASAN_OPTIONS", buf, 1);
    }
}
