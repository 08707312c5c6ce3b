/*
 * The payload transformation of `cdcctl dlq replay` (docs/operations.md, "Dead letters:
 * inspection and replay"): an RFC 6902 JSON Patch file applied in process
 * (common/jsonpatch.h), or a shell command run once per record with the payload on its
 * standard input (a memfd, so nothing is written to disk and a large payload cannot
 * block the pipe both ways) and the new payload on its standard output. The command
 * also gets the record in its environment: DLQ_ID, DLQ_TABLE, DLQ_CLASS.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/jsonpatch.h"
#include "tools/cdcctl/cdcctl.h"

struct ctl_transform {
    cdc_jsonpatch_t *patch; /* or */
    char *cmd;
    char describe[300];
};

cdc_err_t ctl_read_file(const char *path, char **out, size_t *len, cdc_error_t *e)
{
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return cdc_error_set(e, CDC_ERR_IO, "could not open \"%s\": %s", path, strerror(errno));
    for (;;) {
        ssize_t r;
        if (cdc_array_reserve(buf, cap, n + 4097, 4096) != CDC_OK) {
            close(fd);
            free(buf);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
        r = read(fd, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            cdc_err_t rc =
                cdc_error_set(e, CDC_ERR_IO, "could not read \"%s\": %s", path, strerror(errno));
            close(fd);
            free(buf);
            return rc;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return CDC_OK;
}

cdc_err_t ctl_transform_open(const char *patch_file, const char *cmd, ctl_transform_t **out,
                             cdc_error_t *e)
{
    ctl_transform_t *t;
    char *text = NULL;
    size_t len = 0;
    cdc_err_t rc;

    *out = NULL;
    if (patch_file != NULL && patch_file[0] == '\0')
        patch_file = NULL;
    if (cmd != NULL && cmd[0] == '\0')
        cmd = NULL;
    if (patch_file == NULL && cmd == NULL)
        return CDC_OK;
    if (patch_file != NULL && cmd != NULL)
        return cdc_error_set(e, CDC_ERR_CONFIG,
                             "--transform and --transform-cmd cannot be given together");
    if ((t = calloc(1, sizeof(*t))) == NULL)
        return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
    if (cmd != NULL) {
        if ((t->cmd = strdup(cmd)) == NULL) {
            free(t);
            return cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
        }
        snprintf(t->describe, sizeof(t->describe), "cmd %s", cmd);
        *out = t;
        return CDC_OK;
    }
    rc = ctl_read_file(patch_file, &text, &len, e);
    if (rc == CDC_OK)
        rc = cdc_jsonpatch_parse(text, len, &t->patch, e);
    free(text);
    if (rc != CDC_OK) {
        cdc_error_prefix(e, "--transform \"%s\"", patch_file);
        e->code = CDC_ERR_CONFIG;
        free(t);
        return CDC_ERR_CONFIG;
    }
    snprintf(t->describe, sizeof(t->describe), "patch %s", patch_file);
    *out = t;
    return CDC_OK;
}

const char *ctl_transform_describe(const ctl_transform_t *t)
{
    return t != NULL ? t->describe : "";
}

void ctl_transform_free(ctl_transform_t *t)
{
    if (t == NULL)
        return;
    cdc_jsonpatch_free(t->patch);
    free(t->cmd);
    free(t);
}

/* Runs the command with the payload on its standard input; its output into *out. */
static cdc_err_t run_cmd(const ctl_transform_t *t, const cdc_dlq_record_t *r, const void *payload,
                         size_t len, char **out, size_t *out_len, cdc_error_t *e)
{
    int in = memfd_create("cdcctl-payload", MFD_CLOEXEC), pipefd[2] = {-1, -1}, status = 0;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    cdc_err_t rc = CDC_OK;
    pid_t pid;

    if (in < 0 || pipe2(pipefd, O_CLOEXEC) != 0) {
        rc = cdc_error_set(e, CDC_ERR_IO, "could not run the transform command: %s",
                           strerror(errno));
        goto done;
    }
    for (size_t off = 0; off < len;) {
        ssize_t w = write(in, (const char *)payload + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            rc = cdc_error_set(e, CDC_ERR_IO, "could not write the payload: %s", strerror(errno));
            goto done;
        }
        off += (size_t)w;
    }
    lseek(in, 0, SEEK_SET);
    fflush(stdout);
    pid = fork();
    if (pid < 0) {
        rc = cdc_error_set(e, CDC_ERR_IO, "could not run the transform command: %s",
                           strerror(errno));
        goto done;
    }
    if (pid == 0) { /* the child: dup2 clears close-on-exec on 0 and 1 */
        if (dup2(in, 0) < 0 || dup2(pipefd[1], 1) < 0)
            _exit(127);
        setenv("DLQ_ID", r->id, 1);
        setenv("DLQ_TABLE", r->table, 1);
        setenv("DLQ_CLASS", r->cls, 1);
        execl("/bin/sh", "sh", "-c", t->cmd, (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);
    pipefd[1] = -1;
    for (;;) {
        ssize_t got;
        if (cdc_array_reserve(buf, cap, n + 4097, 4096) != CDC_OK) {
            rc = cdc_error_set(e, CDC_ERR_NOMEM, "out of memory");
            break;
        }
        got = read(pipefd[0], buf + n, cap - n - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        n += (size_t)got;
    }
    close(pipefd[0]);
    pipefd[0] = -1;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (rc == CDC_OK && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        rc = cdc_error_set(e, CDC_ERR_INVALID, "the transform command %s %d",
                           WIFEXITED(status) ? "exited with status" : "was killed by signal",
                           WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    /* line-oriented tools end their output with a newline that is not the payload's */
    while (rc == CDC_OK && n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    if (rc == CDC_OK && n == 0)
        rc = cdc_error_set(e, CDC_ERR_INVALID, "the transform command wrote no payload");
    if (rc == CDC_OK) {
        buf[n] = '\0';
        *out = buf;
        *out_len = n;
        buf = NULL;
    }
done:
    free(buf);
    if (in >= 0)
        close(in);
    if (pipefd[0] >= 0)
        close(pipefd[0]);
    if (pipefd[1] >= 0)
        close(pipefd[1]);
    return rc;
}

cdc_err_t ctl_transform_apply(ctl_transform_t *t, const cdc_dlq_record_t *r, const void *payload,
                              size_t len, char **out, size_t *out_len, cdc_error_t *e)
{
    *out = NULL;
    *out_len = 0;
    if (t->cmd != NULL)
        return run_cmd(t, r, payload != NULL ? payload : "", payload != NULL ? len : 0, out,
                       out_len, e);
    if (payload == NULL)
        return cdc_error_set(e, CDC_ERR_INVALID, "a tombstone has no payload to patch");
    return cdc_jsonpatch_apply(t->patch, payload, len, out, out_len, e);
}
