/* ctxlab's CUPTI callback, in C, so that no Python code runs inside the driver.
 *
 * Why: CUPTI calls a subscriber's callback on the thread that made the CUDA call, while the driver or the
 * runtime may hold its own locks (the runtime's one-time initialisation, the primary context's creation, a
 * library's mutex around the call). A Python callback must take the GIL there. When another thread holds the
 * GIL and waits for one of those locks (PyTorch and CuPy call CUDA with the GIL held), neither can go on:
 * the program hangs. This callback never takes the GIL and never waits on a lock that a thread blocked in the
 * driver can hold. It writes each call, resource event and the few call parameters the rules need into
 * memory of its own (under a mutex that is held only to copy a record); Python reads them later.
 *
 * The user's Python stack, which a report needs for a call's line, is taken without waiting for the GIL:
 * - a thread that holds the GIL (it called CUDA without releasing it) has its frames walked right here
 *   through the C API (no Python code runs, nothing can release the GIL);
 * - a thread that released the GIL cannot run Python until the call returns, so its frames stay where the
 *   call was made: the callback asks ctxlab's stack thread (Python) for a snapshot and, at the exit of the
 *   thread's outermost CUDA call (where the driver holds no lock of this call's), waits for it a bounded
 *   time. A snapshot that did not come in time is dropped and the record says so.
 *
 * Nothing here needs CUDA's or Python's headers: the few CUPTI, driver and CPython functions used are
 * handed in as addresses (ctxlab_init), and CUPTI's callback data is read at the offsets of cupti_callbacks.h.
 * Built on first use by ctxlab.tracing.native (cc -O2 -shared -fPIC); no Python ABI, so one build serves any Python.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ABI_VERSION 7
#define MAX_CBID 4096
#define MAX_DEPTH 64
#define MAX_FRAMES 48
#define MAX_FIELDS 5
#define MAX_PARAMS 256
#define MAX_ARG_BYTES 4096
#define BLOB_LIMIT (256u << 20)
#define SEEN_SLOTS (1u << 16)
#define LAYOUT_SLOTS 4096
#define REQUEST_RING 4096

/* CUPTI callback domains (cupti_callbacks.h) */
#define DOMAIN_DRIVER 1
#define DOMAIN_RUNTIME 2
#define DOMAIN_RESOURCE 3

/* record flags */
#define F_NESTED_IN_RUNTIME 1u  /* a driver call made while a runtime call was open on its thread */
#define F_NO_EXIT 2u            /* the call's exit was never seen (tracing stopped inside it) */
#define F_BLOB_DROPPED 4u       /* arguments not kept: the argument store was full */

/* stack states */
#define S_NATIVE 1      /* frames walked here, with the GIL held */
#define S_PENDING 2     /* asked of the stack thread */
#define S_SERVED 3      /* the stack thread took a snapshot while the thread was still inside the call */
#define S_ABANDONED 4   /* the snapshot did not come in time */
#define S_NO_PYTHON 5   /* a thread with no Python thread state (a library's own thread) */
#define S_NO_HELPER 6   /* no stack thread is running (interpreter shutting down, forked child) */

/* want flags per function */
#define W_STACK 1u      /* take the user's stack for this function */
#define W_LAUNCH 2u     /* a kernel launch: keep its arguments (audit) */
#define W_MODULE 8u     /* a module resource event: its descriptor holds the module's id */
#define W_CALLERS 16u    /* keep the native return addresses (which shared object called, e.g. a runtime copy) */
#define W_NAME 32u      /* a launch: name its function once (the flight recorder's kernel names) */
#define CALLERS_ITEM 0xfffffffeu  /* argument-store item: return addresses, not a launch's arguments */
#define MAX_CALLERS 32

typedef struct {
    uint64_t start, end, context, a, b, c, d, e;
    uint32_t tid, cbid, correlation, context_uid;
    int32_t status;
    uint32_t stack;     /* stack id + 1; 0: none */
    uint32_t blob;      /* offset + 1 into the argument store; 0: none */
    uint32_t blob_len;
    uint16_t domain, flags;
    uint32_t depth;
} record_t;             /* 104 bytes: ctxlab.tracing.native.RECORD_DTYPE mirrors it */

typedef struct {
    uint32_t state, tid, nframes, pad;
    uint64_t frames[2 * MAX_FRAMES]; /* (code object, line) pairs, innermost first; code objects are owned */
} pystack_t;

typedef struct { uint8_t site, deref, width; uint16_t offset, inner; } field_t;

typedef struct {
    uint32_t want;
    uint32_t nfields;
    field_t fields[MAX_FIELDS];
    int16_t f_off, params_off, extra_off; /* launches: offsets in the params struct; -1: none */
} spec_t;

typedef uint32_t (*timestamp_fn)(uint64_t *);
typedef uint32_t (*context_id_fn)(void *, uint32_t *);
typedef int (*param_info_fn)(void *, size_t, size_t *, size_t *);
typedef int (*int_void_fn)(void);
typedef void *(*ptr_void_fn)(void);
typedef void *(*ptr_ptr_fn)(void *);
typedef int (*int_ptr_fn)(void *);
typedef void (*void_ptr_fn)(void *);

static struct {
    timestamp_fn timestamp;
    context_id_fn context_id;
    param_info_fn param_info;
    int_void_fn gil_check;
    ptr_void_fn this_thread_state;
    ptr_ptr_fn thread_frame, frame_back, frame_code;
    int_ptr_fn frame_line;
    int_void_fn gc_disable, gc_enable;
    /* the flight recorder names code objects with these (GIL held) and kernels with cuFuncGetName */
    void *(*getattr)(void *, const char *);
    const char *(*as_utf8)(void *, int64_t *);
    void (*err_clear)(void);
    int (*func_name)(const char **, void *);
} fn;

static spec_t specs[4][MAX_CBID];
static volatile int active;
static volatile int helper_running;
static int failure_stacks;   /* take the stack of every call that failed */
static int failure_callers;  /* keep the native callers of every call that failed (which library made it) */
static int wait_ms = 200;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;       /* records, stacks, blobs: held only to copy */
static record_t *records;
static size_t nrecords, caprecords;
static pystack_t *stacks;
static size_t nstacks, capstacks;
static uint8_t *blobs;
static size_t nblobs, capblobs;
static uint64_t dropped_blobs, abandoned, served_count, native_count, requests_total;

static pthread_mutex_t req_mu = PTHREAD_MUTEX_INITIALIZER;   /* the stack thread's queue */
static pthread_cond_t req_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static uint32_t ring[REQUEST_RING];
static uint32_t ring_head, ring_tail;

static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;  /* launches already kept; function layouts */
static uint64_t seen[SEEN_SLOTS];
static uint32_t seen_at[SEEN_SLOTS], seen_len[SEEN_SLOTS];  /* where each seen launch's arguments were kept */
static size_t nseen;
static struct { uint64_t function; uint16_t n; uint16_t sizes[MAX_PARAMS]; } *layouts;

typedef struct {
    uint64_t start, a, b, c, d, e;
    uint32_t blob, blob_len;
    uint16_t flags;
    uint16_t domain;
    uint32_t cbid;
} frame_t;

#define KIND_SLOTS 512

static volatile int first_kind_stacks;  /* the first call of each function per (thread, context): a stack */

static __thread struct {
    int depth, runtime_depth, busy;
    uint32_t nkinds;
    uint64_t kinds[KIND_SLOTS];  /* (domain, function, context) seen on this thread */
    uint32_t outer_stack;   /* the stack of the outermost call in progress: the Python position is fixed */
    uint32_t pending;       /* a snapshot asked for inside the outermost call */
    uint32_t misses;        /* snapshots that did not come in time in a row: wait less */
    uint32_t slot, slot_gen; /* this thread's slot in the flight recorder (index + 1), of which opening */
    uint64_t last_sig;       /* the frames of this thread's last walked stack, hashed, and its id: a loop */
    uint32_t last_stack, last_gen; /* that calls from one line reuses the stack instead of naming it again */
    uint32_t tid;            /* this thread's id, asked of the kernel once (a syscall per call cost the most) */
    frame_t frames[MAX_DEPTH];
} ts;

static int first_of_kind(uint32_t domain, uint32_t cbid, uint64_t context) {
    /* 1 the first time this thread makes this call in this context (bounded: then never again) */
    if (ts.nkinds >= KIND_SLOTS / 2) return 0;
    uint64_t key = ((uint64_t)domain << 60) ^ ((uint64_t)cbid << 44) ^ context ^ 0x5bd1e995ull;
    size_t i = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 40) & (KIND_SLOTS - 1);
    while (ts.kinds[i] && ts.kinds[i] != key) i = (i + 1) & (KIND_SLOTS - 1);
    if (ts.kinds[i] == key) return 0;
    ts.kinds[i] = key;
    ts.nkinds++;
    return 1;
}

static uint32_t gettid_(void) {
    /* once per thread: a forked child's one thread forgets it (after_fork_in_child), a new thread starts at 0 */
    if (!ts.tid) ts.tid = (uint32_t)syscall(SYS_gettid);
    return ts.tid;
}

static uint64_t now(void) {
    uint64_t t = 0;
    if (fn.timestamp && fn.timestamp(&t) == 0) return t;
    struct timespec spec;
    clock_gettime(CLOCK_MONOTONIC, &spec);
    return (uint64_t)spec.tv_sec * 1000000000ull + (uint64_t)spec.tv_nsec;
}

static uint64_t read_u64(uint64_t address) { return address ? *(const uint64_t *)(uintptr_t)address : 0; }

static int grow(void **buf, size_t *cap, size_t need, size_t item) {
    if (need <= *cap) return 1;
    size_t cap2 = *cap ? *cap : 1024;
    while (cap2 < need) cap2 *= 2;
    void *p = realloc(*buf, cap2 * item);
    if (!p) return 0;
    *buf = p;
    *cap = cap2;
    return 1;
}


/* ---------------------------------------------------------------- the flight recorder
 *
 * After ctxlab_flight_open, records, stacks, kept arguments and names go to a file mapped MAP_SHARED instead
 * of this process's heap, and each thread's slot there says which call it is inside: the parent process that
 * audits this one reads it however this one ends (exit, os._exit, a signal, SIGKILL, a hang). Writers hold mu
 * while they copy; a count in the header covers only complete items (stored with release order).
 */
static void (*decref)(void *);

#define FLIGHT_MAGIC 0x314c4654584c5443ull /* "CTXLTFL1" */
#define MAX_SLOTS 1024
#define ITEM_CODE 1u        /* code object id, its file and qualified name */
#define ITEM_THREAD 2u      /* OS thread id, threading ident, Python name */
#define ITEM_FUNCTION 3u    /* CUfunction handle, kernel name */
#define ITEM_STACK_TEXT 4u  /* a snapshot the stack thread took: stack id, thread it is of, its frames as text */
#define ITEM_THREAD_END 5u  /* OS thread id, when its end was noticed */
#define ITEM_BLOB 6u        /* a record's kept arguments or callers */
#define CODE_SLOTS (1u << 16)

typedef struct {
    uint32_t tid, depth;           /* depth 0: inside no call */
    uint32_t outer_domain, outer_cbid;
    uint64_t outer_start;
    uint32_t inner_domain, inner_cbid;
    uint64_t inner_start;
    uint64_t context, inner_a;     /* the context at the outermost entry; the innermost call's first parameter */
    uint32_t gil, stack;           /* the thread held the GIL at the outermost entry; that call's stack id */
    uint64_t last_end;             /* when its last outermost call returned */
    uint64_t calls;                /* outermost calls returned */
} slot_t;

typedef struct { uint32_t code, line; } fframe_t;
typedef struct { uint32_t state, tid, nframes, asked_by; fframe_t frames[MAX_FRAMES]; } fstack_t;

typedef struct {
    uint64_t magic;
    uint32_t abi, record_size, stack_size, slot_size;
    uint64_t cap_records, cap_stacks, cap_bytes;
    uint64_t off_records, off_stacks, off_bytes, off_slots;
    uint64_t nrecords, nstacks, nbytes;
    uint64_t dropped_records, dropped_stacks, dropped_bytes;
    uint64_t heartbeat;            /* when the last record was written (the records' clock) */
    uint32_t nslots, pid;
    uint64_t opened;               /* the records' clock at the opening */
    uint64_t clock_records, clock_wall; /* one moment on both clocks (ctxlab_flight_clock): the parent's "when" */
} flight_t;

static flight_t *flight;
static uint8_t *fbase;
static record_t *frecords;
static fstack_t *fstacks;
static slot_t *fslots;
static uint8_t *fbytes;
static uint32_t flight_gen;
static pthread_mutex_t code_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t named_functions[4096];  /* CUfunctions named in this recording (under seen_mu) */
static struct { uint64_t address; uint32_t id; } *codes;
static uint32_t ncodes;

static void publish(uint64_t *field, uint64_t value) { __atomic_store_n(field, value, __ATOMIC_RELEASE); }

/* An item in the byte area (head: kind, length; then the two parts); its payload's offset + 1, 0 if full.
   Called with mu held. */
static uint32_t flight_item_locked(uint32_t kind, const void *a, uint32_t alen, const void *b, uint32_t blen) {
    uint64_t need = (8u + (uint64_t)alen + blen + 7u) & ~7ull;
    uint64_t at = flight->nbytes;
    if (at + need > flight->cap_bytes || at + need > 0xffffffffull) { flight->dropped_bytes++; return 0; }
    uint32_t head[2] = {kind, alen + blen};
    memcpy(fbytes + at, head, 8);
    if (alen) memcpy(fbytes + at + 8, a, alen);
    if (blen) memcpy(fbytes + at + 8 + alen, b, blen);
    publish(&flight->nbytes, at + need);
    return (uint32_t)(at + 8 + 1);
}

static uint32_t flight_item(uint32_t kind, const void *a, uint32_t alen, const void *b, uint32_t blen) {
    if (!flight) return 0;
    pthread_mutex_lock(&mu);
    uint32_t at = flight_item_locked(kind, a, alen, b, blen);
    pthread_mutex_unlock(&mu);
    return at;
}

/* Map the flight file (made or emptied here, sparse): 0, or the errno of what failed. */
int ctxlab_flight_open(const char *path, uint64_t cap_records, uint64_t cap_stacks, uint64_t cap_bytes) {
    uint64_t off_slots = 4096;
    uint64_t off_records = (off_slots + sizeof(slot_t) * MAX_SLOTS + 4095) & ~4095ull;
    uint64_t off_stacks = (off_records + sizeof(record_t) * cap_records + 4095) & ~4095ull;
    uint64_t off_bytes = (off_stacks + sizeof(fstack_t) * cap_stacks + 4095) & ~4095ull;
    uint64_t size = off_bytes + cap_bytes;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return errno;
    if (ftruncate(fd, (off_t)size) != 0) { int e = errno; close(fd); return e; }
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (base == MAP_FAILED) return e;
    if (!codes) codes = calloc(CODE_SLOTS, sizeof(*codes));
    pthread_mutex_lock(&code_mu);  /* a new recording names its code objects and kernels anew (the old entries'
                                      references are kept: their objects must not be freed under a walk) */
    if (codes) memset(codes, 0, CODE_SLOTS * sizeof(*codes));
    ncodes = 0;
    pthread_mutex_unlock(&code_mu);
    pthread_mutex_lock(&seen_mu);
    memset(named_functions, 0, sizeof(named_functions));
    memset(seen, 0, sizeof(seen));  /* kept arguments are named by their place in this recording */
    memset(seen_at, 0, sizeof(seen_at));
    nseen = 0;
    pthread_mutex_unlock(&seen_mu);
    pthread_mutex_lock(&mu);
    fbase = base;
    flight_t *h = (flight_t *)base;
    h->abi = ABI_VERSION; h->record_size = sizeof(record_t); h->stack_size = sizeof(fstack_t);
    h->slot_size = sizeof(slot_t);
    h->cap_records = cap_records; h->cap_stacks = cap_stacks; h->cap_bytes = cap_bytes;
    h->off_records = off_records; h->off_stacks = off_stacks; h->off_bytes = off_bytes; h->off_slots = off_slots;
    h->pid = (uint32_t)getpid();
    h->opened = now();
    frecords = (record_t *)(fbase + off_records);
    fstacks = (fstack_t *)(fbase + off_stacks);
    fslots = (slot_t *)(fbase + off_slots);
    fbytes = fbase + off_bytes;
    flight_gen++;
    publish(&h->magic, FLIGHT_MAGIC);
    flight = h;
    pthread_mutex_unlock(&mu);
    return 0;
}

/* Stop writing into the flight file: records go to this process's heap again. The mapping stays (a callback
   still running on another thread may be writing into it); the parent reads the file, not this mapping. */
void ctxlab_flight_close(void) {
    pthread_mutex_lock(&mu);
    flight = NULL;
    pthread_mutex_unlock(&mu);
}

static slot_t *my_slot(uint32_t tid) {
    if (!flight) return NULL;
    if (ts.slot_gen != flight_gen) { ts.slot = 0; ts.slot_gen = flight_gen; }
    if (!ts.slot) {
        uint32_t n = __atomic_load_n(&flight->nslots, __ATOMIC_ACQUIRE);
        for (uint32_t i = 0; i < n && i < MAX_SLOTS; i++) {  /* a slot an ended thread gave back */
            uint32_t none = 0;
            if (__atomic_compare_exchange_n(&fslots[i].tid, &none, tid, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
                fslots[i].depth = 0;
                ts.slot = i + 1;
                return &fslots[i];
            }
        }
        uint32_t i = __atomic_fetch_add(&flight->nslots, 1, __ATOMIC_ACQ_REL);
        if (i >= MAX_SLOTS) { ts.slot = 0xffffffffu; return NULL; }
        fslots[i].tid = tid;
        ts.slot = i + 1;
    }
    return ts.slot == 0xffffffffu ? NULL : &fslots[ts.slot - 1];
}

/* The id of a code object in the flight file, named there the first time (the GIL is held: its attributes are
   read through the C API, no Python code runs). Takes over the caller's reference: kept with the id, so its
   address is never reused while the id stands. 0 when the table is full. */
static uint32_t code_id(void *code) {
    if (!code || !codes || !fn.getattr || !fn.as_utf8) { if (code) decref(code); return 0; }
    uint64_t key = (uint64_t)(uintptr_t)code;
    size_t i = (size_t)((key >> 4) * 0x9e3779b97f4a7c15ull >> 48) & (CODE_SLOTS - 1);
    pthread_mutex_lock(&code_mu);
    while (codes[i].address && codes[i].address != key) i = (i + 1) & (CODE_SLOTS - 1);
    if (codes[i].address == key) {
        uint32_t id = codes[i].id;
        pthread_mutex_unlock(&code_mu);
        decref(code);
        return id;
    }
    if (ncodes >= CODE_SLOTS / 2) { pthread_mutex_unlock(&code_mu); decref(code); return 0; }
    uint32_t id = ++ncodes;
    codes[i].address = key;
    codes[i].id = id;
    pthread_mutex_unlock(&code_mu);
    char text[2048];
    uint32_t head[4] = {id, 0, 0, 0};
    size_t used = 0;
    const char *attrs[2] = {"co_filename", "co_qualname"};
    for (int k = 0; k < 2; k++) {
        void *obj = fn.getattr(code, attrs[k]);
        if (!obj && k == 1) { if (fn.err_clear) fn.err_clear(); obj = fn.getattr(code, "co_name"); }
        int64_t n = 0;
        const char *utf8 = obj ? fn.as_utf8(obj, &n) : NULL;
        if (!utf8) { if (fn.err_clear) fn.err_clear(); n = 0; }
        if (n > 1000) n = 1000;
        if (n > 0) memcpy(text + used, utf8, (size_t)n);
        head[1 + k] = (uint32_t)n;
        used += (size_t)n;
        if (obj) decref(obj);
    }
    flight_item(ITEM_CODE, head, sizeof(head), text, (uint32_t)used);
    return id;
}

/* From Python: a thread's name (and threading ident) as the report names it. */
void ctxlab_flight_thread(uint32_t tid, uint64_t ident, const char *name, uint32_t len) {
    uint32_t head[4] = {tid, 0, (uint32_t)ident, (uint32_t)(ident >> 32)};
    flight_item(ITEM_THREAD, head, sizeof(head), name, len > 1000 ? 1000 : len);
}

/* From Python, now and then: this moment on the records' clock and on the wall clock (ns since the epoch). */
void ctxlab_flight_clock(uint64_t wall_ns) {
    if (!flight) return;
    uint64_t t = now();
    pthread_mutex_lock(&mu);
    publish(&flight->clock_records, t);
    publish(&flight->clock_wall, wall_ns);
    pthread_mutex_unlock(&mu);
}

/* From Python: a thread that made calls has ended (its slot is given back for another thread). */
void ctxlab_flight_thread_end(uint32_t tid) {
    if (flight) {
        for (uint32_t i = 0; i < flight->nslots && i < MAX_SLOTS; i++)
            if (fslots[i].tid == tid && fslots[i].depth == 0) __atomic_store_n(&fslots[i].tid, 0, __ATOMIC_RELEASE);
    }
    uint64_t when = now();
    uint32_t head[4] = {tid, 0, (uint32_t)when, (uint32_t)(when >> 32)};
    flight_item(ITEM_THREAD_END, head, sizeof(head), NULL, 0);
}

/* From Python (the stack thread): the snapshot it took for a stack, as text ("library\n" then
   "file\tline\tfunction\n" a frame), before it lets the thread go with ctxlab_served. */
void ctxlab_store_text(uint32_t id, uint32_t asked_by, const char *text, uint32_t len) {
    uint32_t head[2] = {id, asked_by};
    flight_item(ITEM_STACK_TEXT, head, sizeof(head), text, len > 16000 ? 16000 : len);
}

void ctxlab_set_names(void *getattr, void *as_utf8, void *err_clear, void *func_name) {
    fn.getattr = (void *(*)(void *, const char *))getattr;
    fn.as_utf8 = (const char *(*)(void *, int64_t *))as_utf8;
    fn.err_clear = (void (*)(void))err_clear;
    fn.func_name = (int (*)(const char **, void *))func_name;
}


static void name_function(uint64_t function) {
    /* the kernel's name, once per CUfunction (cuFuncGetName, CUDA 12.3+) */
    if (!flight || !fn.func_name || !function) return;
    size_t i = (size_t)((function >> 4) * 0x9e3779b97f4a7c15ull >> 52) & 4095u;
    pthread_mutex_lock(&seen_mu);
    size_t probes = 0;
    while (named_functions[i] && named_functions[i] != function && probes < 4096) { i = (i + 1) & 4095u; probes++; }
    int known = probes >= 4096 || named_functions[i] == function;
    if (!known) named_functions[i] = function;
    pthread_mutex_unlock(&seen_mu);
    if (known) return;
    const char *name = NULL;
    ts.busy = 1;  /* the driver call made here is ctxlab's, not the program's */
    int status = fn.func_name(&name, (void *)(uintptr_t)function);
    ts.busy = 0;
    if (status != 0 || !name) return;
    size_t n = strnlen(name, 2000);
    uint64_t head[1] = {function};
    flight_item(ITEM_FUNCTION, head, sizeof(head), name, (uint32_t)n);
}

/* ---------------------------------------------------------------- stacks */

/* A stack's state and thread, in whichever store holds it (mu held). */
/* A stack id made in one store and looked up after the other took over (the recording closed while a thread
   waited for its snapshot) names nothing there: the bounds checks keep that from reading past either store. */
static uint32_t st_state(uint32_t id) {
    if (flight) return id <= flight->nstacks ? fstacks[id - 1].state : S_ABANDONED;
    return stacks && id <= nstacks ? stacks[id - 1].state : S_ABANDONED;
}
static void st_set(uint32_t id, uint32_t state) {
    if (flight) { if (id <= flight->nstacks) __atomic_store_n(&fstacks[id - 1].state, state, __ATOMIC_RELEASE); }
    else if (stacks && id <= nstacks) stacks[id - 1].state = state;
}
static uint32_t st_tid(uint32_t id) {
    if (flight) return id <= flight->nstacks ? fstacks[id - 1].tid : 0;
    return stacks && id <= nstacks ? stacks[id - 1].tid : 0;
}
static size_t st_count(void) { return flight ? (size_t)flight->nstacks : nstacks; }

static uint32_t new_flight_stack_locked(uint32_t state, uint32_t tid) {
    if (flight->nstacks >= flight->cap_stacks) { flight->dropped_stacks++; return 0; }
    fstack_t *s = &fstacks[flight->nstacks];
    s->state = state; s->tid = tid; s->nframes = 0; s->asked_by = 0;
    publish(&flight->nstacks, flight->nstacks + 1);
    return (uint32_t)flight->nstacks;
}

static uint32_t new_stack(uint32_t state, uint32_t tid) {
    pthread_mutex_lock(&mu);
    if (flight) {
        uint32_t id = new_flight_stack_locked(state, tid);
        pthread_mutex_unlock(&mu);
        return id;
    }
    if (!grow((void **)&stacks, &capstacks, nstacks + 1, sizeof(pystack_t))) {
        pthread_mutex_unlock(&mu);
        return 0;
    }
    pystack_t *s = &stacks[nstacks];
    memset(s, 0, sizeof(*s) - sizeof(s->frames));
    s->state = state;
    s->tid = tid;
    uint32_t id = (uint32_t)++nstacks;
    pthread_mutex_unlock(&mu);
    return id;
}

static uint32_t walk_with_gil(uint32_t tid) {
    /* The GIL is held by this thread: the C API can be used, and no Python code runs. */
    uint64_t frames[2 * MAX_FRAMES];
    uint32_t n = 0;
    /* no collection while frame objects are made: a collection may run finalizers, which are Python code */
    int collecting = fn.gc_disable ? fn.gc_disable() : 0;
    void *tstate = fn.this_thread_state();
    void *f = tstate ? fn.thread_frame(tstate) : NULL;  /* new references all the way */
    while (f && n < MAX_FRAMES) {
        frames[2 * n] = (uint64_t)(uintptr_t)fn.frame_code(f);  /* kept: released by Python when read */
        frames[2 * n + 1] = (uint64_t)fn.frame_line(f);
        n++;
        void *back = fn.frame_back(f);
        decref(f);
        f = back;
    }
    if (f) decref(f);
    if (flight) {  /* the codes named in the flight file; the frame's references go to the code table */
        uint64_t sig = 0x84222325cbf29ce4ull ^ n;
        for (uint32_t i = 0; i < 2 * n; i++) sig = (sig ^ frames[i]) * 0x100000001b3ull;
        if (ts.last_stack && ts.last_gen == flight_gen && ts.last_sig == sig) {
            for (uint32_t i = 0; i < n; i++) decref((void *)(uintptr_t)frames[2 * i]);
            if (collecting && fn.gc_enable) fn.gc_enable();
            return ts.last_stack;
        }
        uint32_t ids[MAX_FRAMES];
        for (uint32_t i = 0; i < n; i++) ids[i] = code_id((void *)(uintptr_t)frames[2 * i]);
        if (collecting && fn.gc_enable) fn.gc_enable();
        pthread_mutex_lock(&mu);
        uint32_t id = new_flight_stack_locked(S_NATIVE, tid);
        if (id) {
            fstack_t *s = &fstacks[id - 1];
            for (uint32_t i = 0; i < n; i++) { s->frames[i].code = ids[i]; s->frames[i].line = (uint32_t)frames[2 * i + 1]; }
            s->nframes = n;
            native_count++;
        }
        pthread_mutex_unlock(&mu);
        ts.last_sig = sig; ts.last_stack = id; ts.last_gen = flight_gen;
        return id;
    }
    if (collecting && fn.gc_enable) fn.gc_enable();
    uint32_t id = 0;
    pthread_mutex_lock(&mu);
    if (grow((void **)&stacks, &capstacks, nstacks + 1, sizeof(pystack_t))) {
        pystack_t *s = &stacks[nstacks];
        s->state = S_NATIVE;
        s->tid = tid;
        s->nframes = n;
        memcpy(s->frames, frames, sizeof(uint64_t) * 2 * n);
        id = (uint32_t)++nstacks;
        native_count++;
    } else {
        for (uint32_t i = 0; i < n; i++) decref((void *)(uintptr_t)frames[2 * i]);
    }
    pthread_mutex_unlock(&mu);
    return id;
}

/* ---------------------------------------------------------------- frames read in place
 *
 * A thread that released the GIL for its CUDA call cannot run Python until the call returns, so its
 * interpreter frames stay as they are; one that holds the GIL runs no Python inside the driver either. Either
 * way its frames can be read here, field by field, at the offsets of its CPython version (handed in by
 * ctxlab_read_frames_in_place and checked there once against a frame whose code and line Python knows),
 * without the GIL, an allocation or a wait. Only code objects the flight file already holds (a reference kept
 * with their id) are named so: the address read is then the code object it was when it was named. A frame of
 * a code object not yet held sends the call down the other paths (walked with the GIL, or the stack thread's
 * snapshot, which holds the codes it saw: ctxlab_hold_code), so a loop pays that once per line.
 */
typedef int (*addr2line_fn)(void *, int);
static struct {
    int on;
    int32_t tstate_frame, cframe_frame;  /* tstate -> cframe -> current frame (cframe_frame < 0: tstate -> frame) */
    int32_t code, previous, instr, owner, owner_cstack, bytecode;  /* frame fields; the bytecode in a code object */
    addr2line_fn addr2line;
    void (*incref)(void *);
} raw;
static uint64_t read_in_place;  /* stacks read in place (under mu) */

#define LINE_SLOTS 512
static __thread struct { uint64_t instr; uint32_t gen; int32_t line; } line_cache[LINE_SLOTS];

static void *field_ptr(void *base, int32_t offset) { return *(void **)((char *)base + offset); }

static void *current_frame(void *tstate) {
    void *p = field_ptr(tstate, raw.tstate_frame);
    return p && raw.cframe_frame >= 0 ? field_ptr(p, raw.cframe_frame) : p;
}

static int is_shim(void *frame) {  /* the entry frames CPython 3.12 puts on the C stack: not the program's */
    return raw.owner >= 0 && *((const char *)frame + raw.owner) == (char)raw.owner_cstack;
}

static int32_t line_of(void *code, void *frame) {
    uint64_t instr = (uint64_t)(uintptr_t)field_ptr(frame, raw.instr);
    size_t at = (size_t)((instr >> 1) * 0x9e3779b97f4a7c15ull >> 52) & (LINE_SLOTS - 1);
    if (line_cache[at].instr == instr && line_cache[at].gen == flight_gen + 1) return line_cache[at].line;
    int64_t units = *(const int64_t *)((const char *)code + 16);  /* ob_size: the code units */
    int64_t offset = (int64_t)instr - (int64_t)((uintptr_t)code + (uint32_t)raw.bytecode);
    int32_t line = raw.addr2line(code, offset >= 0 && offset < 2 * units ? (int)offset : -1);
    line_cache[at].instr = instr; line_cache[at].gen = flight_gen + 1; line_cache[at].line = line;
    return line;
}

static uint32_t held_code_id(void *code) {  /* the id of a code object the flight file holds; 0: not held */
    if (!code || !codes) return 0;
    uint64_t key = (uint64_t)(uintptr_t)code;
    size_t i = (size_t)((key >> 4) * 0x9e3779b97f4a7c15ull >> 48) & (CODE_SLOTS - 1);
    pthread_mutex_lock(&code_mu);
    while (codes[i].address && codes[i].address != key) i = (i + 1) & (CODE_SLOTS - 1);
    uint32_t id = codes[i].address == key ? codes[i].id : 0;
    pthread_mutex_unlock(&code_mu);
    return id;
}

/* This thread's stack read in place into the flight file: 1 with its id in *out (0 if the file is full), or
   0 where a frame's code object is not held yet (the caller takes another path). */
static int read_stack_in_place(uint32_t tid, uint32_t *out) {
    void *tstate = fn.this_thread_state();
    if (!tstate || !flight) return 0;
    uint32_t ids[MAX_FRAMES];
    uint64_t frames[2 * MAX_FRAMES];
    uint32_t n = 0, hops = 0;
    for (void *f = current_frame(tstate); f && n < MAX_FRAMES && hops < 4 * MAX_FRAMES; f = field_ptr(f, raw.previous)) {
        hops++;
        if (is_shim(f)) continue;
        void *code = field_ptr(f, raw.code);
        uint32_t id = held_code_id(code);
        if (!id) return 0;
        ids[n] = id;
        frames[2 * n] = (uint64_t)(uintptr_t)code;
        frames[2 * n + 1] = (uint64_t)(int64_t)line_of(code, f);
        n++;
    }
    uint64_t sig = 0x84222325cbf29ce4ull ^ n;  /* as walk_with_gil: a loop on one line reuses its stack */
    for (uint32_t i = 0; i < 2 * n; i++) sig = (sig ^ frames[i]) * 0x100000001b3ull;
    if (ts.last_stack && ts.last_gen == flight_gen && ts.last_sig == sig) { *out = ts.last_stack; return 1; }
    pthread_mutex_lock(&mu);
    uint32_t id = new_flight_stack_locked(S_NATIVE, tid);
    if (id) {
        fstack_t *s = &fstacks[id - 1];
        for (uint32_t i = 0; i < n; i++) { s->frames[i].code = ids[i]; s->frames[i].line = (uint32_t)frames[2 * i + 1]; }
        s->nframes = n;
        native_count++;
        read_in_place++;
    }
    pthread_mutex_unlock(&mu);
    ts.last_sig = sig; ts.last_stack = id; ts.last_gen = flight_gen;
    *out = id;
    return 1;
}

/* From Python (GIL held), once per tracer: the frame layout of this CPython, checked against the caller's own
   frame (its code, its line, its caller's code); 1 if it holds and frames are read in place from now on. */
int ctxlab_read_frames_in_place(const int32_t *layout, void *addr2line, void *incref, void *probe_code,
                                int probe_line, void *caller_code) {
    raw.on = 0;
    if (!layout || !addr2line || !incref || !fn.this_thread_state) return 0;
    raw.tstate_frame = layout[0]; raw.cframe_frame = layout[1]; raw.code = layout[2]; raw.previous = layout[3];
    raw.instr = layout[4]; raw.owner = layout[5]; raw.owner_cstack = layout[6]; raw.bytecode = layout[7];
    raw.addr2line = (addr2line_fn)addr2line;
    raw.incref = (void (*)(void *))incref;
    void *tstate = fn.this_thread_state();
    if (!tstate) return 0;
    void *f = current_frame(tstate);
    while (f && is_shim(f)) f = field_ptr(f, raw.previous);
    if (!f || field_ptr(f, raw.code) != probe_code || line_of(probe_code, f) != probe_line) return 0;
    f = field_ptr(f, raw.previous);
    while (f && is_shim(f)) f = field_ptr(f, raw.previous);
    if (!f || field_ptr(f, raw.code) != caller_code) return 0;
    memset(line_cache, 0, sizeof(line_cache));
    raw.on = 1;
    return 1;
}

/* From the stack thread (GIL held): hold a code object of a snapshot's frames in the flight file. */
void ctxlab_hold_code(void *code) {
    if (!code || !raw.incref || !flight) return;
    raw.incref(code);
    (void)code_id(code);  /* takes over the reference */
}

static uint32_t take_stack(uint32_t tid) {
    if (ts.outer_stack) return ts.outer_stack;
    uint32_t id;
    if (!fn.gil_check || !fn.this_thread_state || !decref) {
        id = new_stack(S_NO_PYTHON, tid);
    } else if (!fn.this_thread_state()) {
        /* a library's own thread: no Python stack of its own; the stack thread notes where the Python
           threads were (the one that asked the library is among them). Nothing waits for it. */
        id = new_stack(helper_running ? S_PENDING : S_NO_PYTHON, tid);
        if (id && helper_running) {
            pthread_mutex_lock(&req_mu);
            if (ring_head - ring_tail < REQUEST_RING) {
                ring[ring_head++ % REQUEST_RING] = id;
                requests_total++;
                pthread_cond_signal(&req_cv);
            }
            pthread_mutex_unlock(&req_mu);
        }
        if (ts.depth > 0) ts.outer_stack = id;
        return id;
    } else if (raw.on && read_stack_in_place(tid, &id)) {
        /* read in place: no GIL, no wait */
    } else if (fn.gil_check()) {
        id = walk_with_gil(tid);
    } else if (!helper_running) {
        id = new_stack(S_NO_HELPER, tid);
    } else {
        id = new_stack(S_PENDING, tid);
        if (id) {
            pthread_mutex_lock(&req_mu);
            if (ring_head - ring_tail < REQUEST_RING) {
                ring[ring_head++ % REQUEST_RING] = id;
                requests_total++;
                pthread_cond_signal(&req_cv);
                ts.pending = id;
            } else {
                pthread_mutex_lock(&mu);
                st_set(id, S_ABANDONED);
                pthread_mutex_unlock(&mu);
            }
            pthread_mutex_unlock(&req_mu);
        }
    }
    if (ts.depth > 0) ts.outer_stack = id;
    return id;
}

static void wait_for_snapshot(void) {
    /* At the outermost exit: the driver holds no lock of this call's. Wait a bounded time. */
    uint32_t id = ts.pending;
    ts.pending = 0;
    if (!id) return;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    long ms = ts.misses ? 2 : wait_ms;
    deadline.tv_sec += ms / 1000;
    deadline.tv_nsec += (ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) { deadline.tv_sec++; deadline.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&req_mu);
    for (;;) {
        pthread_mutex_lock(&mu);
        uint32_t state = st_state(id);
        pthread_mutex_unlock(&mu);
        if (state != S_PENDING) { ts.misses = 0; break; }
        if (!helper_running || pthread_cond_timedwait(&done_cv, &req_mu, &deadline) == ETIMEDOUT) {
            pthread_mutex_lock(&mu);
            if (st_state(id) == S_PENDING) { st_set(id, S_ABANDONED); abandoned++; ts.misses++; }
            pthread_mutex_unlock(&mu);
            break;
        }
    }
    pthread_mutex_unlock(&req_mu);
}

/* The stack thread: the next snapshot to take (0 after timeout_ms), and the thread to take it of. */
uint32_t ctxlab_next_request(int timeout_ms, uint32_t *tid) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) { deadline.tv_sec++; deadline.tv_nsec -= 1000000000L; }
    uint32_t id = 0;
    pthread_mutex_lock(&req_mu);
    while (ring_head == ring_tail && helper_running) {
        if (pthread_cond_timedwait(&req_cv, &req_mu, &deadline) == ETIMEDOUT) break;
    }
    if (ring_head != ring_tail) id = ring[ring_tail++ % REQUEST_RING];
    pthread_mutex_unlock(&req_mu);
    if (id) {
        pthread_mutex_lock(&mu);
        *tid = st_tid(id);
        pthread_mutex_unlock(&mu);
    }
    return id;
}

/* The stack thread took its snapshot: 1 if the thread was still waiting for it (the snapshot is right). */
int ctxlab_served(uint32_t id) {
    int ok = 0;
    pthread_mutex_lock(&req_mu);
    pthread_mutex_lock(&mu);
    if (id && id <= st_count() && st_state(id) == S_PENDING) {
        st_set(id, S_SERVED);
        served_count++;
        ok = 1;
    }
    pthread_mutex_unlock(&mu);
    pthread_cond_broadcast(&done_cv);
    pthread_mutex_unlock(&req_mu);
    return ok;
}

void ctxlab_set_helper(int running) {
    pthread_mutex_lock(&req_mu);
    helper_running = running;
    pthread_cond_broadcast(&req_cv);
    pthread_cond_broadcast(&done_cv);
    pthread_mutex_unlock(&req_mu);
}

/* ---------------------------------------------------------------- launches */

static uint64_t mix(uint64_t h, uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); return h; }

static size_t seen_slot(uint64_t key, uint32_t *at, uint32_t *len) {
    /* the slot of a launch's (function, context, argument bytes), and where its kept bytes are (at 0: kept
       by no launch yet; the slot is taken for this one). Called with seen_mu held. */
    if (nseen >= SEEN_SLOTS / 2) {  /* memory stays bounded */
        memset(seen, 0, sizeof(seen)); memset(seen_at, 0, sizeof(seen_at)); nseen = 0;
    }
    size_t i = (size_t)(key * 0x9e3779b97f4a7c15ull) & (SEEN_SLOTS - 1);
    while (seen[i] && seen[i] != key) i = (i + 1) & (SEEN_SLOTS - 1);
    if (seen[i] == key) { *at = seen_at[i]; *len = seen_len[i]; }
    else { seen[i] = key; seen_at[i] = 0; nseen++; *at = 0; }
    return i;
}

static int layout_of(uint64_t function, uint16_t *sizes) {
    /* each parameter's size, through cuFuncGetParamInfo (once per function); -1 when unknown */
    if (!fn.param_info || !function) return -1;
    size_t slot = (size_t)(function * 0x9e3779b97f4a7c15ull >> 20) % LAYOUT_SLOTS;
    pthread_mutex_lock(&seen_mu);
    if (!layouts) layouts = calloc(LAYOUT_SLOTS, sizeof(*layouts));
    if (layouts && layouts[slot].function == function) {
        int n = layouts[slot].n;
        memcpy(sizes, layouts[slot].sizes, sizeof(uint16_t) * (size_t)n);
        pthread_mutex_unlock(&seen_mu);
        return n;
    }
    pthread_mutex_unlock(&seen_mu);
    int n = 0;
    ts.busy = 1;  /* the driver calls made here are ctxlab's, not the program's */
    for (; n < MAX_PARAMS; n++) {
        size_t offset = 0, size = 0;
        if (fn.param_info((void *)(uintptr_t)function, (size_t)n, &offset, &size) != 0) break;
        sizes[n] = (uint16_t)(size > 0xffff ? 0xffff : size);
    }
    ts.busy = 0;
    pthread_mutex_lock(&seen_mu);
    if (layouts) {
        layouts[slot].function = function;
        layouts[slot].n = (uint16_t)n;
        memcpy(layouts[slot].sizes, sizes, sizeof(uint16_t) * (size_t)n);
    }
    pthread_mutex_unlock(&seen_mu);
    return n;
}

static uint32_t keep_blob(const uint8_t *data, size_t len, uint32_t *out_len, uint16_t *flags) {
    uint32_t at = 0;
    if (flight) {
        at = flight_item(ITEM_BLOB, data, (uint32_t)len, NULL, 0);
        if (at) *out_len = (uint32_t)len;
        else { *flags |= F_BLOB_DROPPED; dropped_blobs++; }
        return at;
    }
    pthread_mutex_lock(&mu);
    if (nblobs + len > BLOB_LIMIT || !grow((void **)&blobs, &capblobs, nblobs + len, 1)) {
        dropped_blobs++;
        *flags |= F_BLOB_DROPPED;
    } else {
        memcpy(blobs + nblobs, data, len);
        at = (uint32_t)nblobs + 1;
        nblobs += len;
        *out_len = (uint32_t)len;
    }
    pthread_mutex_unlock(&mu);
    return at;
}

static void keep_launch(const spec_t *spec, uint64_t params, uint64_t context, frame_t *fr) {
    /* the arguments as (u32 index, u32 size, bytes) items; index 0xffffffff: the packed extra buffer. Every
       launch gets them (the ordering model needs the memory each kernel touches); a launch whose (function,
       context, argument bytes) were kept before points at the same kept bytes: a loop adds nothing. */
    uint8_t buf[MAX_ARG_BYTES];
    size_t len = 0;
    uint64_t function = read_u64(params + (uint64_t)spec->f_off);
    uint64_t kernel_params = spec->params_off >= 0 ? read_u64(params + (uint64_t)spec->params_off) : 0;
    uint64_t extra = spec->extra_off >= 0 ? read_u64(params + (uint64_t)spec->extra_off) : 0;
    uint64_t h = mix(mix(0, function), context);
    if (kernel_params) {
        uint16_t sizes[MAX_PARAMS];
        int n = layout_of(function, sizes);
        for (int i = 0; i < n; i++) {
            if (sizes[i] < 8) continue;
            size_t size = sizes[i];
            if (len + 8 + size > sizeof(buf)) break;
            const uint8_t *value = (const uint8_t *)(uintptr_t)read_u64(kernel_params + 8ull * (uint64_t)i);
            if (!value) continue;
            uint32_t head[2] = {(uint32_t)i, (uint32_t)size};
            memcpy(buf + len, head, 8);
            memcpy(buf + len + 8, value, size);
            for (size_t k = 0; k + 8 <= size; k += 8) { uint64_t w; memcpy(&w, value + k, 8); h = mix(h, w); }
            len += 8 + size;
        }
    } else if (extra) {
        uint64_t buffer = 0, size = 0;
        for (int k = 0; k < 64; k += 2) {
            uint64_t what = read_u64(extra + 8ull * (uint64_t)k);
            if (what == 0) break;                                   /* CU_LAUNCH_PARAM_END */
            if (what == 1) buffer = read_u64(extra + 8ull * (uint64_t)(k + 1));            /* BUFFER_POINTER */
            else if (what == 2) size = read_u64(read_u64(extra + 8ull * (uint64_t)(k + 1))); /* BUFFER_SIZE */
        }
        if (buffer && size && size + 8 <= sizeof(buf)) {
            uint32_t head[2] = {0xffffffffu, (uint32_t)size};
            memcpy(buf, head, 8);
            memcpy(buf + 8, (const void *)(uintptr_t)buffer, size);
            for (size_t k = 0; k + 8 <= size; k += 8) { uint64_t w; memcpy(&w, buf + 8 + k, 8); h = mix(h, w); }
            len = 8 + size;
        }
    }
    if (!len) return;
    if (!h) h = 1;
    uint32_t at = 0, at_len = 0;
    pthread_mutex_lock(&seen_mu);
    size_t slot = seen_slot(h, &at, &at_len);
    pthread_mutex_unlock(&seen_mu);
    if (at) { fr->blob = at; fr->blob_len = at_len; return; }
    fr->blob = keep_blob(buf, len, &fr->blob_len, &fr->flags);
    pthread_mutex_lock(&seen_mu);
    if (seen[slot] == h) { seen_at[slot] = fr->blob; seen_len[slot] = fr->blob_len; }
    pthread_mutex_unlock(&seen_mu);
}

static void keep_callers(frame_t *fr) {
    /* The native return addresses of this call (Python names the shared objects they lie in): for a retain
       of the primary context, the copy of the runtime that made it. backtrace() was called once in
       ctxlab_init, so it does not load libgcc_s here; unwinding takes no lock a CUDA call can hold (glibc's
       _dl_find_object is lock-free; older ones hold the loader's list lock only while a library is added). */
    void *pcs[MAX_CALLERS];
    int n = backtrace(pcs, MAX_CALLERS);
    if (n <= 0) return;
    uint8_t buf[8 + 8 * MAX_CALLERS];
    uint32_t head[2] = {CALLERS_ITEM, (uint32_t)(8 * n)};
    memcpy(buf, head, 8);
    for (int i = 0; i < n; i++) { uint64_t pc = (uint64_t)(uintptr_t)pcs[i]; memcpy(buf + 8 + 8 * i, &pc, 8); }
    fr->blob = keep_blob(buf, 8 + 8 * (size_t)n, &fr->blob_len, &fr->flags);
}

/* ---------------------------------------------------------------- records */

static void capture(const spec_t *spec, int site, uint64_t params, uint64_t *values) {
    for (uint32_t i = 0; i < spec->nfields; i++) {
        const field_t *f = &spec->fields[i];
        if (f->site != site || !params) continue;
        uint64_t v = read_u64(params + f->offset);
        if (f->deref) v = v ? read_u64(v + f->inner) : 0;
        if (f->width == 4) v &= 0xffffffffull;
        values[i] = v;
    }
}

static volatile int recorded_any;  /* read without the lock by a fork hook: has CUDA been used while tracing */

static void emit(const record_t *r) {
    recorded_any = 1;
    pthread_mutex_lock(&mu);
    if (flight) {
        if (flight->nrecords < flight->cap_records) {
            frecords[flight->nrecords] = *r;
            publish(&flight->nrecords, flight->nrecords + 1);
        } else {
            flight->dropped_records++;
        }
        publish(&flight->heartbeat, r->end);
        pthread_mutex_unlock(&mu);
        return;
    }
    if (grow((void **)&records, &caprecords, nrecords + 1, sizeof(record_t))) records[nrecords++] = *r;
    pthread_mutex_unlock(&mu);
}

void ctxlab_callback(void *userdata, uint32_t domain, uint32_t cbid, const void *data) {
    (void)userdata;
    if (!active || ts.busy || cbid >= MAX_CBID || domain > 3) return;
    uint32_t tid = gettid_();
    const spec_t *spec = &specs[domain][cbid];
    if (domain == DOMAIN_RESOURCE) {
        record_t r;
        memset(&r, 0, sizeof(r));
        r.domain = (uint16_t)domain;
        r.cbid = cbid;
        r.tid = tid;
        r.start = r.end = now();
        r.depth = (uint32_t)ts.depth;
        if (data) {  /* CUpti_ResourceData: context, resourceHandle (a stream), resourceDescriptor */
            uint64_t base = (uint64_t)(uintptr_t)data;
            r.context = read_u64(base);
            r.a = read_u64(base + 8);
            if (spec->want & W_MODULE) {  /* other events' descriptors are not ours to read */
                uint64_t descriptor = read_u64(base + 16);
                r.b = descriptor ? (uint64_t)*(const uint32_t *)(uintptr_t)descriptor : 0;
            }
            if (r.context && fn.context_id) {
                uint32_t uid = 0;
                if (fn.context_id((void *)(uintptr_t)r.context, &uid) == 0) r.context_uid = uid;
            }
        }
        if (spec->want & W_STACK) {
            r.stack = take_stack(tid);
            if (ts.depth == 0) wait_for_snapshot();  /* no call around it to wait at the end of */
        }
        emit(&r);
        return;
    }
    /* CUpti_CallbackData: site @0, functionParams @16, functionReturnValue @24, context @40,
       contextUid @48, correlationId @64 */
    uint64_t base = (uint64_t)(uintptr_t)data;
    uint32_t site = *(const uint32_t *)(uintptr_t)base;
    uint64_t params = read_u64(base + 16);
    if (site == 0) {
        slot_t *slot = my_slot(tid);
        if (ts.depth < MAX_DEPTH) {
            frame_t *fr = &ts.frames[ts.depth];
            memset(fr, 0, sizeof(*fr));
            fr->start = now();
            fr->domain = (uint16_t)domain;
            fr->cbid = cbid;
            uint64_t values[MAX_FIELDS] = {0, 0, 0, 0, 0};
            capture(spec, 0, params, values);
            fr->a = values[0]; fr->b = values[1]; fr->c = values[2]; fr->d = values[3]; fr->e = values[4];
            if (domain == DOMAIN_DRIVER && ts.runtime_depth > 0) fr->flags |= F_NESTED_IN_RUNTIME;
            if (spec->want & W_CALLERS) keep_callers(fr);
            if (slot) {  /* which call this thread is inside, for a parent watching a hang */
                slot->inner_domain = domain; slot->inner_cbid = cbid; slot->inner_start = fr->start;
                slot->inner_a = fr->a;
                if (ts.depth == 0) {
                    slot->outer_domain = domain; slot->outer_cbid = cbid; slot->outer_start = fr->start;
                    slot->context = read_u64(base + 40);
                    slot->gil = fn.gil_check && fn.this_thread_state && fn.this_thread_state() ? (uint32_t)fn.gil_check() : 0;
                    slot->stack = 0;
                }
                __atomic_store_n(&slot->depth, (uint32_t)ts.depth + 1, __ATOMIC_RELEASE);
            }
        }
        ts.depth++;
        if ((spec->want & W_NAME) && spec->f_off >= 0) name_function(read_u64(params + (uint64_t)spec->f_off));
        if (domain == DOMAIN_RUNTIME) ts.runtime_depth++;
        if ((spec->want & W_LAUNCH) && ts.depth <= MAX_DEPTH) {
            frame_t *fr = &ts.frames[ts.depth - 1];
            keep_launch(spec, params, read_u64(base + 40), fr);
            if (fr->blob) take_stack(tid);  /* a launch the pointer rule may report */
        }
        if (spec->want & W_STACK) take_stack(tid);
        if (slot && ts.outer_stack) slot->stack = ts.outer_stack;
        return;
    }
    record_t r;
    memset(&r, 0, sizeof(r));
    r.end = now();
    if (ts.depth > 0) ts.depth--;
    if (domain == DOMAIN_RUNTIME && ts.runtime_depth > 0) ts.runtime_depth--;
    if (ts.depth < MAX_DEPTH) {
        frame_t *fr = &ts.frames[ts.depth];
        r.start = fr->start ? fr->start : r.end;
        r.a = fr->a; r.b = fr->b; r.c = fr->c; r.d = fr->d; r.e = fr->e;
        r.blob = fr->blob; r.blob_len = fr->blob_len;
        r.flags = fr->flags;
    } else {
        r.start = r.end;
    }
    uint64_t values[MAX_FIELDS] = {r.a, r.b, r.c, r.d, r.e};
    capture(spec, 1, params, values);
    r.a = values[0]; r.b = values[1]; r.c = values[2]; r.d = values[3]; r.e = values[4];
    r.domain = (uint16_t)domain;
    r.cbid = cbid;
    r.tid = tid;
    r.depth = (uint32_t)ts.depth;
    r.context = read_u64(base + 40);
    r.context_uid = *(const uint32_t *)(uintptr_t)(base + 48);
    r.correlation = *(const uint32_t *)(uintptr_t)(base + 64);
    uint64_t ret = read_u64(base + 24);
    r.status = ret ? *(const int32_t *)(uintptr_t)ret : 0;
    if (r.status != 0 && r.status != 600 && failure_callers && !r.blob) {  /* 600: NOT_READY, an answer */
        frame_t callers;
        memset(&callers, 0, sizeof(callers));
        keep_callers(&callers);
        r.blob = callers.blob; r.blob_len = callers.blob_len; r.flags |= callers.flags;
    }
    if ((spec->want & W_STACK) || (r.status != 0 && failure_stacks) || ts.outer_stack
        || (first_kind_stacks && ts.depth == 0 && first_of_kind(domain, cbid, r.context)))
        r.stack = take_stack(tid);
    if (ts.depth == 0) {
        wait_for_snapshot();
        ts.outer_stack = 0;
    }
    emit(&r);
    slot_t *slot = my_slot(tid);
    if (slot) {
        if (ts.depth == 0) {
            slot->last_end = r.end;
            slot->calls++;
        } else if (ts.depth <= MAX_DEPTH) {
            const frame_t *up = &ts.frames[ts.depth - 1];
            slot->inner_domain = up->domain; slot->inner_cbid = up->cbid; slot->inner_start = up->start;
            slot->inner_a = up->a;
        }
        __atomic_store_n(&slot->depth, (uint32_t)ts.depth, __ATOMIC_RELEASE);
    }
}

/* ---------------------------------------------------------------- set-up and reading, from Python */

int ctxlab_abi(void) { return ABI_VERSION; }
int ctxlab_recorded_any(void) { return recorded_any; }
size_t ctxlab_record_size(void) { return sizeof(record_t); }
size_t ctxlab_stack_size(void) { return sizeof(pystack_t); }

void ctxlab_init(void *timestamp, void *context_id, void *param_info, void *gil_check, void *this_thread_state,
                 void *thread_frame, void *frame_back, void *frame_code, void *frame_line, void *py_decref,
                 void *gc_disable, void *gc_enable, int wait) {
    fn.timestamp = (timestamp_fn)timestamp;
    fn.context_id = (context_id_fn)context_id;
    fn.param_info = (param_info_fn)param_info;
    fn.gil_check = (int_void_fn)gil_check;
    fn.this_thread_state = (ptr_void_fn)this_thread_state;
    fn.thread_frame = (ptr_ptr_fn)thread_frame;
    fn.frame_back = (ptr_ptr_fn)frame_back;
    fn.frame_code = (ptr_ptr_fn)frame_code;
    fn.frame_line = (int_ptr_fn)frame_line;
    decref = (void (*)(void *))py_decref;
    fn.gc_disable = (int_void_fn)gc_disable;
    fn.gc_enable = (int_void_fn)gc_enable;
    wait_ms = wait > 0 ? wait : 200;
    memset(specs, 0, sizeof(specs));
    void *warm[2];
    backtrace(warm, 2);  /* its first call loads libgcc_s (the loader's lock): here, not inside the driver */
}

void ctxlab_set_want(uint32_t domain, uint32_t cbid, uint32_t want) {
    if (domain <= 3 && cbid < MAX_CBID) specs[domain][cbid].want |= want;
}

void ctxlab_set_field(uint32_t domain, uint32_t cbid, uint32_t site, uint32_t offset, uint32_t deref,
                      uint32_t inner, uint32_t width) {
    if (domain > 3 || cbid >= MAX_CBID) return;
    spec_t *s = &specs[domain][cbid];
    if (s->nfields >= MAX_FIELDS) return;
    field_t *f = &s->fields[s->nfields++];
    f->site = (uint8_t)site; f->offset = (uint16_t)offset; f->deref = (uint8_t)deref;
    f->inner = (uint16_t)inner; f->width = (uint8_t)width;
}

void ctxlab_set_launch(uint32_t cbid, int f_off, int params_off, int extra_off) {
    if (cbid >= MAX_CBID) return;
    spec_t *s = &specs[DOMAIN_DRIVER][cbid];
    s->want |= W_LAUNCH;
    s->f_off = (int16_t)f_off; s->params_off = (int16_t)params_off; s->extra_off = (int16_t)extra_off;
}

/* A launch whose function the flight recorder names (f_off: the CUfunction's offset in its params struct). */
void ctxlab_set_launch_function(uint32_t cbid, int f_off) {
    if (cbid >= MAX_CBID) return;
    spec_t *s = &specs[DOMAIN_DRIVER][cbid];
    s->want |= W_NAME;
    s->f_off = (int16_t)f_off;
}

void ctxlab_set_active(int on) { active = on; }
void ctxlab_set_failure_stacks(int on) { failure_stacks = on; first_kind_stacks = on; failure_callers = on; }

/* Move the records out: copies at most max of them into out, returns how many. */
size_t ctxlab_take_records(record_t *out, size_t max) {
    pthread_mutex_lock(&mu);
    size_t n = nrecords < max ? nrecords : max;
    memcpy(out, records, n * sizeof(record_t));
    memmove(records, records + n, (nrecords - n) * sizeof(record_t));
    nrecords -= n;
    pthread_mutex_unlock(&mu);
    return n;
}

size_t ctxlab_pending_records(void) {
    pthread_mutex_lock(&mu);
    size_t n = nrecords;
    pthread_mutex_unlock(&mu);
    return n;
}

/* A stack by id (1-based): its state, and its frames copied into out (2 words a frame). */
uint32_t ctxlab_stack(uint32_t id, uint64_t *out, uint32_t *nframes, uint32_t *tid) {
    uint32_t state = 0;
    pthread_mutex_lock(&mu);
    if (id && id <= nstacks) {
        pystack_t *s = &stacks[id - 1];
        state = s->state;
        *nframes = s->nframes;
        *tid = s->tid;
        memcpy(out, s->frames, sizeof(uint64_t) * 2 * s->nframes);
    }
    pthread_mutex_unlock(&mu);
    return state;
}

size_t ctxlab_blob(uint32_t at, uint32_t len, uint8_t *out) {
    size_t n = 0;
    pthread_mutex_lock(&mu);
    if (at && (size_t)at - 1 + len <= nblobs) { memcpy(out, blobs + at - 1, len); n = len; }
    pthread_mutex_unlock(&mu);
    return n;
}

void ctxlab_counts(uint64_t *out) {
    pthread_mutex_lock(&mu);
    out[0] = nstacks; out[1] = native_count; out[2] = requests_total; out[3] = served_count;
    out[4] = abandoned; out[5] = dropped_blobs; out[6] = nrecords; out[7] = nblobs; out[8] = read_in_place;
    pthread_mutex_unlock(&mu);
}

/* Forget everything (a new tracer): the stacks' code objects must have been released by Python first. */
void ctxlab_reset(void) {
    pthread_mutex_lock(&mu);
    nrecords = 0; nstacks = 0; nblobs = 0; recorded_any = 0;
    dropped_blobs = abandoned = served_count = native_count = requests_total = read_in_place = 0;
    pthread_mutex_unlock(&mu);
    pthread_mutex_lock(&seen_mu);
    memset(seen, 0, sizeof(seen));
    memset(seen_at, 0, sizeof(seen_at));
    nseen = 0;
    pthread_mutex_unlock(&seen_mu);
    pthread_mutex_lock(&req_mu);
    ring_head = ring_tail = 0;
    pthread_mutex_unlock(&req_mu);
}

static void after_fork_in_child(void) {
    ts.tid = 0;  /* the forking thread's id was the parent's */
    /* another thread of the parent may have held a mutex at the fork: new ones; no stack thread here */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t fresh_cv = PTHREAD_COND_INITIALIZER;
    mu = fresh; req_mu = fresh; seen_mu = fresh; code_mu = fresh;
    req_cv = fresh_cv; done_cv = fresh_cv;
    helper_running = 0;
    ring_head = ring_tail = 0;
    flight = NULL;  /* the parent's recording is the parent's: a forked child must not write into it */
}

__attribute__((constructor)) static void install_fork_handler(void) {
    pthread_atfork(NULL, NULL, after_fork_in_child);
}

/* ---------------------------------------------------------------- for the CPU tests: a lock held across a
   call, as the runtime holds its own around its first initialisation */

static pthread_mutex_t test_lock = PTHREAD_MUTEX_INITIALIZER;

void ctxlab_test_call_holding_lock(uint32_t domain, uint32_t cbid, const void *enter, const void *exit_,
                                   int hold_ms) {
    pthread_mutex_lock(&test_lock);
    ctxlab_callback(NULL, domain, cbid, enter);
    struct timespec pause = {hold_ms / 1000, (long)(hold_ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
    ctxlab_callback(NULL, domain, cbid, exit_);
    pthread_mutex_unlock(&test_lock);
}

typedef void (*callback_fn)(void *, uint32_t, uint32_t, const void *);

void ctxlab_test_call_other_holding_lock(void *callback, uint32_t domain, uint32_t cbid, const void *enter,
                                         const void *exit_, int hold_ms) {
    /* the same with another subscriber's callback: a Python one (ctypes) shows the hang this file avoids */
    pthread_mutex_lock(&test_lock);
    ((callback_fn)callback)(NULL, domain, cbid, enter);
    struct timespec pause = {hold_ms / 1000, (long)(hold_ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
    ((callback_fn)callback)(NULL, domain, cbid, exit_);
    pthread_mutex_unlock(&test_lock);
}

void ctxlab_test_take_lock(void) {
    pthread_mutex_lock(&test_lock);
    pthread_mutex_unlock(&test_lock);
}

/* ---------------------------------------------------------------- for the cost benchmark: one call's enter and
   exit made n times in C, so that what is timed is the callback's own work (benchmarks/callback_cost.py) */

void ctxlab_test_repeat(uint32_t domain, uint32_t cbid, const void *enter, const void *exit_, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        ctxlab_callback(NULL, domain, cbid, enter);
        ctxlab_callback(NULL, domain, cbid, exit_);
    }
}
