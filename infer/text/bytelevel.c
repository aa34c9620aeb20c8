/* The byte-level alphabet (bytelevel.h). */
#include "infer/text/bytelevel.h"
#include <pthread.h>

char bytelevel_enc[256][3];
uint8_t bytelevel_enc_len[256];
int16_t bytelevel_dec[324];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void fill(void) {
    int n = 0;
    for (int i = 0; i < 324; i++) bytelevel_dec[i] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        uint32_t cp = printable ? (uint32_t)b : (uint32_t)(256 + n++);
        bytelevel_dec[cp] = (int16_t)b;
        if (cp < 0x80) { bytelevel_enc[b][0] = (char)cp; bytelevel_enc_len[b] = 1; }
        else {
            bytelevel_enc[b][0] = (char)(0xC0 | (cp >> 6));
            bytelevel_enc[b][1] = (char)(0x80 | (cp & 0x3F));
            bytelevel_enc_len[b] = 2;
        }
    }
}

void bytelevel_init(void) { pthread_once(&once, fill); }
