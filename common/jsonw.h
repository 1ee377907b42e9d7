/* A minimal streaming JSON writer over stdio (output only; cushim never parses JSON).
 * Pretty-prints with 2-space indentation, or writes each top-level value on one line (compact:
 * JSON Lines). Not thread-safe: one writer per stream.
 * Errors: none reported; the caller checks ferror(f). */
#ifndef CUSHIM_JSONW_H
#define CUSHIM_JSONW_H

#include <stdint.h>
#include <stdio.h>

#define JSONW_MAX_DEPTH 16

struct jsonw {
    FILE *f;
    int depth;
    int compact; /* 1: no line breaks or indentation inside a top-level value */
    int first[JSONW_MAX_DEPTH]; /* no member written yet at this depth */
};

/* A writer to f; every top-level value ends with a newline. jsonw_init_compact: each on one
 * line, without spaces (JSON Lines, https://jsonlines.org). */
void jsonw_init(struct jsonw *w, FILE *f);
void jsonw_init_compact(struct jsonw *w, FILE *f);
/* Containers: key is NULL inside arrays / at top level. */
void jsonw_object_begin(struct jsonw *w, const char *key);
void jsonw_object_end(struct jsonw *w);
void jsonw_array_begin(struct jsonw *w, const char *key);
void jsonw_array_end(struct jsonw *w);
void jsonw_u64(struct jsonw *w, const char *key, uint64_t v);
void jsonw_i64(struct jsonw *w, const char *key, int64_t v);
void jsonw_string(struct jsonw *w, const char *key, const char *s); /* NULL -> null */
void jsonw_bool(struct jsonw *w, const char *key, int v);

#endif
