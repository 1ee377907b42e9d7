/* Untrusted bytes made safe to show: command lines (another user's process, any bytes), values
 * of CUSHIM_ variables and command-line arguments echoed in messages. Text may be any bytes;
 * what these functions write is valid UTF-8 without control characters (or with them escaped),
 * so it can neither break a one-line message nor drive a terminal.
 * Pure functions on caller-owned buffers: thread-safe, no allocation. */
#ifndef CUSHIM_TEXT_H
#define CUSHIM_TEXT_H

#include <stddef.h>

/* Length of the valid UTF-8 sequence at p (1..4; 1 for ASCII), or 0 if it is not one (a stray
 * continuation byte, an overlong form, a surrogate, a code point above U+10FFFF, or a sequence
 * cut short by the terminating NUL). */
int cushim_utf8_len(const unsigned char *p);

/* For text views (ps, top, stat, run's summary): s with every control character (C0, DEL, C1,
 * Unicode's bidirectional controls such as U+202E, which reorder a line, and U+2028/U+2029) and
 * every byte that is not valid UTF-8 shown as '?', cut at a character boundary to fit len
 * (NUL included), a cut marked by a trailing "..." (when len >= 4). Returns buf. */
char *cushim_text_printable(const char *s, char *buf, size_t len);

/* For one-line messages: s with \n, \r and \t written as those two-character escapes, every
 * other control character (as above), every invisible one (U+00A0, U+00AD, zero-width U+200B..
 * U+200D, U+2060..U+2064, U+FEFF: a quoted value holding one would look like another value) and
 * every byte that is not valid UTF-8 as \xHH; cut at a character
 * (or escape) boundary to fit len (NUL included), a cut marked by a trailing "..." (when
 * len >= 4). Returns buf. */
char *cushim_text_escaped(const char *s, char *buf, size_t len);

/* Edit distance (byte insertions, deletions, replacements and swaps of two neighbours) between the n bytes at a and the
 * string b when it is at most `max`, else max + 1 (also when either is longer than 64 bytes): how
 * near a mistyped name is to a known one, for "did you mean". */
size_t cushim_text_distance(const char *a, size_t n, const char *b, size_t max);

/* "Did you mean": of the `count` known names, the one meant by the n bytes at word, or -1 when
 * none is. In order: the name itself (distance 0); none when two or more names start with the
 * word (s: stat or serve, not ps), unless the word has three bytes or more after the prefix and
 * the nearest name (below) is one of them (--repor: --report); the one name that starts with it,
 * when it has two bytes or more after the `prefix` bytes all names share (CUSHIM_, --; --dev:
 * --device, pin: pinned, not pid);
 * the nearest within two edits (cushim_text_distance) of a name with 6 or more bytes after the
 * prefix, within one of a shorter one (CUSHIM_FOO is not offered CUSHIM_LOG), the first of equally
 * near ones; the longest name of three bytes or more after the prefix that the word starts with
 * (warning: warn). Its distance in *distance (the bytes missing or extra for a start). Pure. */
int cushim_text_nearest(const char *word, size_t n, const char *const *names, int count, size_t prefix,
                        size_t *distance);

/* cushim_text_nearest for a word typed in any case (STAT, Compil, WARNING) among lower-case
 * names: its first 63 bytes with A-Z folded to a-z. Pure. */
int cushim_text_nearest_folded(const char *word, const char *const *names, int count, size_t prefix,
                               size_t *distance);

#endif
