/*
 * test/reference.h: the lecture's model written a second time, naively, in double
 * precision, recomputing the whole sequence with no KV cache. The tests compare
 * specdec.c's forward pass with it, and take finite differences of its loss to check
 * the backward pass. Include it after "../specdec.c" (it reads GPT and Weights).
 */

// LayerNorm of one row in double: biased variance, eps 1e-5.
static void ref_layernorm(double *out, const double *x, const float *w, const float *b, int C) {
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < C; i++) mean += x[i];
    mean /= C;
    for (int i = 0; i < C; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= C;
    double r = 1.0 / sqrt(var + 1e-5);
    for (int i = 0; i < C; i++) out[i] = (x[i] - mean) * r * w[i] + b[i];
}

// y = bias + x @ W for one row, W stored (in, out); bias may be NULL.
static void ref_linear(double *y, const double *x, const float *W, const float *bias, int in,
                       int out) {
    for (int o = 0; o < out; o++) {
        double s = bias ? bias[o] : 0.0;
        for (int i = 0; i < in; i++) s += x[i] * W[(size_t)i * out + o];
        y[o] = s;
    }
}

// The lecture's model in double, the whole sequence from scratch (no KV cache):
// writes T rows of V logits.
static void ref_forward(const GPT *g, const int *tok, int T, double *logits) {
    const Config *c = &g->config;
    const Weights *w = &g->w;
    int L = c->n_layer, NH = c->n_head, C = c->n_embd, V = c->vocab_size, HS = C / NH;
    int F = 4 * C;
    size_t TC = (size_t)T * C;
    double *x = malloc(TC * sizeof(double)), *xn = malloc(TC * sizeof(double));
    double *q = malloc(TC * sizeof(double)), *k = malloc(TC * sizeof(double));
    double *v = malloc(TC * sizeof(double)), *ao = malloc(TC * sizeof(double));
    double *y = malloc((size_t)C * sizeof(double)), *hid = malloc((size_t)F * sizeof(double));
    double *sc = malloc((size_t)T * sizeof(double));
    for (int t = 0; t < T; t++)
        for (int i = 0; i < C; i++)
            x[(size_t)t * C + i] = (double)w->token_embedding[(size_t)tok[t] * C + i] +
                                   (double)w->position_embedding[(size_t)t * C + i];
    for (int l = 0; l < L; l++) {
        size_t lC = (size_t)l * C, lCC = (size_t)l * C * C, lCF = (size_t)l * C * F;
        // self-attention: pre-LN, heads side by side in the columns of q, k, v
        for (int t = 0; t < T; t++) {
            ref_layernorm(xn + t * C, x + t * C, w->ln1_weight + lC, w->ln1_bias + lC, C);
            ref_linear(q + t * C, xn + t * C, w->query + lCC, NULL, C, C);
            ref_linear(k + t * C, xn + t * C, w->key + lCC, NULL, C, C);
            ref_linear(v + t * C, xn + t * C, w->value + lCC, NULL, C, C);
        }
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                double m = -INFINITY, z = 0.0;
                for (int s = 0; s <= t; s++) {
                    double dot = 0.0;
                    for (int j = 0; j < HS; j++)
                        dot += q[(size_t)t * C + h * HS + j] * k[(size_t)s * C + h * HS + j];
                    sc[s] = dot * pow((double)HS, -0.5); // head_size ** -0.5, as gpt.py: k.shape[-1]**-0.5
                    if (sc[s] > m) m = sc[s];
                }
                for (int s = 0; s <= t; s++) {
                    sc[s] = exp(sc[s] - m);
                    z += sc[s];
                }
                for (int j = 0; j < HS; j++) {
                    double acc = 0.0;
                    for (int s = 0; s <= t; s++) acc += sc[s] / z * v[(size_t)s * C + h * HS + j];
                    ao[(size_t)t * C + h * HS + j] = acc;
                }
            }
        }
        for (int t = 0; t < T; t++) {
            ref_linear(y, ao + t * C, w->proj_weight + lCC, w->proj_bias + lC, C, C);
            for (int i = 0; i < C; i++) x[(size_t)t * C + i] += y[i];
            // feed-forward: pre-LN, Linear(C, 4C), ReLU, Linear(4C, C)
            ref_layernorm(xn + t * C, x + t * C, w->ln2_weight + lC, w->ln2_bias + lC, C);
            ref_linear(hid, xn + t * C, w->ffwd_up_weight + lCF, w->ffwd_up_bias + (size_t)l * F,
                       C, F);
            for (int i = 0; i < F; i++) hid[i] = hid[i] > 0.0 ? hid[i] : 0.0;
            ref_linear(y, hid, w->ffwd_down_weight + lCF, w->ffwd_down_bias + lC, F, C);
            for (int i = 0; i < C; i++) x[(size_t)t * C + i] += y[i];
        }
    }
    for (int t = 0; t < T; t++) {
        ref_layernorm(xn + t * C, x + t * C, w->ln_f_weight, w->ln_f_bias, C);
        ref_linear(logits + (size_t)t * V, xn + t * C, w->lm_head_weight, w->lm_head_bias, C, V);
    }
    free(x); free(xn); free(q); free(k); free(v); free(ao); free(y); free(hid); free(sc);
}

