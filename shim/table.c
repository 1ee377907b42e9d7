#include "shim/table.h"

#include <sched.h>
#include <string.h>

#include "shim/arena.h"

void table_lock_slow(struct shim_shard *s)
{
    unsigned spins = 0;
    while (atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire)) {
        if (++spins > 64) {
            sched_yield();
            spins = 0;
        }
    }
}

/* table_put with the shard's lock taken here. `past_limit` (table_put_back): a shard at its fill
 * limit that cannot grow still takes e while one slot stays empty besides, so that every probe
 * ends. */
static int put_locking(struct shim_table *t, const struct shim_entry *e, struct shim_entry *old,
                       bool past_limit)
{
    uint64_t h = table_mix(e->key);
    struct shim_shard *s = table_shard(t, h);
    table_lock(s);
    if (s->count >= s->limit && table_grow(s) != 0 &&
        (!past_limit || s->cap == 0 || s->count + 1 >= s->cap)) {
        table_unlock(s);
        return -1;
    }
    int rc = table_store(s, table_probe(s, e->key, h), e, old);
    table_unlock(s);
    return rc;
}

int table_put_slow(struct shim_table *t, const struct shim_entry *e, struct shim_entry *old)
{
    return put_locking(t, e, old, false);
}

int table_put_back(struct shim_table *t, const struct shim_entry *e, struct shim_entry *old)
{
    return put_locking(t, e, old, true);
}

int table_put_new_slow(struct shim_table *t, uint64_t key, uint64_t size, uint64_t ctx,
                       uint64_t device_kind_flags, struct shim_entry *old)
{
    struct shim_entry e = {.key = key, .size = size, .ctx = ctx,
                           .device = (int32_t)(uint32_t)device_kind_flags,
                           .kind = (uint16_t)(device_kind_flags >> 32),
                           .flags = (uint16_t)(device_kind_flags >> 48)};
    return table_put_slow(t, &e, old);
}

bool table_take_slow(struct shim_table *t, uint64_t key, struct shim_entry *out)
{
    uint64_t h = table_mix(key);
    struct shim_shard *s = table_shard(t, h);
    bool found = false;
    table_lock(s);
    if (s->cap != 0) {
        uint32_t i = table_probe(s, key, h);
        if (s->slots[i].key == key) {
            if (out)
                *out = s->slots[i];
            table_remove_at(s, i);
            found = true;
        }
    }
    table_unlock(s);
    return found;
}

void table_remove_at_unlock(struct shim_shard *s, uint32_t i)
{
    table_remove_at(s, i);
    table_unlock(s);
}

int table_grow(struct shim_shard *s)
{
    uint32_t cap = s->cap ? s->cap * 2 : 16;
    struct shim_entry *slots = arena_alloc((size_t)cap * sizeof *slots);
    if (!slots)
        return -1;
    struct shim_entry *old = s->slots;
    uint32_t old_cap = s->cap;
    s->slots = slots;
    s->cap = cap;
    s->limit = cap / 2;
    for (uint32_t i = 0; i < old_cap; i++) {
        if (old[i].key != 0)
            slots[table_probe(s, old[i].key, table_mix(old[i].key))] = old[i];
    }
    arena_free(old, (size_t)old_cap * sizeof *old);
    return 0;
}

void table_remove_at(struct shim_shard *s, uint32_t i)
{
    uint32_t mask = s->cap - 1;
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (s->slots[j].key == 0)
            break;
        uint32_t home = table_home(table_mix(s->slots[j].key), mask);
        /* Move j into the hole at i unless its home lies cyclically in (i, j]. */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            s->slots[i] = s->slots[j];
            i = j;
        }
    }
    s->slots[i].key = 0;
    s->count--;
}

bool table_get(struct shim_table *t, uint64_t key, struct shim_entry *out)
{
    uint64_t h = table_mix(key);
    struct shim_shard *s = table_shard(t, h);
    bool found = false;
    table_lock(s);
    if (s->cap) {
        uint32_t i = table_probe(s, key, h);
        if (s->slots[i].key == key) {
            if (out)
                *out = s->slots[i];
            found = true;
        }
    }
    table_unlock(s);
    return found;
}

bool table_update(struct shim_table *t, uint64_t key, bool (*fn)(struct shim_entry *, void *),
                  void *arg, struct shim_entry *out)
{
    uint64_t h = table_mix(key);
    struct shim_shard *s = table_shard(t, h);
    bool found = false;
    table_lock(s);
    if (s->cap) {
        uint32_t i = table_probe(s, key, h);
        if (s->slots[i].key == key) {
            found = true;
            bool keep = fn(&s->slots[i], arg);
            s->slots[i].key = key;
            if (out)
                *out = s->slots[i];
            if (!keep)
                table_remove_at(s, i);
        }
    }
    table_unlock(s);
    return found;
}

int table_upsert(struct shim_table *t, const struct shim_entry *e,
                 void (*fn)(struct shim_entry *, void *), void *arg)
{
    uint64_t h = table_mix(e->key);
    struct shim_shard *s = table_shard(t, h);
    int rc = 0;
    table_lock(s);
    if (s->cap) {
        uint32_t i = table_probe(s, e->key, h);
        if (s->slots[i].key == e->key) {
            fn(&s->slots[i], arg);
            s->slots[i].key = e->key;
            table_unlock(s);
            return 1;
        }
    }
    if (s->count >= s->limit && table_grow(s) != 0) {
        rc = -1;
    } else {
        s->slots[table_probe(s, e->key, h)] = *e;
        s->count++;
    }
    table_unlock(s);
    return rc;
}

int table_add_unless(struct shim_table *t, const struct shim_entry *e, bool (*veto)(void *), void *arg)
{
    uint64_t h = table_mix(e->key);
    struct shim_shard *s = table_shard(t, h);
    int rc = 0;
    table_lock(s);
    if (s->cap && s->slots[table_probe(s, e->key, h)].key == e->key)
        rc = 1;
    else if (veto(arg))
        rc = 2;
    else if (s->count >= s->limit && table_grow(s) != 0)
        rc = -1;
    else {
        s->slots[table_probe(s, e->key, h)] = *e;
        s->count++;
    }
    table_unlock(s);
    return rc;
}

unsigned table_drain_if(struct shim_table *t, bool (*pred)(const struct shim_entry *, void *),
                        void (*done)(const struct shim_entry *, void *), void *arg)
{
    unsigned n = 0;
    for (unsigned k = 0; k < SHIM_TABLE_SHARDS; k++) {
        struct shim_shard *s = &t->shard[k];
        table_lock(s);
        for (uint32_t i = 0; i < s->cap;) {
            if (s->slots[i].key != 0 && pred(&s->slots[i], arg)) {
                struct shim_entry e = s->slots[i];
                table_remove_at(s, i);
                done(&e, arg);
                n++;
                /* A later entry may have shifted into slot i: look at it again. Entries that
                 * wrap around from the end into slots before i were already seen or are seen
                 * again harmlessly (pred is re-evaluated on them). */
                continue;
            }
            i++;
        }
        table_unlock(s);
    }
    return n;
}

unsigned table_for_each(struct shim_table *t, bool (*fn)(struct shim_entry *, void *), void *arg)
{
    unsigned n = 0;
    for (unsigned k = 0; k < SHIM_TABLE_SHARDS; k++) {
        struct shim_shard *s = &t->shard[k];
        table_lock(s);
        for (uint32_t i = 0; i < s->cap; i++)
            if (s->slots[i].key != 0 && fn(&s->slots[i], arg))
                n++;
        table_unlock(s);
    }
    return n;
}

unsigned table_collect_from(struct shim_table *t, unsigned shard, uint32_t *slot,
                            bool (*fn)(struct shim_entry *, void *), void *arg, uint64_t *keys,
                            unsigned max, uint32_t *cap)
{
    unsigned n = 0;
    struct shim_shard *s = &t->shard[shard];
    table_lock(s);
    uint32_t i = *slot;
    for (; i < s->cap && n < max; i++)
        if (s->slots[i].key != 0 && fn(&s->slots[i], arg))
            keys[n++] = s->slots[i].key;
    *slot = i < s->cap ? i : s->cap;
    *cap = s->cap;
    table_unlock(s);
    return n;
}

uint64_t table_count(struct shim_table *t)
{
    uint64_t n = 0;
    for (unsigned k = 0; k < SHIM_TABLE_SHARDS; k++) {
        /* Under the shard's lock, as every write of its count (ThreadSanitizer: read without it,
         * graph_take's count raced with puts and takes on other threads). */
        struct shim_shard *s = &t->shard[k];
        table_lock(s);
        n += s->count;
        table_unlock(s);
    }
    return n;
}

void table_after_fork_child(struct shim_table *t)
{
    memset(t, 0, sizeof *t);
}
