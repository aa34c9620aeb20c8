/* question.jsonl reader (EAGLE / Spec-Bench benchmark format). */
#include "infer/text/questions.h"
#include "kernels/base/util.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void question_clear(Question *q) {
    if (!q) return;
    free(q->id);
    free(q->category);
    for (int i = 0; i < q->n_turns; i++) free(q->turns[i]);
    free(q->turns);
    free(q->reference);
    memset(q, 0, sizeof *q);
}

static int fail(Question *q, const char *file, int line, const char *what) {
    question_clear(q);
    err_set("%s:%d: %s", file, line, what);
    return -1;
}

int question_parse(const char *text, size_t len, const char *file, int line, Question *q) {
    memset(q, 0, sizeof *q);
    q->line = line;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!j) return fail(q, file, line, "malformed JSON (a question line must be one JSON object)");
    /* only whitespace may follow the object */
    if (end) for (const char *p = end; p < text + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') { cJSON_Delete(j); return fail(q, file, line, "trailing characters after the JSON object"); }
    if (!cJSON_IsObject(j)) { cJSON_Delete(j); return fail(q, file, line, "a question line must be a JSON object"); }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "question_id");
    if (cJSON_IsNumber(id)) {
        double v = id->valuedouble;
        if (v != floor(v) || fabs(v) > 9e15) { cJSON_Delete(j); return fail(q, file, line, "question_id must be an integer or a string"); }
        char buf[32];
        snprintf(buf, sizeof buf, "%lld", (long long)v);
        q->id = xstrdup(buf); q->id_is_int = 1; q->id_int = (long long)v;
    } else if (cJSON_IsString(id)) {
        q->id = xstrdup(id->valuestring);
    } else {
        cJSON_Delete(j);
        return fail(q, file, line, id ? "question_id must be an integer or a string" : "question_id missing");
    }
    const cJSON *cat = cJSON_GetObjectItemCaseSensitive(j, "category");
    if (cat && !cJSON_IsString(cat) && !cJSON_IsNull(cat)) { cJSON_Delete(j); return fail(q, file, line, "category must be a string"); }
    q->category = xstrdup(cJSON_IsString(cat) ? cat->valuestring : "");
    const cJSON *turns = cJSON_GetObjectItemCaseSensitive(j, "turns");
    if (!turns) { cJSON_Delete(j); return fail(q, file, line, "turns missing"); }
    if (!cJSON_IsArray(turns) || cJSON_GetArraySize(turns) == 0) { cJSON_Delete(j); return fail(q, file, line, "turns must be a non-empty list of strings"); }
    int nt = cJSON_GetArraySize(turns);
    q->turns = xcalloc((size_t)nt, sizeof(char *));
    const cJSON *e;
    cJSON_ArrayForEach(e, turns) {
        if (!cJSON_IsString(e)) { cJSON_Delete(j); return fail(q, file, line, "turns must be a non-empty list of strings"); }
        q->turns[q->n_turns++] = xstrdup(e->valuestring);
    }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(j, "reference");
    if (ref) {
        char *text = cJSON_PrintUnformatted(ref);
        q->reference = xstrdup(text);
        cJSON_free(text);
    }
    cJSON_Delete(j);
    return 0;
}

QuestionSet *questions_load(const char *path) {
    size_t n;
    char *text = read_text_file(path, &n);
    if (!text) return NULL;
    QuestionSet *qs = xcalloc(1, sizeof *qs);
    qs->path = xstrdup(path);
    int cap = 0, line = 0;
    size_t i = 0;
    if (n >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) i = 3;  /* UTF-8 BOM */
    while (i < n) {
        size_t e = i;
        while (e < n && text[e] != '\n') e++;
        line++;
        int blank = 1;
        for (size_t k = i; k < e; k++)
            if (text[k] != ' ' && text[k] != '\t' && text[k] != '\r') { blank = 0; break; }
        if (!blank) {
            if (qs->n == cap) { cap = cap ? cap * 2 : 64; qs->q = xrealloc(qs->q, sizeof(Question) * (size_t)cap); }
            if (question_parse(text + i, e - i, path, line, &qs->q[qs->n])) {
                free(text);
                questions_free(qs);
                return NULL;
            }
            qs->n++;
        }
        i = e + 1;
    }
    free(text);
    if (qs->n == 0) {
        err_set("%s: no questions (the question file is empty)", path);
        questions_free(qs);
        return NULL;
    }
    return qs;
}

void questions_free(QuestionSet *qs) {
    if (!qs) return;
    for (int i = 0; i < qs->n; i++) question_clear(&qs->q[i]);
    free(qs->q);
    free(qs->path);
    free(qs);
}

void questions_keep_first(QuestionSet *qs, int n) {
    if (n <= 0 || n >= qs->n) return;
    for (int i = n; i < qs->n; i++) question_clear(&qs->q[i]);
    qs->n = n;
}

void questions_keep_turns(QuestionSet *qs, int n) {
    if (n <= 0) return;
    for (int i = 0; i < qs->n; i++) {
        Question *q = &qs->q[i];
        for (int t = n; t < q->n_turns; t++) free(q->turns[t]);
        if (q->n_turns > n) q->n_turns = n;
    }
}

int questions_total_turns(const QuestionSet *qs) {
    int t = 0;
    for (int i = 0; i < qs->n; i++) t += qs->q[i].n_turns;
    return t;
}
