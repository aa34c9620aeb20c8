/* NFC (nfc.h).  A quick scan finds the texts NFC leaves alone: every code
 * point below U+0300 and every one outside nfc_unsafe (no combining class,
 * not changed by NFC, never the second half of a composition).  Any other
 * text is decomposed (Hangul syllables by their formula), its runs of
 * combining marks stably sorted by class, and composed again (UAX #15's
 * algorithm; Hangul LV and LVT by formula). */
#include "infer/text/nfc.h"
#include "infer/text/nfc_data.h"
#include "infer/text/utf8.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#include <string.h>

#define N_OF(a) (sizeof a / sizeof *a)
enum { S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7,
       L_COUNT = 19, V_COUNT = 21, T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT };

static int unsafe(uint32_t c) {
    if (c < nfc_unsafe[0][0]) return 0;
    size_t lo = 0, hi = N_OF(nfc_unsafe);
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (c < nfc_unsafe[m][0]) hi = m;
        else if (c > nfc_unsafe[m][1]) lo = m + 1;
        else return 1;
    }
    return 0;
}

static unsigned ccc(uint32_t c) {
    if (c < nfc_ccc[0][0]) return 0;
    size_t lo = 0, hi = N_OF(nfc_ccc);
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (c < nfc_ccc[m][0]) hi = m;
        else if (c > nfc_ccc[m][1]) lo = m + 1;
        else return nfc_ccc[m][2];
    }
    return 0;
}

/* The full decomposition of c (NULL and *len 0 when it has none). */
static const uint32_t *decomp(uint32_t c, size_t *len) {
    size_t lo = 0, hi = N_OF(nfc_decomp);
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (c < nfc_decomp[m][0]) hi = m;
        else if (c > nfc_decomp[m][0]) lo = m + 1;
        else { *len = nfc_decomp[m][2]; return nfc_decomp_pool + nfc_decomp[m][1]; }
    }
    *len = 0;
    return NULL;
}

/* The composite of a + b, or 0. */
static uint32_t compose(uint32_t a, uint32_t b) {
    if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT)
        return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE && b < T_BASE + T_COUNT)
        return a + (b - T_BASE);
    size_t lo = 0, hi = N_OF(nfc_comp);
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (a < nfc_comp[m][0] || (a == nfc_comp[m][0] && b < nfc_comp[m][1])) hi = m;
        else if (a > nfc_comp[m][0] || b > nfc_comp[m][1]) lo = m + 1;
        else return nfc_comp[m][2];
    }
    return 0;
}

typedef struct { uint32_t *v; size_t n, cap; } CpVec;
static void cp_push(CpVec *v, uint32_t c) {
    if (v->n == v->cap) { v->cap = v->cap ? v->cap * 2 : 64; v->v = xrealloc(v->v, v->cap * sizeof *v->v); }
    v->v[v->n++] = c;
}

const char *nfc_normalize(const char *s, size_t n, size_t *out_n, Arena *ar) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {                                   /* the quick scan */
        if (u[i] < 0xCC) { i += u[i] < 0x80 ? 1 : 2; continue; }  /* below U+0300 */
        int k = utf8_valid_char(u + i, n - i);
        if (!k) { i++; continue; }                    /* not ours to judge: left as it is */
        if (unsafe(utf8_decode(u + i, k))) break;
        i += (size_t)k;
    }
    *out_n = n;
    if (i >= n) return s;
    /* decompose */
    CpVec cp = {0};
    for (i = 0; i < n;) {
        int k = utf8_valid_char(u + i, n - i);
        if (!k) { cp_push(&cp, 0xFFFD); i++; continue; }   /* callers pass valid UTF-8 */
        uint32_t c = utf8_decode(u + i, k);
        i += (size_t)k;
        size_t dl;
        const uint32_t *d;
        if (c >= S_BASE && c < S_BASE + S_COUNT) {
            uint32_t si = c - S_BASE;
            cp_push(&cp, L_BASE + si / N_COUNT);
            cp_push(&cp, V_BASE + (si % N_COUNT) / T_COUNT);
            if (si % T_COUNT) cp_push(&cp, T_BASE + si % T_COUNT);
        } else if ((d = decomp(c, &dl)) != NULL) {
            for (size_t j = 0; j < dl; j++) cp_push(&cp, d[j]);
        } else cp_push(&cp, c);
    }
    /* canonical order: stable insertion sort of each run of marks by class */
    for (size_t a = 1; a < cp.n; a++) {
        uint32_t c = cp.v[a];
        unsigned cc = ccc(c);
        if (!cc) continue;
        size_t b = a;
        while (b > 0 && ccc(cp.v[b - 1]) > cc) { cp.v[b] = cp.v[b - 1]; b--; }
        cp.v[b] = c;
    }
    /* compose: a mark joins the last starter unless a character between
     * them has class 0 or a class >= its own */
    size_t w = 0, starter = (size_t)-1;
    int last_cc = -1;                                /* class of the last kept character after the starter; -1: none */
    for (size_t a = 0; a < cp.n; a++) {
        uint32_t c = cp.v[a];
        unsigned cc = ccc(c);
        if (starter != (size_t)-1 && (last_cc == -1 || (last_cc != 0 && (unsigned)last_cc < cc))) {
            uint32_t r = compose(cp.v[starter], c);
            if (r) { cp.v[starter] = r; continue; }
        }
        if (cc == 0) { starter = w; last_cc = -1; }
        else last_cc = (int)cc;
        cp.v[w++] = c;
    }
    /* encode */
    char *d = arena_alloc(ar, w * 4 + 1);
    size_t q = 0;
    for (size_t a = 0; a < w; a++) {
        uint32_t c = cp.v[a];
        if (c < 0x80) d[q++] = (char)c;
        else if (c < 0x800) { d[q++] = (char)(0xC0 | c >> 6); d[q++] = (char)(0x80 | (c & 0x3F)); }
        else if (c < 0x10000) {
            d[q++] = (char)(0xE0 | c >> 12); d[q++] = (char)(0x80 | ((c >> 6) & 0x3F)); d[q++] = (char)(0x80 | (c & 0x3F));
        } else {
            d[q++] = (char)(0xF0 | c >> 18); d[q++] = (char)(0x80 | ((c >> 12) & 0x3F));
            d[q++] = (char)(0x80 | ((c >> 6) & 0x3F)); d[q++] = (char)(0x80 | (c & 0x3F));
        }
    }
    d[q] = 0;
    free(cp.v);
    *out_n = q;
    return d;
}
