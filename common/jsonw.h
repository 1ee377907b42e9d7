/* A minimal streaming JSON writer over stdio (output only; cushim never parses JSON).
 * Pretty-prints with 2-space indentation, or writes each top-level value on one line (compact:
 * JSON Lines). Not thread-safe: one writer per stream.
 * Errors: none reported; the caller checks ferror(f). The writer never flushes or closes f: the
 * caller owns it. Well-formed output needs well-formed calls (a key for each member of an
 * object, none for an element of an array or a top-level value; every begin ended): nothing is
 * checked. */
#ifndef CUSHIM_JSONW_H
#define CUSHIM_JSONW_H

#include <stdint.h>
#include <stdio.h>

/* Containers may nest JSONW_MAX_DEPTH - 1 deep. Deeper, the depth is clamped (jsonw.c
 * open_container), not refused: separators, indentation and the closing newline go wrong and
 * the output is malformed. cushim's own documents stay far below it. */
#define JSONW_MAX_DEPTH 16

/* A writer's state, in the caller's storage (set by jsonw_init*; nothing to free). */
struct jsonw {
    FILE *f;
    int depth;
    int compact; /* 1: no line breaks or indentation inside a top-level value */
    int first[JSONW_MAX_DEPTH]; /* no member written yet at this depth */
};

/* A writer to f; every top-level object or array ends with a newline (a top-level scalar gets
 * none). jsonw_init_compact: each on one line, without spaces (JSON Lines,
 * https://jsonlines.org). */
void jsonw_init(struct jsonw *w, FILE *f);
void jsonw_init_compact(struct jsonw *w, FILE *f);
/* Containers: key is NULL inside arrays / at top level. */
void jsonw_object_begin(struct jsonw *w, const char *key);
void jsonw_object_end(struct jsonw *w);
void jsonw_array_begin(struct jsonw *w, const char *key);
void jsonw_array_end(struct jsonw *w);
/* Values: one member `"key": v` (key NULL: an array element, or a top-level value). Numbers in
 * decimal as given (no unit is added: the key names it). Strings and keys are escaped (", \ and control
 * characters) and any byte that is not valid UTF-8 becomes \ufffd, so the output stays
 * valid JSON for any bytes. jsonw_bool: v nonzero is true. */
void jsonw_u64(struct jsonw *w, const char *key, uint64_t v);
void jsonw_i64(struct jsonw *w, const char *key, int64_t v);
void jsonw_string(struct jsonw *w, const char *key, const char *s); /* NULL -> null */
void jsonw_bool(struct jsonw *w, const char *key, int v);

#endif
