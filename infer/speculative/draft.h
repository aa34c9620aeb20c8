/* Draft sources behind one ops table: an EAGLE-1/2 head (draft_eagle.c:
 * drafts from the target's final hidden states and the next token's
 * embedding, reusing the target's embedding and LM head), an EAGLE-3 head
 * (draft_eagle3.c: drafts from the inputs of three target layers, with its
 * own norm, LM head and draft vocabulary) or a separate small draft LM
 * (draft_lm.c).  A new source is one more DraftOps and one line in
 * draft.c's table.
 *
 * Every source is a causal model whose last committed entry is the tree's root:
 * a node at depth d sits at draft position (committed − 1 + d).  During a
 * cycle, expanded nodes get temporary KV slots after the committed ones
 * (each sees the context and its own ancestors); draft_end_cycle drops them
 * and draft_catch_up commits what the target accepted.  This file's
 * functions keep that bookkeeping (slots, masks, positions, the distribution
 * op) for every source. */
#ifndef C2T_DRAFT_H
#define C2T_DRAFT_H
#include "infer/model/llama.h"
#include "infer/speculative/gate.h"
#include "infer/speculative/tree.h"

typedef struct Draft Draft;

/* One forward of a draft, of one of two types: a catch-up (the target
 * committed tokens[0..m), tokens[0] being the previous root, with features
 * hidden[m][feat_width] (device), and emitted `next`, the new root) or a
 * cycle's tree nodes (nodes[0..n) of a tree of tree_n nodes, with parents
 * par, tokens tok at positions pos, each seeing the committed context and
 * the entries mask marks in the window of this cycle's entries, mask_w =
 * d->n_temp + n wide (SeqView), written as temporary entries from slot
 * d->n_past + d->n_temp). */
struct DraftStep {
    Draft *d;
    int catch_up;
    const int *tokens;
    const float *hidden;
    int m, next;
    const int *nodes, *par, *tok, *pos;
    int n, tree_n;
    const uint8_t *mask;
    int mask_w;
    int on_device;      /* nodes, par, tok, pos and mask are backend memory (the device cycle's) */
    /* on_device: the step's first KV slot, d->n_past + d->n_temp, in
     * backend memory (tree_inputs' out[4m]), where every source reads it,
     * so that none of the step's inputs is an upload */
    const int *past;
    /* a catch-up's entries kept from the cycle's drafting (DraftOps.keeps_path):
     * tokens[1..kept] are already in entries keep[0..kept) (backend memory)
     * counted from d->n_past, ascending; only the rest and next are
     * forwarded */
    const int *keep;
    int kept;
    /* results: a catch-up's committed entries (the root's logits go to
     * d->root_logits); the nodes' logits [n][Vd] (backend memory, valid
     * until the next step of any draft of the run that made them) */
    int added;
    const float *logits;
};

typedef struct {
    const char *kind;   /* --draft-kind name */
    /* --draft-kind auto: the first source whose detect accepts the draft's
     * config.json (detect_rule says when, for help texts), else the one
     * marked auto_default. */
    int (*detect)(const ModelConfig *c);
    const char *detect_rule;
    int auto_default;
    /* Reads the checkpoint in dir: sets d->impl, d->cfg, d->config_hash. */
    int (*load)(Draft *d, const char *dir);
    void (*free)(Draft *d);              /* d->impl and what it holds */
    /* Optional: the source's own state cut to the d->n_past entries
     * draft_rewind kept (0: a new prompt). */
    void (*rewind)(Draft *d);
    /* Runs the steps of n different drafts of this source, all of one type,
     * as one batched forward where the source can (n is 1 for a draft
     * decoding alone); 0, or -1 with err_set. */
    int (*run)(DraftStep *const *steps, int n);
    /* Optional: dst (a copy of src's Draft) gets its own context and
     * buffers over src's weights, which src keeps and must outlive it. */
    int (*clone)(Draft *dst, const Draft *src);
    void (*end_cycle)(Draft *d);         /* optional: drop this cycle's temporary entries */
    /* Optional: the whole of draft_expand, for a source without a model (the
     * tests' scripted draft); on the device cycle too, over the pool read
     * back (cycle_expand). */
    int (*expand)(Draft *d, const Tree *t, const int *nodes, int n, int k, int topm, int *ids, float *probs,
                  float *entropy);
    /* Optional: score only target tokens ids[0..n) (ascending) from now on;
     * logits then have n columns, column j for token ids[j]; ids NULL (n
     * the full vocabulary): every token again. */
    int (*set_vocab)(Draft *d, const int *ids, int n);
    /* Whether a catch-up may keep the entries this cycle's steps wrote for
     * the accepted path (DraftStep.keep) instead of forwarding those tokens
     * again: a model's entry for a node sees the committed context and the
     * node's ancestors at the node's position, what a forward of the path
     * computes (a draft LM; not an EAGLE head, whose catch-up takes the
     * target's features in place of its own). */
    int keeps_path;
    /* A draft's first catch-up gives tokens[0] an entry of its own (a draft
     * LM: an entry a token, the root's the last), so the entries of k
     * committed tokens under root token k number k + 1; an EAGLE head's
     * entry pairs a feature with the next token, none holds tokens[0]:
     * k of them. */
    int first_token_entry;
} DraftOps;

struct Draft {
    const DraftOps *ops;
    void *impl;              /* the source's own state */
    const LlamaModel *target;
    const Backend *be;
    int slots;               /* KV capacity */
    int n_past;              /* committed entries (the last one is the root) */
    int n_temp;              /* temporary tree entries of this cycle */
    int *slot_of;            /* per tree node: its temporary slot, -1 if none */
    /* This cycle's entries where a catch-up can read them (DraftOps.keeps_path
     * on the CPU backend, whose tree is host memory): entry e, slot n_past +
     * e, holds token ent_token[e] under entry ent_parent[e] (-1: the root);
     * ent_n of them (-1: not a whole record), written while n_past was
     * ent_past. */
    int *ent_token, *ent_parent;
    int ent_n, ent_cap, ent_past;
    int *keep_dev, keep_cap;   /* backend memory: a catch-up's kept entries (DraftStep.keep) */
    int node_cap;
    int V, H;
    int Vd;                  /* columns of the draft's logits: V, or a reduced draft vocabulary */
    int *d2t;                /* host [Vd]: column -> target token id; NULL when Vd == V */
    int *d2t_dev;            /* the same in backend memory (the device cycle's) */
    /* What catch-up reads from the target's forward: its final hidden states
     * (n_feat_layers 0), or the inputs of decoder layers feat_layers[]
     * side by side (EAGLE-3; LlamaState.aux); feat_width floats a token. */
    int feat_layers[EAGLE3_FEAT_LAYERS];
    int n_feat_layers;
    int feat_width;
    ModelConfig cfg;
    char dir[512];
    char config_hash[17];
    char weight_types[128];  /* st_weight_types of its checkpoint, for reports */
    float *root_logits;      /* device, V: the distribution under the root */
    double t_dist;           /* seconds in softmax / top-k / entropy, cumulative */
    long long rows_scored;   /* logit rows computed (tree nodes expanded, catch-ups' roots), cumulative */
    long long steps_scored;  /* the LM-head products that computed them (one per catch-up or expansion) */
    long long kept_tokens;   /* catch-up tokens whose drafted entries were kept (DraftStep.keep), cumulative */
    TreeInputs dev_inputs;   /* the device cycle's forward inputs, in backend memory */
    int *past_dev;           /* backend memory, one int: n_past as draft_cycle_origin left it */
    Gate *gate;              /* where its forwards go when several sequences decode together; NULL: at once */
    /* --draft-temperature: the draft's logits are divided by it before the
     * softmax that gives p, P and H (1: the head as trained).  Verification
     * is unchanged, so decoding stays lossless; trees, τ and γ change.  For
     * experiments on calibration (a head whose P ranks nodes worse). */
    float temperature;
};

extern const DraftOps draft_eagle_ops, draft_eagle3_ops, draft_lm_ops;

/* kind "eagle", "eagle3" or "lm"; NULL or "auto" reads dir/config.json and
 * picks by the sources' detect rules (draft_kind_help).  Checks the draft
 * fits the target (vocabulary, hidden size) and names the mismatch
 * otherwise. */
Draft *draft_load(const char *kind, const char *dir, const LlamaModel *target, int slots);
/* The kinds draft_load takes, "eagle | eagle3 | lm | auto", from its one list
 * of sources (errors print it); whether kind is one of them. */
const char *draft_kind_names(void);
int draft_kind_known(const char *kind);
/* For --help: the kinds and what auto picks, from the same list (lines
 * after the first indented for a help column at 25). */
const char *draft_kind_help(void);
/* Asks the target state to capture what d reads at catch-up (nothing for
 * heads that read the final hidden states), and returns those rows of the
 * last forward: draft_catch_up's hidden argument. */
int draft_capture(const Draft *d, LlamaState *s);
const float *draft_features(const Draft *d, const LlamaState *s);
/* Drafts from the n most frequent target tokens only (EAGLE-3's reduced
 * draft vocabulary): counted on the draft's training data and stored beside
 * it as token_counts.safetensors (tensor "token_counts", I64 [V]).  The LM
 * head shrinks from V to n rows; verification is unchanged, so decoding
 * stays lossless.  n <= 0 or n >= V: the full vocabulary (again). */
int draft_set_vocab(Draft *d, int n);
/* The share of the draft's token counts held by its n most frequent ids,
 * for every n: cov[0..V] (cov[V] = 1), in *seen the ids counted at least
 * once and, where rank is not NULL, rank[id] for each of the V ids: its
 * place in that order (the n most frequent are those of rank < n); NULL +
 * err_set as draft_set_vocab. */
double *draft_vocab_coverage(const Draft *d, int *seen, int *rank);
#define DRAFT_COUNTS_FILE "token_counts.safetensors"
/* A second draft over d's weights for another sequence (batched decoding),
 * with its own context; d must outlive it.  NULL with err_set where the
 * source cannot share its weights. */
Draft *draft_clone(const Draft *d);
/* Runs the n distribution calls on be, calls with the same shape and
 * outputs as one softmax_topk (softmax_topk_dev where the outputs are
 * backend memory) over their rows, read where they lie when the calls'
 * logits are consecutive rows of one buffer (a batched draft step's),
 * else gathered into one: each row's results are those of a call of its
 * own. */
void draft_dists(const Backend *be, DistCall *const *calls, int n);

/* Runs steps of n different drafts (draft_step's gate does this for the
 * steps of every sequence waiting on one): those of one source and type in
 * one forward. */
int draft_run_steps(DraftStep *const *steps, int n);
/* A draft of another source (ops->load not called; impl is its state). */
Draft *draft_new(const DraftOps *ops, void *impl);
void draft_free(Draft *d);
const char *draft_kind_name(const Draft *d);
/* Keeps the entries of the first k committed tokens, token k being the
 * root, and forgets the rest; k 0: everything (a new prompt).  The next
 * catch-up's tokens[0] is then token k, its features those of tokens k...
 * k at most draft_prefix_max. */
void draft_rewind(Draft *d, int k);
/* The most committed tokens whose entries draft_rewind can keep: those the
 * draft has caught up on, less the root's entry. */
int draft_prefix_max(const Draft *d);
/* The target committed m tokens (tokens[0] is the previous root) with
 * features hidden[m][feat_width] (device; draft_features) and emitted
 * `next`, the new root. */
int draft_catch_up(Draft *d, const int *tokens, const float *hidden, int m, int next);
/* The draft distribution under each of nodes[0..n) of t: top-k children
 * (ids, probs; k per node) and the entropy over the topm largest
 * probabilities (0 = exact).  nodes is either {0} (the root) or non-root
 * nodes whose non-root ancestors were expanded earlier this cycle. */
int draft_expand(Draft *d, const Tree *t, const int *nodes, int n, int k, int topm, int *ids,
                 float *probs, float *entropy);
void draft_end_cycle(Draft *d);
/* The device cycle's: n_past to backend memory, where this cycle's
 * draft_expand_dev steps count their slots and positions from (one upload,
 * before the draft phase, so that the phase itself uploads nothing). */
void draft_cycle_origin(Draft *d);
/* Whether a device program's draft phase on d may be recorded as one unit
 * (backend_recorded): d decodes alone (a gate's steps wait on other
 * sequences) and its steps run a model (not DraftOps.expand).  A device
 * cycle's step reads every input where the step gives it, DraftStep.past
 * included: it uploads nothing and reads nothing back. */
int draft_unit_ok(const Draft *d);
/* The host-side counts a draft phase advances (temporary entries, rows and
 * steps scored, time in distributions): saved before a unit and restored
 * before each issue of it, so that a unit issued twice counts once. */
typedef struct { int n_temp; long long rows_scored, steps_scored; double t_dist; } DraftCounts;
DraftCounts draft_counts(const Draft *d);
void draft_counts_restore(Draft *d, const DraftCounts *c);
/* draft_expand for the device cycle (cycle.h): the distributions under
 * nodes rows[0..m) (backend memory) of t, a tree of n nodes in backend
 * memory, or under the root (root 1, rows unused), into ids/probs[m][k]
 * and entropy[m] (backend memory; NULL skips it), in the draft's columns
 * (tree_grow maps them with d2t_dev); the step's inputs by the cycle's
 * tree_inputs, on tree_be through tree_gate (the cycle's backend and gate,
 * DevCycle.gate: a batched sequence's waits there, infer/session/batch.c). */
int draft_expand_dev(Draft *d, const Backend *tree_be, Gate *tree_gate, const DevTree *t, int n, int root,
                     const int *rows, int m, int k, int topm, int *ids, float *probs, float *entropy);
#endif
