/* The calibration cache of observers.h (spec-eval --cost-cache): one JSON file
 * of verification curves, each under the key of everything it depends on.
 *
 *   {"format": "c2t-cost-cache", "version": 1,
 *    "curves": [{"key": "...", "verify_n": [1, 2, ...], "verify_s": [...],
 *                "row_s": 0.012, "calibration_s": 1.2, "measured_unix": 1764300000}]}
 *
 * (row_s: cost.h's one-row LM-head time for lazily scored trees; 0 or
 * absent where none was measured.)
 *
 * A file that is not such a cache (another file named by mistake, a
 * truncated one) is refused, never overwritten.  Curves are kept in the
 * order they were written, and only the COST_CACHE_CURVES newest: every
 * build has its own key, so without a bound the file would grow by a curve
 * per build. */
#include "infer/session/observers.h"
#include "kernels/base/util.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define CACHE_FORMAT "c2t-cost-cache"

/* The cache's JSON (a new one when path does not exist), or NULL + err_set. */
static cJSON *cache_read(const char *path) {
    if (!file_exists(path)) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "format", CACHE_FORMAT);
        cJSON_AddNumberToObject(j, "version", 1);
        cJSON_AddArrayToObject(j, "curves");
        return j;
    }
    cJSON *j = read_json_file(path);
    if (!j) return NULL;
    const cJSON *fmt = cJSON_GetObjectItem(j, "format"), *ver = cJSON_GetObjectItem(j, "version");
    const char *why = !cJSON_IsString(fmt) || strcmp(fmt->valuestring, CACHE_FORMAT) ? "format is not " CACHE_FORMAT
                      : !cJSON_IsNumber(ver) || ver->valuedouble != 1                ? "version is not 1"
                      : !cJSON_IsArray(cJSON_GetObjectItem(j, "curves"))             ? "no \"curves\" array"
                                                                                     : NULL;
    if (why) {
        err_set("%s: not a cost cache (%s); delete it or name another file with --cost-cache", path, why);
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* The curve of entry e into m; -1 + err_set when it is malformed. */
static int curve_read(const char *path, int index, const cJSON *e, CostModel *m) {
    const cJSON *n = cJSON_GetObjectItem(e, "verify_n"), *s = cJSON_GetObjectItem(e, "verify_s");
    const int len = cJSON_GetArraySize(n);
    if (!cJSON_IsArray(n) || !cJSON_IsArray(s) || len < 1 || len > COST_MAX_POINTS || len != cJSON_GetArraySize(s)) {
        err_set("%s: curve %d: verify_n and verify_s must be arrays of the same length, 1 to %d; delete the file",
                path, index, COST_MAX_POINTS);
        return -1;
    }
    CostModel c;
    cost_init(&c);
    for (int i = 0; i < len; i++) {
        const cJSON *x = cJSON_GetArrayItem(n, i), *y = cJSON_GetArrayItem(s, i);
        const double tokens = cJSON_IsNumber(x) ? x->valuedouble : -1, secs = cJSON_IsNumber(y) ? y->valuedouble : -1;
        if (tokens != floor(tokens) || tokens < 1 || tokens > 1e6 || !(secs > 0 && isfinite(secs)) ||
            cost_add_point(&c, (int)tokens, secs)) {
            err_set("%s: curve %d, point %d: token counts must ascend from 1 and times be positive; delete the file",
                    path, index, i);
            return -1;
        }
    }
    const cJSON *row = cJSON_GetObjectItem(e, "row_s");   /* absent: no row measured */
    if (row && !(cJSON_IsNumber(row) && row->valuedouble >= 0 && isfinite(row->valuedouble))) {
        err_set("%s: curve %d: row_s must be a number of seconds >= 0; delete the file", path, index);
        return -1;
    }
    c.row_s = row ? row->valuedouble : 0;
    *m = c;
    return 0;
}

int cost_cache_get(const char *path, const char *key, CostModel *m) {
    cJSON *j = cache_read(path);
    if (!j) return -1;
    const cJSON *curves = cJSON_GetObjectItem(j, "curves"), *e;
    int found = 0, index = 0;
    cJSON_ArrayForEach(e, curves) {
        const cJSON *k = cJSON_GetObjectItem(e, "key");
        if (cJSON_IsString(k) && !strcmp(k->valuestring, key)) {
            found = curve_read(path, index, e, m) ? -1 : 1;
            break;
        }
        index++;
    }
    cJSON_Delete(j);
    return found;
}

/* mkdir -p of path's directory. */
static int make_parent_dirs(const char *path) {
    char *dir = xstrdup(path);
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(dir, 0777) && errno != EEXIST) {
            err_set("%s: cannot create the directory %s: %s", path, dir, strerror(errno));
            free(dir);
            return -1;
        }
        *p = '/';
    }
    free(dir);
    return 0;
}

int cost_cache_put(const char *path, const char *key, const CostModel *m) {
    cJSON *j = cache_read(path);
    if (!j) return -1;
    cJSON *curves = cJSON_GetObjectItem(j, "curves");
    for (int i = cJSON_GetArraySize(curves) - 1; i >= 0; i--) {
        const cJSON *k = cJSON_GetObjectItem(cJSON_GetArrayItem(curves, i), "key");
        if (cJSON_IsString(k) && !strcmp(k->valuestring, key)) cJSON_DeleteItemFromArray(curves, i);
    }
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "key", key);
    cJSON *n = cJSON_AddArrayToObject(e, "verify_n"), *s = cJSON_AddArrayToObject(e, "verify_s");
    for (int i = 0; i < m->n_pts; i++) {
        cJSON_AddItemToArray(n, cJSON_CreateNumber(m->n[i]));
        cJSON_AddItemToArray(s, cJSON_CreateNumber(m->verify_s[i]));
    }
    cJSON_AddNumberToObject(e, "row_s", m->row_s);
    cJSON_AddNumberToObject(e, "calibration_s", m->calibration_s);
    cJSON_AddNumberToObject(e, "measured_unix", (double)time(NULL));
    cJSON_AddItemToArray(curves, e);
    while (cJSON_GetArraySize(curves) > COST_CACHE_CURVES) cJSON_DeleteItemFromArray(curves, 0);
    int rc = make_parent_dirs(path) || write_json(path, j) ? -1 : 0;
    cJSON_Delete(j);
    return rc;
}

int cost_cache_refresh(const char *path, const CostModel *m) {
    if (!path || !m->cache_key[0] || m->cycles < COST_REFRESH_CYCLES) return 0;
    CostModel c;
    cost_corrected_curve(m, &c);
    return cost_cache_put(path, m->cache_key, &c) ? -1 : 1;
}

const char *cost_cache_default_path(char *buf, size_t size) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg) snprintf(buf, size, "%s/c2t/cost.json", xdg);
    else if (home && *home) snprintf(buf, size, "%s/.cache/c2t/cost.json", home);
    else return NULL;
    return buf;
}
