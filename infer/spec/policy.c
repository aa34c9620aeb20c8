/* Policy registry and parameters.  The helpers the policies share are in
 * policy_helpers.c, so that the modules call down to them and only the
 * registry calls the modules. */
#include "infer/spec/policy.h"
#include "kernels/base/util.h"
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Adding a policy: its module in policies/ and one line here. */
static const PolicyClass *const registry[] = {
    &policy_ar, &policy_chain, &policy_static, &policy_eagle2, &policy_c2t, &policy_sage, &policy_wetap,
};
#define N_POLICIES ((int)(sizeof registry / sizeof *registry))

void policy_params_default(PolicyParams *p) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "eagle2");
    p->topk = 10;         /* EAGLE-2 paper, 7B setting */
    p->depth = -1;        /* the policy's own default (eagle2 6, c2t 8, chain 5) */
    p->total = 60;
    p->draft_len = 5;
    p->topm = 1000;       /* C2T paper eq. 7 */
    snprintf(p->static_tree, sizeof p->static_tree, "eagle1");
    p->beta = 0.5f;
    snprintf(p->early_stop, sizeof p->early_stop, "none");
    p->threshold = 0.5f;
}

int policy_params_set(PolicyParams *p, const char *key, const char *value) {
    char pair[512];
    if (value) snprintf(pair, sizeof pair, "%s=%s", key, value);
    else snprintf(pair, sizeof pair, "%s", key);
    const char *eq = strchr(pair, '=');
    if (!eq || eq == pair || strchr(pair, '\n')) { err_set("--param '%s': expected KEY=VALUE", pair); return -1; }
    size_t used = strlen(p->own_params);
    if (used + strlen(pair) + 2 > sizeof p->own_params) { err_set("--param: too many parameters"); return -1; }
    snprintf(p->own_params + used, sizeof p->own_params - used, "%s\n", pair);
    return 0;
}

static const PolicyParamDef *param_def(const PolicyClass *c, const char *key) {
    for (int i = 0; i < c->n_params; i++)
        if (!strcmp(c->params[i].key, key)) return &c->params[i];
    return NULL;
}

static int param_store(const PolicyParamDef *d, void *own, const char *value) {
    char *end;
    errno = 0;
    if (d->type == 'i') {
        long v = strtol(value, &end, 10);
        if (!*value || *end || errno || v < d->lo || v > d->hi) {
            err_set("--param %s: expected an integer in [%g, %g], got '%s'", d->key, d->lo, d->hi, value);
            return -1;
        }
        *(int *)((char *)own + d->off) = (int)v;
        return 0;
    }
    double v = strtod(value, &end);
    if (!*value || *end || errno || !(d->lo_open ? v > d->lo : v >= d->lo) || !(v <= d->hi)) {
        err_set("--param %s: expected a number in %c%g, %g], got '%s'", d->key, d->lo_open ? '(' : '[', d->lo,
                d->hi, value);
        return -1;
    }
    *(float *)((char *)own + d->off) = (float)v;
    return 0;
}

/* The policy's parameter struct: defaults, then every --param pair, each of
 * which must be one of its keys. */
static int params_apply(Policy *p) {
    const PolicyClass *c = p->cls;
    if (c->n_params) {
        p->own = xcalloc(1, c->params_size);
        for (int i = 0; i < c->n_params; i++) {
            const PolicyParamDef *d = &c->params[i];
            if (d->type == 'i') *(int *)((char *)p->own + d->off) = (int)d->def;
            else *(float *)((char *)p->own + d->off) = (float)d->def;
        }
    }
    for (const char *line = p->prm.own_params; *line;) {
        const char *nl = strchr(line, '\n');
        char pair[512];
        snprintf(pair, sizeof pair, "%.*s", (int)(nl ? nl - line : (long)strlen(line)), line);
        line = nl ? nl + 1 : line + strlen(line);
        char *eq = strchr(pair, '=');
        *eq = 0;
        const PolicyParamDef *d = param_def(c, pair);
        if (!d) {
            char keys[1024] = "";
            for (int i = 0; i < c->n_params; i++)
                snprintf(keys + strlen(keys), sizeof keys - strlen(keys), "%s%s", i ? " " : "", c->params[i].key);
            err_set("--param: policy %s has no parameter '%s' (%s)", c->name, pair, c->n_params ? keys : "it has none");
            return -1;
        }
        if (param_store(d, p->own, eq + 1)) return -1;
    }
    return 0;
}

int policy_param_get(const Policy *p, int i, const char **key, double *value) {
    if (i < 0 || i >= p->cls->n_params) return -1;
    const PolicyParamDef *d = &p->cls->params[i];
    if (key) *key = d->key;
    if (value)
        *value = d->type == 'i' ? *(const int *)((const char *)p->own + d->off) : *(const float *)((const char *)p->own + d->off);
    return 0;
}

const char *policy_names(void) {
    static char buf[256];
    if (!buf[0])
        for (int i = 0; i < N_POLICIES; i++)
            snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", i ? " " : "", registry[i]->name);
    return buf;
}

Policy *policy_new(const PolicyParams *prm) {
    for (int i = 0; i < N_POLICIES; i++) {
        if (strcmp(prm->name, registry[i]->name)) continue;
        Policy *p = xcalloc(1, sizeof *p);
        p->cls = registry[i];
        p->name = registry[i]->name;
        p->prm = *prm;
        p->needs_draft = 1;
        if (params_apply(p) || registry[i]->init(p)) { free(p->own); free(p); return NULL; }
        return p;
    }
    err_set("unknown policy '%s' (%s)", prm->name, policy_names());
    return NULL;
}

void policy_free(Policy *p) {
    if (!p) return;
    if (p->destroy) p->destroy(p);
    free(p->own);
    free(p);
}

int policy_max_nodes(const Policy *p) { return p->cls->max_nodes(p); }
