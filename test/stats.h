/*
 * test/stats.h: the statistics the exactness tests share: Pearson's chi-square with its
 * p-value, and the exact joint of two generated characters from plain forward passes under
 * plain decoding's context rule. Include it after beyond.c (served_probs) and check.h.
 */
#include <math.h>

// ----------------------------------------------------------------------------
// Statistics helpers

// Upper regularised incomplete gamma Q(a, x) = Gamma(a, x) / Gamma(a): a series for
// x < a + 1, a continued fraction (modified Lentz) beyond. The chi-square p-value of
// X with d degrees of freedom is Q(d/2, X/2).
static double gamma_q(double a, double x) {
    if (x <= 0.0) return 1.0;
    double lg = lgamma(a);
    if (x < a + 1.0) {
        double term = 1.0 / a, sum = term;
        for (int n = 1; n < 1000 && term > sum * 1e-16; n++) sum += term *= x / (a + n);
        return 1.0 - sum * exp(-x + a * log(x) - lg);
    }
    double b = x + 1.0 - a, c = 1e300, d = 1.0 / b, h = d;
    for (int i = 1; i < 1000; i++) {
        double an = -i * (i - a);
        b += 2.0;
        d = an * d + b;
        if (fabs(d) < 1e-300) d = 1e-300;
        c = b + an / c;
        if (fabs(c) < 1e-300) c = 1e-300;
        d = 1.0 / d;
        double delta = d * c;
        h *= delta;
        if (fabs(delta - 1.0) < 1e-15) break;
    }
    return exp(-x + a * log(x) - lg) * h;
}

typedef struct {
    double stat, pvalue;
    int cells, pooled;   // cells in the test (the pooled one included), cells pooled
    long zero_hits;      // draws of a cell whose expected probability is exactly 0
} ChiSquare;

// Pearson's chi-square of counts against probabilities want (n cells, total draws):
// cells expected below 5 are merged into one; a cell of probability 0 that was drawn
// counts in zero_hits (and makes the test fail on its own).
static ChiSquare chi_square(const long *counts, const double *want, int n, long total) {
    ChiSquare r = {0.0, 1.0, 0, 0, 0};
    double pool_e = 0.0;
    long pool_o = 0;
    for (int i = 0; i < n; i++) {
        double e = want[i] * (double)total;
        if (want[i] == 0.0) r.zero_hits += counts[i];
        if (e < 5.0) {
            pool_e += e;
            pool_o += counts[i];
            r.pooled++;
            continue;
        }
        r.stat += (counts[i] - e) * (counts[i] - e) / e;
        r.cells++;
    }
    if (pool_e > 0.0) {
        r.stat += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
        r.cells++;
    }
    r.pvalue = r.cells > 1 ? gamma_q((r.cells - 1) / 2.0, r.stat / 2.0) : 1.0;
    return r;
}

// Plain decoding's context rule, restated for one more token: the cache holds the tokens
// before seq[n-1], which is fed now; when the cache is full it is emptied and the last S/2
// tokens, seq[n-1] last, run again from position 0 (a refill), else seq[n-1] runs on top.
// Returns the logits row after seq[n-1].
static const float *plain_feed(GPT *g, const int *seq, int n) {
    int S = g->config.block_size;
    if (g->state.cache_len < S) return forward(g, seq + n - 1, 1);
    g->state.cache_len = 0;
    return forward(g, seq + n - S / 2, S / 2) + (size_t)(S / 2 - 1) * g->config.vocab_size;
}

// Exact joints of the generated characters after the prompt as served (s: temperature,
// top-k, top-p), from plain forward passes under plain decoding's context rule (the
// prompt's last S tokens from position 0, then plain_feed): joint12 of the 1st and 2nd,
// p(x1) p(x2 | x1), and joint23 of the 2nd and 3rd, sum over x1 of p(x1) p(x2 | x1)
// p(x3 | x1 x2). A prompt of S tokens fills the cache, so x1 is fed by a refill over the
// last S/2 tokens: the window a folded round must verify on.
static void exact_joint(GPT *g, const int *prompt, int np, const Sampler *s, double *joint12,
                        double *joint) {
    int V = g->config.vocab_size, S = g->config.block_size, n0 = np < S ? np : S;
    float *p1 = malloc((size_t)V * sizeof(float)), *p2 = malloc((size_t)V * sizeof(float)),
          *p3 = malloc((size_t)V * sizeof(float));
    int *seq = malloc((size_t)(np + 2) * sizeof(int));
    memcpy(seq, prompt, (size_t)np * sizeof(int));
    memset(joint, 0, (size_t)V * V * sizeof(double));
    memset(joint12, 0, (size_t)V * V * sizeof(double));
    g->state.cache_len = 0;
    const float *lg = forward(g, prompt + np - n0, n0);
    served_probs(p1, lg + (size_t)(n0 - 1) * V, V, s);
    int prompt_cached = 1; // the prompt's positions hold it (a refill overwrites them)
    for (int x1 = 0; x1 < V; x1++) {
        if (p1[x1] == 0.0f) continue;
        if (!prompt_cached && n0 < S) { // x1 runs on top of the prompt: run it again
            g->state.cache_len = 0;
            forward(g, prompt + np - n0, n0);
        }
        prompt_cached = n0 < S; // else x1 is fed by a refill
        g->state.cache_len = n0;
        seq[np] = x1;
        served_probs(p2, plain_feed(g, seq, np + 1), V, s);
        int kv1 = g->state.cache_len;
        for (int x2 = 0; x2 < V; x2++) joint12[x1 * V + x2] = (double)p1[x1] * p2[x2];
        for (int x2 = 0; x2 < V; x2++) {
            double w = (double)p1[x1] * p2[x2];
            if (w < 1e-13) continue; // the cells skipped hold < 65 * 65 * 1e-13 in all
            g->state.cache_len = kv1;
            if (kv1 == S) prompt_cached = 0; // x2 is fed by a refill
            seq[np + 1] = x2;
            served_probs(p3, plain_feed(g, seq, np + 2), V, s);
            for (int x3 = 0; x3 < V; x3++) joint[x2 * V + x3] += w * p3[x3];
        }
    }
    free(p1);
    free(p2);
    free(p3);
    free(seq);
}
