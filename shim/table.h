/* The shim's tables: what it allocated, keyed by pointer or handle.
 *
 * A table is 64 shards, each a linear-probing hash array (backward-shift deletion, no
 * tombstones) behind its own spin lock. Memory comes from arena.c. Critical sections only touch
 * the array: no driver call, no I/O, so a lock is never held across CUDA.
 *
 * Thread-safety: every function is safe from any thread. Key 0 is reserved (never tracked).
 * Errors: table_put returns -1 when the arena is exhausted (the caller stops tracking that
 * allocation and logs once).
 */
#ifndef CUSHIM_TABLE_H
#define CUSHIM_TABLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Entry flags. */
#define SHIM_F_CAPTURE 0x01u     /* allocated while a stream of the process was capturing */
#define SHIM_F_OFFLOADED 0x02u   /* served from pinned host memory by the offload policy */
#define SHIM_F_SPILLED 0x04u     /* ... because the device request failed for lack of memory */
#define SHIM_F_COMPILE 0x08u     /* allocated in the compile phase */
#define SHIM_F_RESIDENT 0x10u    /* offloaded in compile phase, counted resident in the run phase */
#define SHIM_F_RELEASED 0x20u    /* vmm handle: its cuMemCreate reference was released */
#define SHIM_F_RESERVED 0x40u    /* its bytes were reserved against the device budget (budget.h) */
#define SHIM_F_MULTICAST 0x80u   /* vmm handle: an imported multicast object (no memory of its own) */
#define SHIM_F_UNTRACKED 0x100u  /* vmm mapping: of a handle in no table (kept for cuMemUnmap's walk) */
#define SHIM_F_POOL_GONE 0x200u  /* stream-ordered, in the budget: its pool was destroyed (budget.h) */
/* Never in an entry; an argument of account_alloc_to only: the caller took any waiting phase
 * request before it chose where the memory goes (offload, budget), so the allocation is counted
 * in the phase it was placed in, and a request that came during its driver call waits for the
 * next allocation (a fresh-user trial: a request landing during an offloaded compile allocation
 * moved it to the run phase's offloaded peak, and out of the compile phase's). */
#define SHIM_F_PLACED 0x400u

struct shim_entry {
    uint64_t key;      /* pointer or handle; 0 = empty slot */
    uint64_t size;     /* requested bytes */
    uint64_t ctx;      /* CUcontext the allocation belongs to, 0 if none */
    uint64_t aux;      /* per table: vmm mapping -> handle; pool -> location; a stream-ordered
                        * allocation in the budget -> its pool (0: unknown) */
    int32_t device;    /* ordinal it is counted on, -1 = not counted */
    uint16_t kind;     /* enum cushim_kind */
    uint16_t flags;    /* SHIM_F_* */
    uint32_t refs;     /* vmm handle: references (creates + retains - releases) */
    uint32_t maps;     /* vmm handle: live mappings */
};

#define SHIM_TABLE_SHARDS 64

struct shim_shard {
    atomic_flag lock;
    uint32_t count;
    uint32_t cap;      /* power of two, 0 before first insert */
    struct shim_entry *slots;
    uint32_t limit;    /* cap / 2: an insert at count >= limit grows the shard first */
    char pad[36];
};

struct shim_table {
    struct shim_shard shard[SHIM_TABLE_SHARDS];
};

/* Inserts e (e->key != 0). If the key was present, its old entry is copied to *old (if not NULL)
 * and replaced; returns 1. Returns 0 for a new key, -1 when out of memory. Inline below. */
static inline int table_put(struct shim_table *t, const struct shim_entry *e, struct shim_entry *old);

/* table_put of an entry that was just taken out of t (a refused free's or unmap's put-back),
 * which must not fail for the fill limit: when the shard is at its limit and cannot grow (out of
 * memory), e still goes in while the shard keeps an empty slot besides (count + 1 < cap), past
 * the limit. Returns as table_put: 0 inserted, 1 replaced (old entry to *old if not NULL), -1
 * when the shard has no room at all (nothing done). Thread-safe; out of line (table.c). */
int table_put_back(struct shim_table *t, const struct shim_entry *e, struct shim_entry *old);

/* Removes `key`, copying its entry to *out (if not NULL). Returns true if it was present. */
static inline bool table_take(struct shim_table *t, uint64_t key, struct shim_entry *out);

/* Copies the entry of `key` to *out. Returns true if present. */
bool table_get(struct shim_table *t, uint64_t key, struct shim_entry *out);

/* Calls fn on the entry of `key` under its shard lock; fn may modify it (not its key) and returns
 * true to keep it, false to remove it. The entry as fn left it is copied to *out (if not NULL).
 * Returns true if the key was present. fn must not call into CUDA or the table. */
bool table_update(struct shim_table *t, uint64_t key, bool (*fn)(struct shim_entry *, void *),
                  void *arg, struct shim_entry *out);

/* Under one lock: calls fn on the entry of e->key if present (as table_update, but the entry is
 * always kept), else inserts *e. Returns 1 when fn ran, 0 when e was inserted, -1 when out of
 * memory. fn must not call into CUDA or the table. */
int table_upsert(struct shim_table *t, const struct shim_entry *e,
                 void (*fn)(struct shim_entry *, void *), void *arg);

/* Under one lock: inserts a copy of *e unless the table has an entry for e->key (left as it is)
 * or veto(arg) says no. Returns 1 when an entry was there, 0 when e was inserted, 2 when vetoed,
 * -1 when out of memory. Thread-safe; veto runs under the shard lock, after the lookup, and
 * must only read atomics (a writer that changes what veto reads before it takes the same shard
 * lock is seen). */
int table_add_unless(struct shim_table *t, const struct shim_entry *e, bool (*veto)(void *), void *arg);

/* Removes every entry for which pred returns true, calling done(entry) for each after its
 * removal (under the shard lock: done must only do arithmetic/atomics). Returns how many. */
unsigned table_drain_if(struct shim_table *t, bool (*pred)(const struct shim_entry *, void *),
                        void (*done)(const struct shim_entry *, void *), void *arg);

/* Calls fn on every entry under its shard lock; fn may modify it (not its key) and must only do
 * arithmetic/atomics. Returns how many entries fn returned true for. */
unsigned table_for_each(struct shim_table *t, bool (*fn)(struct shim_entry *, void *), void *arg);

/* Under shard `shard`'s lock, from slot *slot on: calls fn on each entry (fn may modify it, not
 * its key, and must only do arithmetic) and copies to keys[] the keys of up to `max` entries it
 * returns true for. *slot becomes the slot to go on from, *cap the shard's capacity (a caller
 * that sees it change, the shard having grown, starts again from slot 0). Returns how many keys;
 * *slot == *cap once the shard has been gone through. */
unsigned table_collect_from(struct shim_table *t, unsigned shard, uint32_t *slot,
                            bool (*fn)(struct shim_entry *, void *), void *arg, uint64_t *keys,
                            unsigned max, uint32_t *cap);

/* Entries in the table (sum over shards, each read under its lock: not a consistent snapshot
 * under concurrency). Cold: 64 lock round trips; the fast paths keep plain counts. */
uint64_t table_count(struct shim_table *t);

/* In a child after fork(): empty the table without freeing (a parent's lock may be held). */
void table_after_fork_child(struct shim_table *t);

/* ---- inline fast paths (every allocation and free) ---- */

/* Grows shard s (lock held); -1 when out of memory. */
int table_grow(struct shim_shard *s);
/* Backward-shift deletion of slot i (lock held). */
void table_remove_at(struct shim_shard *s, uint32_t i);
/* Contended lock: spins, then yields. */
void table_lock_slow(struct shim_shard *s);

/* Fibonacci hashing: the product's top 6 bits pick the shard, bits 32 and up the slot (the low
 * bits of an aligned pointer are zero, and so are the product's). */
static inline __attribute__((always_inline)) uint64_t table_mix(uint64_t key)
{
    return key * 0x9E3779B97F4A7C15ull;
}

static inline __attribute__((always_inline)) uint32_t table_home(uint64_t h, uint32_t mask)
{
    return (uint32_t)(h >> 32) & mask;
}

static inline __attribute__((always_inline)) struct shim_shard *table_shard(struct shim_table *t, uint64_t h)
{
    struct shim_shard *s = &t->shard[h >> 58];
    /* Kept in one register: the compiler would otherwise rebuild the address at every field. */
    __asm__("" : "+r"(s));
    return s;
}

static inline __attribute__((always_inline)) void table_lock(struct shim_shard *s)
{
    if (__builtin_expect(atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire), 0))
        table_lock_slow(s);
}

static inline __attribute__((always_inline)) void table_unlock(struct shim_shard *s)
{
    atomic_flag_clear_explicit(&s->lock, memory_order_release);
}

/* Slot of key in s (cap > 0), or the empty slot where it would go. */
static inline __attribute__((always_inline)) uint32_t table_probe(const struct shim_shard *s,
                                                                  uint64_t key, uint64_t h)
{
    uint32_t mask = s->cap - 1;
    uint32_t i = table_home(h, mask);
    uint64_t k = s->slots[i].key;
    if (__builtin_expect(k == 0 || k == key, 1)) /* the home slot, usually */
        return i;
    do
        i = (i + 1) & mask;
    while (s->slots[i].key != 0 && s->slots[i].key != key);
    return i;
}

/* The slow halves of table_put and table_take (table.c): the whole operation, when the shard's
 * lock is held by another thread or the shard must grow first. Out of line and called last, so
 * the inline halves make no call in the middle of a wrapper. */
int table_put_slow(struct shim_table *t, const struct shim_entry *e, struct shim_entry *old);
bool table_take_slow(struct shim_table *t, uint64_t key, struct shim_entry *out);
/* Backward-shift deletion of slot i, then the shard's unlock (lock held). */
void table_remove_at_unlock(struct shim_shard *s, uint32_t i);

/* Puts e in slot i of s (lock held): 1 if it replaced a live entry (copied to *old), else 0. */
static inline __attribute__((always_inline)) int table_store(struct shim_shard *s, uint32_t i,
                                                             const struct shim_entry *e,
                                                             struct shim_entry *old)
{
    int rc = 0;
    struct shim_entry *slot = &s->slots[i];
    if (__builtin_expect(slot->key != 0, 0)) {
        if (old)
            *old = *slot;
        rc = 1;
    } else {
        s->count++;
    }
    /* Field by field: a caller's constant fields become stores of constants. */
    slot->key = e->key;
    slot->size = e->size;
    slot->ctx = e->ctx;
    slot->aux = e->aux;
    slot->device = e->device;
    slot->kind = e->kind;
    slot->flags = e->flags;
    slot->refs = e->refs;
    slot->maps = e->maps;
    return rc;
}

static inline int table_put(struct shim_table *t, const struct shim_entry *e, struct shim_entry *old)
{
    uint64_t h = table_mix(e->key);
    struct shim_shard *s = table_shard(t, h);
    if (__builtin_expect(atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire), 0))
        return table_put_slow(t, e, old);
    if (__builtin_expect(s->count >= s->limit, 0)) {
        table_unlock(s);
        return table_put_slow(t, e, old);
    }
    int rc = table_store(s, table_probe(s, e->key, h), e, old);
    table_unlock(s);
    return rc;
}

/* table_put_new's out-of-line half (table.c): table_put of the entry given by its fields (aux,
 * refs and maps zero; device, kind and flags packed by table_dkf), taking the shard's lock and
 * growing it if needed. Returns table_put's result: 0 inserted as a new key, 1 replaced a live
 * entry (copied to *old unless old is NULL), -1 out of memory (nothing done). Thread-safe. */
int table_put_new_slow(struct shim_table *t, uint64_t key, uint64_t size, uint64_t ctx,
                       uint64_t device_kind_flags, struct shim_entry *old);
/* An entry's device, kind and flags in one word for table_put_new_slow, which unpacks it:
 * device in bits 0-31 (as uint32_t: -1 survives), kind 32-47, flags 48-63. Pure. */
static inline __attribute__((always_inline)) uint64_t table_dkf(int32_t device, uint16_t kind,
                                                              uint16_t flags)
{
    return (uint64_t)(uint32_t)device | (uint64_t)kind << 32 | (uint64_t)flags << 48;
}
/* table_put of a new allocation's entry given by its fields (aux, refs and maps zero), in the
 * common case only: true when it was inserted as a new key; false, with nothing done, when the
 * shard's lock is held by another thread, the shard must grow or the key is already there (the
 * caller then does the whole put out of line: table_put_new_slow). So no copy of the entry is
 * built in memory and no call is made on the fast path. */
static inline __attribute__((always_inline)) bool table_put_new(struct shim_table *t, uint64_t key,
                                                                uint64_t size, uint64_t ctx,
                                                                int32_t device, uint16_t kind,
                                                                uint16_t flags)
{
    uint64_t h = table_mix(key);
    struct shim_shard *s = table_shard(t, h);
    if (__builtin_expect(atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire), 0))
        return false;
    if (__builtin_expect(s->count >= s->limit, 0)) {
        table_unlock(s);
        return false;
    }
    struct shim_entry *slot = &s->slots[table_probe(s, key, h)];
    if (__builtin_expect(slot->key != 0, 0)) {
        table_unlock(s);
        return false;
    }
    s->count++;
    slot->key = key;
    slot->size = size;
    slot->ctx = ctx;
    slot->aux = 0;
    slot->device = device;
    slot->kind = kind;
    slot->flags = flags;
    slot->refs = 0;
    slot->maps = 0;
    table_unlock(s);
    return true;
}

static inline bool table_take(struct shim_table *t, uint64_t key, struct shim_entry *out)
{
    uint64_t h = table_mix(key);
    struct shim_shard *s = table_shard(t, h);
    if (__builtin_expect(atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire), 0))
        return table_take_slow(t, key, out);
    if (__builtin_expect(s->cap == 0, 0)) {
        table_unlock(s);
        return false;
    }
    uint32_t i = table_probe(s, key, h);
    if (s->slots[i].key != key) {
        table_unlock(s);
        return false;
    }
    if (out)
        *out = s->slots[i];
    /* Usually the next slot is empty: nothing to shift back. */
    if (__builtin_expect(s->slots[(i + 1) & (s->cap - 1)].key == 0, 1)) {
        s->slots[i].key = 0;
        s->count--;
        table_unlock(s);
    } else {
        table_remove_at_unlock(s, i);
    }
    return true;
}

#endif
