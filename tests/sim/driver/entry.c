/* What every exported entry point does first (SIM_ENTER): count the call per exported symbol,
 * apply SIMCUDA_INJECT, refuse calls before cuInit. Also simcuda_call_count. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "procaddr.h"
#include "sim.h"

#define SIM_MAX_RULES 64

struct inject_rule {
    enum sim_sym sym;
    uint64_t nth; /* 1-based call number; 0: every call */
    CUresult code;
    int signal;   /* `raise=SIGNUM`: raised in the calling thread, then the call goes on */
};

_Atomic uint64_t sim_calls[SIM_SYM_COUNT];
atomic_bool sim_fast_entry;
static atomic_bool initialized;
static struct inject_rule rules[SIM_MAX_RULES];
static unsigned nrules;
static _Atomic uint64_t epoch;

static int by_name(const void *key, const void *elem)
{
    return strcmp(key, *(const char *const *)elem);
}

static bool sym_lookup(const char *name, enum sim_sym *sym)
{
    const char *const *hit = bsearch(name, sim_sym_names, SIM_SYM_COUNT, sizeof *sim_sym_names, by_name);
    if (hit)
        *sym = (enum sim_sym)(hit - sim_sym_names);
    return hit != NULL;
}

/* SIMCUDA_INJECT=SYMBOL:N:CODE[,...]: N is 1-based or `*`; CODE a number, a CUresult name, or
 * `raise=SIGNUM` (the call raises that signal in its thread on entry, then does its work: a signal
 * handler running inside a driver call). */
static void inject_load(const char *spec)
{
    if (!spec)
        return;
    char *copy = strdup(spec), *save = NULL;
    for (char *rule = strtok_r(copy, ",", &save); rule; rule = strtok_r(NULL, ",", &save)) {
        char *n = strchr(rule, ':'), *code = n ? strchr(n + 1, ':') : NULL, *end;
        struct inject_rule r = {0};
        if (!code || nrules == SIM_MAX_RULES) {
            if (!code)
                fprintf(stderr, "simcuda: SIMCUDA_INJECT rule \"%s\" is not SYMBOL:N:CODE; ignored\n", rule);
            else
                fprintf(stderr, "simcuda: SIMCUDA_INJECT rule \"%s\" is past the %d rules kept; ignored\n", rule,
                        SIM_MAX_RULES);
            continue;
        }
        *n++ = '\0';
        *code++ = '\0';
        bool ok = sym_lookup(rule, &r.sym);
        if (strcmp(n, "*") != 0) {
            r.nth = strtoull(n, &end, 10);
            ok = ok && *n && !*end && r.nth > 0;
        }
        if (strncmp(code, "raise=", 6) == 0) {
            long sig = strtol(code + 6, &end, 10);
            r.signal = (int)sig;
            ok = ok && code[6] && !*end && sig > 0 && sig < 65;
        } else {
            long value = strtol(code, &end, 10);
            r.code = (CUresult)value;
            if (!*code || *end)
                ok = ok && sim_error_by_name(code, &r.code);
        }
        if (ok)
            rules[nrules++] = r;
        else
            fprintf(stderr, "simcuda: SIMCUDA_INJECT rule \"%s:%s:%s\" is not SYMBOL:N:CODE (an exported symbol, N "
                            "1 or more or *, CODE a CUresult number or name, or raise=SIGNUM 1..64); ignored\n",
                    rule, n, code);
    }
    free(copy);
}

static void setup_once(void)
{
    sim_config_load();
    inject_load(sim_cfg.inject);
    sim_procaddr_load();
}

void sim_setup(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, setup_once);
}

bool sim_enter(enum sim_sym sym, bool needs_init, CUresult *rc)
{
    /* Fast path once set up: a real driver's entry costs little, and cushim's benchmarks count
     * every instruction the shim's extra driver calls take here. */
    static atomic_bool set_up;
    if (__builtin_expect(!atomic_load_explicit(&set_up, memory_order_acquire), 0)) {
        sim_setup();
        atomic_store_explicit(&set_up, true, memory_order_release);
    }
    uint64_t n = atomic_fetch_add_explicit(&sim_calls[sym], 1, memory_order_relaxed) + 1;
    if (__builtin_expect(nrules == 0, 1))
        return needs_init && !atomic_load_explicit(&initialized, memory_order_relaxed) ?
                   (*rc = CUDA_ERROR_NOT_INITIALIZED, true) : false;
    for (unsigned i = 0; i < nrules; i++)
        if (rules[i].sym == sym && (rules[i].nth == 0 || rules[i].nth == n)) {
            if (rules[i].signal) {
                raise(rules[i].signal);
                continue;
            }
            *rc = rules[i].code;
            return true;
        }
    if (needs_init && !atomic_load(&initialized)) {
        *rc = CUDA_ERROR_NOT_INITIALIZED;
        return true;
    }
    return false;
}

void sim_set_initialized(void)
{
    atomic_store(&initialized, true);
    /* From now on entries take the inline path, unless SIMCUDA_INJECT has rules. */
    sim_setup();
    if (nrules == 0)
        atomic_store_explicit(&sim_fast_entry, true, memory_order_release);
}

uint64_t sim_epoch_next(void)
{
    return atomic_fetch_add(&epoch, 1) + 1;
}

uint64_t simcuda_call_count(const char *symbol)
{
    enum sim_sym sym;
    return symbol && sym_lookup(symbol, &sym) ? atomic_load(&sim_calls[sym]) : 0;
}
