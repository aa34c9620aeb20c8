/* Growable buffers the tokenizers build their results in: bytes (Buf),
 * token ids (IdVec), pieces of text (PieceVec), and a bump arena (Arena)
 * for strings that live until the end of one encode or decode call.  They
 * grow with xrealloc, which exits on out-of-memory, so nothing here fails.
 * A zeroed struct is an empty buffer.  Internal to infer/text. */
#ifndef C2T_TEXT_BUF_H
#define C2T_TEXT_BUF_H
#include <stddef.h>
#include <stdint.h>

/* Bytes.  After any put, v[n] is a NUL, so v is a C string when the bytes
 * hold no NUL; v stays NULL until the first put. */
typedef struct { char *v; size_t n, cap; } Buf;
void buf_put(Buf *b, const void *p, size_t n);
static inline void buf_putc(Buf *b, char c) { buf_put(b, &c, 1); }

typedef struct { int32_t *v; size_t n, cap; } IdVec;
void idvec_push(IdVec *v, int32_t x);
void idvec_append(IdVec *v, const int32_t *x, size_t n);

/* A piece of text (not owned): a token (id >= 0) or text still to encode
 * (id -1).  orig0: the piece starts at offset 0 of the text given to
 * encode (Metaspace's prepend_scheme "first" prepends only there). */
typedef struct { const char *p; uint32_t len; int32_t id; uint8_t orig0; } Piece;
typedef struct { Piece *v; size_t n, cap; } PieceVec;
void piecevec_push(PieceVec *v, const char *p, size_t len, int32_t id, int orig0);

/* Bump allocator: arena_alloc returns n bytes aligned to 8 that stay valid
 * until arena_free, which releases everything at once. */
typedef struct ArenaBlock ArenaBlock;
typedef struct { ArenaBlock *head; } Arena;
char *arena_alloc(Arena *a, size_t n);
void arena_free(Arena *a);
#endif
