/* spec-collect's engine: EAGLE-2's full draft trees on question files, every
 * node of every verified tree into a trace file (collect/trace.h), with the
 * run's settings as root attributes so that --resume continues only the
 * same run, and --shard splits the questions over processes. */
#ifndef C2T_COLLECT_H
#define C2T_COLLECT_H
#include "collect/trace.h"
#include "infer/session/session.h"

typedef struct {
    const char *out;          /* the trace file */
    TraceCompress compress;
    int resume;               /* continue out after its last finished question */
    int shard_i, shard_n;     /* take questions q with q % shard_n == shard_i */
    int max_questions, max_turns;   /* as the question files were cut (recorded) */
    int batch;                /* sequences decoded together (continuous batching, infer/session/batch.h) */
} CollectOptions;

/* The trace rows of a verified tree's nodes 1..t->n-1 (the root has no
 * row): P, H, p, token, depth, rank as the tree holds them, parent as an
 * index among the rows (-1 under the root), accepted 0 (the caller marks
 * the accepted path).  spec-train computes a classifier's features from
 * these rows (dataset_tree_nodes). */
void collect_tree_rows(const Tree *t, TraceNode *rows);

/* Decodes this shard's questions of sets[i] (read from files[i]) with
 * policy (eagle2, total all) and writes their trees.  -1 with err_set. */
int collect_run(Session *s, Policy *policy, QuestionSet *const *sets, const char *const *files, int n,
                const CollectOptions *o);
#endif
