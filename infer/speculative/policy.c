/* Policy registry and parameters.  The helpers the policies share are in
 * cycle.c (declared in policy.h), so that the modules call down to them and
 * only the registry calls the modules. */
#include "infer/speculative/policy.h"
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
    p->topm = 1000;       /* C2T paper eq. 7 */
}

int policy_params_set(PolicyParams *p, const char *key, const char *value) {
    char pair[4200];
    if (value) snprintf(pair, sizeof pair, "%s=%s", key, value);
    else snprintf(pair, sizeof pair, "%s", key);
    const char *eq = strchr(pair, '=');
    if (!eq || eq == pair || strchr(pair, '\n')) { err_set("--param '%s': expected KEY=VALUE", pair); return -1; }
    size_t used = strlen(p->settings);
    if (used + strlen(pair) + 2 > sizeof p->settings) { err_set("%.*s: too many policy settings", (int)(eq - pair), pair); return -1; }
    snprintf(p->settings + used, sizeof p->settings - used, "%s\n", pair);
    return 0;
}

int policy_params_given(const PolicyParams *p, const char *key) {
    const size_t n = strlen(key);
    for (const char *line = p->settings; *line;) {
        const char *name = line, *end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        const int flag = !strncmp(name, "--", 2);
        if (flag) name += 2;
        int same = (size_t)(end - name) > n && name[n] == '=';
        for (size_t i = 0; same && i < n; i++)
            same = name[i] == key[i] || (flag && name[i] == '-' && key[i] == '_');
        if (same) return 1;
        line = *end ? end + 1 : end;
    }
    return 0;
}

/* The table row of a setting given as "topk" or "--topk" / "--draft-len". */
static const PolicyParamDef *param_def(const PolicyClass *c, const char *given) {
    char key[64];
    int flag = !strncmp(given, "--", 2);
    const char *name = flag ? given + 2 : given;
    if (strlen(name) >= sizeof key) return NULL;
    memcpy(key, name, strlen(name) + 1);
    if (flag)
        for (char *k = key; *k; k++) if (*k == '-') *k = '_';
    for (int i = 0; i < c->n_params; i++)
        if (!strcmp(c->params[i].key, key)) return &c->params[i];
    return NULL;
}

/* A setting's value into the policy's struct; `given` is its spelling
 * (--topk or topk) for the error line. */
static int param_store(const PolicyParamDef *d, void *own, const char *given, const char *value) {
    char *field = (char *)own + d->off, *end;
    const char *name = strncmp(given, "--", 2) ? "--param " : "";
    errno = 0;
    if (d->type == 's') {
        if (strlen(value) >= d->size) { err_set("%s%s: longer than %zu characters", name, given, d->size - 1); return -1; }
        snprintf(field, d->size, "%s", value);
        return 0;
    }
    if (d->type == 'i' || d->type == 'a' || d->type == 'u') {
        /* "all" is stored, and reported, as -1 */
        if (d->type == 'a' && (!strcmp(value, "all") || !strcmp(value, "-1"))) { *(int *)field = -1; return 0; }
        if (d->type != 'i' && !strcmp(value, "auto")) { *(int *)field = POLICY_SIZE_AUTO; return 0; }
        long v = strtol(value, &end, 10);
        if (!*value || *end || errno || v < d->lo || v > d->hi) {
            err_set("%s%s: expected an integer in [%g, %g]%s, got '%s'", name, given, d->lo, d->hi,
                    d->type == 'a' ? ", 'all' or 'auto'" : d->type == 'u' ? " or 'auto'" : "", value);
            return -1;
        }
        *(int *)field = (int)v;
        return 0;
    }
    double v = strtod(value, &end);
    if (!*value || *end || errno || !(d->lo_open ? v > d->lo : v >= d->lo) || !(v <= d->hi)) {
        err_set("%s%s: expected a number in %c%g, %g], got '%s'", name, given, d->lo_open ? '(' : '[', d->lo,
                d->hi, value);
        return -1;
    }
    *(float *)field = (float)v;
    return 0;
}

static const char *param_keys(const PolicyClass *c) {
    static char keys[1024];
    keys[0] = 0;
    for (int i = 0; i < c->n_params; i++)
        snprintf(keys + strlen(keys), sizeof keys - strlen(keys), "%s%s", i ? " " : "", c->params[i].key);
    return c->n_params ? keys : "it has none";
}

/* The policy's settings struct: defaults, then every recorded pair, each of
 * which must name one of its settings. */
static int params_apply(Policy *p) {
    const PolicyClass *c = p->cls;
    if (c->n_params) p->own = xcalloc(1, c->params_size);
    for (int i = 0; i < c->n_params; i++) {
        const PolicyParamDef *d = &c->params[i];
        char *field = (char *)p->own + d->off;
        if (d->type == 's') snprintf(field, d->size, "%s", d->text_def ? d->text_def : "");
        else if (d->type == 'f') *(float *)field = (float)d->def;
        else *(int *)field = (int)d->def;
    }
    for (const char *line = p->prm.settings; *line;) {
        const char *nl = strchr(line, '\n');
        char pair[4200];
        snprintf(pair, sizeof pair, "%.*s", (int)(nl ? nl - line : (long)strlen(line)), line);
        line = nl ? nl + 1 : line + strlen(line);
        char *eq = strchr(pair, '=');
        *eq = 0;
        const PolicyParamDef *d = param_def(c, pair);
        if (!d) {
            if (!strncmp(pair, "--", 2))
                err_set("%s does not apply to policy %s (its settings: %s)", pair, c->name, param_keys(c));
            else
                err_set("--param: policy %s has no parameter '%s' (%s)", c->name, pair, param_keys(c));
            return -1;
        }
        if (param_store(d, p->own, pair, eq + 1)) return -1;
    }
    return 0;
}

int policy_has_setting(const char *policy, const char *key) {
    for (int i = 0; i < N_POLICIES; i++)
        if (!strcmp(registry[i]->name, policy)) return param_def(registry[i], key) != NULL;
    return 0;
}

void policy_params_set_int_if_owned(PolicyParams *p, const char *key, int value) {
    char text[32];
    snprintf(text, sizeof text, "%d", value);
    if (policy_has_setting(p->name, key)) policy_params_set(p, key, text);
}

int policy_param_get(const Policy *p, int i, const char **key, double *num, const char **text) {
    if (i < 0 || i >= p->cls->n_params) return -1;
    const PolicyParamDef *d = &p->cls->params[i];
    const char *field = (const char *)p->own + d->off;
    if (key) *key = d->key;
    int is_auto = (d->type == 'a' || d->type == 'u') && *(const int *)field == POLICY_SIZE_AUTO;
    if (text) *text = d->type == 's' ? field : is_auto ? "auto" : NULL;
    if (num) *num = d->type == 'f' ? *(const float *)field : d->type == 's' || is_auto ? 0 : *(const int *)field;
    return 0;
}

int policy_param_num(const Policy *p, const char *key, double *num) {
    const char *k, *text;
    for (int i = 0; policy_param_get(p, i, &k, num, &text) == 0; i++)
        if (!strcmp(k, key) && !text) return 0;
    err_set("policy %s has no numeric setting '%s'", p->name, key);
    return -1;
}

const char *policy_names(void) {
    static char buf[256];
    if (!buf[0])
        for (int i = 0; i < N_POLICIES; i++)
            snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", i ? " " : "", registry[i]->name);
    return buf;
}

Policy *policy_new_with(const PolicyClass *cls, const PolicyParams *prm) {
    Policy *p = xcalloc(1, sizeof *p);
    p->cls = cls;
    p->name = cls->name;
    p->prm = *prm;
    p->needs_draft = 1;
    if (params_apply(p) || cls->init(p)) { free(p->own); free(p); return NULL; }
    return p;
}

Policy *policy_new(const PolicyParams *prm) {
    for (int i = 0; i < N_POLICIES; i++)
        if (!strcmp(prm->name, registry[i]->name)) return policy_new_with(registry[i], prm);
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
