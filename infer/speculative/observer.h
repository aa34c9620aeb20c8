/* The cycle's observer interface: how what measures the cycle (the cost
 * model and its draft switch, the draft-vocabulary chooser, the backend's
 * thread tuner, a caller's cycle hook: infer/session/observers.h) watches
 * it from outside its core.  The decoder (decode.c) calls its observers at
 * four points of a turn and knows nothing of what they measure; each
 * observer is one struct whose first member is an Observer, listed on the
 * decoder by decoder_watch. */
#ifndef C2T_OBSERVER_H
#define C2T_OBSERVER_H
#include "infer/speculative/tree.h"

typedef struct Decoder Decoder;

/* One committed cycle, as the decoder reports it. */
typedef struct {
    const Tree *tree;     /* the verified tree on the host where a walk read it, else NULL (it is in
                             backend memory) */
    const Tree *keys;     /* its nodes' P and depths where the host has them (the tree, or what the
                             program read to size it), else NULL */
    const int *path;      /* accepted nodes, path[0] the root */
    const int *tokens;    /* their tokens */
    int n_path;
    int n_nodes;          /* nodes verified, the root included */
    int bonus;            /* the target's token after the path: the next root */
    int emitted;          /* tokens the cycle emitted (fewer than n_path where the turn ended) */
    int drafted;          /* 0: drafting was off, the root alone verified */
    int index;            /* the cycle's number in the turn, from 0 */
    double verify_s;      /* the target's forward and the acceptance */
    int walked_rows;      /* path rows scored one at a time after the forward (lazy logits), else 0 */
    double draft_s;       /* drafting since the last cycle ended, the catch-up on its tokens included */
    double deferred_s;    /* the catch-up on tokens drafting did not cover (the prompt's, drafting-off
                             cycles'): in neither draft_s nor, for the switch, the cycle's time */
} CycleReport;

/* The interface: every callback optional; a non-zero return is -1 with
 * err_set, and the turn is given up there (decoder_run returns -1). */
typedef struct Observer Observer;
struct Observer {
    const char *name;
    /* after the prompt's prefill and the draft's catch-up on it */
    int (*turn_begin)(Observer *o, Decoder *dec);
    /* before a cycle drafts, and once after the prefill: may turn drafting
     * off for the cycle (Decoder.cycle_off) */
    void (*cycle_begin)(Observer *o, Decoder *dec);
    /* after a cycle committed its path, before the draft catches up on it
     * (not called where drafting is off or the turn ended) */
    int (*before_catch_up)(Observer *o, Decoder *dec, int bonus);
    /* the cycle, committed and caught up on */
    int (*cycle_end)(Observer *o, Decoder *dec, const CycleReport *r);
    void (*destroy)(Observer *o);
    Observer *next;
};

/* Appends o to dec's observers (called in that order); the decoder destroys
 * it with itself. */
void decoder_watch(Decoder *dec, Observer *o);
/* dec's observer of that name, or NULL. */
Observer *decoder_observer(const Decoder *dec, const char *name);
#endif
