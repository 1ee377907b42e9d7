/* SIMCUDA_* environment variables (README.md, "Environment"). A bad value prints one line on
 * stderr (the variable, the value, what it takes and the default) and keeps the default. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sim.h"

#define GIB (1ull << 30)
#define MIB (1ull << 20)

struct sim_config sim_cfg;

/* One line: the variable, its value, what it takes and the default used instead. */
static void bad(const char *var, const char *value, const char *expected, const char *def)
{
    fprintf(stderr, "simcuda: %s=\"%s\" is not %s; using the default %s\n", var, value, expected, def);
}

#define SIZE_WORDS "(a whole number of bytes, or with a binary unit: 512M, 64MiB, 1g)"

/* "512M", "64MiB", "1g", "4096": binary units, case-insensitive. */
static bool parse_size(const char *s, uint64_t *out)
{
    static const struct { const char *suffix[3]; unsigned shift; } units[] = {
        {{"", "b", "b"}, 0},      {{"k", "kb", "kib"}, 10}, {{"m", "mb", "mib"}, 20},
        {{"g", "gb", "gib"}, 30}, {{"t", "tb", "tib"}, 40},
    };
    char *end;
    while (isspace((unsigned char)*s))
        s++;
    if (!isdigit((unsigned char)*s))
        return false;
    unsigned long long n = strtoull(s, &end, 10);
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++)
        for (int i = 0; i < 3; i++)
            if (strcasecmp(end, units[u].suffix[i]) == 0 && n <= (~0ull >> units[u].shift)) {
                *out = (uint64_t)n << units[u].shift;
                return true;
            }
    return false;
}

static void size_var(const char *var, uint64_t *out, uint64_t def, const char *def_text, bool zero_ok)
{
    const char *v = getenv(var);
    *out = def;
    if (v && (!parse_size(v, out) || (*out == 0 && !zero_ok))) {
        bad(var, v, zero_ok ? "a size " SIZE_WORDS : "a size above 0 " SIZE_WORDS, def_text);
        *out = def;
    }
}

/* "16GiB" for every device, or "0:4GiB,1:8GiB" per device (others keep 16 GiB). */
static void memory_var(void)
{
    const char *v = getenv("SIMCUDA_DEVICE_MEMORY");
    for (int d = 0; d < SIM_MAX_DEVICES; d++)
        sim_cfg.capacity[d] = 16 * GIB;
    if (!v)
        return;
    if (!strchr(v, ':')) {
        uint64_t all;
        if (!parse_size(v, &all)) {
            bad("SIMCUDA_DEVICE_MEMORY", v, "a size " SIZE_WORDS " nor ORDINAL:SIZE,... with ordinals 0..15", "16GiB");
            return;
        }
        for (int d = 0; d < SIM_MAX_DEVICES; d++)
            sim_cfg.capacity[d] = all;
        return;
    }
    char *copy = strdup(v), *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(item, ':'), *end;
        long d = strtol(item, &end, 10);
        uint64_t size;
        if (!colon || end != colon || d < 0 || d >= SIM_MAX_DEVICES || !parse_size(colon + 1, &size)) {
            bad("SIMCUDA_DEVICE_MEMORY", v, "a size " SIZE_WORDS " nor ORDINAL:SIZE,... with ordinals 0..15", "16GiB");
            for (int k = 0; k < SIM_MAX_DEVICES; k++) /* the default, for the entries before it too */
                sim_cfg.capacity[k] = 16 * GIB;
            break;
        }
        sim_cfg.capacity[d] = size;
    }
    free(copy);
}

/* Whether `entry` of CUDA_VISIBLE_DEVICES names physical device d by UUID: "GPU-" and the start
 * of its UUID string, as nvidia-smi prints it (the CUDA MPS guide, CUDA_VISIBLE_DEVICES: "the
 * first few characters of the UUID (including GPU-)"). Byte i of device d's UUID is 0x10*d + i. */
static bool uuid_names(const char *entry, size_t len, int d)
{
    char u[48];
    unsigned char b[16];
    for (int i = 0; i < 16; i++)
        b[i] = (unsigned char)(0x10 * d + i);
    snprintf(u, sizeof u, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return len > 4 && len <= strlen(u) && strncasecmp(entry, u, len) == 0;
}

/* CUDA_VISIBLE_DEVICES (CUDA C++ Programming Guide, "CUDA Environment Variables"): a comma list of
 * device indices or UUIDs; only those devices are visible, numbered in the list's order; an entry
 * that names no device ends the list: the devices before it stay visible ("0,2,-1,1": devices 0
 * and 2). A device listed twice leaves none (as PyTorch's _parse_visible_devices, which follows
 * the driver, says: "Repeated ordinal results in empty set"). Set but empty: no device. Unset:
 * every device, in order. Blanks around an entry are ignored. */
static void visible_devices(int count)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    int n = 0;
    bool listed[SIM_MAX_DEVICES] = {false};
    /* Past the last device too: a 17th entry can only repeat one or name none (listed[] keeps n
     * at most count). */
    for (const char *p = v; p && *p;) {
        while (isspace((unsigned char)*p))
            p++;
        size_t len = strcspn(p, ",");
        size_t word = len;
        while (word > 0 && isspace((unsigned char)p[word - 1]))
            word--;
        int d = -1;
        char *end;
        long i = strtol(p, &end, 10);
        if (end != p && (size_t)(end - p) == word && i >= 0 && i < count)
            d = (int)i;
        for (int k = 0; d < 0 && k < count; k++)
            if (uuid_names(p, word, k))
                d = k;
        if (d < 0)
            break;
        if (listed[d]) {
            n = 0;
            break;
        }
        listed[d] = true;
        sim_cfg.physical[n++] = d;
        p += len;
        if (*p == ',')
            p++;
    }
    if (!v)
        for (n = 0; n < count; n++)
            sim_cfg.physical[n] = n;
    uint64_t capacity[SIM_MAX_DEVICES];
    memcpy(capacity, sim_cfg.capacity, sizeof capacity);
    for (int k = 0; k < n; k++)
        sim_cfg.capacity[k] = capacity[sim_cfg.physical[k]];
    sim_cfg.device_count = n;
}

void sim_config_load(void)
{
    const char *v = getenv("SIMCUDA_DEVICE_COUNT");
    char *end;
    sim_cfg.device_count = 1;
    if (v) {
        long n = strtol(v, &end, 10);
        if (*v && !*end && n >= 0 && n <= SIM_MAX_DEVICES)
            sim_cfg.device_count = (int)n;
        else
            bad("SIMCUDA_DEVICE_COUNT", v, "a whole number 0..16", "1");
    }
    memory_var();
    visible_devices(sim_cfg.device_count);
    v = getenv("SIMCUDA_DEVICE_NAME");
    snprintf(sim_cfg.name, sizeof sim_cfg.name, "%s", v && *v ? v : "cushim simulated device");
    size_var("SIMCUDA_CTX_OVERHEAD", &sim_cfg.ctx_overhead, 300 * MIB, "300MiB", true);
    size_var("SIMCUDA_GRANULARITY", &sim_cfg.granularity, 512, "512", false);
    size_var("SIMCUDA_VMM_GRANULARITY", &sim_cfg.vmm_granularity, 2 * MIB, "2MiB", false);
    v = getenv("SIMCUDA_LAZY_EVENTS");
    sim_cfg.lazy_events = v && strcmp(v, "1") == 0;
    if (v && strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
        bad("SIMCUDA_LAZY_EVENTS", v, "0 or 1", "0");
    v = getenv("SIMCUDA_INSTANTIATE_LOOKUP");
    sim_cfg.instantiate_with_flags = v && strcmp(v, "withflags") == 0;
    if (v && strcmp(v, "v2") != 0 && strcmp(v, "withflags") != 0)
        bad("SIMCUDA_INSTANTIATE_LOOKUP", v, "v2 or withflags", "v2");
    v = getenv("SIMCUDA_STRICT_COPIES");
    sim_cfg.strict_copies = v && strcmp(v, "1") == 0;
    if (v && strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
        bad("SIMCUDA_STRICT_COPIES", v, "0 or 1", "0");
    v = getenv("SIMCUDA_IMPORT_SAME_HANDLE");
    sim_cfg.import_same_handle = v && strcmp(v, "1") == 0;
    if (v && strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
        bad("SIMCUDA_IMPORT_SAME_HANDLE", v, "0 or 1", "0");
    v = getenv("SIMCUDA_BEGIN_CAPTURE_MS");
    if (v) {
        long n = strtol(v, &end, 10);
        if (*v && !*end && n >= 0 && n <= 10000)
            sim_cfg.begin_capture_ms = (uint64_t)n;
        else
            bad("SIMCUDA_BEGIN_CAPTURE_MS", v, "a whole number of milliseconds 0..10000", "0");
    }
    sim_cfg.log_lookups = getenv("SIMCUDA_LOG_LOOKUPS");
    sim_cfg.hide = getenv("SIMCUDA_HIDE");
    sim_cfg.inject = getenv("SIMCUDA_INJECT");
}
