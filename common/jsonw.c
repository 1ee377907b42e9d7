#include "common/jsonw.h"

#include <inttypes.h>

#include "common/text.h"

void jsonw_init(struct jsonw *w, FILE *f)
{
    w->f = f;
    w->depth = 0;
    w->first[0] = 1;
    w->compact = 0;
}

void jsonw_init_compact(struct jsonw *w, FILE *f)
{
    jsonw_init(w, f);
    w->compact = 1;
}

static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p >= 0x80) {
            /* Command lines are bytes: invalid UTF-8 becomes U+FFFD so the JSON stays valid. */
            int n = cushim_utf8_len(p);
            if (n) {
                fwrite(p, 1, (size_t)n, f);
                p += n - 1;
            } else {
                fputs("\\ufffd", f);
            }
            continue;
        }
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

static void member(struct jsonw *w, const char *key)
{
    if (w->depth > 0) {
        if (w->compact) {
            if (!w->first[w->depth])
                fputc(',', w->f);
        } else {
            fputs(w->first[w->depth] ? "\n" : ",\n", w->f);
            for (int i = 0; i < w->depth; i++)
                fputs("  ", w->f);
        }
        w->first[w->depth] = 0;
    }
    if (key) {
        put_string(w->f, key);
        fputs(w->compact ? ":" : ": ", w->f);
    }
}

static void open_container(struct jsonw *w, const char *key, char c)
{
    member(w, key);
    fputc(c, w->f);
    if (w->depth + 1 < JSONW_MAX_DEPTH)
        w->depth++;
    w->first[w->depth] = 1;
}

static void close_container(struct jsonw *w, char c)
{
    int empty = w->first[w->depth];
    if (w->depth > 0)
        w->depth--;
    if (!empty && !w->compact) {
        fputc('\n', w->f);
        for (int i = 0; i < w->depth; i++)
            fputs("  ", w->f);
    }
    fputc(c, w->f);
    if (w->depth == 0)
        fputc('\n', w->f);
}

void jsonw_object_begin(struct jsonw *w, const char *key) { open_container(w, key, '{'); }
void jsonw_object_end(struct jsonw *w) { close_container(w, '}'); }
void jsonw_array_begin(struct jsonw *w, const char *key) { open_container(w, key, '['); }
void jsonw_array_end(struct jsonw *w) { close_container(w, ']'); }

void jsonw_u64(struct jsonw *w, const char *key, uint64_t v)
{
    member(w, key);
    fprintf(w->f, "%" PRIu64, v);
}

void jsonw_i64(struct jsonw *w, const char *key, int64_t v)
{
    member(w, key);
    fprintf(w->f, "%" PRId64, v);
}

void jsonw_string(struct jsonw *w, const char *key, const char *s)
{
    member(w, key);
    if (s)
        put_string(w->f, s);
    else
        fputs("null", w->f);
}

void jsonw_bool(struct jsonw *w, const char *key, int v)
{
    member(w, key);
    fputs(v ? "true" : "false", w->f);
}
