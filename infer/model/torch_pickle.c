/* A restricted unpickler for torch.save state dicts.  Python's pickle is a
 * program: GLOBAL names any callable and REDUCE calls it.  Here GLOBAL is
 * looked up in a short table (anything else is refused on the spot) and
 * REDUCE / BINPERSID only build records: an empty dict, a storage
 * reference, a tensor view.  No object is walked recursively (every object
 * sits in one list and is freed from it), every length is checked against
 * the bytes left, and the stack, marks and memo are bounded, so a hostile
 * pickle costs at most memory proportional to its size. */
#include "infer/model/torch_pickle.h"
#include "kernels/base/util.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum { PK_MAX_STACK = 1 << 20, PK_MAX_MARKS = 1 << 16, PK_MAX_MEMO = 1 << 20, PK_MAX_KEY = 255 };

enum { K_NONE, K_BOOL, K_INT, K_FLOAT, K_STR, K_TUPLE, K_LIST, K_DICT, K_GLOBAL, K_STORAGE, K_TENSOR };
enum { G_ODICT, G_REBUILD, G_PARAM, G_STORAGE_TYPE, G_DTYPE };

typedef struct Obj {
    int kind;
    int64_t i;              /* INT, BOOL; GLOBAL: which G_*; STORAGE: index into storages */
    const char *dt;         /* GLOBAL storage type / dtype: safetensors dtype name */
    char *s;                /* STR (NUL-terminated; len may count inner NULs) */
    size_t len;
    struct Obj **items;     /* TUPLE, LIST; DICT: key, value, key, value, ... */
    int n, cap;
    TpTensor *t;            /* TENSOR */
} Obj;

typedef struct {
    const char *file;
    const uint8_t *start, *p, *end;
    Obj **stack;
    int sp, stack_cap;
    int *marks;
    int nmarks, marks_cap;
    Obj **memo;
    int memo_cap, memo_count;
    Obj **all;
    size_t nall, all_cap;
    TpStateDict *out;
} Pk;

/* The globals a state dict imports.  Storage types name the element type
 * of a storage; dtypes may appear as plain values. */
static const struct { const char *module, *name; int g; const char *dt; } allowed[] = {
    {"collections", "OrderedDict", G_ODICT, NULL},
    {"torch._utils", "_rebuild_tensor_v2", G_REBUILD, NULL},
    {"torch._utils", "_rebuild_parameter", G_PARAM, NULL},
    {"torch", "FloatStorage", G_STORAGE_TYPE, "F32"},
    {"torch", "HalfStorage", G_STORAGE_TYPE, "F16"},
    {"torch", "BFloat16Storage", G_STORAGE_TYPE, "BF16"},
    {"torch", "DoubleStorage", G_STORAGE_TYPE, "F64"},
    {"torch", "LongStorage", G_STORAGE_TYPE, "I64"},
    {"torch", "IntStorage", G_STORAGE_TYPE, "I32"},
    {"torch", "ShortStorage", G_STORAGE_TYPE, "I16"},
    {"torch", "CharStorage", G_STORAGE_TYPE, "I8"},
    {"torch", "ByteStorage", G_STORAGE_TYPE, "U8"},
    {"torch", "BoolStorage", G_STORAGE_TYPE, "BOOL"},
    {"torch", "float32", G_DTYPE, "F32"},
    {"torch", "float16", G_DTYPE, "F16"},
    {"torch", "bfloat16", G_DTYPE, "BF16"},
};

static int fail(Pk *k, const char *fmt, ...) PRINTF_LIKE(2, 3);
static int fail(Pk *k, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    err_set("%s: %s", k->file, msg);
    return -1;
}

static size_t at(const Pk *k) { return (size_t)(k->p - k->start); }

static int need(Pk *k, size_t n) {
    if ((size_t)(k->end - k->p) < n) return fail(k, "pickle truncated at byte %zu", at(k));
    return 0;
}

static Obj *new_obj(Pk *k, int kind) {
    if (k->nall == k->all_cap) {
        k->all_cap = k->all_cap ? 2 * k->all_cap : 256;
        k->all = xrealloc(k->all, sizeof(Obj *) * k->all_cap);
    }
    Obj *o = xcalloc(1, sizeof *o);
    o->kind = kind;
    k->all[k->nall++] = o;
    return o;
}

static void add_item(Obj *c, Obj *x) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 4;
        c->items = xrealloc(c->items, sizeof(Obj *) * c->cap);
    }
    c->items[c->n++] = x;
}

static int push(Pk *k, Obj *o) {
    if (k->sp == PK_MAX_STACK) return fail(k, "pickle stack deeper than %d at byte %zu", PK_MAX_STACK, at(k));
    if (k->sp == k->stack_cap) {
        k->stack_cap = k->stack_cap ? 2 * k->stack_cap : 64;
        k->stack = xrealloc(k->stack, sizeof(Obj *) * k->stack_cap);
    }
    k->stack[k->sp++] = o;
    return 0;
}

/* NULL (error set) on an empty stack or one emptied down to the last MARK */
static Obj *pop(Pk *k) {
    int floor = k->nmarks ? k->marks[k->nmarks - 1] : 0;
    if (k->sp <= floor) { fail(k, "pickle stack underflow at byte %zu", at(k)); return NULL; }
    return k->stack[--k->sp];
}

static Obj *top(Pk *k) {
    int floor = k->nmarks ? k->marks[k->nmarks - 1] : 0;
    if (k->sp <= floor) { fail(k, "pickle stack underflow at byte %zu", at(k)); return NULL; }
    return k->stack[k->sp - 1];
}

/* Pops everything above the last MARK into *first / *n (still in the stack
 * array until the next push). */
static int pop_mark(Pk *k, Obj ***first, int *n) {
    if (!k->nmarks) return fail(k, "pickle has no MARK for the opcode at byte %zu", at(k) - 1);
    int m = k->marks[--k->nmarks];
    *first = k->stack ? k->stack + m : NULL;   /* no pushes yet: an empty run (no NULL + 0) */
    *n = k->sp - m;
    k->sp = m;
    return 0;
}

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static int push_int(Pk *k, int64_t v) {
    Obj *o = new_obj(k, K_INT);
    o->i = v;
    return push(k, o);
}

static int op_string(Pk *k, int lenbytes) {
    if (need(k, lenbytes)) return -1;
    uint64_t n = le(k->p, lenbytes);
    k->p += lenbytes;
    if (n > (uint64_t)(k->end - k->p)) return fail(k, "string of %llu bytes past the end of the pickle at byte %zu", (unsigned long long)n, at(k));
    Obj *o = new_obj(k, K_STR);
    o->s = xmalloc(n + 1);
    memcpy(o->s, k->p, n);
    o->s[n] = 0;
    o->len = n;
    k->p += n;
    return push(k, o);
}

/* LONG1: a little-endian two's-complement integer of up to 8 bytes here */
static int op_long1(Pk *k) {
    if (need(k, 1)) return -1;
    int n = *k->p++;
    if (n > 8) return fail(k, "integer of %d bytes at byte %zu (at most 8 in a state dict)", n, at(k));
    if (need(k, n)) return -1;
    uint64_t v = le(k->p, n);
    if (n && n < 8 && (k->p[n - 1] & 0x80)) v |= ~(uint64_t)0 << (8 * n);   /* sign-extend */
    k->p += n;
    return push_int(k, (int64_t)v);
}

static int op_binfloat(Pk *k) {
    if (need(k, 8)) return -1;
    uint64_t bits = 0;
    for (int i = 0; i < 8; i++) bits = bits << 8 | k->p[i];   /* big-endian */
    k->p += 8;
    Obj *o = new_obj(k, K_FLOAT);
    o->i = (int64_t)bits;
    return push(k, o);
}

/* a line of GLOBAL's argument, for the refusal message: printable ASCII only */
static void printable(char *dst, size_t cap, const uint8_t *s, size_t n) {
    size_t j = 0;
    for (size_t i = 0; i < n && j + 1 < cap; i++) dst[j++] = s[i] >= 0x20 && s[i] < 0x7f ? (char)s[i] : '?';
    dst[j] = 0;
}

static int op_global(Pk *k) {
    const uint8_t *mod = k->p, *nl1 = memchr(mod, '\n', (size_t)(k->end - mod));
    const uint8_t *name = nl1 ? nl1 + 1 : NULL, *nl2 = nl1 ? memchr(name, '\n', (size_t)(k->end - name)) : NULL;
    if (!nl2) return fail(k, "pickle truncated in a GLOBAL at byte %zu", at(k));
    size_t ml = (size_t)(nl1 - mod), nlen = (size_t)(nl2 - name);
    k->p = nl2 + 1;
    for (size_t i = 0; i < sizeof allowed / sizeof *allowed; i++)
        if (strlen(allowed[i].module) == ml && !memcmp(allowed[i].module, mod, ml) &&
            strlen(allowed[i].name) == nlen && !memcmp(allowed[i].name, name, nlen)) {
            Obj *o = new_obj(k, K_GLOBAL);
            o->i = allowed[i].g;
            o->dt = allowed[i].dt;
            return push(k, o);
        }
    char m[100], n[100];
    printable(m, sizeof m, mod, ml);
    printable(n, sizeof n, name, nlen);
    return fail(k, "pickle imports %s.%s; refusing (only state-dict globals are allowed)", m, n);
}

static int memo_put(Pk *k, uint64_t idx) {
    Obj *o = top(k);
    if (!o) return -1;
    if (idx >= PK_MAX_MEMO) return fail(k, "pickle memo index %llu at byte %zu is too large", (unsigned long long)idx, at(k));
    if (idx >= (uint64_t)k->memo_cap) {
        int cap = k->memo_cap ? k->memo_cap : 64;
        while ((uint64_t)cap <= idx) cap *= 2;
        k->memo = xrealloc(k->memo, sizeof(Obj *) * cap);
        memset(k->memo + k->memo_cap, 0, sizeof(Obj *) * (cap - k->memo_cap));
        k->memo_cap = cap;
    }
    if (!k->memo[idx]) k->memo_count++;
    k->memo[idx] = o;
    return 0;
}

static int memo_get(Pk *k, uint64_t idx) {
    if (idx >= (uint64_t)k->memo_cap || !k->memo[idx])
        return fail(k, "pickle reads memo %llu, never stored, at byte %zu", (unsigned long long)idx, at(k));
    return push(k, k->memo[idx]);
}

/* reads an n-byte little-endian memo index and stores or fetches */
static int op_memo(Pk *k, int n, int put) {
    if (need(k, n)) return -1;
    uint64_t idx = le(k->p, n);
    k->p += n;
    return put ? memo_put(k, idx) : memo_get(k, idx);
}

static int op_tuple(Pk *k, int n) {
    Obj **items;
    if (n < 0) {
        if (pop_mark(k, &items, &n)) return -1;
    } else {
        int floor = k->nmarks ? k->marks[k->nmarks - 1] : 0;
        if (k->sp - floor < n) return fail(k, "pickle stack underflow at byte %zu", at(k));
        k->sp -= n;
        items = k->stack + k->sp;
    }
    Obj *t = new_obj(k, K_TUPLE);
    for (int i = 0; i < n; i++) add_item(t, items[i]);
    return push(k, t);
}

/* SETITEM(S) on a dict, APPEND(S) on a list: pairs or single values */
static int op_fill(Pk *k, int kind, int marked) {
    Obj **items, *one[2];
    int n;
    if (marked) {
        if (pop_mark(k, &items, &n)) return -1;
    } else {
        n = kind == K_DICT ? 2 : 1;
        for (int i = n - 1; i >= 0; i--) if (!(one[i] = pop(k))) return -1;
        items = one;
    }
    Obj *c = top(k);
    if (!c) return -1;
    if (c->kind != kind)
        return fail(k, "pickle %s into something that is not a %s at byte %zu", kind == K_DICT ? "sets items" : "appends",
                    kind == K_DICT ? "dict" : "list", at(k));
    if (kind == K_DICT && n % 2) return fail(k, "pickle SETITEMS with an odd count at byte %zu", at(k));
    for (int i = 0; i < n; i++) add_item(c, items[i]);
    return 0;
}

static int storage_index(Pk *k, const Obj *key, const char *dt, int64_t numel) {
    TpStateDict *sd = k->out;
    for (int i = 0; i < sd->nstorages; i++)
        if (!strcmp(sd->storages[i].key, key->s)) {
            if (strcmp(sd->storages[i].dtype_name, dt) || sd->storages[i].numel != numel)
                return fail(k, "storage %s is declared twice with different types or sizes", key->s);
            return i;
        }
    sd->storages = xrealloc(sd->storages, sizeof(TpStorage) * (sd->nstorages + 1));
    TpStorage *s = &sd->storages[sd->nstorages];
    s->key = xstrdup(key->s);
    snprintf(s->dtype_name, sizeof s->dtype_name, "%s", dt);
    s->numel = numel;
    return sd->nstorages++;
}

/* BINPERSID with ('storage', <StorageType>, key, location, numel): a
 * reference to the zip entry <archive>/data/<key> */
static int op_persid(Pk *k) {
    Obj *pid = pop(k);
    if (!pid) return -1;
    Obj **a = pid->items;
    if (pid->kind != K_TUPLE || pid->n != 5 || a[0]->kind != K_STR || strcmp(a[0]->s, "storage") ||
        a[1]->kind != K_GLOBAL || a[1]->i != G_STORAGE_TYPE || a[2]->kind != K_STR || a[3]->kind != K_STR ||
        a[4]->kind != K_INT)
        return fail(k, "persistent id at byte %zu is not ('storage', <storage type>, key, location, numel)", at(k));
    const Obj *key = a[2];
    if (!key->len || key->len > PK_MAX_KEY || strlen(key->s) != key->len || strchr(key->s, '/'))
        return fail(k, "storage key at byte %zu is not a plain name", at(k));
    if (a[4]->i < 0) return fail(k, "storage %s has %lld elements", key->s, (long long)a[4]->i);
    int idx = storage_index(k, key, a[1]->dt, a[4]->i);
    if (idx < 0) return -1;
    Obj *o = new_obj(k, K_STORAGE);
    o->i = idx;
    return push(k, o);
}

/* a tuple of ints into dims[]; 0 / -1 */
static int int_tuple(const Obj *t, int64_t *dims, int *n) {
    if (t->kind != K_TUPLE || t->n > ST_MAX_DIMS) return -1;
    for (int i = 0; i < t->n; i++) {
        if (t->items[i]->kind != K_INT) return -1;
        dims[i] = t->items[i]->i;
    }
    *n = t->n;
    return 0;
}

/* _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
 * backward_hooks[, metadata]): a view; its bounds are checked once the
 * storage's bytes are known (infer/model/ptbin.c) */
static Obj *rebuild_tensor(Pk *k, const Obj *args) {
    Obj **a = args->items;
    int ns = 0, nt = 0;
    TpTensor t = {0};
    if ((args->n != 6 && args->n != 7) || a[0]->kind != K_STORAGE || a[1]->kind != K_INT ||
        int_tuple(a[2], t.shape, &ns) || int_tuple(a[3], t.stride, &nt) || ns != nt) {
        fail(k, "_rebuild_tensor_v2 at byte %zu: arguments are not (storage, offset, size, stride, ...) of at most %d dims",
             at(k), ST_MAX_DIMS);
        return NULL;
    }
    t.storage = (int)a[0]->i;
    t.offset = a[1]->i;
    t.ndim = ns;
    Obj *o = new_obj(k, K_TENSOR);
    o->t = xmalloc(sizeof t);
    *o->t = t;
    return o;
}

/* REDUCE: the only calls a state dict makes, recognised, never executed */
static int op_reduce(Pk *k) {
    Obj *args = pop(k), *fn = args ? pop(k) : NULL;
    if (!fn) return -1;
    if (fn->kind != K_GLOBAL || args->kind != K_TUPLE)
        return fail(k, "pickle REDUCE at byte %zu calls something that is not an allowed global", at(k));
    Obj *r = NULL;
    if (fn->i == G_ODICT && args->n == 0) r = new_obj(k, K_DICT);
    else if (fn->i == G_REBUILD) { if (!(r = rebuild_tensor(k, args))) return -1; }
    else if (fn->i == G_PARAM && args->n == 3 && args->items[0]->kind == K_TENSOR) r = args->items[0];
    if (!r) return fail(k, "pickle REDUCE at byte %zu is not a call a state dict makes", at(k));
    return push(k, r);
}

/* BUILD sets an object's state: an OrderedDict's _metadata, a parameter's
 * extras.  Neither matters to the weights, so the state is dropped. */
static int op_build(Pk *k) {
    Obj *state = pop(k), *o = state ? top(k) : NULL;
    if (!o) return -1;
    if (o->kind != K_DICT && o->kind != K_TENSOR) return fail(k, "pickle BUILD at byte %zu on something that is not a dict or tensor", at(k));
    return 0;
}

static int op_mark(Pk *k) {
    if (k->nmarks == PK_MAX_MARKS) return fail(k, "pickle nests more than %d MARKs", PK_MAX_MARKS);
    if (k->nmarks == k->marks_cap) {
        k->marks_cap = k->marks_cap ? 2 * k->marks_cap : 16;
        k->marks = xrealloc(k->marks, sizeof(int) * k->marks_cap);
    }
    k->marks[k->nmarks++] = k->sp;
    return 0;
}

static int push_new(Pk *k, int kind, int64_t i) {
    Obj *o = new_obj(k, kind);
    o->i = i;
    return push(k, o);
}

/* One opcode; 1 at STOP. */
static int step(Pk *k) {
    if (need(k, 1)) return -1;
    int op = *k->p++;
    switch (op) {
    case 0x80:   /* PROTO */
        if (need(k, 1)) return -1;
        if (*k->p > 5) return fail(k, "pickle protocol %d", *k->p);
        k->p++;
        return 0;
    case 0x95:   /* FRAME: a length hint only */
        if (need(k, 8)) return -1;
        k->p += 8;
        return 0;
    case '}': return push_new(k, K_DICT, 0);
    case ']': return push_new(k, K_LIST, 0);
    case ')': return push_new(k, K_TUPLE, 0);
    case 'N': return push_new(k, K_NONE, 0);
    case 0x88: return push_new(k, K_BOOL, 1);
    case 0x89: return push_new(k, K_BOOL, 0);
    case '(': return op_mark(k);
    case 'X': case 'T': return op_string(k, 4);   /* BINUNICODE, BINSTRING */
    case 0x8c: case 'U': return op_string(k, 1);  /* SHORT_BINUNICODE, SHORT_BINSTRING */
    case 'J':
        if (need(k, 4)) return -1;
        k->p += 4;
        return push_int(k, (int32_t)(uint32_t)le(k->p - 4, 4));
    case 'K': case 'M': {
        int n = op == 'K' ? 1 : 2;
        if (need(k, n)) return -1;
        k->p += n;
        return push_int(k, (int64_t)le(k->p - n, n));
    }
    case 0x8a: return op_long1(k);
    case 'G': return op_binfloat(k);
    case 't': return op_tuple(k, -1);
    case 0x85: return op_tuple(k, 1);
    case 0x86: return op_tuple(k, 2);
    case 0x87: return op_tuple(k, 3);
    case 'c': return op_global(k);
    case 'Q': return op_persid(k);
    case 'R': return op_reduce(k);
    case 's': return op_fill(k, K_DICT, 0);
    case 'u': return op_fill(k, K_DICT, 1);
    case 'a': return op_fill(k, K_LIST, 0);
    case 'e': return op_fill(k, K_LIST, 1);
    case 'b': return op_build(k);
    case 'q': return op_memo(k, 1, 1);
    case 'r': return op_memo(k, 4, 1);
    case 'h': return op_memo(k, 1, 0);
    case 'j': return op_memo(k, 4, 0);
    case 0x94: return memo_put(k, (uint64_t)k->memo_count);   /* MEMOIZE */
    case '.': return 1;
    default:
        return fail(k, "pickle opcode 0x%02x at byte %zu is not one a state dict uses; refusing", op, at(k) - 1);
    }
}

/* The pickle's result: a dict of name -> tensor, copied into out. */
static int collect(Pk *k, const Obj *d) {
    if (d->kind != K_DICT) return fail(k, "pickle holds no state dict (its top object is not a dict)");
    TpStateDict *sd = k->out;
    sd->tensors = xcalloc(d->n / 2 + 1, sizeof(TpTensor));
    for (int i = 0; i + 1 < d->n; i += 2) {
        const Obj *key = d->items[i], *v = d->items[i + 1];
        if (key->kind != K_STR || strlen(key->s) != key->len) return fail(k, "state dict key %d is not a name", i / 2);
        if (v->kind != K_TENSOR) return fail(k, "state dict entry %s is not a tensor", key->s);
        for (int j = 0; j < sd->ntensors; j++)
            if (!strcmp(sd->tensors[j].name, key->s)) return fail(k, "state dict names tensor %s twice", key->s);
        sd->tensors[sd->ntensors] = *v->t;
        sd->tensors[sd->ntensors++].name = xstrdup(key->s);
    }
    return 0;
}

static void pk_free(Pk *k) {
    for (size_t i = 0; i < k->nall; i++) {
        free(k->all[i]->s);
        free(k->all[i]->items);
        free(k->all[i]->t);
        free(k->all[i]);
    }
    free(k->all); free(k->stack); free(k->marks); free(k->memo);
}

int tp_parse(const char *file, const uint8_t *buf, size_t n, TpStateDict *out) {
    memset(out, 0, sizeof *out);
    Pk k = {.file = file, .start = buf, .p = buf, .end = buf + n, .out = out};
    int rc;
    while ((rc = step(&k)) == 0) {}
    if (rc == 1) {
        Obj *r = pop(&k);
        rc = r ? collect(&k, r) : -1;
    }
    pk_free(&k);
    if (rc) tp_free(out);
    return rc;
}

void tp_free(TpStateDict *sd) {
    for (int i = 0; i < sd->nstorages; i++) free(sd->storages[i].key);
    for (int i = 0; i < sd->ntensors; i++) free(sd->tensors[i].name);
    free(sd->storages); free(sd->tensors);
    memset(sd, 0, sizeof *sd);
}
