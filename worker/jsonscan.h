/*
 * Fast JSON parsing for the record path. Change events are small, plain JSON documents
 * (ASCII keys, integers, short strings); jansson's general-purpose lexer spends most of
 * the decode time on them. cdc_json_scan() parses such documents directly into a jansson
 * tree identical to what json_loadb(buf, len, 0, ..) returns, and gives up (returns NULL)
 * on anything outside that plain subset: non-ASCII bytes, \u escapes, real numbers,
 * integers of more than 18 digits, deep nesting, and every syntax error. The caller then
 * falls back to json_loadb, which also produces the error message, so results and errors
 * are exactly jansson's.
 */
#ifndef CDC_WORKER_JSONSCAN_H
#define CDC_WORKER_JSONSCAN_H

#include <stddef.h>
#include <string.h>

/* jansson's types (the callers that walk a tree include <jansson.h>) */
typedef struct json_t json_t;
typedef struct json_error_t json_error_t;

/*
 * Parses buf[0..len) (a top-level object or array, nothing but whitespace after it).
 * Returns a new reference owned by the caller, or NULL when the document is outside the
 * fast subset (call json_loadb then).
 */
json_t *cdc_json_scan(const char *buf, size_t len);

/* cdc_json_scan, falling back to json_loadb(buf, len, 0, err) (err may be NULL). */
json_t *cdc_json_load(const char *buf, size_t len, json_error_t *err);

/*
 * cdc_json_load for a tree that lives only until cdc_json_scope_end() on this thread (the
 * record path: one event at a time). The fast path takes the tree's nodes from a
 * per-thread arena instead of malloc (jansson's frees of them are no-ops), which saves
 * most of the allocator work of building and freeing a tree per event. Rules: call
 * cdc_json_scope_end() after the last json_decref of the tree and before the next
 * cdc_json_load_scoped on the thread; no node of the tree (or pointer into one) may be
 * kept past it, nor handed to another thread. Values added to the tree later, and the
 * json_loadb fallback, use malloc as usual.
 */
json_t *cdc_json_load_scoped(const char *buf, size_t len, json_error_t *err);
void cdc_json_scope_end(void);

/* The character a one-letter JSON escape (\" \\ \/ \b \f \n \r \t) stands for, c being
 * the letter after the backslash; -1 for \u and invalid escapes. */
static inline int cdc_json_unescape(unsigned char c)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *p = memchr(from, c, sizeof(from) - 1);
    return p != NULL ? to[p - from] : -1;
}

#endif
