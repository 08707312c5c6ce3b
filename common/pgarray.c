/*
 * PostgreSQL's array text (see pgarray.h) as JSON array text. Shared by the capture,
 * which sends an array column's value this way (capture/event.c), and the worker, which
 * reads an array attribute of a composite's text (worker/convert.c).
 */
#include "common/pgarray.h"

#include <strings.h>

bool cdc_json_is_number(const char *s, size_t len)
{
    size_t i = 0;
    if (i < len && s[i] == '-')
        i++;
    if (i >= len || s[i] < '0' || s[i] > '9')
        return false;
    if (s[i] == '0' && i + 1 < len && s[i + 1] >= '0' && s[i + 1] <= '9')
        return false;
    while (i < len && s[i] >= '0' && s[i] <= '9')
        i++;
    if (i < len && s[i] == '.') {
        i++;
        if (i >= len || s[i] < '0' || s[i] > '9')
            return false;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= len || s[i] < '0' || s[i] > '9')
            return false;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    return i == len;
}

/* One array element (already unquoted/unescaped into tmp when quoted). */
static void put_elem(cdc_buf_t *b, cdc_value_enc_t enc, const char *s, size_t len, bool quoted)
{
    if (!quoted && len == 4 && strncasecmp(s, "NULL", 4) == 0) {
        cdc_buf_puts(b, "null");
        return;
    }
    switch (enc) {
    case CDC_VENC_INT:
    case CDC_VENC_FLOAT:
    case CDC_VENC_DECIMAL:
        if (cdc_json_is_number(s, len)) {
            cdc_buf_put(b, s, len);
            return;
        }
        break;
    case CDC_VENC_BOOL:
        if (len == 1 && (s[0] == 't' || s[0] == 'f')) {
            cdc_buf_puts(b, s[0] == 't' ? "true" : "false");
            return;
        }
        break;
    default:
        break;
    }
    cdc_buf_json_str(b, s, len);
}

/*
 * Parses a PostgreSQL array literal ("{1,2,NULL}", "{{a,b},{c,d}}", "{\"x y\",z}",
 * optionally prefixed by dimension decoration "[0:1]={...}") into JSON array text.
 */
bool cdc_pg_array_to_json(cdc_buf_t *b, cdc_value_enc_t elem_enc, const char *s, size_t len)
{
    const char *p = s, *end = s + len;
    cdc_buf_t tmp = {0};
    int depth = 0;
    bool need_value = false, ok = false;

    if (p < end && *p == '[') {
        const char *eq = memchr(p, '=', len);
        if (eq == NULL)
            return false;
        p = eq + 1;
    }
    while (p < end) {
        char c = *p;
        if (c == '{') {
            cdc_buf_putc(b, '[');
            depth++;
            need_value = false;
            p++;
            if (p < end && *p == '}')
                continue;
            need_value = true;
            continue;
        }
        if (c == '}') {
            cdc_buf_putc(b, ']');
            depth--;
            p++;
            if (depth == 0)
                break;
            continue;
        }
        if (c == ',') {
            cdc_buf_putc(b, ',');
            p++;
            need_value = true;
            continue;
        }
        if (depth == 0 || !need_value)
            goto cleanup;
        need_value = false;
        cdc_buf_reset(&tmp);
        if (c == '"') {
            p++;
            while (p < end && *p != '"') {
                if (*p == '\\' && p + 1 < end)
                    p++;
                cdc_buf_putc(&tmp, *p);
                p++;
            }
            if (p >= end)
                goto cleanup;
            p++;
            put_elem(b, elem_enc, tmp.data ? tmp.data : "", tmp.len, true);
        } else {
            const char *start = p;
            while (p < end && *p != ',' && *p != '}') {
                if (*p == '\\' && p + 1 < end)
                    p++;
                p++;
            }
            /* unquoted elements may hold backslash escapes only in odd cases */
            for (const char *q = start; q < p; q++) {
                if (*q == '\\' && q + 1 < p)
                    q++;
                cdc_buf_putc(&tmp, *q);
            }
            put_elem(b, elem_enc, tmp.data ? tmp.data : "", tmp.len, false);
        }
    }
    ok = depth == 0 && p == end;
cleanup:
    cdc_buf_free(&tmp);
    return ok && !b->oom;
}
