#include "common/text.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int cushim_utf8_len(const unsigned char *p)
{
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    int n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    /* Overlong 3- and 4-byte forms, UTF-16 surrogates, beyond U+10FFFF (RFC 3629, section 4). */
    if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0) || (c == 0xf0 && p[1] < 0x90) ||
        (c == 0xf4 && p[1] >= 0x90))
        return 0;
    return n;
}

/* A control character: C0, DEL, C1 (U+0080..U+009F, encoded C2 80..C2 9F), or one of Unicode's
 * bidirectional controls (the Bidi_Control property: U+061C, U+200E, U+200F, U+202A..U+202E,
 * U+2066..U+2069), which reorder what follows on the line: a command line holding U+202E could
 * show another pid or figure than its own ("Trojan Source", CVE-2021-42574); and the line and
 * paragraph separators U+2028 and U+2029, which some viewers take as line breaks. */
static int control(const unsigned char *p, int n)
{
    return (n == 1 && (p[0] < 0x20 || p[0] == 0x7f)) || (n == 2 && p[0] == 0xc2 && p[1] < 0xa0) ||
           (n == 2 && p[0] == 0xd8 && p[1] == 0x9c) ||
           (n == 3 && p[0] == 0xe2 && p[1] == 0x80 && (p[2] == 0x8e || p[2] == 0x8f || (p[2] >= 0xa8 && p[2] <= 0xae))) ||
           (n == 3 && p[0] == 0xe2 && p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9);
}

/* A character that shows as nothing or as a plain space, so that a quoted value holding one looks
 * like another value ("stat\u200b" like "stat"): U+00A0 (no-break space), U+00AD (soft hyphen),
 * U+200B..U+200D (zero-width space, non-joiner, joiner), U+2060..U+2064 (word joiner, invisible
 * operators) and U+FEFF (zero-width no-break space, a byte order mark). Escaped in messages; a
 * command line keeps them (ps, top: what the program was given). */
static int invisible(const unsigned char *p, int n)
{
    return (n == 2 && p[0] == 0xc2 && (p[1] == 0xa0 || p[1] == 0xad)) ||
           (n == 3 && p[0] == 0xe2 && p[1] == 0x80 && p[2] >= 0x8b && p[2] <= 0x8d) ||
           (n == 3 && p[0] == 0xe2 && p[1] == 0x81 && p[2] >= 0xa0 && p[2] <= 0xa4) ||
           (n == 3 && p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf);
}

static size_t escape(const unsigned char *p, int n, char *out);

/* One pass for both forms: a character that is kept is copied, another one is replaced by what
 * `replace` writes for it (into out, returning its length); nothing is cut inside a character
 * or its replacement. Returns whether all of s fitted. */
static bool fill(const char *s, char *buf, size_t len,
                 size_t (*replace)(const unsigned char *p, int n, char *out))
{
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = cushim_utf8_len(p);
        char rep[5 * 4 + 1];
        const char *out = (const char *)p;
        size_t k = (size_t)n;
        if (n == 0 || control(p, n) || (replace == escape && invisible(p, n)))
            out = rep, k = replace(p, n, rep);
        if (o + k + 1 > len)
            break;
        memcpy(buf + o, out, k);
        o += k;
        p += n ? (size_t)n : 1;
    }
    buf[o] = '\0';
    return *p == '\0';
}

/* fill, and when s does not fit, as much as fits before "..." (so a cut is never silent). */
static char *render(const char *s, char *buf, size_t len,
                    size_t (*replace)(const unsigned char *p, int n, char *out))
{
    if (len == 0)
        return buf;
    if (!fill(s, buf, len, replace) && len >= 4) {
        fill(s, buf, len - 3, replace);
        strcat(buf, "...");
    }
    return buf;
}

static size_t question_mark(const unsigned char *p, int n, char *out)
{
    (void)p, (void)n;
    out[0] = '?';
    return 1;
}

static size_t escape(const unsigned char *p, int n, char *out)
{
    if (n == 1 && (*p == '\n' || *p == '\r' || *p == '\t')) {
        out[0] = '\\', out[1] = *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't';
        return 2;
    }
    size_t k = 0;
    for (int i = 0; i < (n ? n : 1); i++)
        k += (size_t)snprintf(out + k, 5, "\\x%02x", p[i]);
    return k;
}

char *cushim_text_printable(const char *s, char *buf, size_t len)
{
    return render(s, buf, len, question_mark);
}

char *cushim_text_escaped(const char *s, char *buf, size_t len)
{
    return render(s, buf, len, escape);
}

size_t cushim_text_distance(const char *a, size_t n, const char *b, size_t max)
{
    enum { MAXN = 64 };
    size_t m = strlen(b);
    if (n > MAXN || m > MAXN || (m > n ? m - n : n - m) > max)
        return max + 1;
    /* Rows k-2, k-1 and k of the table (optimal string alignment: a swap of two neighbours is
     * one edit, as in "--quite"). */
    size_t r0[MAXN + 1], r1[MAXN + 1], r2[MAXN + 1], *two = r0, *one = r1, *cur = r2;
    for (size_t j = 0; j <= m; j++)
        one[j] = j;
    for (size_t k = 1; k <= n; k++) {
        cur[0] = k;
        for (size_t j = 1; j <= m; j++) {
            size_t d = one[j - 1] + (a[k - 1] != b[j - 1]);
            if (one[j] + 1 < d)
                d = one[j] + 1;
            if (cur[j - 1] + 1 < d)
                d = cur[j - 1] + 1;
            if (k > 1 && j > 1 && a[k - 1] == b[j - 2] && a[k - 2] == b[j - 1] && two[j - 2] + 1 < d)
                d = two[j - 2] + 1;
            cur[j] = d;
        }
        size_t *t = two;
        two = one;
        one = cur;
        cur = t;
    }
    return one[m] <= max ? one[m] : max + 1;
}

int cushim_text_nearest(const char *word, size_t n, const char *const *names, int count, size_t prefix,
                        size_t *distance)
{
    int best = -1;
    size_t best_d = 3;
    for (int i = 0; i < count; i++) {
        size_t limit = strlen(names[i]) >= prefix + 6 ? 2 : 1, d = cushim_text_distance(word, n, names[i], limit);
        if (d <= limit && d < best_d) {
            best_d = d;
            best = i;
        }
    }
    /* Before a near name, the start of exactly one name, two bytes or more past the prefix (--dev:
     * --device; pin: pinned, not pid), as getopt_long takes a unique start; offered, never taken.
     * The start of two or more is none of them, and no near name either (s: stat or serve, not ps;
     * found by an attack trial). */
    int start = -1, starts = 0;
    for (int i = 0; best_d > 0 && i < count; i++)
        if (strlen(names[i]) > n && strncmp(names[i], word, n) == 0) {
            starts++;
            start = i;
        }
    if (starts > 1 || (starts == 1 && n < prefix + 2)) {
        start = -1;
        /* Two or more start so: none, unless the word has three bytes or more past the prefix and
         * the near name is one of them (--repor: --report, not --report-format; an attack trial:
         * the rule hid that), as a short word is too little to tell (pi: pinned or pid). */
        if (starts > 1 && !(best >= 0 && n >= prefix + 3 && strncmp(names[best], word, n) == 0)) {
            *distance = 3;
            return -1;
        }
    }
    /* Else the longest name the word starts with, three bytes or more past the prefix (warning:
     * warn, CUSHIM_LOG_LEVEL: CUSHIM_LOG, CUSHIM_OFFLOAD_MINIMUM: CUSHIM_OFFLOAD_MIN). */
    int within = -1;
    for (int i = 0; best < 0 && start < 0 && i < count; i++) {
        size_t len = strlen(names[i]);
        if (len >= prefix + 3 && len < n && strncmp(names[i], word, len) == 0 &&
            (within < 0 || len > strlen(names[within])))
            within = i;
    }
    if (within >= 0) {
        best = within;
        best_d = n - strlen(names[within]);
    }
    if (start >= 0) {
        best = start;
        best_d = strlen(names[start]) - n;
    }
    *distance = best_d;
    return best;
}

int cushim_text_nearest_folded(const char *word, const char *const *names, int count, size_t prefix,
                               size_t *distance)
{
    char lower[64];
    size_t n = strlen(word);
    if (n >= sizeof lower)
        n = sizeof lower - 1;
    for (size_t i = 0; i < n; i++)
        lower[i] = word[i] >= 'A' && word[i] <= 'Z' ? (char)(word[i] - 'A' + 'a') : word[i];
    lower[n] = '\0';
    return cushim_text_nearest(lower, n, names, count, prefix, distance);
}
