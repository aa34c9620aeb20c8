/* A trace file from elsewhere (collect/trace_reader.c): open, then read
 * every finished row the counts promise. */
#include "tests/fuzz/fuzz.h"
#include "collect/trace.h"
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    TraceReader *r = trace_open(fuzz_file("trace.h5", data, size));
    if (!r) return 0;
    enum { B = 4096 };
    TraceNode *nodes = malloc(sizeof *nodes * B);
    TraceTree *trees = malloc(sizeof *trees * B);
    TraceQuestion *qs = malloc(sizeof *qs * B);
    for (int64_t i = 0; i < trace_reader_nodes(r); i += B)
        if (trace_read_nodes(r, i, trace_reader_nodes(r) - i < B ? trace_reader_nodes(r) - i : B, nodes)) break;
    for (int64_t i = 0; i < trace_reader_trees(r); i += B)
        if (trace_read_trees(r, i, trace_reader_trees(r) - i < B ? trace_reader_trees(r) - i : B, trees)) break;
    for (int64_t i = 0; i < trace_reader_questions(r); i += B)
        if (trace_read_questions(r, i, trace_reader_questions(r) - i < B ? trace_reader_questions(r) - i : B, qs)) break;
    free(nodes); free(trees); free(qs);
    trace_reader_close(r);
    return 0;
}
