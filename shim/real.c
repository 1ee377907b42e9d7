/* Real driver entry points: one slot per row of hooks.h. A door (dlsym, cuGetProcAddress) offers
 * the function it found and shim_real_offer decides whether the slot takes it; a slot still empty
 * when the shim needs it is resolved here. The hot paths read a slot with one relaxed load
 * (shim.h shim_real); everything else in this file runs on the doors' slow paths and after an
 * unload.
 *
 * Which function a slot holds when two objects have one (a program that tries a stub libcuda
 * before the driver, or dlclose()s libcuda and loads it again elsewhere):
 * - an object's kind (obj_rank): gone (no loaded object has the address), a stub (its own
 *   cuDriverGetVersion fails: the toolkit's stubs/libcuda.so answers CUDA_ERROR_STUB_LIBRARY to
 *   every call), partial (it has no cuDriverGetVersion: a forwarder, an interposer, a hand-made
 *   stub) or a driver (its cuDriverGetVersion succeeds);
 * - a stub's function never enters an empty slot from a door: the program gets it as it is (it
 *   allocates nothing, there is nothing to count);
 * - a slot moves to a door's function p only when its function q is gone, or q is a stub's and p
 *   is not (and q is not what the shim's own exports reach by the loader's order: the next
 *   definition after the shim, what a program linked to libcuda calls without the shim). Then
 *   every other slot in q's object moves to p's object too;
 * - q next after the shim (libcuda linked, a forwarder preloaded behind the shim such as HAMi's,
 *   whatever it answers to cuDriverGetVersion) or a partial object's (a tracer, which cannot be
 *   told from a hand-made stub) keeps its slot and the door hands out the wrapper (first come);
 * - otherwise (q a driver's, p a second driver's) the door hands p out as it is, uncounted (said
 *   once): the program gets exactly what it would get without the shim. Two entry points of one
 *   object (dlsym's and cuGetProcAddress's) are one function for this: the slot keeps its own and
 *   the door hands out the wrapper.
 * After an unload (shim_real_check_unloads, from the dlclose door, the doors' offers that change
 * nothing fast, and the exit report) a slot whose object is gone is looked up again, or emptied
 * when nothing loaded has the function (the next use resolves it again): it never keeps an address
 * in unmapped memory. Every dl_iterate_phdr runs under a lock fork waits for (shim_iterate_phdr). */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <sys/auxv.h>

#include "shim/shim.h"

const struct shim_fn_info shim_fns[SHIM_FN_COUNT] = {
#define SHIM_X_HOOK(sym, base, ver, pt) [SHIM_FN_##sym] = {#sym, #base, ver, pt, (void *)&sym},
#define SHIM_X_REAL(sym, base, ver, pt) [SHIM_FN_##sym] = {#sym, #base, ver, pt, NULL},
    SHIM_HOOKS(SHIM_X_HOOK) SHIM_REAL_ONLY(SHIM_X_REAL)
#undef SHIM_X_HOOK
#undef SHIM_X_REAL
};

_Atomic(void *) shim_real_slot[SHIM_FN_COUNT];

/* The object each slot's function was found in (obj_id), 0 when not known. A slot and its entry
 * here change together under slot_lock, which is held for those loads and stores only, never
 * across a call (a door can run inside the loader's lock, which dladdr and dlopen take). The hot
 * paths read the slot alone, without it. */
static uint64_t slot_obj[SHIM_FN_COUNT];
static atomic_flag slot_lock = ATOMIC_FLAG_INIT;

/* The distinct objects the slots' functions were found in (slot_obj's values, 0 left out), for
 * shim_real_check_unloads: an unload that took none of them needs no look at the slots. Added to
 * under slot_lock; rebuilt from slot_obj by the check after a slot moved. */
#define REC_OBJS 8
static uint64_t rec_objs[REC_OBJS];
static unsigned rec_count;
static bool rec_overflow;

/* Records obj (under slot_lock). */
static void rec_add(uint64_t obj)
{
    bool known = obj == 0;
    for (unsigned k = 0; k < rec_count && !known; k++)
        known = rec_objs[k] == obj;
    if (!known && rec_count < REC_OBJS)
        rec_objs[rec_count++] = obj;
    else if (!known)
        rec_overflow = true;
}

static void lock_slots(void);
static void unlock_slots(void);

/* dl_iterate_phdr takes the loader's write lock, which glibc 2.36 does not reset in a forked
 * child: a fork while another thread of the shim was inside it left the child's next
 * dl_iterate_phdr (C++ unwinding, say) waiting for ever. The shim's calls run under phdr_mutex,
 * which a fork waits for (pthread_atfork, registered by the constructor or at first use, before
 * the shim's first call). The fork handlers hold slot_lock across the fork too, so a child never
 * sees a slot and its object half changed. */
static pthread_mutex_t phdr_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void)
{
    pthread_mutex_lock(&phdr_mutex);
    lock_slots();
}

static void fork_release(void)
{
    unlock_slots();
    pthread_mutex_unlock(&phdr_mutex);
}

static void fork_register(void)
{
    pthread_atfork(fork_prepare, fork_release, fork_release);
}

SHIM_EARLY void shim_real_fork_setup(void)
{
    pthread_once(&fork_once, fork_register);
}

__attribute__((constructor)) static void real_load(void)
{
    shim_real_fork_setup();
}

SHIM_EARLY int shim_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data)
{
    shim_real_fork_setup();
    pthread_mutex_lock(&phdr_mutex);
    int r = dl_iterate_phdr(cb, data);
    pthread_mutex_unlock(&phdr_mutex);
    return r;
}

static void lock_slots(void)
{
    shim_real_fork_setup();
    while (atomic_flag_test_and_set_explicit(&slot_lock, memory_order_acquire))
        sched_yield();
}

static void unlock_slots(void)
{
    atomic_flag_clear_explicit(&slot_lock, memory_order_release);
}

/* The slot of row id and the object its function was found in, read together. */
static void *slot_read(enum shim_fn id, uint64_t *obj)
{
    lock_slots();
    void *p = atomic_load_explicit(&shim_real_slot[id], memory_order_relaxed);
    *obj = slot_obj[id];
    unlock_slots();
    return p;
}

/* Stores fn (found in object obj) in row id's slot if the slot still holds `expect`. */
static bool slot_replace(enum shim_fn id, void *expect, void *fn, uint64_t obj)
{
    lock_slots();
    bool ok = atomic_load_explicit(&shim_real_slot[id], memory_order_relaxed) == expect;
    if (ok) {
        slot_obj[id] = obj;
        rec_add(obj);
        atomic_store_explicit(&shim_real_slot[id], fn, memory_order_release);
    }
    unlock_slots();
    return ok;
}

static _Atomic(shim_dlsym_fn) next_dlsym;

SHIM_EARLY shim_dlsym_fn shim_real_dlsym(void)
{
    shim_dlsym_fn f = atomic_load_explicit(&next_dlsym, memory_order_acquire);
    if (likely(f != NULL))
        return f;
    /* DESIGN.md: never the plain dlsym (that is the shim itself): libc's by version first... */
    shim_dlsym_fn libc = (shim_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
#if defined(__x86_64__)
    if (!libc)
        libc = (shim_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
#elif defined(__aarch64__)
    if (!libc)
        libc = (shim_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.17");
#endif
    /* ...then, through it, the next dlsym after the shim without a version: another interposer
     * behind us that wraps dlsym unversioned (dlvsym would skip it) stays in the chain. */
    f = libc ? (shim_dlsym_fn)libc(RTLD_NEXT, "dlsym") : NULL;
    if (!f)
        f = libc;
    atomic_store_explicit(&next_dlsym, f, memory_order_release);
    return f;
}

/* The next `name` (dlclose, dlopen) after the shim, which exports one (door_dlsym.c): another
 * interposer's, else libc's; looked up once, then kept in `cache`. */
static SHIM_EARLY void *next_after_shim(_Atomic(void *) *cache, const char *name)
{
    void *f = atomic_load_explicit(cache, memory_order_acquire);
    if (likely(f != NULL))
        return f;
    shim_dlsym_fn sym = shim_real_dlsym();
    f = sym ? sym(RTLD_NEXT, name) : NULL;
    if (!f)
        f = dlvsym(RTLD_NEXT, name, "GLIBC_2.34");
    atomic_store_explicit(cache, f, memory_order_release);
    return f;
}

static _Atomic(void *) next_dlclose, next_dlopen;

SHIM_EARLY shim_dlclose_fn shim_real_dlclose(void)
{
    return (shim_dlclose_fn)next_after_shim(&next_dlclose, "dlclose");
}

SHIM_EARLY shim_dlopen_fn shim_real_dlopen(void)
{
    return (shim_dlopen_fn)next_after_shim(&next_dlopen, "dlopen");
}

SHIM_EARLY void shim_close_own(void *h)
{
    shim_dlclose_fn f = shim_real_dlclose();
    if (h && f)
        f(h);
}

/* An object's identity from its base (where its first segment is mapped) and file name, hashed
 * (FNV-1a), never 0. */
static uint64_t obj_hash(uintptr_t base, const char *name)
{
    uint64_t h = 1469598103934665603ull;
    for (unsigned k = 0; k < sizeof base; k++)
        h = (h ^ ((base >> (8 * k)) & 0xff)) * 1099511628211ull;
    for (const char *c = name ? name : ""; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
    return h ? h : 1;
}

/* The identity of the loaded object that holds code address fn (obj_hash), 0 when no loaded
 * object holds fn. */
static uint64_t obj_id(const void *fn)
{
    Dl_info i;
    if (!fn || !dladdr(fn, &i) || !i.dli_fbase)
        return 0;
    return obj_hash((uintptr_t)i.dli_fbase, i.dli_fname);
}

/* A handle on the loaded object that holds fn (dlopen RTLD_NOLOAD of its file name; close it with
 * shim_close_own), or NULL (none holds it, or the main program's, which has no name to open). */
static void *obj_handle(const void *fn)
{
    Dl_info i;
    if (!fn || !dladdr(fn, &i) || !i.dli_fname || !i.dli_fname[0])
        return NULL;
    return dlopen(i.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
}

enum { OBJ_GONE, OBJ_STUB, OBJ_PARTIAL, OBJ_DRIVER };

/* obj_rank's answers for the last objects asked, as base | rank (bases are page-aligned);
 * emptied after an unload. */
#define RANK_CACHE 4
static _Atomic(uintptr_t) rank_cache[RANK_CACHE];
static _Atomic unsigned rank_next;

/* The kind of the object that holds fn (the header comment): its own cuDriverGetVersion is asked
 * (once per object; the driver answers it before cuInit and changes nothing). */
static int obj_rank(const void *fn)
{
    Dl_info i;
    if (!fn || !dladdr(fn, &i) || !i.dli_fbase)
        return OBJ_GONE;
    uintptr_t base = (uintptr_t)i.dli_fbase;
    for (unsigned k = 0; k < RANK_CACHE; k++) {
        uintptr_t e = atomic_load_explicit(&rank_cache[k], memory_order_relaxed);
        if (e && (e & ~(uintptr_t)3) == base)
            return (int)(e & 3);
    }
    int rank = OBJ_PARTIAL;
    shim_dlsym_fn sym = shim_real_dlsym();
    void *h = obj_handle(fn);
    if (h && sym) {
        CUresult (*version)(int *) = (CUresult(*)(int *))sym(h, "cuDriverGetVersion");
        Dl_info vi;
        /* its own, not one of its dependencies' (a forwarder linked to libcuda) */
        if (version && dladdr((void *)version, &vi) && vi.dli_fbase == i.dli_fbase) {
            int v = 0;
            rank = version(&v) == CUDA_SUCCESS ? OBJ_DRIVER : OBJ_STUB;
        }
    }
    shim_close_own(h);
    if ((base & 3) == 0) {
        unsigned k = atomic_fetch_add_explicit(&rank_next, 1, memory_order_relaxed) % RANK_CACHE;
        atomic_store_explicit(&rank_cache[k], base | (uintptr_t)rank, memory_order_relaxed);
    }
    return rank;
}

/* Whether fn is what the loader finds first after the shim for row id's symbol: the function the
 * shim's own export stands in front of (libcuda linked by the program, or an interposer behind
 * the shim). */
static bool is_next_after_shim(enum shim_fn id, const void *fn)
{
    shim_dlsym_fn sym = shim_real_dlsym();
    return sym && sym(RTLD_NEXT, shim_fns[id].symbol) == fn;
}

/* A function in the driver that a door last bound a slot to (and that object's obj_id): where
 * the shim looks up the functions it calls itself when the driver is not libcuda.so.1 by name (a
 * program's dlopen of it by path, with a stub of that soname loaded first). */
static _Atomic(void *) anchor_fn;
static _Atomic uint64_t anchor_obj;

static void set_anchor(void *fn, uint64_t obj)
{
    lock_slots();
    atomic_store_explicit(&anchor_fn, fn, memory_order_relaxed);
    atomic_store_explicit(&anchor_obj, obj, memory_order_relaxed);
    unlock_slots();
}

/* The anchor, NULL when none or when its object is gone. */
static void *get_anchor(void)
{
    lock_slots();
    void *fn = atomic_load_explicit(&anchor_fn, memory_order_relaxed);
    uint64_t obj = atomic_load_explicit(&anchor_obj, memory_order_relaxed);
    unlock_slots();
    return fn && obj_id(fn) == obj ? fn : NULL;
}

/* Row id's function found in the object that holds `in` (not one of its dependencies'), or NULL. */
SHIM_EARLY void *shim_own_definition(const void *in, const char *name)
{
    shim_dlsym_fn sym = shim_real_dlsym();
    void *h = obj_handle(in);
    void *p = h && sym ? sym(h, name) : NULL;
    shim_close_own(h);
    return p && obj_id(p) == obj_id(in) ? p : NULL;
}

static void *lookup_in(enum shim_fn id, const void *in)
{
    void *p = shim_own_definition(in, shim_fns[id].symbol);
    return p == shim_fns[id].wrapper ? NULL : p;
}

/* Where the shim finds row id's function by itself: the next definition after the shim (another
 * interposer behind us, or libcuda when it is in the global scope), else in the driver a door
 * last bound (the anchor), else libcuda's own, loaded by the runtime with RTLD_LOCAL. NULL if
 * none has it; never the shim's own wrapper. */
static void *lookup(enum shim_fn id)
{
    shim_dlsym_fn sym = shim_real_dlsym();
    if (!sym)
        return NULL;
    void *p = sym(RTLD_NEXT, shim_fns[id].symbol);
    if (p && p != shim_fns[id].wrapper)
        return p;
    void *anchor = get_anchor();
    if (anchor && (p = lookup_in(id, anchor)) != NULL)
        return p;
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    p = h ? sym(h, shim_fns[id].symbol) : NULL;
    shim_close_own(h);
    return p && p != shim_fns[id].wrapper ? p : NULL;
}

/* Number of objects unloaded since the process started (dl_iterate_phdr's dlpi_subs). */
static int count_subs(struct dl_phdr_info *info, size_t size, void *data)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
        *(unsigned long long *)data = info->dlpi_subs;
    return 1;
}

static _Atomic unsigned long long checked_subs;

/* After a rebind from object `old` (an obj_id) to the object that holds `to`: every other slot
 * in `old` that the shim's exports do not stand in front of moves to `to`'s function of that
 * row, where it has one. */
static void move_object(enum shim_fn skip, uint64_t old, const void *to)
{
    shim_dlsym_fn sym = shim_real_dlsym();
    void *h = obj_handle(to);
    uint64_t to_obj = obj_id(to);
    for (int i = 0; h && sym && i < SHIM_FN_COUNT; i++) {
        uint64_t obj;
        void *s = slot_read((enum shim_fn)i, &obj);
        if (i == (int)skip || !s || obj_id(s) != old || is_next_after_shim((enum shim_fn)i, s))
            continue;
        void *n = sym(h, shim_fns[i].symbol);
        if (n && n != shim_fns[i].wrapper && obj_id(n) == to_obj)
            slot_replace((enum shim_fn)i, s, n, to_obj);
    }
    shim_close_own(h);
    dlerror(); /* the lookups' errors are not the program's */
}

/* Which of the recorded objects (rec_objs) are loaded: one pass over the loaded objects, each
 * one's identity made as obj_id makes it (dladdr's dli_fbase is where the object's first PT_LOAD
 * segment is mapped, dli_fname its dlpi_name). An identity that does not match for another reason
 * is only a slower check (the slots' own, below), never a wrong one. */
static uintptr_t page_size;

struct present {
    unsigned n;
    uint64_t ids[REC_OBJS];
    bool found[REC_OBJS];
};

static int mark_present(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct present *pr = data;
    for (int k = 0; k < info->dlpi_phnum; k++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[k];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t base = info->dlpi_addr + (ph->p_vaddr & ~(uintptr_t)(page_size - 1));
        uint64_t id = obj_hash(base, info->dlpi_name);
        for (unsigned j = 0; j < pr->n; j++)
            pr->found[j] |= pr->ids[j] == id;
        break;
    }
    return 0;
}

SHIM_EARLY void shim_real_check_unloads(void)
{
    unsigned long long subs = 0;
    shim_iterate_phdr(count_subs, &subs);
    unsigned long long seen = atomic_load_explicit(&checked_subs, memory_order_acquire);
    if (subs == seen)
        return;
    for (unsigned k = 0; k < RANK_CACHE; k++)
        atomic_store_explicit(&rank_cache[k], 0, memory_order_relaxed);
    /* Something was unloaded: first, cheaply, whether it was an object a slot's function is in. */
    if (!page_size)
        page_size = (uintptr_t)getauxval(AT_PAGESZ);
    struct present pr = {0};
    lock_slots();
    bool overflow = rec_overflow;
    pr.n = rec_count;
    memcpy(pr.ids, rec_objs, sizeof pr.ids);
    unlock_slots();
    bool all = !overflow;
    if (all && pr.n > 0) {
        shim_iterate_phdr(mark_present, &pr);
        for (unsigned j = 0; j < pr.n; j++)
            all = all && pr.found[j];
    }
    if (!all) {
        /* Then each slot, each distinct object it was found in asked once (dladdr). */
        struct { uint64_t obj; bool alive; } asked[16];
        unsigned n_asked = 0;
        int moved = 0, emptied = 0;
        for (int i = 0; i < SHIM_FN_COUNT; i++) {
            uint64_t obj;
            void *s = slot_read((enum shim_fn)i, &obj);
            /* obj 0: found where no loaded object was (an interposer's trampoline): kept */
            if (!s || obj == 0)
                continue;
            int alive = -1;
            for (unsigned k = 0; k < n_asked && alive < 0; k++)
                if (asked[k].obj == obj)
                    alive = asked[k].alive;
            if (alive < 0) {
                alive = obj_id(s) == obj;
                if (n_asked < sizeof asked / sizeof asked[0])
                    asked[n_asked++] = (__typeof__(asked[0])){obj, alive};
            }
            if (alive)
                continue;
            void *n = lookup((enum shim_fn)i);
            if (slot_replace((enum shim_fn)i, s, n, obj_id(n)))
                n ? moved++ : emptied++;
        }
        /* The recorded objects again, from the slots as they are now. */
        lock_slots();
        rec_count = 0;
        rec_overflow = false;
        for (int i = 0; i < SHIM_FN_COUNT; i++)
            rec_add(atomic_load_explicit(&shim_real_slot[i], memory_order_relaxed) ? slot_obj[i] : 0);
        unlock_slots();
        if (moved || emptied)
            LOG_INFO("a driver library was unloaded: %d of its functions found again, %d gone",
                     moved, emptied);
        dlerror(); /* the lookups' errors are not the program's */
    }
    atomic_compare_exchange_strong(&checked_subs, &seen, subs);
}

enum offer_verdict { KEEP_SLOT, TAKE_P, HAND_OUT_P };

/* What a door's function p (in an object of kind p_rank) does to q, the slot's function, of
 * another object that is still loaded (the header comment's rule):
 * - a hook on either side (a function that is not its object's own definition of the name: an
 *   interposer's wrapper handed out by its dlsym or cuGetProcAddress) is a chain through that
 *   interposer: the slot keeps q, the door hands out the wrapper;
 * - q what the shim's exports stand in front of (the next definition after the shim: libcuda
 *   linked by the program, a forwarder preloaded behind the shim such as HAMi's, whatever its
 *   cuDriverGetVersion answers): the slot keeps q, the door hands out the wrapper, as the
 *   program's own calls reach q; except when q is a true stub's and p is not, where the wrapper
 *   would answer the stub's error for the driver's function: p is handed out as it is;
 * - q a true stub's (its cuDriverGetVersion fails): q yields to p;
 * - q a partial library's (no cuDriverGetVersion: a tracer, a forwarder, a hand-made stub): the
 *   slot keeps q, the door hands out the wrapper (first come);
 * - q a driver's: p (a second driver's) is handed out as it is. */
static enum offer_verdict verdict(enum shim_fn id, void *q, void *p, int p_rank)
{
    if (p_rank == OBJ_STUB)
        return HAND_OUT_P;
    if (lookup_in(id, q) != q || lookup_in(id, p) != p)
        return KEEP_SLOT;
    int q_rank = obj_rank(q);
    if (is_next_after_shim(id, q))
        return q_rank == OBJ_STUB ? HAND_OUT_P : KEEP_SLOT;
    if (q_rank == OBJ_STUB)
        return TAKE_P;
    if (q_rank == OBJ_PARTIAL)
        return KEEP_SLOT;
    return HAND_OUT_P;
}

bool shim_real_offer(enum shim_fn id, void *p)
{
    if (!p || p == shim_fns[id].wrapper)
        return false;
    if (atomic_load_explicit(&shim_real_slot[id], memory_order_relaxed) == p)
        return true;
    shim_real_check_unloads();
    uint64_t p_obj = obj_id(p);
    for (int tries = 0; tries < 16; tries++) {
        uint64_t q_obj;
        void *q = slot_read(id, &q_obj);
        if (q == p)
            return true;
        uint64_t q_now = obj_id(q);
        bool q_gone = q && q_obj != 0 && q_now != q_obj;
        if (q && !q_gone && q_now == p_obj)
            return true; /* two entry points of one object (dlsym's, cuGetProcAddress's): one */
        int p_rank = obj_rank(p);
        if (!q || q_gone) {
            if (p_rank == OBJ_STUB) {
                LOG_ONCE(CUSHIM_LOG_DEBUG, "%s from a stub library (its cuDriverGetVersion fails): "
                         "handed out as it is", shim_fns[id].symbol);
                return false;
            }
        } else {
            enum offer_verdict v = verdict(id, q, p, p_rank);
            if (v == KEEP_SLOT)
                return true;
            if (v == HAND_OUT_P) {
                if (p_rank != OBJ_STUB)
                    LOG_ONCE(CUSHIM_LOG_WARN, "%s found in a second library while the one the shim "
                             "calls is still loaded: the program gets it as it is, and what it "
                             "allocates through it is not counted", shim_fns[id].symbol);
                return false;
            }
        }
        if (!slot_replace(id, q, p, p_obj))
            continue; /* another thread changed the slot: decide again */
        if (p_rank == OBJ_DRIVER && (q || !get_anchor()))
            set_anchor(p, p_obj);
        if (q) {
            LOG_INFO("%s: the shim now calls another library's (the one it called %s)",
                     shim_fns[id].symbol,
                     q_gone ? "was unloaded" : "is a stub or has no cuDriverGetVersion");
            if (!q_gone)
                move_object(id, q_now, p);
        }
        return true;
    }
    return false;
}

void *shim_real_resolve(enum shim_fn id)
{
    void *p = lookup(id);
    if (!p) {
        LOG_ONCE(CUSHIM_LOG_DEBUG, "driver has no %s", shim_fns[id].symbol);
        return NULL;
    }
    slot_replace(id, NULL, p, obj_id(p));
    return atomic_load_explicit(&shim_real_slot[id], memory_order_relaxed);
}
