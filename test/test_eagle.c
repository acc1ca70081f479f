/*
 * test/test_eagle.c: the trained early exit and the EAGLE draft of tinyshakespeare/train.c
 * (exit_loss_grad, exit_target_residual, save_exit_head; eagle_train_forward, eagle_train_backward,
 * eagle_eval_row, save_eagle_head), the trainers of beyond.c's ExitHead and EagleHead.
 *
 *   1. The exit's gradient: exit_loss_grad's gradient of the distillation loss (the
 *      cross-entropy against a target row p) with respect to each of its four tensors,
 *      against central differences of a double-precision reference of LayerNorm + Linear
 *      written here from the formula. As in test/test_medusa.c each float moves to the
 *      floats nearest p +- h and the quotient divides by their exact distance; the tolerance
 *      is 1e-3 (max |analytic - numeric| / max |numeric|, per tensor).
 *   2. The exit reads the right rows: with the target's own ln_f and lm_head, its logits on
 *      exit_target_residual's rows are the untrained exit's (forward with n_layer lowered), bit
 *      for bit, on the shipped model.
 *   3. EAGLE's gradient: the loss CE(p_{i+1}, q_i) + SmoothL1(h_i - f_{i+1}) of two windows,
 *      against central differences of a double reference (fc, one causal block, the
 *      target's ln_f and lm_head, written here), for a sample of every tensor: fc_weight,
 *      fc_bias and the block's 13. Then eagle_eval_row, the one-row path eagle-eval uses, gives
 *      the rows of the batched training pass bit for bit.
 *   4. The files: save_exit_head and save_eagle_head write the sizes and header fields of
 *      beyond.c's formats, the floats in order, and a checksum that matches; the shipped
 *      tinyshakespeare/exit.bin and eagle.bin fit tinyshakespeare/model.bin and beat the
 *      untrained exit on a slice of the validation split; a short training run is
 *      deterministic.
 *   5. EAGLE-3's gradient (eagle3_train_forward, eagle3_train_backward): fuse of the rows
 *      after blocks 1 and 2 and the top one, three unrolled steps of the draft reading its
 *      own h, the cross-entropy alone, against a double reference with the runtime's mask
 *      written again (step k of chain i sees step 1 of chains 0..i and its own chain's
 *      steps 2..k),
 *      for every tensor; eagle_eval_row's chains give the unrolled rows bit for bit; its
 *      file's header and floats, read back; a short EAGLE-3 training is deterministic.
 *   6. Nothing that is not a finite number is learned or saved: on a target whose rows are
 *      NaN both trainers stop at step 1 before the update; both writers refuse a NaN or inf.
 *
 * broken build: -DBREAK_EXIT_BACKWARD
 * broken build: -DBREAK_EAGLE_BACKWARD
 * broken build: -DBREAK_EAGLE3_BACKWARD
 * test/run_tests.sh also builds this file with each flag on the lines above: the first drops
 * the exit head's bias gradient, the second the regression term of the EAGLE backward, the
 * third the gradient EAGLE-3's unrolled steps send back through the fed-back h. In
 * those builds this test runs that gradient check only, and prints PASS only if it fails.
 */
#define TESTING // leaves out the trainer's main: this file has its own
#include "../tinyshakespeare/train.c"

#include "check.h"
#include "reference.h" // ref_layernorm and ref_linear, in double

#define TOLERANCE 1e-3 // max |analytic - numeric| / max |numeric|, per tensor
#define STEP 1e-4      // h: the distance of each central difference

// The tiny target every gradient check uses: C = 8, NH = 2, S = 6, V = 11, H = 4C.
#define TINY {2, 2, 8, 6, 11, 32}

// Fills n floats uniformly from [-a, a).
static void fill_uniform(float *x, size_t n, double a, Rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(a * (2.0 * rng_uniform(r) - 1.0));
}

// Cross-entropy of double logits z (V) against the distribution p: logsumexp(z) - p.z.
static double ref_soft_ce(const double *z, const float *p, int V) {
    double m = z[0], sum = 0.0, dot = 0.0; // the max is taken out first
    for (int v = 1; v < V; v++) m = z[v] > m ? z[v] : m;
    for (int v = 0; v < V; v++) sum += exp(z[v] - m);
    for (int v = 0; v < V; v++) dot += p[v] * (z[v] - m); // sum_v p(v) z(v), p sums to 1
    return log(sum) - dot;
}

// The central difference of loss(ctx) in the float *x, moved to the floats nearest x +- STEP.
static double central(double (*loss)(void *), void *ctx, float *x) {
    float p = *x, up = (float)(p + STEP), down = (float)(p - STEP); // the floats nearest
    *x = up;
    double lu = loss(ctx); // the loss a step up
    *x = down;
    double ld = loss(ctx); // and a step down
    *x = p;
    return (lu - ld) / ((double)up - (double)down); // over the exact distance
}

// The worst relative error of grad against central differences over up to `most` floats of
// one tensor x (n floats, evenly spread): max |analytic - numeric| / max |numeric|.
static double tensor_error(double (*loss)(void *), void *ctx, float *x, const float *grad,
                           size_t n, size_t most) {
    size_t stride = n > most ? n / most : 1; // a sample spread over the tensor
    double max_diff = 0.0, max_num = 0.0;
    for (size_t i = 0; i < n; i += stride) {
        double num = central(loss, ctx, x + i); // the numeric derivative
        max_diff = fmax(max_diff, fabs(num - grad[i]));
        max_num = fmax(max_num, fabs(num));
    }
    return max_num > 0.0 ? max_diff / max_num : max_diff; // relative to the largest
}

// ----------------------------------------------------------------------------
// 1, 2: the exit

// The exit's summed loss over T rows of x->r against x->p, in double from the formula.
static double ref_exit_loss(void *ctx) {
    ExitTrainer *x = ctx;
    int C = x->head.C, V = x->head.V, T = 6; // the tiny target's 6 rows
    double r[64], ln[64], z[256], loss = 0.0; // one row in double
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < C; i++) r[i] = x->r[(size_t)t * C + i];
        ref_layernorm(ln, r, x->head.ln_weight, x->head.ln_bias, C); // the exit's LayerNorm
        ref_linear(z, ln, x->head.head_weight, x->head.head_bias, C, V); // and its head
        loss += ref_soft_ce(z, x->p + (size_t)t * V, V);
    }
    return loss;
}

// Section 1 on the tiny target: returns the worst relative error of the four tensors; with
// report, one line per tensor.
static double exit_gradient_check(int report) {
    Config c = TINY;
    GPT g;
    ExitTrainer x;
    build_gpt(&g, &c);
    init_gpt_random(&g, 41); // only its sizes matter here
    exit_trainer_init(&x, &g, 1); // the exit after block 1
    Rng r; // its own stream: the parameters and data below
    rng_seed(&r, 42);
    // a head away from the target's (ln weights not all 1), random rows and random targets
    for (size_t i = 0; i < x.P; i++)
        x.head.ln_weight[i] += (float)(0.5 * (2.0 * rng_uniform(&r) - 1.0));
    fill_uniform(x.r, 6 * 8, 2.0, &r); // residual rows
    fill_uniform(x.d_logits, 6 * 11, 3.0, &r); // logits of the soft targets
    for (int t = 0; t < 6; t++) tempered_softmax(x.p + t * 11, x.d_logits + t * 11, 11, 1.0f);
    exit_trainer_transpose(&x); // as train_exit_head does before each step
    double loss = exit_loss_grad(&x, 6, 1.0f), ref = ref_exit_loss(&x);
    if (report)
        check(fabs(loss - ref) < 1e-5 * fabs(ref), "exit_loss_grad's loss %.9f == the double "
              "reference's %.9f", loss, ref);
    // the four tensors, each with its gradient, in the allocation's order
    const char *names[4] = {"ln_weight", "ln_bias", "head_weight", "head_bias"};
    size_t sizes[4] = {8, 8, 8 * 11, 11}, at = 0; // C, C, C x V, V
    double worst = 0.0; // over the four tensors
    for (int k = 0; k < 4; k++) {
        double e = tensor_error(ref_exit_loss, &x, x.head.ln_weight + at, x.grad + at,
                                sizes[k], sizes[k]);
        if (report)
            check(e <= TOLERANCE, "exit_loss_grad: dLoss/d%s within %.0e of central "
                  "differences (relative error %.2g)", names[k], TOLERANCE, e);
        worst = fmax(worst, e);
        at += sizes[k]; // the next tensor
    }
    exit_trainer_free(&x); // safe on a half-built one
    free_gpt(&g); // the tiny target
    return worst;
}

// Section 2 on the shipped model: the untrained exit computed two ways, bit for bit.
static void test_exit_rows(GPT *g, const int *tokens) {
    int S = g->config.block_size, V = g->config.vocab_size; // a whole window
    ExitTrainer x;
    exit_trainer_init(&x, g, 1); // ln_f and lm_head: the untrained exit
    // forward with n_layer 1 gives the untrained exit's logits beside the residual rows
    const float *plain = exit_target_residual(g, tokens, S, 1, x.r);
    memcpy(x.d_logits, plain, (size_t)S * V * sizeof(float));
    exit_trainer_logits(&x, S); // the runtime's function on the same rows
    check(memcmp(x.logits, x.d_logits, (size_t)S * V * sizeof(float)) == 0, "an exit initialised "
          "from ln_f and lm_head, on exit_target_residual's rows after block 1, gives forward's "
          "n_layer = 1 logits bit for bit (%d rows)", S);
    exit_trainer_free(&x);
}

// ----------------------------------------------------------------------------
// 3: EAGLE

// What the EAGLE reference reads: the trainer (its parameters, the target rows it holds),
// the target and the windows' tokens.
typedef struct {
    EagleTrainer *et; // the parameters, moved in place
    const GPT *target; // frozen: E, ln_f, lm_head
    const int *tokens; // (B, S)
} EagleCase;

// One causal block of n rows x (n, C) in place, in double, from the trainer's float block.
static void ref_eagle_block(const EagleTrainer *et, double *x, int n) {
    const Weights *w = &et->block.w; // the trainer's block
    int C = et->C, NH = et->bc.n_head, HS = C / NH, H = et->bc.ffn_width; // C 8, 2 heads
    double ln[8 * 8], q[8 * 8], k[8 * 8], v[8 * 8], ao[8 * 8], y[8], hid[64], sc[8];
    for (int t = 0; t < n; t++) {
        ref_layernorm(ln + t * C, x + t * C, w->ln1_weight, w->ln1_bias, C);
        ref_linear(q + t * C, ln + t * C, w->query, NULL, C, C);
        ref_linear(k + t * C, ln + t * C, w->key, NULL, C, C);
        ref_linear(v + t * C, ln + t * C, w->value, NULL, C, C);
    }
    // attention: each row to every row up to its own, heads side by side
    for (int h = 0; h < NH; h++)
        for (int t = 0; t < n; t++) {
            double m = -INFINITY, z = 0.0; // the scores' max and sum
            for (int s = 0; s <= t; s++) {
                double dot = 0.0;
                for (int j = 0; j < HS; j++) dot += q[t * C + h * HS + j] * k[s * C + h * HS + j];
                sc[s] = dot / sqrt((double)HS); // scaled as specdec.c scales
                m = sc[s] > m ? sc[s] : m;
            }
            for (int s = 0; s <= t; s++) z += (sc[s] = exp(sc[s] - m)); // the softmax's terms
            for (int j = 0; j < HS; j++) {
                double acc = 0.0;
                for (int s = 0; s <= t; s++) acc += sc[s] / z * v[s * C + h * HS + j];
                ao[t * C + h * HS + j] = acc;
            }
        }
    // proj and the MLP, each added to the residual
    for (int t = 0; t < n; t++) {
        ref_linear(y, ao + t * C, w->proj_weight, w->proj_bias, C, C); // proj
        for (int i = 0; i < C; i++) x[t * C + i] += y[i];
        ref_layernorm(ln, x + t * C, w->ln2_weight, w->ln2_bias, C); // ln2
        ref_linear(hid, ln, w->ffwd_up_weight, w->ffwd_up_bias, C, H);
        for (int i = 0; i < H; i++) hid[i] = hid[i] > 0.0 ? hid[i] : 0.0; // ReLU
        ref_linear(y, hid, w->ffwd_down_weight, w->ffwd_down_bias, H, C);
        for (int i = 0; i < C; i++) x[t * C + i] += y[i];
    }
}

// The EAGLE loss of every window, summed, in double: fc on [f_i, E[x_{i+1}]], the block,
// the target's ln_f and lm_head, CE against p_{i+1} plus mean SmoothL1 against f_{i+1}.
static double ref_eagle_loss(void *ctx) {
    EagleCase *ec = ctx;
    const EagleTrainer *et = ec->et;
    const Weights *tw = &ec->target->w; // the target's frozen tensors
    int C = et->C, V = et->V, S = et->S, n = S - 1; // S target rows, n draft rows
    double cat[16], x[8 * 8], ln[8], z[16], loss = 0.0;
    for (int b = 0; b < et->B; b++) {
        const float *f = et->feat + (size_t)b * S * C, *p = et->p + (size_t)b * S * V;
        for (int i = 0; i < n; i++) {
            int tok = ec->tokens[b * S + i + 1]; // the next token x_{i+1}
            for (int j = 0; j < C; j++) cat[j] = f[i * C + j]; // the feature first
            for (int j = 0; j < C; j++) cat[C + j] = tw->token_embedding[tok * C + j];
            ref_linear(x + i * C, cat, et->fc, et->fc + 2 * C * C, 2 * C, C); // fc
        }
        ref_eagle_block(et, x, n); // h, in place
        // each row's two terms
        for (int i = 0; i < n; i++) {
            ref_layernorm(ln, x + i * C, tw->ln_f_weight, tw->ln_f_bias, C); // the target's ln_f
            ref_linear(z, ln, tw->lm_head_weight, tw->lm_head_bias, C, V); // and lm_head
            double reg = 0.0; // SmoothL1 against f_{i+1}
            for (int j = 0; j < C; j++) {
                double d = fabs(x[i * C + j] - f[(i + 1) * C + j]);
                reg += d < 1.0 ? 0.5 * d * d : d - 0.5;
            }
            loss += EAGLE_W_CE * ref_soft_ce(z, p + (i + 1) * V, V) + EAGLE_W_REG * reg / C;
        }
    }
    return loss;
}

// A tiny target and an EAGLE draft for it of two windows, whose target rows are filled and
// whose gradient (of the summed loss) is taken; returns the trainer's loss.
static double eagle_case(GPT *g, EagleTrainer *et, int *tokens) {
    Config c = TINY;
    build_gpt(g, &c);
    init_gpt_random(g, 51); // its rows are the features
    eagle_trainer_init(et, g, 2, 52); // two windows
    Rng r;
    rng_seed(&r, 53);
    // weights larger than PyTorch's start, so the LayerNorms and the attention bend
    fill_uniform(et->fc, (size_t)(2 * 8 + 1) * 8, 0.6, &r);
    for (size_t i = 0; i < et->n; i++)
        et->block.params[et->off + i] += (float)(0.3 * (2.0 * rng_uniform(&r) - 1.0));
    for (int i = 0; i < 12; i++) tokens[i] = (int)(rng_u64(&r) % 11); // two windows of 6
    double loss = 0.0; // summed over both windows
    eagle_train_prepare(et); // zero gradients, as a training step starts
    for (int b = 0; b < 2; b++) {
        eagle_train_targets(et, g, tokens + 6 * b, 6, b); // f and p
        loss += eagle_train_forward(et, g, tokens + 6 * b, 6, b);
        eagle_train_backward(et, g, b, 1.0f); // the summed loss's gradient
    }
    return loss;
}

// Section 3: EAGLE's gradient for a sample of every tensor; returns the worst relative error.
static double eagle_gradient_check(int report) {
    GPT g;
    EagleTrainer et;
    int tokens[12];
    double loss = eagle_case(&g, &et, tokens);
    EagleCase ec = {&et, &g, tokens}; // what the reference reads
    double ref = ref_eagle_loss(&ec), worst = 0.0;
    if (report)
        check(fabs(loss - ref) < 1e-5 * fabs(ref), "eagle_train_forward's loss %.9f == the double "
              "reference's %.9f", loss, ref);
    // fc_weight and fc_bias, then the block's 13 tensors, 24 floats of each at most
    size_t sizes[N_TENSORS], nfc = 2 * 8 * 8, at = et.off;
    weight_sizes(&et.bc, sizes); // the block's tensor sizes
    double e = tensor_error(ref_eagle_loss, &ec, et.fc, et.fc_grad, nfc, 24);
    worst = fmax(worst, e);
    if (report) check(e <= TOLERANCE, "EAGLE: dLoss/dfc_weight within %.0e (relative error %.2g)",
                      TOLERANCE, e);
    e = tensor_error(ref_eagle_loss, &ec, et.fc + nfc, et.fc_grad + nfc, 8, 8);
    worst = fmax(worst, e);
    if (report) check(e <= TOLERANCE, "EAGLE: dLoss/dfc_bias within %.0e (relative error %.2g)",
                      TOLERANCE, e);
    for (int k = EAGLE_BLOCK_FIRST; k <= EAGLE_BLOCK_LAST; k++) {
        e = tensor_error(ref_eagle_loss, &ec, et.block.params + at, et.ts.grads + at, sizes[k], 24);
        worst = fmax(worst, e);
        if (report) check(e <= TOLERANCE, "EAGLE: dLoss/d%s within %.0e of central differences "
                          "(relative error %.2g)", TENSOR_NAMES[k], TOLERANCE, e);
        at += sizes[k];
    }
    eagle_trainer_free(&et); // safe on a half-built one
    free_gpt(&g);
    return worst;
}

// Section 3's second half: eagle_eval_row row by row gives the batched pass's h and logits.
static void test_eagle_step(void) {
    GPT g;
    EagleTrainer et;
    int tokens[12];
    eagle_case(&g, &et, tokens); // the same draft and windows
    // window 0's rows from the batched pass, kept before eagle_eval_row reuses its record
    float h[5 * 8], z[5 * 11], hs[5 * 8], zs[5 * 11];
    eagle_train_forward(&et, &g, tokens, 6, 0); // window 0, batched
    memcpy(h, et.ts.blocks[0].x_out, sizeof(h)); // its 5 rows of h
    memcpy(z, et.logits, sizeof(z)); // and logits
    for (int i = 0; i < 5; i++) {
        const float *hi = eagle_eval_row(&et, &g, et.feat + i * 8, tokens[i + 1], i);
        memcpy(hs + i * 8, hi, 8 * sizeof(float)); // row i of h, one at a time
        memcpy(zs + i * 11, et.logits, 11 * sizeof(float));
    }
    check(!memcmp(h, hs, sizeof(h)) && !memcmp(z, zs, sizeof(z)), "eagle_eval_row, one row at a "
          "time on the block's cache, gives the batched pass's 5 rows of h and logits bit for bit");
    eagle_trainer_free(&et);
    free_gpt(&g);
}

// ----------------------------------------------------------------------------
// 4: the files, the shipped ones, determinism

// The whole file at path (malloc'd), its size in *n; NULL if unreadable.
static unsigned char *slurp(const char *path, size_t *n) {
    char err[256]; // unused: the test checks NULL
    return read_file(path, n, "test file", "", err, sizeof(err));
}

// save_exit_head on the tiny target: size, header fields, floats in order, checksum.
static void test_exit_file(const char *dir) {
    Config c = TINY;
    GPT g;
    ExitTrainer x;
    build_gpt(&g, &c);
    init_gpt_random(&g, 61); // its fingerprint goes in the file
    exit_trainer_init(&x, &g, 1);
    char path[600], err[512];
    snprintf(path, sizeof(path), "%s/exit.bin", dir); // inside the temporary directory
    x.head.head_bias[10] = 0.25f; // the last float, to find at end-12
    int rc = save_exit_head(&x.head, &g, path, err, sizeof(err));
    size_t n = 0; // the file's size
    unsigned char *b = rc == 0 ? slurp(path, &n) : NULL;
    size_t want = 28 + 4 * (2 * 8 + 8 * 11 + 11) + 8; // header, floats, checksum
    check(b && n == want, "save_exit_head writes %zu bytes (28 + 4(2C + CV + V) + 8), got %zu",
          want, n);
    if (b && n == want) {
        uint32_t last;
        memcpy(&last, &x.head.head_bias[10], 4); // the bits of the last float
        check(!memcmp(b, "SPDX", 4) && get_u32(b + 4) == 1 && get_u32(b + 8) == 1 &&
              get_u32(b + 12) == 8 && get_u32(b + 16) == 11 &&
              get_u64(b + 20) == target_fingerprint(&g), "the exit file's header: SPDX, "
              "version 1, layer 1, C 8, V 11, the target's fingerprint");
        check(get_u32(b + 28) == 0x3f800000u && get_u32(b + n - 12) == last &&
              fnv1a64(b, n - 8) == get_u64(b + n - 8), "the exit file's floats start with "
              "ln_weight (1.0, ln_f's), end with head_bias, and its checksum matches");
    }
    free(b); // NULL when the write failed
    exit_trainer_free(&x);
    free_gpt(&g);
}

// save_eagle_head on the tiny target: size, header fields, floats in order, checksum.
static void test_eagle_file(const char *dir) {
    GPT g;
    EagleTrainer et;
    int tokens[12];
    eagle_case(&g, &et, tokens);
    char path[600], err[512];
    snprintf(path, sizeof(path), "%s/eagle.bin", dir); // inside the temporary directory
    int rc = save_eagle_head(&et, &g, path, err, sizeof(err));
    size_t n = 0, nfc = (2 * 8 + 1) * 8; // fc_weight and fc_bias
    unsigned char *b = rc == 0 ? slurp(path, &n) : NULL;
    // the block's 13 tensors: 2C + 4CC + C + 2C + CH + H + HC + C floats
    size_t block = 2 * 8 + 4 * 64 + 8 + 2 * 8 + 8 * 32 + 32 + 32 * 8 + 8;
    size_t want = 48 + 4 * (nfc + block) + 8; // header, floats, checksum
    check(b && n == want && et.n == block, "save_eagle_head writes %zu bytes (48 + 4((2C+1)C "
          "+ the block's 13 tensors) + 8), got %zu", want, n);
    if (b && n == want) {
        check(!memcmp(b, "SPDE", 4) && get_u32(b + 4) == 1 && get_u32(b + 8) == 1 &&
              get_u32(b + 12) == 2 && get_u32(b + 16) == 0 && get_u32(b + 20) == 0 &&
              get_u32(b + 24) == 8 && get_u32(b + 28) == 11 && get_u32(b + 32) == 32 &&
              get_u32(b + 36) == 2 && get_u64(b + 40) == target_fingerprint(&g),
              "the EAGLE file's header: SPDE, version 1, n_feat 1, feat_layer {2, 0, 0} (the "
              "top of 2 blocks), C 8, V 11, H 32, n_head 2, the target's fingerprint");
        // the first float, the first of the block (ln1_weight), the last (ffwd_down_bias)
        uint32_t f0, l0, last;
        memcpy(&f0, &et.fc[0], 4); // fc_weight[0][0]
        memcpy(&l0, &et.block.w.ln1_weight[0], 4); // the block's first float
        memcpy(&last, &et.block.w.ffwd_down_bias[7], 4); // the block's last float
        check(get_u32(b + 48) == f0 && get_u32(b + 48 + 4 * nfc) == l0 &&
              get_u32(b + n - 12) == last && fnv1a64(b, n - 8) == get_u64(b + n - 8),
              "the EAGLE file's floats: fc_weight first, ln1_weight right after fc_bias, "
              "ffwd_down_bias last; its checksum matches");
    }
    free(b);
    eagle_trainer_free(&et);
    free_gpt(&g);
}

// The shipped exit and EAGLE draft fit the shipped model and do better than the untrained
// exit on a slice of the validation split; two short exit runs give the same floats.
static void test_shipped(GPT *g, const Corpus *corpus) {
    char err[512];
    ExitTrainer x;
    EagleTrainer et;
    exit_trainer_init(&x, g, 1); // sized for the shipped target
    EagleShape sh = {1, 0, 0, 1}; // EAGLE or EAGLE-3: the file says
    int rs = eagle_train_shape(&sh, g, DEFAULT_EAGLE, err, sizeof(err));
    check(rs == 0, "%s holds an EAGLE draft reading %d rows of the target (%s)", DEFAULT_EAGLE,
          sh.n_feat, rs ? err : "ok");
    eagle_trainer_setup(&et, g, 1, 2, &sh); // one window: the evaluation needs no more
    int rx = read_exit_head(&x, g, DEFAULT_EXIT, err, sizeof(err));
    check(rx == 0, "%s reads for %s (%s)", DEFAULT_EXIT, DEFAULT_MODEL, rx ? err : "ok");
    int re = read_eagle_head(&et, g, DEFAULT_EAGLE, err, sizeof(err));
    check(re == 0, "%s reads for %s (%s)", DEFAULT_EAGLE, DEFAULT_MODEL, re ? err : "ok");
    // 1,000 validation tokens (about 1% of the split): seconds, not minutes
    size_t n = SANITIZED ? 200 : 1000;
    ExitEval e;
    EagleEval ee;
    exit_eval_split(&x, g, corpus->tokens + corpus->n_train, n, &e); // trained and untrained
    eagle_eval_split(&et, g, corpus->tokens + corpus->n_train, n, &ee); // by depth
    check(rx == 0 && e.alpha[0] > e.alpha[1] + 0.1, "the shipped exit's alpha %.3f beats the "
          "untrained exit's %.3f by more than 0.1 (first %zu validation tokens)", e.alpha[0],
          e.alpha[1], n);
    check(re == 0 && ee.alpha[0] > e.alpha[0] + 0.1, "the shipped EAGLE draft's first-guess "
          "alpha %.3f beats the trained exit's %.3f by more than 0.1", ee.alpha[0], e.alpha[0]);
    exit_trainer_free(&x);
    eagle_trainer_free(&et);
}

// Two exit trainings of 3 steps of 2 windows from the same seed give the same floats.
static void test_deterministic(GPT *g, const Corpus *corpus) {
    ExitOptions o = {1, 3, 2, 7}; // layer 1, 3 steps, 2 windows, seed 7
    ExitTrainer a, b;
    exit_trainer_init(&a, g, 1);
    exit_trainer_init(&b, g, 1);
    char err[512];
    train_exit_head(&a, g, corpus, &o, err, sizeof(err)); // the same run twice
    train_exit_head(&b, g, corpus, &o, err, sizeof(err));
    check(!memcmp(a.head.ln_weight, b.head.ln_weight, a.P * sizeof(float)) &&
          memcmp(a.head.head_weight, g->w.lm_head_weight, 4) != 0, "two exit trainings from "
          "the same seed give the same floats, and training moved them");
    exit_trainer_free(&a);
    exit_trainer_free(&b);
}

// ----------------------------------------------------------------------------
// 5: EAGLE-3 (fuse, the unrolled steps of training-time test)

// The tiny target EAGLE-3's check uses: 3 blocks, so rows after blocks 1, 2 and 3 exist.
#define TINY3 {3, 2, 8, 6, 11, 32}
#define TINY3_STEPS 3 // step k has 6-k rows: 5 + 4 + 3

// One row of EAGLE-3's reference: the block on input x (C) given every visible row's key
// and value (kk, vv: nv rows of C, this row's own among them) and its query q; h out (C).
static void ref_eagle3_row(const EagleTrainer *et, const double *x, const double *q,
                           const double *kk, const double *vv, int nv, double *h) {
    const Weights *w = &et->block.w;
    int C = et->C, NH = et->bc.n_head, HS = C / NH, H = et->bc.ffn_width;
    double ao[8], y[8], ln[8], hid[64], sc[32];
    for (int hd = 0; hd < NH; hd++) { // each head: softmax over the visible rows
        double m = -INFINITY, z = 0.0;
        for (int s = 0; s < nv; s++) {
            double dot = 0.0;
            for (int j = 0; j < HS; j++) dot += q[hd * HS + j] * kk[s * C + hd * HS + j];
            sc[s] = dot / sqrt((double)HS);
            m = sc[s] > m ? sc[s] : m;
        }
        for (int s = 0; s < nv; s++) z += (sc[s] = exp(sc[s] - m));
        for (int j = 0; j < HS; j++) {
            double acc = 0.0;
            for (int s = 0; s < nv; s++) acc += sc[s] / z * vv[s * C + hd * HS + j];
            ao[hd * HS + j] = acc;
        }
    }
    // proj, then the MLP, each onto the residual
    ref_linear(y, ao, w->proj_weight, w->proj_bias, C, C);
    for (int i = 0; i < C; i++) h[i] = x[i] + y[i];
    ref_layernorm(ln, h, w->ln2_weight, w->ln2_bias, C);
    ref_linear(hid, ln, w->ffwd_up_weight, w->ffwd_up_bias, C, H);
    for (int i = 0; i < H; i++) hid[i] = hid[i] > 0.0 ? hid[i] : 0.0;
    ref_linear(y, hid, w->ffwd_down_weight, w->ffwd_down_bias, H, C);
    for (int i = 0; i < C; i++) h[i] += y[i];
}

// EAGLE-3's loss of every window, summed, in double from the formulas: g_i = fuse of the
// window's three rows; step k of chain i reads [g_i or its chain's h of step k-1,
// E[x_{i+k}]], attends to step 1 of chains 0..i and to its own chain's steps 2..k, and is
// judged against p_{i+k} by the soft cross-entropy. The mask is written here, not read.
static double ref_eagle3_loss(void *ctx) {
    EagleCase *ec = ctx;
    const EagleTrainer *et = ec->et;
    const Weights *tw = &ec->target->w, *w = &et->block.w;
    int C = et->C, V = et->V, S = et->S, n = S - 1, K = et->steps;
    // by step k (0-based) and chain i: the inputs, keys, values, outputs
    double g[5][8], xin[3][5][8], q[3][5][8], kk[3][5][8], vv[3][5][8], h[3][5][8];
    double in3[24], cat[16], ln[8], z[16], keys[8 * 8], vals[8 * 8], loss = 0.0;
    for (int b = 0; b < et->B; b++) {
        const float *p = et->p + (size_t)b * S * V, *fin = et->fused_in + (size_t)b * S * 3 * C;
        const int *tok = ec->tokens + b * S;
        for (int i = 0; i < n; i++) { // the fused rows
            for (int j = 0; j < 3 * C; j++) in3[j] = fin[i * 3 * C + j];
            ref_linear(g[i], in3, et->fuse, et->fuse + 3 * C * C, 3 * C, C);
        }
        for (int k = 0; k < K; k++) {
            // the step's inputs and their queries, keys and values
            for (int i = 0; i + k < n; i++) {
                const double *feat = k == 0 ? g[i] : h[k - 1][i];
                for (int j = 0; j < C; j++) cat[j] = feat[j];
                const float *e = tw->token_embedding + tok[i + k + 1] * C; // its token
                for (int j = 0; j < C; j++) cat[C + j] = e[j];
                ref_linear(xin[k][i], cat, et->fc, et->fc + 2 * C * C, 2 * C, C);
                ref_layernorm(ln, xin[k][i], w->ln1_weight, w->ln1_bias, C);
                ref_linear(q[k][i], ln, w->query, NULL, C, C);
                ref_linear(kk[k][i], ln, w->key, NULL, C, C);
                ref_linear(vv[k][i], ln, w->value, NULL, C, C);
            }
            // each row: step 1 of chains 0..i, then its own chain's steps 2..k+1
            for (int i = 0; i + k < n; i++) {
                int nv = 0;
                for (int j = 0; j <= i; j++, nv++) {
                    memcpy(keys + nv * C, kk[0][j], C * sizeof(double));
                    memcpy(vals + nv * C, vv[0][j], C * sizeof(double));
                }
                for (int s = 1; s <= k; s++, nv++) {
                    memcpy(keys + nv * C, kk[s][i], C * sizeof(double));
                    memcpy(vals + nv * C, vv[s][i], C * sizeof(double));
                }
                ref_eagle3_row(et, xin[k][i], q[k][i], keys, vals, nv, h[k][i]);
                ref_layernorm(ln, h[k][i], tw->ln_f_weight, tw->ln_f_bias, C);
                ref_linear(z, ln, tw->lm_head_weight, tw->lm_head_bias, C, V);
                loss += ref_soft_ce(z, p + (i + k + 1) * V, V);
            }
        }
    }
    return loss;
}

// A tiny 3-block target and an EAGLE-3 draft for it (rows after blocks 1, 2 and 3, three
// steps) of two windows, whose gradient (of the summed loss) is taken; returns the loss.
static double eagle3_case(GPT *g, EagleTrainer *et, int *tokens) {
    Config c = TINY3;
    build_gpt(g, &c);
    init_gpt_random(g, 71);
    EagleShape sh = {3, 1, 2, TINY3_STEPS};
    eagle_trainer_setup(et, g, 2, 72, &sh);
    Rng r;
    rng_seed(&r, 73);
    // weights larger than PyTorch's start, so the LayerNorms and the attention bend
    fill_uniform(et->fc, (size_t)(2 * 8 + 1) * 8, 0.6, &r);
    fill_uniform(et->fuse, (size_t)(3 * 8 + 1) * 8, 0.5, &r);
    for (size_t i = 0; i < et->n; i++)
        et->block.params[et->off + i] += (float)(0.3 * (2.0 * rng_uniform(&r) - 1.0));
    for (int i = 0; i < 12; i++) tokens[i] = (int)(rng_u64(&r) % 11);
    double loss = 0.0;
    eagle_train_prepare(et); // zero gradients, transposes (fc's too)
    for (int b = 0; b < 2; b++) {
        eagle3_train_targets(et, g, tokens + 6 * b, 6, b);
        loss += eagle3_train_forward(et, g, tokens + 6 * b, b);
        eagle3_train_backward(et, g, b, 1.0f);
    }
    return loss;
}

// Section 5: EAGLE-3's gradient for a sample of every tensor (fuse, fc, the block's 13);
// returns the worst relative error.
static double eagle3_gradient_check(int report) {
    GPT g;
    EagleTrainer et;
    int tokens[12];
    double loss = eagle3_case(&g, &et, tokens);
    EagleCase ec = {&et, &g, tokens};
    double ref = ref_eagle3_loss(&ec), worst = 0.0;
    if (report)
        check(et.rows == 12 && fabs(loss - ref) < 1e-5 * fabs(ref), "eagle3_train_forward's "
              "loss %.9f over 3 steps (5 + 4 + 3 rows a window) == the double reference's %.9f",
              loss, ref);
    // fuse_weight, fuse_bias, fc_weight, fc_bias: 24 floats of each at most
    const char *names[4] = {"fuse_weight", "fuse_bias", "fc_weight", "fc_bias"};
    float *x[4] = {et.fuse, et.fuse + 3 * 64, et.fc, et.fc + 2 * 64};
    float *dx[4] = {et.fuse_grad, et.fuse_grad + 3 * 64, et.fc_grad, et.fc_grad + 2 * 64};
    size_t n[4] = {3 * 64, 8, 2 * 64, 8}, sizes[N_TENSORS], at = et.off;
    for (int k = 0; k < 4; k++) {
        double e = tensor_error(ref_eagle3_loss, &ec, x[k], dx[k], n[k], 24);
        worst = fmax(worst, e);
        if (report) check(e <= TOLERANCE, "EAGLE-3: dLoss/d%s within %.0e (relative error %.2g)",
                          names[k], TOLERANCE, e);
    }
    // the block's 13 tensors
    weight_sizes(&et.bc, sizes);
    for (int k = EAGLE_BLOCK_FIRST; k <= EAGLE_BLOCK_LAST; k++) {
        double e = tensor_error(ref_eagle3_loss, &ec, et.block.params + at, et.ts.grads + at,
                                sizes[k], 24);
        worst = fmax(worst, e);
        if (report) check(e <= TOLERANCE, "EAGLE-3: dLoss/d%s within %.0e of central "
                          "differences (relative error %.2g)", TENSOR_NAMES[k], TOLERANCE, e);
        at += sizes[k];
    }
    eagle_trainer_free(&et);
    free_gpt(&g);
    return worst;
}

// Section 5's rows: eagle_eval_row's chains (depth 1 from g_i, then its own h, on the
// block's cache as the runtime keeps it) give the unrolled pass's rows bit for bit.
static void test_eagle3_rows(void) {
    GPT g;
    EagleTrainer et;
    int tokens[12];
    eagle3_case(&g, &et, tokens);
    eagle3_train_forward(&et, &g, tokens, 0); // window 0 again: its record, batched
    float h[12 * 8], z[12 * 11], hs[12 * 8], zs[12 * 11];
    memcpy(h, et.ts.blocks[0].x_out, sizeof(h));
    memcpy(z, et.logits, sizeof(z));
    // chain i, depth d: the row of step d, at position i+d-1
    for (int i = 0; i < 5; i++) {
        const float *hi = et.g + i * 8;
        for (int d = 1; d <= TINY3_STEPS && i + d <= 5; d++) {
            int row = eagle_train_rows_of(6, d - 1) + i;
            hi = eagle_eval_row(&et, &g, hi, tokens[i + d], i + d - 1);
            memcpy(hs + row * 8, hi, 8 * sizeof(float));
            memcpy(zs + row * 11, et.logits, 11 * sizeof(float));
        }
    }
    check(!memcmp(h, hs, sizeof(h)) && !memcmp(z, zs, sizeof(z)), "EAGLE-3: eagle_eval_row's "
          "chains (g_i, then the draft's own h, on its cache) give the unrolled pass's 12 rows "
          "of h and logits bit for bit");
    // the fused rows' input: the rows after blocks 1 and 2 (forward cut there), then f
    float r1[6 * 8];
    exit_target_residual(&g, tokens, 6, 2, r1);
    int taps_ok = 1;
    for (int t = 0; t < 6; t++)
        taps_ok &= !memcmp(et.fused_in + t * 24 + 8, r1 + t * 8, 32) &&
                   !memcmp(et.fused_in + t * 24 + 16, et.feat + t * 8, 32);
    check(taps_ok, "EAGLE-3's fuse reads [r_1, r_2, f] of each position: the residual after "
          "blocks 1 and 2 (forward cut there), then the top feature");
    eagle_trainer_free(&et);
    free_gpt(&g);
}

// save_eagle_head and read_eagle_head on an EAGLE-3 draft: the header, fuse first, and the
// floats back bit for bit.
static void test_eagle3_file(const char *dir) {
    GPT g;
    EagleTrainer et, back;
    int tokens[12];
    eagle3_case(&g, &et, tokens);
    char path[600], err[512];
    snprintf(path, sizeof(path), "%s/eagle3.bin", dir);
    int rc = save_eagle_head(&et, &g, path, err, sizeof(err));
    size_t n = 0, nfuse = (3 * 8 + 1) * 8, nfc = (2 * 8 + 1) * 8;
    unsigned char *b = rc == 0 ? slurp(path, &n) : NULL;
    size_t want = 48 + 4 * (nfuse + nfc + et.n) + 8;
    check(b && n == want, "save_eagle_head writes an EAGLE-3 draft in %zu bytes (48 + 4((3C+1)C "
          "+ (2C+1)C + the block) + 8), got %zu", want, n);
    uint32_t f0, c0;
    memcpy(&f0, &et.fuse[0], 4);
    memcpy(&c0, &et.fc[0], 4);
    check(b && n == want && get_u32(b + 8) == 3 && get_u32(b + 12) == 1 &&
          get_u32(b + 16) == 2 && get_u32(b + 20) == 3 && get_u32(b + 48) == f0 &&
          get_u32(b + 48 + 4 * nfuse) == c0, "the EAGLE-3 file's header: n_feat 3, feat_layer "
          "{1, 2, 3}; fuse_weight first, fc_weight after fuse_bias");
    EagleShape sh = {3, 1, 2, 1}; // eagle-eval reads it with one step
    eagle_trainer_setup(&back, &g, 1, 9, &sh);
    int rr = read_eagle_head(&back, &g, path, err, sizeof(err));
    check(rr == 0 && !memcmp(back.fuse, et.fuse, nfuse * 4) && !memcmp(back.fc, et.fc, nfc * 4) &&
          !memcmp(back.block.params + back.off, et.block.params + et.off, et.n * 4),
          "read_eagle_head reads the EAGLE-3 file back bit for bit (%s)", rr ? err : "ok");
    free(b);
    eagle_trainer_free(&back);
    eagle_trainer_free(&et);
    free_gpt(&g);
}

// Two EAGLE-3 trainings of 2 steps of 2 windows on the shipped model give the same floats.
static void test_eagle3_deterministic(GPT *g, const Corpus *corpus) {
    EagleOptions o = {2, 2, 5, {3, 1, 2, 3}, 1};
    EagleTrainer a, b;
    eagle_trainer_setup(&a, g, 2, 5, &o.shape);
    eagle_trainer_setup(&b, g, 2, 5, &o.shape);
    float fuse0 = a.fuse[0];
    char err[512];
    train_eagle(&a, g, corpus, &o, err, sizeof(err));
    train_eagle(&b, g, corpus, &o, err, sizeof(err));
    size_t nfuse = (size_t)(3 * a.C + 1) * a.C, nfc = (size_t)(2 * a.C + 1) * a.C;
    check(!memcmp(a.fuse, b.fuse, nfuse * 4) && !memcmp(a.fc, b.fc, nfc * 4) &&
          !memcmp(a.block.params, b.block.params, a.block.n_params * 4) && a.fuse[0] != fuse0,
          "two EAGLE-3 trainings from the same seed give the same floats, and training moved "
          "fuse");
    eagle_trainer_free(&a);
    eagle_trainer_free(&b);
}

// Nothing that is not a finite number is learned or saved. On the tiny target with a NaN in
// its lm_head (so every row is NaN), train_exit_head and train_eagle stop at step 1 before
// the update, with one line, their floats as they started; save_exit_head and save_eagle_head
// refuse a NaN and write no file.
static void test_nonfinite(const char *dir) {
    Config c = TINY;
    GPT g;
    ExitTrainer x;
    EagleTrainer et;
    build_gpt(&g, &c);
    init_gpt_random(&g, 71);
    g.w.lm_head_weight[0] = NAN;
    exit_trainer_init(&x, &g, 1);
    eagle_trainer_init(&et, &g, 2, 72);
    int tokens[120];
    Rng r;
    rng_seed(&r, 73);
    for (int i = 0; i < 120; i++) tokens[i] = (int)(rng_u64(&r) % 11);
    Corpus corpus = {NULL, tokens, 120, 108, 12};
    // the floats each trainer starts from, to see that no update was made
    float ln0 = x.head.ln_weight[0], fc0 = et.fc[0];
    char err[512] = "", path[600];
    ExitOptions xo = {1, 3, 2, 1};
    int rx = train_exit_head(&x, &g, &corpus, &xo, err, sizeof(err));
    check(rx == -1 && strstr(err, "step 1: the loss is not a finite number (are the target's "
          "rows NaN?") && x.head.ln_weight[0] == ln0, "train_exit_head on a target of NaN rows "
          "stops at step 1 before the update: \"%s\"", err);
    EagleOptions eo = {3, 2, 1, {1, 2, 0, 1}, 0};
    int re = train_eagle(&et, &g, &corpus, &eo, err, sizeof(err));
    check(re == -1 && strstr(err, "step 1: the loss is not a finite number") && et.fc[0] == fc0,
          "train_eagle on a target of NaN rows stops at step 1 before the update: \"%s\"", err);
    // the writers, on floats holding a NaN
    snprintf(path, sizeof(path), "%s/nan_exit.bin", dir);
    x.head.head_bias[2] = NAN;
    rx = save_exit_head(&x.head, &g, path, err, sizeof(err));
    check(rx == -1 && strstr(err, "exit head") && strstr(err, "float 16 is not a finite number")
          && access(path, F_OK) != 0, "save_exit_head refuses a NaN (the first: head_weight's "
          "first float, copied from the target's lm_head) and writes no file: \"%s\"", err);
    snprintf(path, sizeof(path), "%s/nan_eagle.bin", dir);
    et.block.w.ffwd_down_bias[1] = INFINITY;
    re = save_eagle_head(&et, &g, path, err, sizeof(err));
    // fc's (2C + 1) C = 136 floats come first, then the block's; ffwd_down_bias is its last C
    check(re == -1 && strstr(err, "eagle draft") && strstr(err, "float 977 is not a finite") &&
          access(path, F_OK) != 0, "save_eagle_head refuses an inf (float 136 + 841, numbered as "
          "the file numbers them) and writes no file: \"%s\"", err);
    exit_trainer_free(&x);
    eagle_trainer_free(&et);
    free_gpt(&g);
}

// Sections 2 and 4 on the shipped model, the temporary directory's file checks first.
static void test_files_and_shipped(void) {
    char dir[] = "/tmp/test_eagle.XXXXXX"; // the files go here, then away
    if (check(mkdtemp(dir) != NULL, "make a temporary directory")) {
        test_exit_file(dir);
        test_eagle_file(dir);
        test_eagle3_file(dir);
        test_nonfinite(dir);
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0) printf("could not remove %s\n", dir);
    }
    char err[512];
    GPT g;
    Vocab v;
    Corpus corpus;
    memset(&g, 0, sizeof(g)); // zeroed: the frees below are safe
    memset(&corpus, 0, sizeof(corpus));
    int ok = load_checkpoint(DEFAULT_MODEL, &g, &v, err, sizeof(err)) == 0 &&
             load_corpus(&corpus, DEFAULT_CORPUS, &v, err, sizeof(err)) == 0;
    if (check(ok, "load %s and %s (%s)", DEFAULT_MODEL, DEFAULT_CORPUS, ok ? "ok" : err)) {
        test_exit_rows(&g, corpus.tokens + corpus.n_train); // the first validation window
        test_shipped(&g, &corpus);
        test_deterministic(&g, &corpus);
        test_eagle3_deterministic(&g, &corpus);
    }
    free_gpt(&g);
    free_corpus(&corpus);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    (void)ref_forward; // reference.h's whole model: this test needs only its LayerNorm and Linear
#if defined(BREAK_EXIT_BACKWARD)
    double worst = exit_gradient_check(0);
    check(worst > TOLERANCE, "the gradient check catches an exit backward without the head "
          "bias's term: worst relative error %.2g (tolerance %.0e)", worst, TOLERANCE);
#elif defined(BREAK_EAGLE_BACKWARD)
    double worst = eagle_gradient_check(0);
    check(worst > TOLERANCE, "the gradient check catches an EAGLE backward without the "
          "regression's term: worst relative error %.2g (tolerance %.0e)", worst, TOLERANCE);
#elif defined(BREAK_EAGLE3_BACKWARD)
    double worst = eagle3_gradient_check(0);
    check(worst > TOLERANCE, "the gradient check catches an EAGLE-3 backward whose fed-back h "
          "gets no gradient: worst relative error %.2g (tolerance %.0e)", worst, TOLERANCE);
#endif
#if defined(BREAK_EXIT_BACKWARD) || defined(BREAK_EAGLE_BACKWARD) || \
    defined(BREAK_EAGLE3_BACKWARD)
    (void)exit_gradient_check; // a broken build checks its one gradient check only
    (void)eagle_gradient_check;
    (void)eagle3_gradient_check;
    (void)test_eagle_step;
    (void)test_eagle3_rows;
    (void)test_files_and_shipped;
#else
    exit_gradient_check(1);
    eagle_gradient_check(1);
    test_eagle_step();
    eagle3_gradient_check(1);
    test_eagle3_rows();
    test_files_and_shipped();
#endif
    printf("test_eagle summary: %d checks passed and %d failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
}
