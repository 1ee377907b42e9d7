#include "shim/table.h"

#include <sched.h>
#include <string.h>

#include "shim/arena.h"

static inline uint64_t mix(uint64_t key)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

static inline struct shim_shard *shard_of(struct shim_table *t, uint64_t h)
{
    return &t->shard[h >> 58];
}

static inline void lock(struct shim_shard *s)
{
    unsigned spins = 0;
    while (atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire)) {
        if (++spins > 64) {
            sched_yield();
            spins = 0;
        }
    }
}

static inline void unlock(struct shim_shard *s)
{
    atomic_flag_clear_explicit(&s->lock, memory_order_release);
}

/* Slot index of key in s, or the empty slot where it would go. s->cap > 0. */
static uint32_t probe(const struct shim_shard *s, uint64_t key, uint64_t h)
{
    uint32_t mask = s->cap - 1;
    uint32_t i = (uint32_t)h & mask;
    while (s->slots[i].key != 0 && s->slots[i].key != key)
        i = (i + 1) & mask;
    return i;
}

static int grow(struct shim_shard *s)
{
    uint32_t cap = s->cap ? s->cap * 2 : 16;
    struct shim_entry *slots = arena_alloc((size_t)cap * sizeof *slots);
    if (!slots)
        return -1;
    struct shim_entry *old = s->slots;
    uint32_t old_cap = s->cap;
    s->slots = slots;
    s->cap = cap;
    for (uint32_t i = 0; i < old_cap; i++) {
        if (old[i].key != 0)
            slots[probe(s, old[i].key, mix(old[i].key))] = old[i];
    }
    arena_free(old, (size_t)old_cap * sizeof *old);
    return 0;
}

/* Backward-shift deletion of slot i (linear probing, no tombstones). */
static void remove_at(struct shim_shard *s, uint32_t i)
{
    uint32_t mask = s->cap - 1;
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (s->slots[j].key == 0)
            break;
        uint32_t home = (uint32_t)mix(s->slots[j].key) & mask;
        /* Move j into the hole at i unless its home lies cyclically in (i, j]. */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            s->slots[i] = s->slots[j];
            i = j;
        }
    }
    s->slots[i].key = 0;
    s->count--;
}

int table_put(struct shim_table *t, const struct shim_entry *e, struct shim_entry *old)
{
    uint64_t h = mix(e->key);
    struct shim_shard *s = shard_of(t, h);
    int rc = 0;
    lock(s);
    if ((s->count + 1) * 2 > s->cap && grow(s) != 0) {
        unlock(s);
        return -1;
    }
    uint32_t i = probe(s, e->key, h);
    if (s->slots[i].key != 0) {
        if (old)
            *old = s->slots[i];
        rc = 1;
    } else {
        s->count++;
    }
    s->slots[i] = *e;
    unlock(s);
    return rc;
}

bool table_take(struct shim_table *t, uint64_t key, struct shim_entry *out)
{
    uint64_t h = mix(key);
    struct shim_shard *s = shard_of(t, h);
    bool found = false;
    lock(s);
    if (s->cap) {
        uint32_t i = probe(s, key, h);
        if (s->slots[i].key == key) {
            if (out)
                *out = s->slots[i];
            remove_at(s, i);
            found = true;
        }
    }
    unlock(s);
    return found;
}

bool table_get(struct shim_table *t, uint64_t key, struct shim_entry *out)
{
    uint64_t h = mix(key);
    struct shim_shard *s = shard_of(t, h);
    bool found = false;
    lock(s);
    if (s->cap) {
        uint32_t i = probe(s, key, h);
        if (s->slots[i].key == key) {
            if (out)
                *out = s->slots[i];
            found = true;
        }
    }
    unlock(s);
    return found;
}

bool table_update(struct shim_table *t, uint64_t key, bool (*fn)(struct shim_entry *, void *),
                  void *arg, struct shim_entry *out)
{
    uint64_t h = mix(key);
    struct shim_shard *s = shard_of(t, h);
    bool found = false;
    lock(s);
    if (s->cap) {
        uint32_t i = probe(s, key, h);
        if (s->slots[i].key == key) {
            found = true;
            bool keep = fn(&s->slots[i], arg);
            s->slots[i].key = key;
            if (out)
                *out = s->slots[i];
            if (!keep)
                remove_at(s, i);
        }
    }
    unlock(s);
    return found;
}

unsigned table_drain_if(struct shim_table *t, bool (*pred)(const struct shim_entry *, void *),
                        void (*done)(const struct shim_entry *, void *), void *arg)
{
    unsigned n = 0;
    for (unsigned k = 0; k < SHIM_TABLE_SHARDS; k++) {
        struct shim_shard *s = &t->shard[k];
        lock(s);
        for (uint32_t i = 0; i < s->cap;) {
            if (s->slots[i].key != 0 && pred(&s->slots[i], arg)) {
                struct shim_entry e = s->slots[i];
                remove_at(s, i);
                done(&e, arg);
                n++;
                /* A later entry may have shifted into slot i: look at it again. Entries that
                 * wrap around from the end into slots before i were already seen or are seen
                 * again harmlessly (pred is re-evaluated on them). */
                continue;
            }
            i++;
        }
        unlock(s);
    }
    return n;
}

uint64_t table_count(struct shim_table *t)
{
    uint64_t n = 0;
    for (unsigned k = 0; k < SHIM_TABLE_SHARDS; k++)
        n += t->shard[k].count;
    return n;
}

void table_after_fork_child(struct shim_table *t)
{
    memset(t, 0, sizeof *t);
}
