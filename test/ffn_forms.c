/*
 * test/ffn_forms.c — the MLP's two matmuls at a padded width, in two loop forms.
 *
 * specdec.c computes every Linear in one form, axpy: weight stored (in, out), the loop
 * over tokens inside the loop over weight rows. The issue that added --ffn-width carried
 * a prototype's advice from another machine: the dot-product form (weight stored (out,
 * in), the token loop inside the row loop, one running sum per output) for the
 * up-projection. This tool measures both on this machine, with the same sums in the same
 * order (so the same bits), beside the streaming-read bandwidth:
 *
 *   test/ffn_forms [H]     (default 65536: 134 MB of MLP weights over 4 layers)
 *
 * notes/speed.md quotes it. Not part of make test: it only measures.
 */
#define TESTING
#include "bench.c"

// out[t][o] = bias[o] + sum_i in[t][i] * weight_t[o][i], i ascending: the dot-product form
// of matmul, with weight_t stored (out, in). The same operations in the same order as
// matmul's axpy form, so the same bits; only the loop order and the layout differ.
static void matmul_dot(float *out, const float *in, const float *weight_t, const float *bias,
                       int T, int in_dim, int out_dim) {
    for (int o = 0; o < out_dim; o++) {
        const float *w = weight_t + (size_t)o * in_dim; // row o: read once per pass
        for (int t = 0; t < T; t++) {
            const float *x = in + (size_t)t * in_dim;
            float sum = bias ? bias[o] : 0.0f;
            for (int i = 0; i < in_dim; i++) sum += x[i] * w[i]; // one chain of adds
            out[(size_t)t * out_dim + o] = sum;
        }
    }
}

int main(int argc, char **argv) {
    program_name = "ffn_forms"; // its messages' first word
    uint64_t width = 65536; // the H asked for, which parse_whole checks
    if (argc > 2 || (argc == 2 && parse_whole(argv[1], 256, 1 << 20, &width) != 0)) {
        error_line("usage: test/ffn_forms [H], H a whole number from 256 to 1048576");
        return 1;
    }
    long H = (long)width; // 256 to 2^20
    const int L = 4, C = 64, Ts[] = {1, 2, 3, 5, 9, 16};
    size_t n = (size_t)L * C * H;
    float *up = malloc(n * 4), *up_t = malloc(n * 4), *down = malloc(n * 4);
    float *b = malloc((size_t)L * H * 4), *x = malloc(16 * C * 4), *h = malloc(16 * H * 4);
    float *h2 = malloc(16 * H * 4), *y = malloc(16 * C * 4);
    if (!up || !up_t || !down || !b || !x || !h || !h2 || !y) { error_line("out of memory"); return 1; }
    Rng r;
    rng_seed(&r, 5);
    // random weights, written (real pages); up_t is up transposed, layer by layer
    for (size_t i = 0; i < n; i++) down[i] = (float)(rng_uniform(&r) - 0.5);
    for (int l = 0; l < L; l++)
        for (long i = 0; i < C; i++)
            for (long o = 0; o < H; o++) {
                float v = (float)(rng_uniform(&r) - 0.5);
                up[(size_t)l * C * H + i * H + o] = v;
                up_t[(size_t)l * C * H + o * C + i] = v;
            }
    for (size_t i = 0; i < (size_t)L * H; i++) b[i] = (float)(rng_uniform(&r) - 0.5);
    for (int i = 0; i < 16 * C; i++) x[i] = (float)(rng_uniform(&r) - 0.5);
    for (long i = 0; i < 16 * H; i++) h[i] = (float)rng_uniform(&r);
    double bw = stream_bandwidth((size_t)512 << 20), mb = 2.0 * n * 4 / 1e6;
    printf("H = %ld: %.1f MB of MLP weights; streaming read %.2f GB/s, so %.2f ms per pass "
           "at the bandwidth limit\n", H, mb, bw / 1e9, 2.0 * n * 4 / bw * 1e3);
    printf("   T   up axpy (ms)  up dot (ms)  down axpy (ms)   c(T) axpy+axpy  c(T) dot+axpy\n");
    double base[2] = {0, 0};
    for (int k = 0; k < 6; k++) {
        int T = Ts[k];
        double s[3][5];
        for (int rep = 0; rep < 5; rep++) { // alternated, medians of 5
            for (int f = 0; f < 3; f++) {
                double t0 = now_seconds();
                for (int l = 0; l < L; l++) {
                    size_t off = (size_t)l * C * H;
                    if (f == 0) matmul(h2, x, (Linear){up + off, b + l * H, C, (int)H}, T);
                    else if (f == 1) matmul_dot(h2, x, up_t + off, b + l * H, T, C, (int)H);
                    else matmul(y, h, (Linear){down + off, NULL, (int)H, C}, T);
                }
                s[f][rep] = now_seconds() - t0;
            }
        }
        double ua = median(s[0], 5), ud = median(s[1], 5), da = median(s[2], 5);
        if (T == 1) { base[0] = ua + da; base[1] = ud + da; }
        printf("  %2d  %12.3f  %11.3f  %14.3f  %15.2f  %13.2f\n", T, 1e3 * ua, 1e3 * ud,
               1e3 * da, (ua + da) / base[0], (ud + da) / base[1]);
    }
    // the two forms must give the same bits (the same sums in the same order)
    matmul(h, x, (Linear){up, b, C, (int)H}, 16);
    matmul_dot(h2, x, up_t, b, 16, C, (int)H);
    printf("the two forms' outputs are %s\n", memcmp(h, h2, 16 * H * 4) ? "DIFFERENT (a bug)"
                                                                         : "bit-identical");
    return 0;
}
