#include "common/units.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

int cushim_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (!s || !*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        unsigned d = (unsigned)(*s - '0');
        if (v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int cushim_parse_size(const char *s, uint64_t *out)
{
    static const struct { const char *suffix; unsigned shift; } units[] = {
        {"", 0},    {"b", 0},    {"k", 10},   {"kb", 10},  {"kib", 10}, {"m", 20},
        {"mb", 20}, {"mib", 20}, {"g", 30},   {"gb", 30},  {"gib", 30}, {"t", 40},
        {"tb", 40}, {"tib", 40}, {"ki", 10}, {"mi", 20}, {"gi", 30}, {"ti", 40}, /* Kubernetes' spelling */
    };
    char digits[32];
    size_t n = 0;
    if (!s)
        return -1;
    /* Leading zeros say nothing (but "0" is a size). */
    while (s[0] == '0' && s[1] >= '0' && s[1] <= '9')
        s++;
    while (s[n] >= '0' && s[n] <= '9')
        n++;
    if (n == 0)
        return -1;
    /* 32 digits or more (no leading zero): 2^64 or more, when a unit follows. */
    memcpy(digits, s, n < sizeof digits ? n : sizeof digits - 1);
    digits[n < sizeof digits ? n : sizeof digits - 1] = '\0';
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcasecmp(s + n, units[i].suffix) != 0)
            continue;
        uint64_t v;
        if (n >= sizeof digits || cushim_parse_u64(digits, UINT64_MAX >> units[i].shift, &v) != 0)
            return -2; /* digits and a unit, but 2^64 bytes or more */
        *out = v << units[i].shift;
        return 0;
    }
    return -1;
}

int cushim_parse_bool(const char *s, int *out)
{
    static const char *yes[] = {"1", "true", "yes", "on"};
    static const char *no[] = {"0", "false", "no", "off"};
    if (!s)
        return -1;
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}

int cushim_parse_enum(const char *choices, const char *s)
{
    size_t len = s ? strlen(s) : 0;
    int index = 0;
    if (!s || !*s)
        return -1;
    for (const char *p = choices; *p; index++) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && strncasecmp(p, s, n) == 0)
            return index;
        if (!bar)
            break;
        p = bar + 1;
    }
    return -1;
}

char *cushim_enum_name(const char *choices, int n, char *buf, size_t len)
{
    const char *p = choices;
    if (len == 0)
        return buf;
    buf[0] = '\0';
    for (int i = 0; i < n && p; i++) {
        p = strchr(p, '|');
        if (p)
            p++;
    }
    if (p) {
        const char *bar = strchr(p, '|');
        size_t k = bar ? (size_t)(bar - p) : strlen(p);
        if (k >= len)
            k = len - 1;
        memcpy(buf, p, k);
        buf[k] = '\0';
    }
    return buf;
}

char *cushim_format_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
        return buf;
    }
    unsigned u = 0;
    double v = (double)bytes;
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    /* Round to three significant digits, carrying into the next unit where the rounding would
     * show 1024 (%.0f of 1023.5 and over). */
    if (v >= 1023.5 && u < 6) {
        v /= 1024.0;
        u++;
    }
    if (v < 9.995)
        snprintf(buf, len, "%.2f %s", v, names[u]);
    else if (v < 99.95)
        snprintf(buf, len, "%.1f %s", v, names[u]);
    else
        snprintf(buf, len, "%.0f %s", v, names[u]);
    return buf;
}
