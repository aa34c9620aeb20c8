/* The byte-level (GPT-2) alphabet: every byte stands for one character, so
 * that BPE over characters covers any byte string.  Printable bytes are
 * their own character; the others take U+0100 onwards, in byte order.
 * Internal to infer/text. */
#ifndef C2T_TEXT_BYTELEVEL_H
#define C2T_TEXT_BYTELEVEL_H
#include <stdint.h>

/* Fills the tables below, once (thread-safe).  Every tokenizer is made
 * after a call to it (tokenizer_load), so encoders and decoders read the
 * tables without calling it. */
void bytelevel_init(void);
extern char bytelevel_enc[256][3];      /* byte -> its character's UTF-8 */
extern uint8_t bytelevel_enc_len[256];  /* ... and its length (1 or 2) */
extern int16_t bytelevel_dec[324];      /* code point -> byte, -1 for none */
#endif
