/*
 * test/test_train.c: the training pass of tinyshakespeare/train.c against finite differences, one
 * AdamW step against its formulas, and a short training run that must learn.
 *
 * train_forward + train_backward give the gradient of the mean cross-entropy with
 * respect to every parameter. This test takes the same derivative numerically, with
 * central differences of the loss of test/reference.h's model, which is computed in
 * double precision from the float parameters, and compares the two tensor by tensor.
 *
 * Why the noise is small and known: each parameter p is moved to the floats p+ and p-
 * nearest p +- h, and the difference quotient divides by the exact distance (p+ - p-),
 * so float rounding of the step costs nothing. The loss itself is a double, good to
 * about 1e-15, so rounding adds about 1e-15 / h = 1e-11 to a derivative. The truncation
 * error of a central difference is h^2/6 * f''' ~ 1e-9. The analytic gradient comes from
 * float arithmetic, good to about 1e-6 relative. So a correct backward pass lands around
 * 1e-6, the tolerance of 1e-3 (max |analytic - numeric| / max |numeric|, per tensor)
 * leaves wide room, and a wrong term in any formula lands far above it.
 *
 * Distillation (--teacher) changes only the loss: at each position the cross-entropy
 * against the teacher's softmax, sum_v -p_teacher(v) log q(v), whose gradient with respect
 * to the logits is q - p_teacher. The same check runs on that loss, with a second tiny
 * model as the teacher, and once more with the next-character gradient in place of the
 * distillation one, where it must fail: the check can tell the two apart.
 *
 * broken build: -DBREAK_LAYERNORM_BACKWARD
 * test/run_tests.sh also builds this file with the flag on the line above. That drops
 * a term of the LayerNorm input gradient in tinyshakespeare/train.c. In that build this test expects
 * the gradient check to fail, and prints PASS only if it does.
 */
#define TESTING
#include "../tinyshakespeare/train.c"

#include <stdarg.h>

#include "reference.h"

#define TOLERANCE 1e-3 // max |analytic - numeric| / max |numeric|, per tensor
#define STEP 1e-4      // h: the distance of each central difference

#include "check.h"

// The mean cross-entropy of B windows, from the double reference model: against the
// next characters in targets, or, if soft is not NULL, against the distributions there,
// (B, S, V), as distillation computes it.
static double reference_loss(const GPT *g, const int *inputs, const int *targets,
                             const float *soft, int B) {
    int S = g->config.block_size, V = g->config.vocab_size;
    double *logits = malloc((size_t)S * V * sizeof(double)), loss = 0.0;
    for (int b = 0; b < B; b++) {
        ref_forward(g, inputs + (size_t)b * S, S, logits);
        for (int t = 0; t < S; t++) {
            // logsumexp(z) - z[target], with the max taken out first
            const double *z = logits + (size_t)t * V;
            double m = z[0], sum = 0.0;
            for (int v = 1; v < V; v++) m = z[v] > m ? z[v] : m;
            for (int v = 0; v < V; v++) sum += exp(z[v] - m);
            if (!soft) {
                loss += m + log(sum) - z[targets[(size_t)b * S + t]];
                continue;
            }
            // distillation: sum_v -soft[v] (z[v] - logsumexp(z))
            const float *p = soft + ((size_t)b * S + t) * V;
            for (int v = 0; v < V; v++) loss -= (double)p[v] * (z[v] - m - log(sum));
        }
    }
    free(logits);
    return loss / ((double)B * S);
}

// Gives the LayerNorms random weights and biases: with the default 1 and 0, a gradient
// that confused weight with bias, or ln1 with ln2, could still look right.
static void randomise_layernorms(GPT *g, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    const Config *c = &g->config;
    Weights *w = &g->w;
    size_t n = (size_t)c->n_layer * c->n_embd;
    for (size_t i = 0; i < n; i++) {
        w->ln1_weight[i] = (float)(0.5 + rng_uniform(&r));
        w->ln1_bias[i] = (float)(rng_uniform(&r) - 0.5);
        w->ln2_weight[i] = (float)(0.5 + rng_uniform(&r));
        w->ln2_bias[i] = (float)(rng_uniform(&r) - 0.5);
    }
    for (int i = 0; i < c->n_embd; i++) {
        w->ln_f_weight[i] = (float)(0.5 + rng_uniform(&r));
        w->ln_f_bias[i] = (float)(rng_uniform(&r) - 0.5);
    }
}

// Compares every parameter's analytic gradient with a central difference, tensor by
// tensor; returns the worst relative error and names its tensor. The numeric side
// differentiates the loss against soft targets if soft is not NULL (distillation).
static double gradient_check(GPT *g, TrainState *ts, const int *inputs, const int *targets,
                             const float *soft, const char **worst_name, int report) {
    size_t sizes[N_TENSORS], at = 0;
    weight_sizes(&g->config, sizes);
    double worst = 0.0;
    *worst_name = "";
    for (int k = 0; k < N_TENSORS; k++) {
        double max_err = 0.0, max_num = 0.0;
        for (size_t i = at; i < at + sizes[k]; i++) {
            // the floats nearest p + h and p - h, and the exact distance between them
            float p = g->params[i];
            float hi = (float)(p + STEP), lo = (float)(p - STEP);
            g->params[i] = hi;
            double loss_hi = reference_loss(g, inputs, targets, soft, ts->B);
            g->params[i] = lo;
            double loss_lo = reference_loss(g, inputs, targets, soft, ts->B);
            g->params[i] = p;
            double numeric = (loss_hi - loss_lo) / ((double)hi - (double)lo);
            double err = fabs((double)ts->grads[i] - numeric);
            if (err > max_err) max_err = err;
            if (fabs(numeric) > max_num) max_num = fabs(numeric);
        }
        // relative to the tensor's largest gradient; the floor keeps 0/0 away
        double rel = max_err / (max_num > 1e-12 ? max_num : 1e-12);
        if (report)
            check(rel < TOLERANCE, "gradient of %-18s (%5zu values): max |analytic - numeric| "
                  "= %.2g, max |numeric| = %.2g, relative %.2g (tolerance %.0e)",
                  TENSOR_NAMES[k], sizes[k], max_err, max_num, rel, TOLERANCE);
        else
            printf("  gradient of %-18s relative error %.2g\n", TENSOR_NAMES[k], rel);
        if (rel > worst) {
            worst = rel;
            *worst_name = TENSOR_NAMES[k];
        }
        at += sizes[k];
    }
    return worst;
}

// One AdamW step on hand-picked numbers against the formulas written out here:
// p <- p (1 - lr wd) - lr m_hat / (sqrt(v_hat) + eps), m_hat = m / (1 - b1^t), ...
static void test_adamw(void) {
    float params[3] = {1.0f, -2.0f, 0.5f}, grads[3] = {0.5f, -0.1f, 0.0f};
    float m[3] = {0}, v[3] = {0};
    AdamW opt = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, m, v, 0};
    double p[3] = {1.0, -2.0, 0.5}, mm[3] = {0}, vv[3] = {0}, worst = 0.0;
    for (int step = 1; step <= 3; step++) {
        adamw_update(&opt, params, grads, 3);
        for (int i = 0; i < 3; i++) {
            p[i] *= 1.0 - 1e-3 * 0.01;
            mm[i] = 0.9 * mm[i] + 0.1 * grads[i];
            vv[i] = 0.999 * vv[i] + 0.001 * (double)grads[i] * grads[i];
            double mh = mm[i] / (1.0 - pow(0.9, step)), vh = vv[i] / (1.0 - pow(0.999, step));
            p[i] -= 1e-3 * mh / (sqrt(vh) + 1e-8);
            double d = fabs(p[i] - params[i]);
            if (d > worst) worst = d;
        }
    }
    check(worst < 1e-6 && opt.step == 3, "AdamW, 3 steps on 3 parameters == the formulas in "
          "double (max |diff| %.2g; params now %.6f %.6f %.6f)", worst, params[0], params[1],
          params[2]);
}

// A few hundred steps of the real recipe on a small model bring the validation loss far
// below ln(65) = 4.17, the loss of a uniform guess: the whole training loop learns.
static void test_learns(void) {
    Vocab v;
    Corpus corpus;
    char err[512] = "";
    memset(&v, 0, sizeof(v));
    if (!check(load_corpus_learning_vocab(&corpus, "tinyshakespeare/input.txt", &v, err,
                                          sizeof(err)) == 0,
               "load tinyshakespeare/input.txt for the learning test%s%s", err[0] ? ": " : "",
               err))
        return;
    Config c = {2, 2, 32, 16, v.size, 128};
    enum { B = 16, STEPS = 300 };
    GPT g;
    TrainState ts;
    build_gpt(&g, &c);
    build_train_state(&ts, &c, B);
    init_gpt_random(&g, 1337);
    AdamW opt = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, NULL, NULL, 0};
    opt.m = calloc(g.n_params, sizeof(float));
    opt.v = calloc(g.n_params, sizeof(float));
    int inputs[B * 16], targets[B * 16];
    Rng r;
    rng_seed(&r, 1337);
    // the loss over the whole validation split, before and after
    double before = eval_loss(&g, corpus.tokens + corpus.n_train, val_tokens(&corpus));
    double first = 0.0, last = 0.0;
    for (int it = 0; it < STEPS; it++) {
        get_batch(&corpus, B, c.block_size, &r, inputs, targets);
        double loss = train_forward(&g, &ts, inputs, targets);
        if (it == 0) first = loss;
        last = loss;
        train_backward(&g, &ts, inputs, targets);
        adamw_update(&opt, g.params, ts.grads, g.n_params);
    }
    double after = eval_loss(&g, corpus.tokens + corpus.n_train, val_tokens(&corpus));
    check(after < 3.0 && after < before - 1.0, "%d steps (L=2 NH=2 C=32 S=16, %zu parameters): "
          "val loss %.3f -> %.3f, below 3.0 and far below ln(65) = %.3f (batch loss %.3f -> %.3f)",
          STEPS, g.n_params, before, after, log(65.0), first, last);
    free(opt.m);
    free(opt.v);
    free_train_state(&ts);
    free_gpt(&g);
    free_corpus(&corpus);
}

// Distillation: a second tiny model of the same vocabulary and block size teaches g. Its
// soft targets must be the reference model's softmax; the loss against them must match
// the reference's; the gradient must pass the same finite-difference check; and the
// check must fail when the backward pass uses the next characters instead of the teacher.
static void test_distillation(GPT *g, TrainState *ts, const int *inputs, const int *targets) {
    const Config *c = &g->config;
    int S = c->block_size, V = c->vocab_size, B = ts->B;
    // a teacher of another shape: one layer, 12 wide, 3 heads, its own seed
    Config tc = {1, 3, 12, S, V, 48};
    GPT teacher;
    if (!check(build_gpt(&teacher, &tc) == 0, "build a teacher (L=1 NH=3 C=12 S=%d V=%d)", S, V))
        return;
    init_gpt_random(&teacher, 21);
    ts->soft = alloc_floats((size_t)B * S * V); // free_train_state frees it
    teacher_targets(&teacher, ts, inputs);
    // the soft targets against the double reference's softmax, row by row
    double *z = malloc((size_t)S * V * sizeof(double)), worst_p = 0.0, worst_sum = 0.0;
    for (int b = 0; b < B; b++) {
        ref_forward(&teacher, inputs + (size_t)b * S, S, z);
        for (int t = 0; t < S; t++) {
            const double *zt = z + (size_t)t * V;
            const float *p = ts->soft + ((size_t)b * S + t) * V;
            double m = zt[0], sum = 0.0, row = 0.0;
            for (int v = 1; v < V; v++) m = zt[v] > m ? zt[v] : m;
            for (int v = 0; v < V; v++) sum += exp(zt[v] - m);
            for (int v = 0; v < V; v++) {
                double d = fabs((double)p[v] - exp(zt[v] - m) / sum);
                if (d > worst_p) worst_p = d;
                row += p[v];
            }
            if (fabs(row - 1.0) > worst_sum) worst_sum = fabs(row - 1.0);
        }
    }
    free(z);
    check(worst_p < 1e-6 && worst_sum < 1e-6, "teacher_targets == the double reference's "
          "softmax of the teacher (max |diff| %.2g), each row sums to 1 (max |sum - 1| %.2g)",
          worst_p, worst_sum);
    // the loss against the teacher, then its gradient, as a --teacher run takes them
    double loss = train_forward(g, ts, inputs, targets);
    double ref = reference_loss(g, inputs, targets, ts->soft, B);
    double hard = reference_loss(g, inputs, targets, NULL, B);
    check(fabs(loss - ref) < 1e-5 && fabs(loss - hard) > 1e-2, "distillation: train_forward's "
          "loss against the teacher %.9f == the double reference's %.9f (|diff| %.2g), and "
          "not the next-character loss %.6f", loss, ref, fabs(loss - ref), hard);
    train_backward(g, ts, inputs, targets);
    const char *worst_name;
    double worst = gradient_check(g, ts, inputs, targets, ts->soft, &worst_name, 0);
    check(worst < TOLERANCE, "distillation gradient (q - p_teacher through every layer) == "
          "central differences of the loss against the teacher: worst relative error %.2g in "
          "%s (tolerance %.0e, all %d tensors)", worst, worst_name, TOLERANCE, N_TENSORS);
    // the same check must catch a backward pass that ignores the teacher: the
    // next-character gradient, p - onehot(target), against the distillation loss
    float *soft = ts->soft;
    ts->soft = NULL;
    train_forward(g, ts, inputs, targets);
    train_backward(g, ts, inputs, targets);
    ts->soft = soft;
    worst = gradient_check(g, ts, inputs, targets, ts->soft, &worst_name, 0);
    check(worst > TOLERANCE, "the check fails on the next-character gradient in place of the "
          "distillation one: worst relative error %.2g in %s (tolerance %.0e)", worst,
          worst_name, TOLERANCE);
    free_gpt(&teacher);
}

// The whole file at path (malloc'd), its size in *n; NULL if it cannot be read.
static unsigned char *slurp(const char *path, size_t *n) {
    char err[256]; // unused: the callers check NULL
    return read_file(path, n, "test file", "", err, sizeof(err));
}

// 1 if the file at path holds exactly the n bytes of want.
static int same_bytes(const char *path, const unsigned char *want, size_t n) {
    size_t got_n = 0;
    unsigned char *got = slurp(path, &got_n);
    int same = got && got_n == n && memcmp(got, want, n) == 0;
    free(got);
    return same;
}

// Nothing that is not a finite number is ever saved, and a run stops at the first loss that
// is not one: save_training refuses a NaN parameter and an inf moment with one line and
// leaves the pair on disk byte for byte; save_checkpoint refuses one and writes nothing; and
// train(), distilling from a teacher whose rows are NaN, stops at step 1 before the update
// (the student's parameters are the ones it started with) and writes no file.
static void test_nonfinite(const char *dir) {
    Config c = {1, 2, 8, 6, 7, 32};
    GPT g, teacher;
    Vocab v;
    TrainProgress p;
    char path[600], fresh[600], err[512] = "";
    build_vocab(&v, (const unsigned char *)"abcdefg", 7);
    build_gpt(&g, &c);
    init_gpt_random(&g, 3);
    build_train_progress(&p, g.n_params, 2, 1);
    snprintf(path, sizeof(path), "%s/pair.bin", dir);
    snprintf(fresh, sizeof(fresh), "%s/fresh.bin", dir);
    // a good pair first, and its bytes
    int rc = save_training(&g, &v, &p, path, err, sizeof(err));
    char state[620];
    snprintf(state, sizeof(state), "%s.state", path);
    size_t n_ck = 0, n_st = 0;
    unsigned char *ck = slurp(path, &n_ck), *st = slurp(state, &n_st);
    if (!check(rc == 0 && ck && st, "save_training writes a good pair (%s)", rc ? err : "ok"))
        return;
    // a NaN parameter, then an inf second moment: refused, the pair as it was
    float keep = g.params[5];
    g.params[5] = NAN;
    rc = save_training(&g, &v, &p, path, err, sizeof(err));
    check(rc == -1 && strstr(err, "checkpoint") && strstr(err, "float 5 is not a finite number") &&
          !strchr(err, '\n') && same_bytes(path, ck, n_ck) && same_bytes(state, st, n_st),
          "save_training refuses a NaN parameter in one line (\"%s\"); the pair on disk is "
          "byte for byte the one before", err);
    rc = save_checkpoint(&g, &v, fresh, err, sizeof(err));
    check(rc == -1 && strstr(err, "not a finite number") && access(fresh, F_OK) != 0,
          "save_checkpoint refuses a NaN parameter and writes no file (\"%s\")", err);
    g.params[5] = keep;
    p.opt.v[3] = INFINITY;
    rc = save_training(&g, &v, &p, path, err, sizeof(err));
    check(rc == -1 && strstr(err, "training state") && strstr(err, "float 3 is not a finite") &&
          same_bytes(path, ck, n_ck) && same_bytes(state, st, n_st),
          "save_training refuses an inf moment of AdamW (\"%s\"); the pair stays", err);
    p.opt.v[3] = 0.0f;
    // a teacher whose lm_head holds a NaN: every row of its softmax is NaN
    build_gpt(&teacher, &c);
    init_gpt_random(&teacher, 4);
    teacher.w.lm_head_weight[0] = NAN;
    int tokens[200];
    Rng r;
    rng_seed(&r, 5);
    for (int i = 0; i < 200; i++) tokens[i] = (int)(rng_u64(&r) % 7);
    Corpus corpus = {NULL, tokens, 200, 180, 20};
    TrainOptions to = {3, 2, 500, 100, 1, fresh, 0, &teacher, "the NaN teacher"};
    TrainState ts;
    float *before = malloc(g.n_params * sizeof(float));
    memcpy(before, g.params, g.n_params * sizeof(float));
    rc = build_train_pass(&ts, &c, 2, 1, err, sizeof(err));
    if (rc == 0) rc = train(&g, &v, &corpus, &to, &p, &ts, err, sizeof(err));
    check(rc == -1 && strstr(err, "step 1: the loss against the teacher is not a finite number") &&
          strstr(err, "the NaN teacher") && strstr(err, "nothing written") &&
          !memcmp(before, g.params, g.n_params * sizeof(float)) && access(fresh, F_OK) != 0,
          "train() distilling from NaN rows stops at step 1 before the update (the parameters "
          "unchanged), writes nothing, and says so: \"%s\"", err);
    free_train_state(&ts);
    free(before);
    free(ck);
    free(st);
    free_train_progress(&p);
    free_gpt(&teacher);
    free_gpt(&g);
}

// The messages the trainer gives: a failed write's fix follows its errno, and two
// vocabularies of one size are told apart by their first differing entry.
static void test_messages(void) {
    const char *generic = write_fix(EIO);
    check(strstr(write_fix(ENOSPC), "free space") && strstr(write_fix(EFBIG), "ulimit -f") &&
          strstr(write_fix(ENOENT), "create the directory") && strstr(write_fix(EROFS),
          "read-only") && strcmp(write_fix(ENOSPC), generic) && strcmp(write_fix(EFBIG), generic),
          "a failed write's fix follows its errno: ENOSPC \"%s\", EFBIG \"%s\", ENOENT \"%s\"",
          write_fix(ENOSPC), write_fix(EFBIG), write_fix(ENOENT));
    Vocab a, b, c;
    char why[128] = "";
    build_vocab(&a, (const unsigned char *)"\n !$&", 5);
    build_vocab(&b, (const unsigned char *)"\n !#&", 5);
    build_vocab(&c, (const unsigned char *)"ab", 2);
    int same = vocab_difference(&a, "teacher", &a, "corpus", why, sizeof(why));
    int diff = vocab_difference(&b, "teacher", &a, "corpus", why, sizeof(why));
    check(same == 0 && diff == -1 && !strcmp(why, "entry 3 is '#' (0x23) in the teacher and '$' "
          "(0x24) in the corpus"), "two vocabularies of 5 characters: the first entry that "
          "differs, \"%s\"", why);
    vocab_difference(&c, "teacher", &a, "corpus", why, sizeof(why));
    check(!strcmp(why, "2 and 5 characters"), "two of different sizes: \"%s\"", why);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    // a tiny, odd config: every tensor small enough to difference every entry, and no
    // size equal to another, so a transposed index cannot go unnoticed
    Config c = {2, 2, 8, 6, 7, 32};
    enum { B = 2 };
    GPT g;
    TrainState ts;
    if (!check(build_gpt(&g, &c) == 0 && build_train_state(&ts, &c, B) == 0,
               "build a model (L=2 NH=2 C=8 S=6 V=7) and a training pass of %d windows", B))
        return 1;
    init_gpt_random(&g, 99);
    randomise_layernorms(&g, 5);
    // random windows and next-token targets over the 7 tokens
    int inputs[B * 6], targets[B * 6];
    Rng r;
    rng_seed(&r, 11);
    for (int i = 0; i < B * 6; i++) {
        inputs[i] = (int)(rng_u64(&r) % 7);
        targets[i] = (int)(rng_u64(&r) % 7);
    }
    // the loss first: the training forward and the reference must agree on it
    double loss = train_forward(&g, &ts, inputs, targets);
    double ref = reference_loss(&g, inputs, targets, NULL, B);
    check(fabs(loss - ref) < 1e-5, "train_forward's loss %.9f == the double reference's %.9f "
          "(|diff| %.2g); ln(7) = %.4f", loss, ref, fabs(loss - ref), log(7.0));
    train_backward(&g, &ts, inputs, targets);
    const char *worst_name;
#ifndef BREAK_LAYERNORM_BACKWARD
    double worst = gradient_check(&g, &ts, inputs, targets, NULL, &worst_name, 1);
    printf("worst relative error %.2g, in %s\n", worst, worst_name);
#else
    // the test-only broken build: the check must fail, or it could not catch this bug
    double worst = gradient_check(&g, &ts, inputs, targets, NULL, &worst_name, 0);
    check(worst > TOLERANCE, "the gradient check catches a LayerNorm backward with a dropped "
          "term: worst relative error %.2g in %s (tolerance %.0e)", worst, worst_name, TOLERANCE);
#endif
#ifndef BREAK_LAYERNORM_BACKWARD
    test_distillation(&g, &ts, inputs, targets);
#else
    (void)test_distillation; // the broken build checks the gradient check only
#endif
    free_train_state(&ts);
    free_gpt(&g);
#ifndef BREAK_LAYERNORM_BACKWARD
    test_adamw();
    test_learns();
    test_messages();
    char dir[] = "/tmp/test_train.XXXXXX"; // the files of test_nonfinite, then away
    if (check(mkdtemp(dir) != NULL, "make a temporary directory")) {
        test_nonfinite(dir);
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0) printf("could not remove %s\n", dir);
    }
#else
    (void)test_adamw; // the broken build checks the gradient check only
    (void)test_learns;
    (void)test_messages;
    (void)test_nonfinite;
#endif
    printf("test_train summary: %d checks passed and %d failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
}
