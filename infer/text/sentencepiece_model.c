/* SentencePiece tokenizer.model, read directly.
 *
 * The file is a protobuf ModelProto; a minimal wire-format reader takes the
 * fields we need: pieces (piece, score, type), trainer_spec (model_type,
 * byte_fallback, unk/bos/eos ids, unk_surface, treat_whitespace_as_suffix) and
 * normalizer_spec (name, precompiled_charsmap, add_dummy_prefix,
 * remove_extra_whitespaces, escape_whitespaces).  Hand-written: the project
 * links no protobuf library, and these few fields need none.  The same
 * fields are written back by tokenizer_write_spm (spec-convert). */
#include "infer/text/tokenizer_internal.h"
#include "kernels/base/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- protobuf wire format ---- */
typedef struct { const unsigned char *p, *end; } PB;

static int pb_varint(PB *b, uint64_t *v) {
    uint64_t r = 0;
    for (int s = 0; s < 64; s += 7) {
        if (b->p >= b->end) return -1;
        unsigned c = *b->p++;
        r |= (uint64_t)(c & 0x7F) << s;
        if (!(c & 0x80)) { *v = r; return 0; }
    }
    return -1;
}

static int pb_key(PB *b, uint32_t *field, int *wt) {
    uint64_t k;
    if (pb_varint(b, &k)) return -1;
    *field = (uint32_t)(k >> 3);
    *wt = (int)(k & 7);
    return 0;
}

static int pb_len(PB *b, PB *sub) {
    uint64_t n;
    if (pb_varint(b, &n) || n > (uint64_t)(b->end - b->p)) return -1;
    sub->p = b->p; sub->end = b->p + n;
    b->p += n;
    return 0;
}

static int pb_skip(PB *b, int wt) {
    uint64_t v; PB s;
    switch (wt) {
    case 0: return pb_varint(b, &v);
    case 1: if (b->end - b->p < 8) return -1; b->p += 8; return 0;
    case 2: return pb_len(b, &s);
    case 5: if (b->end - b->p < 4) return -1; b->p += 4; return 0;
    default: return -1;
    }
}

static int pb_fixed32(PB *b, uint32_t *v) {
    if (b->end - b->p < 4) return -1;
    *v = (uint32_t)b->p[0] | (uint32_t)b->p[1] << 8 | (uint32_t)b->p[2] << 16 | (uint32_t)b->p[3] << 24;
    b->p += 4;
    return 0;
}

enum { SP_NORMAL = 1, SP_UNKNOWN = 2, SP_CONTROL = 3, SP_USER = 4, SP_UNUSED = 5, SP_BYTE = 6 };

typedef struct { const unsigned char *s; size_t n; float score; int type; } RawPiece;

int spm_read_model(Tokenizer *t, const unsigned char *data, size_t len, const char *path) {
    PB b = {data, data + len};
    RawPiece *pieces = NULL; size_t np = 0, cap = 0;
    int model_type = 1, byte_fallback = 0;
    long unk_id = 0, bos_id = 1, eos_id = 2;
    int add_dummy = 1, remove_ws = 1, escape_ws = 1, ws_suffix = 0;
    const unsigned char *norm_name = NULL; size_t norm_name_n = 0;
    size_t charsmap_n = 0;
    const unsigned char *unk_surface = NULL; size_t unk_surface_n = 0; int has_unk_surface = 0;
    while (b.p < b.end) {
        uint32_t f; int wt;
        if (pb_key(&b, &f, &wt)) goto bad;
        if (f == 1 && wt == 2) {
            PB s;
            if (pb_len(&b, &s)) goto bad;
            RawPiece rp = {NULL, 0, 0.0f, SP_NORMAL};
            while (s.p < s.end) {
                uint32_t g; int w2;
                if (pb_key(&s, &g, &w2)) goto bad;
                if (g == 1 && w2 == 2) { PB x; if (pb_len(&s, &x)) goto bad; rp.s = x.p; rp.n = (size_t)(x.end - x.p); }
                else if (g == 2 && w2 == 5) { uint32_t u; if (pb_fixed32(&s, &u)) goto bad; memcpy(&rp.score, &u, 4); }
                else if (g == 3 && w2 == 0) { uint64_t v; if (pb_varint(&s, &v)) goto bad; rp.type = (int)v; }
                else if (pb_skip(&s, w2)) goto bad;
            }
            if (np == cap) { cap = cap ? cap * 2 : 1024; pieces = xrealloc(pieces, cap * sizeof *pieces); }
            pieces[np++] = rp;
        } else if (f == 2 && wt == 2) {
            PB s;
            if (pb_len(&b, &s)) goto bad;
            while (s.p < s.end) {
                uint32_t g; int w2; uint64_t v;
                if (pb_key(&s, &g, &w2)) goto bad;
                if (w2 == 0 && (g == 3 || g == 35 || g == 40 || g == 41 || g == 42 || g == 24)) {
                    if (pb_varint(&s, &v)) goto bad;
                    if (g == 3) model_type = (int)v;
                    else if (g == 35) byte_fallback = v != 0;
                    else if (g == 40) unk_id = (long)(int32_t)v;
                    else if (g == 41) bos_id = (long)(int32_t)v;
                    else if (g == 42) eos_id = (long)(int32_t)v;
                    else if (g == 24) ws_suffix = v != 0;
                } else if (g == 44 && w2 == 2) {
                    PB x; if (pb_len(&s, &x)) goto bad;
                    unk_surface = x.p; unk_surface_n = (size_t)(x.end - x.p); has_unk_surface = 1;
                } else if (pb_skip(&s, w2)) goto bad;
            }
        } else if (f == 3 && wt == 2) {
            PB s;
            if (pb_len(&b, &s)) goto bad;
            while (s.p < s.end) {
                uint32_t g; int w2; uint64_t v;
                if (pb_key(&s, &g, &w2)) goto bad;
                if (g == 1 && w2 == 2) { PB x; if (pb_len(&s, &x)) goto bad; norm_name = x.p; norm_name_n = (size_t)(x.end - x.p); }
                else if (g == 2 && w2 == 2) { PB x; if (pb_len(&s, &x)) goto bad; charsmap_n = (size_t)(x.end - x.p); }
                else if ((g == 3 || g == 4 || g == 5) && w2 == 0) {
                    if (pb_varint(&s, &v)) goto bad;
                    if (g == 3) add_dummy = v != 0; else if (g == 4) remove_ws = v != 0; else escape_ws = v != 0;
                } else if (pb_skip(&s, w2)) goto bad;
            }
        } else if (pb_skip(&b, wt)) goto bad;
    }
    if (!np) { err_set("%s: not a SentencePiece model (no pieces)", path); free(pieces); return -1; }
    if (model_type != 2) {
        static const char *names[] = {"?", "UNIGRAM", "BPE", "WORD", "CHAR"};
        err_set("%s: SentencePiece model_type %s is not supported (only BPE)", path,
                model_type >= 1 && model_type <= 4 ? names[model_type] : "unknown");
        free(pieces);
        return -1;
    }
    if (charsmap_n) {
        err_set("%s: SentencePiece normalizer '%.*s' (precompiled charsmap) is not supported (only identity)", path,
                (int)norm_name_n, norm_name ? (const char *)norm_name : "");
        free(pieces);
        return -1;
    }
    if (ws_suffix) { err_set("%s: treat_whitespace_as_suffix is not supported", path); free(pieces); return -1; }
    t->spm_add_dummy_prefix = add_dummy;
    t->spm_remove_extra_ws = remove_ws;
    t->spm_escape_ws = escape_ws;
    t->spm_ws_suffix = ws_suffix;
    t->byte_fallback = byte_fallback;
    if (has_unk_surface) {
        t->spm_unk_surface = xmalloc(unk_surface_n + 1);
        memcpy(t->spm_unk_surface, unk_surface, unk_surface_n);
        t->spm_unk_surface[unk_surface_n] = 0;
    } else t->spm_unk_surface = xstrdup(" \xE2\x81\x87 ");
    t->score = xmalloc(sizeof(float) * np);
    strmap_init(&t->spm_pieces, np);
    strmap_init(&t->spm_reserved, 300);
    t->unk_id = -1;
    for (size_t i = 0; i < np; i++) {
        const RawPiece *rp = &pieces[i];
        if (!rp->n) { err_set("%s: piece %zu is empty", path, i); free(pieces); return -1; }
        /* pieces are C strings from here on (strcmp, xstrdup): a NUL inside
         * one made copies shorter than their recorded length (found by
         * tests/fuzz: a heap over-read) */
        if (memchr(rp->s, 0, rp->n)) { err_set("%s: piece %zu holds a NUL byte", path, i); free(pieces); return -1; }
        uint8_t attr = 0;
        switch (rp->type) {
        case SP_UNKNOWN: attr = TA_UNKNOWN; break;
        case SP_CONTROL: attr = TA_CONTROL; break;
        case SP_USER: attr = TA_USER; break;
        case SP_UNUSED: attr = TA_UNUSED; break;
        case SP_BYTE: attr = TA_BYTE; break;
        default: break;
        }
        tk_set_token(t, (int32_t)i, (const char *)rp->s, rp->n, attr);
        t->score[i] = rp->score;
        int normal = rp->type == SP_NORMAL || rp->type == SP_USER || rp->type == SP_UNUSED;
        StrMap *m = normal ? &t->spm_pieces : &t->spm_reserved;
        if (strmap_get(m, t->tok[i], rp->n) >= 0) { err_set("%s: piece '%s' is defined twice", path, t->tok[i]); free(pieces); return -1; }
        strmap_put(m, t->tok[i], rp->n, (int32_t)i);
        if (rp->type == SP_UNKNOWN) t->unk_id = (int32_t)i;
        if (rp->type == SP_BYTE) {
            int v = -1;
            if (rp->n == 6 && !memcmp(rp->s, "<0x", 3) && rp->s[5] == '>') v = (int)strtol((const char *)t->tok[i] + 3, NULL, 16);
            if (v < 0 || v > 255) { err_set("%s: byte piece '%s' is invalid", path, t->tok[i]); free(pieces); return -1; }
            t->byte_id[v] = (int32_t)i;
        }
        if (rp->type == SP_USER) {
            t->user_idx = xrealloc(t->user_idx, sizeof(int) * (size_t)(t->n_user + 1));
            t->user_idx[t->n_user++] = (int)i;
        }
    }
    free(pieces);
    if (t->unk_id < 0) { err_set("%s: the model defines no unknown piece", path); return -1; }
    if (byte_fallback) for (int b2 = 0; b2 < 256; b2++)
        if (t->byte_id[b2] < 0) { err_set("%s: byte_fallback is on but byte piece <0x%02X> is missing", path, b2); return -1; }
    if (bos_id >= 0 && bos_id < (long)np) t->bos_id = (int32_t)bos_id;
    if (eos_id >= 0 && eos_id < (long)np) t->eos_id = (int32_t)eos_id;
    (void)unk_id;
    t->cache = word_cache_new();
    t->ws_split = escape_ws && ws_split_safe(t, &t->spm_pieces);
    return 0;
bad:
    free(pieces);
    err_set("%s: malformed protobuf (not a SentencePiece tokenizer.model?)", path);
    return -1;
}

/* ---- writing a model ---- */

static void pw_varint(Buf *b, uint64_t v) {
    do {
        buf_putc(b, (char)((v & 0x7F) | (v > 0x7F ? 0x80 : 0)));
        v >>= 7;
    } while (v);
}
static void pw_key(Buf *b, uint32_t field, int wt) { pw_varint(b, (uint64_t)field << 3 | (uint64_t)wt); }
/* an int32 field: negative values take ten bytes, as protobuf writes them */
static void pw_int(Buf *b, uint32_t field, int64_t v) { pw_key(b, field, 0); pw_varint(b, (uint64_t)v); }
static void pw_bytes(Buf *b, uint32_t field, const void *p, size_t n) {
    pw_key(b, field, 2);
    pw_varint(b, n);
    buf_put(b, p, n);
}

int tokenizer_write_spm(const char *path, const SpmPiece *pieces, size_t n, const SpmSpec *spec) {
    Buf out = {0}, sub = {0};
    for (size_t i = 0; i < n; i++) {   /* ModelProto.pieces (1): piece (1), score (2, fixed32), type (3) */
        sub.n = 0;
        pw_bytes(&sub, 1, pieces[i].text, pieces[i].len);
        uint32_t u;
        memcpy(&u, &pieces[i].score, 4);
        pw_key(&sub, 2, 5);
        for (int k = 0; k < 4; k++) buf_putc(&sub, (char)(u >> 8 * k));
        pw_int(&sub, 3, pieces[i].type);
        pw_bytes(&out, 1, sub.v, sub.n);
    }
    /* trainer_spec (2): model_type BPE (3), vocab_size (4), byte_fallback (35), unk/bos/eos ids (40-42) */
    sub.n = 0;
    pw_int(&sub, 3, 2);
    pw_int(&sub, 4, (int64_t)n);
    pw_int(&sub, 35, spec->byte_fallback != 0);
    pw_int(&sub, 40, spec->unk_id);
    pw_int(&sub, 41, spec->bos_id);
    pw_int(&sub, 42, spec->eos_id);
    pw_bytes(&out, 2, sub.v, sub.n);
    /* normalizer_spec (3): name (1), add_dummy_prefix (3), remove_extra_whitespaces (4, default on: written
     * off), escape_whitespaces (5) */
    sub.n = 0;
    pw_bytes(&sub, 1, "identity", 8);
    pw_int(&sub, 3, spec->add_dummy_prefix != 0);
    pw_int(&sub, 4, 0);
    pw_int(&sub, 5, 1);
    pw_bytes(&out, 3, sub.v, sub.n);
    free(sub.v);
    char *tmp;
    FILE *f = atomic_create(path, &tmp);
    if (!f) { free(out.v); return -1; }
    const int bad = fwrite(out.v, 1, out.n, f) != out.n;
    free(out.v);
    return atomic_finish(f, tmp, path, bad);
}
