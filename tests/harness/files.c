/*
 * Counting files and directories under a test's scratch directory (harness.h), for
 * tests that check what a module left on disk: no temporary files, the expected table
 * files, directories removed by garbage collection. A plain opendir walk, so a test
 * needs no shell.
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/harness/harness.h"

typedef struct walk {
    const char *suffix; /* files: name suffix (NULL = any) */
    bool recursive;
    long files, dirs;
    size_t bytes;
} walk_t;

static bool walk(const char *dir, walk_t *w)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[4096];
    struct stat sb;

    if (d == NULL)
        return false;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (lstat(path, &sb) != 0)
            continue;
        if (S_ISDIR(sb.st_mode)) {
            w->dirs++;
            if (w->recursive)
                walk(path, w);
        } else if (S_ISREG(sb.st_mode)) {
            size_t n = strlen(de->d_name), sl = w->suffix ? strlen(w->suffix) : 0;
            if (w->suffix == NULL || (n > sl && strcmp(de->d_name + n - sl, w->suffix) == 0)) {
                w->files++;
                w->bytes += (size_t)sb.st_size;
            }
        }
    }
    closedir(d);
    return true;
}

long cdc_test_count_files(const char *dir, const char *suffix, bool recursive, size_t *bytes)
{
    walk_t w = {.suffix = suffix, .recursive = recursive};
    if (!walk(dir, &w))
        return -1;
    if (bytes != NULL)
        *bytes = w.bytes;
    return w.files;
}

long cdc_test_count_dirs(const char *dir)
{
    walk_t w = {.recursive = true};
    return walk(dir, &w) ? w.dirs : -1;
}
