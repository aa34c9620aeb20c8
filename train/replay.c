/* EAGLE-2 replayed from a trace of every position (train/replay.h). */
#include "train/replay.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#include <string.h>

/* A trace attribute as an integer; -1 with err_set when absent or not one. */
static int attr_int(TraceReader *rd, const char *path, const char *key, int *v) {
    char *s = trace_reader_attr(rd, key), *end = NULL;
    long x = s ? strtol(s, &end, 10) : 0;
    int ok = s && end != s && *end == 0;
    free(s);
    if (!ok) { err_set("%s: attribute %s is absent or not an integer", path, key); return -1; }
    *v = (int)x;
    return 0;
}

/* The rerank's order over trace nodes (policy_by_joint_prob over a Tree): higher P, then
 * shallower, then earlier. */
static int by_joint_prob(const void *a, const void *b, void *nodes) {
    int x = *(const int *)a, y = *(const int *)b;
    const TraceNode *nd = nodes;
    if (nd[x].P != nd[y].P) return nd[x].P > nd[y].P ? -1 : 1;
    if (nd[x].depth != nd[y].depth) return nd[x].depth - nd[y].depth;
    return x - y;
}

/* One tree under eagle2 at depth, total and min_p (policy_rerank_by_P): the
 * nodes kept (γ of its cycle) into *kept, and how many of its labelled
 * path they hold. */
static int tree_accepted(const TraceNode *nd, int n, int depth, int total, float min_p, int *order, uint8_t *keep,
                         int *kept) {
    int pool = 0;
    for (int i = 0; i < n; i++)
        if (nd[i].depth <= depth + 1) order[pool++] = i;
    for (int i = 0; i < n; i++) keep[i] = 0;
    int m = total < 0 || total > pool ? pool : total;
    if (m < pool || min_p > 0) qsort_r(order, pool, sizeof(int), by_joint_prob, (void *)nd);
    for (int i = 0; i < m; i++)
        if (nd[order[i]].P < min_p) { m = i; break; }
    for (int i = 0; i < m; i++) keep[order[i]] = 1;
    *kept = m;
    /* the labelled path, from depth 1 down, while the rerank kept it */
    int len = 0, cur = -1;
    for (int found = 1; found;) {
        found = 0;
        for (int i = cur + 1; i < n && !found; i++)
            if (nd[i].accepted && nd[i].parent == cur && keep[i]) { cur = i; len++; found = 1; }
    }
    return len;
}

int replay_eagle2(const char *path, int depth, int total, float min_p, Replay *out) {
    memset(out, 0, sizeof *out);
    out->depth = depth;
    out->total = total;
    out->min_p = min_p;
    TraceReader *rd = trace_open(path);
    if (!rd) return -1;
    int rc = -1, trace_depth;
    TraceTree *trees = NULL;
    int *order = NULL;
    uint8_t *keep = NULL, *scratch = NULL;
    TraceCursor cur;
    trace_cursor_init(&cur, rd, TRACE_F_P | TRACE_F_DEPTH | TRACE_F_ACCEPTED | TRACE_F_PARENT);
    char *verify = trace_reader_attr(rd, "verify");
    int every = verify && !strcmp(verify, "root");
    free(verify);
    if (!every) {
        err_set("%s: not a trace of every position (spec-collect --every-position writes verify = root)", path);
        goto done;
    }
    if (attr_int(rd, path, "topk", &out->topk) || attr_int(rd, path, "depth", &trace_depth)) goto done;
    if (depth < 0 || depth > trace_depth) {
        err_set("%s: depth %d: the trace's trees were grown %d steps deep", path, depth, trace_depth);
        goto done;
    }
    out->n_questions = trace_reader_questions(rd);
    out->questions = xcalloc((size_t)(out->n_questions ? out->n_questions : 1), sizeof(TraceQuestion));
    if (trace_read_questions(rd, 0, out->n_questions, out->questions)) goto done;
    const int64_t nt = trace_reader_trees(rd);
    trees = xmalloc(sizeof(TraceTree) * (size_t)(nt ? nt : 1));
    if (nt && trace_read_trees(rd, 0, nt, trees)) goto done;
    out->turns = xcalloc((size_t)(nt ? nt : 1), sizeof(ReplayTurn));
    int cap = 0;
    for (int64_t i = 0; i < nt;) {
        /* one turn: trees i .. j-1, at positions 0 .. j-i-1 */
        int64_t j = i;
        while (j < nt && trees[j].question == trees[i].question && trees[j].turn == trees[i].turn) {
            if (trees[j].cycle != j - i) {
                err_set("%s: tree row %lld is cycle %d of its turn where %lld was expected: not one tree per position",
                        path, (long long)j, trees[j].cycle, (long long)(j - i));
                goto done;
            }
            j++;
        }
        if (trees[i].question < 0 || trees[i].question >= out->n_questions) {
            err_set("%s: tree row %lld names question %d of %lld", path, (long long)i, trees[i].question,
                    (long long)out->n_questions);
            goto done;
        }
        ReplayTurn *t = &out->turns[out->n_turns++];
        t->question = trees[i].question;
        t->turn = trees[i].turn;
        t->new_tokens = j - i + 1;
        const int64_t last = j - i;   /* L - 1: tokens the cycles emit */
        for (int64_t r = 0; r < last;) {
            const TraceTree *tr = &trees[i + r];
            if (tr->n_nodes > cap) {
                cap = tr->n_nodes;
                order = xrealloc(order, sizeof(int) * cap);
                keep = xrealloc(keep, (size_t)cap);
                scratch = xrealloc(scratch, (size_t)cap);
            }
            const TraceNode *nd = trace_cursor_get(&cur, i + r, tr->first_node, tr->n_nodes);
            if (!nd || trace_check_tree(path, i + r, tr->first_node, nd, tr->n_nodes, scratch)) goto done;
            int kept, acc = tree_accepted(nd, tr->n_nodes, depth, total, min_p, order, keep, &kept);
            const int64_t emit = acc + 1 < last - r ? acc + 1 : last - r;
            t->cycles++;
            t->gamma += kept;
            t->cycle_tokens += emit;
            r += emit;
        }
        i = j;
    }
    rc = 0;
done:
    trace_cursor_free(&cur);
    trace_reader_close(rd);
    free(trees); free(order); free(keep); free(scratch);
    if (rc) replay_free(out);
    return rc;
}

void replay_free(Replay *r) {
    free(r->questions);
    free(r->turns);
    r->questions = NULL;
    r->turns = NULL;
    r->n_questions = r->n_turns = 0;
}
