/*
 * The replay driver of the fuzz targets for builds without libFuzzer (gcc, `make asan`,
 * `make test`): runs LLVMFuzzerTestOneInput once per file named on the command line, or per
 * file of a directory named there (its corpus, tests/fuzz/corpus/<target>/). Exits 0 when
 * every input ran (a crash or a sanitizer report aborts), 1 when an input cannot be read.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/fuzz/fuzz.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static int run_file(const char *path, size_t *count)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return 1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf != NULL && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    int bad = ferror(f) || buf == NULL;
    fclose(f);
    if (bad) {
        fprintf(stderr, "%s: cannot read\n", path);
        free(buf);
        return 1;
    }
    /* an exact-size copy, so that ASan sees a read past the input's end */
    uint8_t *exact = malloc(n > 0 ? n : 1);
    if (exact == NULL) {
        free(buf);
        return 1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    (*count)++;
    return 0;
}

static int compare(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *path, size_t *count)
{
    DIR *d = opendir(path);
    if (d == NULL) {
        perror(path);
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof(*names));
            if (nn == NULL) {
                rc = 1;
                break;
            }
            names = nn;
        }
        if ((names[n] = strdup(de->d_name)) == NULL) {
            rc = 1;
            break;
        }
        n++;
    }
    closedir(d);
    if (n > 0)
        qsort(names, n, sizeof(*names), compare);
    for (size_t i = 0; i < n; i++) {
        char file[4096];
        snprintf(file, sizeof(file), "%s/%s", path, names[i]);
        struct stat st;
        if (rc == 0 && stat(file, &st) == 0 && S_ISREG(st.st_mode))
            rc = run_file(file, count);
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    size_t count = 0;
    int rc = 0;

    LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc && rc == 0; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            rc = 1;
        } else if (S_ISDIR(st.st_mode)) {
            rc = run_dir(argv[i], &count);
        } else {
            rc = run_file(argv[i], &count);
        }
    }
    printf("%s: %zu inputs replayed%s\n", argv[0], count, rc ? " (stopped: unreadable input)" : "");
    return rc;
}
