/* Parsing and printing of sizes, booleans and enumerations (DESIGN.md "Configuration").
 * Pure functions on caller-owned buffers: thread-safe, no allocation. */
#ifndef CUSHIM_UNITS_H
#define CUSHIM_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Parses a byte size: an integer with an optional suffix, case-insensitive: B, K/KB/KiB/Ki,
 * M/MB/MiB/Mi, G/GB/GiB/Gi, T/TB/TiB/Ti (all binary: K = 1024; Ki is Kubernetes' spelling), e.g.
 * "512M", "64MiB", "1g", "1Gi", "4096".
 * Surrounding blanks are not accepted. Returns 0 and sets *out, -1 for what is not a size (empty,
 * junk), -2 for a size of 2^64 bytes or more. */
int cushim_parse_size(const char *s, uint64_t *out);

/* Parses 1/0/true/false/yes/no/on/off (case-insensitive). Returns 0 and sets *out, or -1. */
int cushim_parse_bool(const char *s, int *out);

/* Index of `s` among the '|'-separated `choices` ("off|error|warn"), or -1. */
int cushim_parse_enum(const char *choices, const char *s);

/* Copies the n-th (0-based) choice of `choices` into buf (cut to len-1 bytes, NUL-terminated
 * when len > 0); returns buf. n beyond the last choice gives ""; a negative n gives the first
 * choice. */
char *cushim_enum_name(const char *choices, int n, char *buf, size_t len);

/* Parses a non-negative decimal integer that fits in `max`; returns 0 or -1. */
int cushim_parse_u64(const char *s, uint64_t max, uint64_t *out);

/* Formats bytes in binary units: "0 B", "255 B", "1.00 KiB", "1.50 GiB" (3 significant digits,
 * exact integers below 1024). Writes at most len bytes, NUL-terminated; returns buf. */
char *cushim_format_bytes(uint64_t bytes, char *buf, size_t len);

/* a + b, or UINT64_MAX when that would wrap (sums of counters read from untrusted segments). */
static inline uint64_t cushim_sat_add(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

#endif
