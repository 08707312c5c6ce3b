/*
 * Change-event encoding (see event.h). Values arrive in PostgreSQL's text output form
 * with the session settings the capture forces on its connections (DateStyle=ISO,
 * TimeZone=UTC, bytea_output=hex, extra_float_digits=1), which is what the parsers
 * below rely on.
 */
#include "capture/event.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/hex.h"
#include "common/pgarray.h"

/* ---- buffer ---------------------------------------------------------------------- */

/* "00" .. "99": two digits per division (the envelope has half a dozen integers). */
static const char digit_pairs[201] = "000102030405060708091011121314151617181920212223242526272829"
                                     "303132333435363738394041424344454647484950515253545556575859"
                                     "606162636465666768697071727374757677787980818283848586878889"
                                     "90919293949596979899";

void cdc_buf_put_u64(cdc_buf_t *b, uint64_t v)
{
    char tmp[20];
    int i = 20;
    while (v >= 100) {
        unsigned r = (unsigned)(v % 100) * 2;
        v /= 100;
        tmp[--i] = digit_pairs[r + 1];
        tmp[--i] = digit_pairs[r];
    }
    if (v >= 10) {
        tmp[--i] = digit_pairs[v * 2 + 1];
        tmp[--i] = digit_pairs[v * 2];
    } else {
        tmp[--i] = (char)('0' + v);
    }
    cdc_buf_put(b, tmp + i, (size_t)(20 - i));
}

void cdc_buf_put_i64(cdc_buf_t *b, int64_t v)
{
    if (v < 0) {
        cdc_buf_putc(b, '-');
        cdc_buf_put_u64(b, (uint64_t)0 - (uint64_t)v);
    } else {
        cdc_buf_put_u64(b, (uint64_t)v);
    }
}

/* ---- scalar parsers ---------------------------------------------------------------- */

static bool digits(const char **p, const char *end, int min, int max, int64_t *out)
{
    int64_t v = 0;
    int n = 0;
    while (*p < end && **p >= '0' && **p <= '9' && n < max) {
        v = v * 10 + (**p - '0');
        (*p)++;
        n++;
    }
    *out = v;
    return n >= min;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (astronomical year numbering). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
    int64_t era, yoe, doy, doe;
    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static bool ends_with_bc(const char *s, size_t *len)
{
    if (*len >= 3 && memcmp(s + *len - 3, " BC", 3) == 0) {
        *len -= 3;
        return true;
    }
    return false;
}

/* "YYYY-MM-DD" (4+ digit year) at *p. */
static bool parse_ymd(const char **p, const char *end, bool bc, int64_t *days)
{
    int64_t y, m, d;
    if (!digits(p, end, 4, 9, &y) || *p >= end || **p != '-')
        return false;
    (*p)++;
    if (!digits(p, end, 2, 2, &m) || *p >= end || **p != '-')
        return false;
    (*p)++;
    if (!digits(p, end, 2, 2, &d))
        return false;
    if (m < 1 || m > 12 || d < 1 || d > 31)
        return false;
    if (bc)
        y = 1 - y;
    *days = days_from_civil(y, m, d);
    return true;
}

/* "HH:MM:SS[.ffffff]" at *p. */
static bool parse_hms(const char **p, const char *end, int64_t *micros)
{
    int64_t h, m, s, frac = 0;
    if (!digits(p, end, 2, 2, &h) || *p >= end || **p != ':')
        return false;
    (*p)++;
    if (!digits(p, end, 2, 2, &m) || *p >= end || **p != ':')
        return false;
    (*p)++;
    if (!digits(p, end, 2, 2, &s))
        return false;
    if (*p < end && **p == '.') {
        int n = 0;
        (*p)++;
        while (*p < end && **p >= '0' && **p <= '9') {
            if (n < 6) {
                frac = frac * 10 + (**p - '0');
                n++;
            }
            (*p)++;
        }
        if (n == 0)
            return false;
        while (n++ < 6)
            frac *= 10;
    }
    if (h > 24 || m > 59 || s > 60)
        return false;
    *micros = ((h * 60 + m) * 60 + s) * INT64_C(1000000) + frac;
    return true;
}

bool cdc_event_parse_date(const char *s, size_t len, int64_t *days)
{
    bool bc = ends_with_bc(s, &len);
    const char *p = s, *end = s + len;
    return parse_ymd(&p, end, bc, days) && p == end;
}

bool cdc_event_parse_time(const char *s, size_t len, int64_t *micros)
{
    const char *p = s, *end = s + len;
    return parse_hms(&p, end, micros) && p == end;
}

bool cdc_event_parse_timestamp(const char *s, size_t len, int64_t *micros)
{
    bool bc = ends_with_bc(s, &len);
    const char *p = s, *end = s + len;
    int64_t days, tod;

    if (!parse_ymd(&p, end, bc, &days) || p >= end || *p != ' ')
        return false;
    p++;
    if (!parse_hms(&p, end, &tod))
        return false;
    *micros = days * INT64_C(86400000000) + tod;
    if (p < end && (*p == '+' || *p == '-')) {
        /* zone offset "+HH[:MM[:SS]]": local = UTC + offset, so UTC = local - offset */
        int sign = *p == '-' ? -1 : 1;
        int64_t oh, om = 0, os = 0;
        p++;
        if (!digits(&p, end, 2, 2, &oh))
            return false;
        if (p < end && *p == ':') {
            p++;
            if (!digits(&p, end, 2, 2, &om))
                return false;
            if (p < end && *p == ':') {
                p++;
                if (!digits(&p, end, 2, 2, &os))
                    return false;
            }
        }
        *micros -= sign * ((oh * 60 + om) * 60 + os) * INT64_C(1000000);
    }
    return p == end;
}

void cdc_event_put_base64_of_hex(cdc_buf_t *b, const char *s, size_t len)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uint8_t in[3];
    size_t n = 0, i;

    if (len < 2 || s[0] != '\\' || s[1] != 'x') {
        /* not hex output: keep the text so nothing is lost */
        cdc_buf_json_str(b, s, len);
        return;
    }
    if (!cdc_buf_grow(b, (len - 2) / 2 * 4 / 3 + 8))
        return;
    cdc_buf_putc(b, '"');
    for (i = 2; i + 1 < len; i += 2) {
        int byte = cdc_hex_byte(s + i);
        if (byte < 0)
            break;
        in[n++] = (uint8_t)byte;
        if (n == 3) {
            char o[4] = {tab[in[0] >> 2], tab[((in[0] & 3) << 4) | (in[1] >> 4)],
                         tab[((in[1] & 15) << 2) | (in[2] >> 6)], tab[in[2] & 63]};
            cdc_buf_put(b, o, 4);
            n = 0;
        }
    }
    if (n == 1) {
        char o[4] = {tab[in[0] >> 2], tab[(in[0] & 3) << 4], '=', '='};
        cdc_buf_put(b, o, 4);
    } else if (n == 2) {
        char o[4] = {tab[in[0] >> 2], tab[((in[0] & 3) << 4) | (in[1] >> 4)],
                     tab[(in[1] & 15) << 2], '='};
        cdc_buf_put(b, o, 4);
    }
    cdc_buf_putc(b, '"');
}

/* ---- values ------------------------------------------------------------------------ */

void cdc_event_put_value(cdc_buf_t *b, cdc_value_enc_t enc, uint32_t elem_oid, const char *text,
                         size_t len)
{
    int64_t v;

    switch (enc) {
    case CDC_VENC_BOOL:
        if (len == 1 && (text[0] == 't' || text[0] == 'f')) {
            cdc_buf_puts(b, text[0] == 't' ? "true" : "false");
            return;
        }
        break;
    case CDC_VENC_INT:
    case CDC_VENC_FLOAT:
        if (cdc_json_is_number(text, len)) {
            cdc_buf_put(b, text, len);
            return;
        }
        break; /* NaN, Infinity, -Infinity: strings */
    case CDC_VENC_DATE:
        if (cdc_event_parse_date(text, len, &v)) {
            cdc_buf_put_i64(b, v);
            return;
        }
        break;
    case CDC_VENC_TIME:
        if (cdc_event_parse_time(text, len, &v)) {
            cdc_buf_put_i64(b, v);
            return;
        }
        break;
    case CDC_VENC_TIMESTAMP:
        if (cdc_event_parse_timestamp(text, len, &v)) {
            cdc_buf_put_i64(b, v);
            return;
        }
        break;
    case CDC_VENC_BYTES:
        cdc_event_put_base64_of_hex(b, text, len);
        return;
    case CDC_VENC_ARRAY: {
        cdc_buf_t arr = {0};
        cdc_value_enc_t ee;
        cdc_ice_type_t ice;
        int32_t p, s;
        cdc_schema_map_type(elem_oid, -1, &ice, &p, &s, &ee);
        if (cdc_pg_array_to_json(&arr, ee, text, len)) {
            cdc_buf_json_str(b, arr.data, arr.len);
            cdc_buf_free(&arr);
            return;
        }
        cdc_buf_free(&arr);
        break;
    }
    default:
        break;
    }
    cdc_buf_json_str(b, text, len);
}

/* ---- envelope ---------------------------------------------------------------------- */

static void put_row(cdc_buf_t *b, const cdc_event_t *ev, const cdc_pgo_tuple_t *row, bool key_only)
{
    const cdc_schema_doc_t *schema = ev->schema;
    bool first = true;
    cdc_buf_putc(b, '{');
    for (size_t i = 0; i < schema->ncols && i < row->ncols; i++) {
        const cdc_schema_col_t *c = &schema->cols[i];
        const cdc_pgo_value_t *v = &row->cols[i];
        if (v->kind == CDC_PGO_VAL_UNCHANGED || (key_only && c->key == 0))
            continue;
        if (!first)
            cdc_buf_putc(b, ',');
        first = false;
        if (ev->col_names) {
            cdc_buf_put(b, ev->col_names[i], ev->col_name_lens[i]);
        } else {
            cdc_buf_json_str(b, c->name, strlen(c->name));
            cdc_buf_putc(b, ':');
        }
        if (v->kind == CDC_PGO_VAL_NULL || v->data == NULL)
            cdc_buf_put(b, "null", 4);
        else
            cdc_event_put_value(b, c->enc, c->elem_oid, v->data, v->len);
    }
    cdc_buf_putc(b, '}');
}

void cdc_event_source_head(cdc_buf_t *b, const char *name, const char *db, const char *schema,
                           const char *table, int64_t schema_version)
{
    cdc_buf_puts(b, ",\"source\":{\"version\":");
    cdc_buf_json_str(b, CDC_VERSION, strlen(CDC_VERSION));
    cdc_buf_puts(b, ",\"connector\":\"cdc-capture\",\"name\":");
    cdc_buf_json_str(b, name, strlen(name));
    cdc_buf_puts(b, ",\"db\":");
    cdc_buf_json_str(b, db, strlen(db));
    cdc_buf_puts(b, ",\"schema\":");
    cdc_buf_json_str(b, schema, strlen(schema));
    cdc_buf_puts(b, ",\"table\":");
    cdc_buf_json_str(b, table, strlen(table));
    if (schema_version > 0) {
        cdc_buf_puts(b, ",\"schema_version\":");
        cdc_buf_put_i64(b, schema_version);
    }
}

#define PUT_LIT(b, s) cdc_buf_put((b), (s), sizeof(s) - 1)
/* A literal (a field's name) followed by a number. */
#define PUT_LIT_U64(b, s, v) (PUT_LIT(b, s), cdc_buf_put_u64((b), (v)))
#define PUT_LIT_I64(b, s, v) (PUT_LIT(b, s), cdc_buf_put_i64((b), (v)))

void cdc_event_encode_value(cdc_buf_t *b, const cdc_event_t *ev)
{
    const cdc_schema_doc_t *sc = ev->schema;
    bool any_unchanged = false;

    PUT_LIT(b, "{\"before\":");
    if (ev->before)
        put_row(b, ev, ev->before, ev->before_key_only);
    else
        PUT_LIT(b, "null");
    PUT_LIT(b, ",\"after\":");
    if (ev->after)
        put_row(b, ev, ev->after, false);
    else
        PUT_LIT(b, "null");
    if (ev->source_head)
        cdc_buf_put(b, ev->source_head, ev->source_head_len);
    else
        cdc_event_source_head(b, ev->name, ev->db, sc->pg_schema, sc->pg_table, sc->version);
    PUT_LIT_U64(b, ",\"lsn\":", ev->lsn);
    PUT_LIT_U64(b, ",\"txId\":", ev->xid);
    PUT_LIT_I64(b, ",\"ts_ms\":", ev->source_ts_ms);
    /* Debezium's sequence: ["<commit lsn>","<lsn>"] as a JSON string */
    PUT_LIT_U64(b, ",\"sequence\":\"[\\\"", ev->commit_lsn);
    PUT_LIT_U64(b, "\\\",\\\"", ev->lsn);
    PUT_LIT(b, "\\\"]\",\"snapshot\":\"");
    cdc_buf_puts(b, ev->snapshot);
    if (ev->snapshot_id != NULL) {
        PUT_LIT(b, "\",\"snapshot_id\":");
        cdc_buf_json_str(b, ev->snapshot_id, strlen(ev->snapshot_id));
        PUT_LIT(b, "},\"op\":\"");
    } else {
        PUT_LIT(b, "\"},\"op\":\"");
    }
    cdc_buf_putc(b, ev->op);
    PUT_LIT_I64(b, "\",\"ts_ms\":", ev->ts_ms);
    if (ev->after) {
        for (size_t i = 0; i < sc->ncols && i < ev->after->ncols; i++) {
            if (ev->after->cols[i].kind != CDC_PGO_VAL_UNCHANGED)
                continue;
            cdc_buf_puts(b, any_unchanged ? "," : ",\"unchanged_toast\":[");
            any_unchanged = true;
            cdc_buf_json_str(b, sc->cols[i].name, strlen(sc->cols[i].name));
        }
        if (any_unchanged)
            cdc_buf_putc(b, ']');
        if (any_unchanged && ev->snapshot_pending)
            PUT_LIT(b, ",\"snapshot_pending\":true");
    }
    cdc_buf_putc(b, '}');
}

static const cdc_pgo_value_t *key_value(const cdc_pgo_tuple_t *row, const cdc_pgo_tuple_t *fallback,
                                        size_t i)
{
    if (row && i < row->ncols && row->cols[i].kind != CDC_PGO_VAL_UNCHANGED)
        return &row->cols[i];
    if (fallback && i < fallback->ncols && fallback->cols[i].kind != CDC_PGO_VAL_UNCHANGED)
        return &fallback->cols[i];
    return NULL;
}

bool cdc_event_encode_key(cdc_buf_t *b, const cdc_schema_doc_t *schema, const cdc_pgo_tuple_t *row,
                          const cdc_pgo_tuple_t *fallback)
{
    bool first = true;
    cdc_buf_putc(b, '{');
    for (size_t i = 0; i < schema->ncols; i++) {
        const cdc_schema_col_t *c = &schema->cols[i];
        const cdc_pgo_value_t *v;
        if (c->key == 0)
            continue;
        v = key_value(row, fallback, i);
        if (v == NULL)
            return false;
        if (!first)
            cdc_buf_putc(b, ',');
        first = false;
        cdc_buf_json_str(b, c->name, strlen(c->name));
        cdc_buf_putc(b, ':');
        if (v->kind == CDC_PGO_VAL_NULL || v->data == NULL)
            cdc_buf_puts(b, "null");
        else
            cdc_event_put_value(b, c->enc, c->elem_oid, v->data, v->len);
    }
    cdc_buf_putc(b, '}');
    return !first && !b->oom;
}

bool cdc_event_same_key(const cdc_schema_doc_t *schema, const cdc_pgo_tuple_t *a,
                        const cdc_pgo_tuple_t *b)
{
    for (size_t i = 0; i < schema->ncols; i++) {
        const cdc_pgo_value_t *x, *y;
        if (schema->cols[i].key == 0)
            continue;
        x = key_value(a, NULL, i);
        y = key_value(b, NULL, i);
        if (x == NULL || y == NULL)
            continue; /* unchanged TOAST: the value did not change */
        if (x->kind != y->kind || x->len != y->len ||
            (x->len && memcmp(x->data, y->data, x->len) != 0))
            return false;
    }
    return true;
}

const char *cdc_lsn_str(uint64_t lsn, char *buf, size_t size)
{
    snprintf(buf, size, "%X/%X", (unsigned)(lsn >> 32), (unsigned)(lsn & 0xffffffffu));
    return buf;
}

bool cdc_lsn_parse(const char *s, uint64_t *lsn)
{
    unsigned hi, lo;
    char tail;
    if (s == NULL || sscanf(s, "%X/%X%c", &hi, &lo, &tail) != 2)
        return false;
    *lsn = ((uint64_t)hi << 32) | lo;
    return true;
}
