/*
 * test/fuzz_seeds.c: writes the seed inputs of the two fuzz targets, so that no
 * binary seed is committed and the seeds always match the current file formats.
 *
 *   fuzz_seeds CHECKPOINT_DIR ARGS_DIR
 *
 * CHECKPOINT_DIR gets, for three tiny configs, a valid checkpoint behind each of
 * test/fuzz_checkpoint.c's four checkpoint mode bytes, and a valid training state
 * behind its two state mode bytes (a fuzzer starting from a valid file reaches the
 * deep checks in a few mutations; from nothing it would first have to guess the
 * magic, the version and a config whose size it matches). ARGS_DIR gets a mode byte
 * and NUL-separated words for every option of parse_args, parse_beyond_args and
 * tinyshakespeare/train, its eval and its init, and a few prompts. test/fuzz_test.sh
 * builds and runs this before fuzzing.
 */
#define TESTING // leaves out the trainer's main, beyond.c's and specdec.c's
#include "../tinyshakespeare/train.c" // beyond.c, specdec.c, the checkpoint and state writers

static const char *ckpt_dir, *args_dir;
static int n_written;

// Writes mode byte + body to DIR/NAME; exits 1 on failure.
static void put(const char *dir, const char *name, int mode, const void *body, size_t n) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    unsigned char m = (unsigned char)mode;
    if (!f || fwrite(&m, 1, 1, f) != 1 || fwrite(body, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "fuzz_seeds: cannot write %s\n", path);
        exit(1);
    }
    n_written++;
}

// A checkpoint and a training state of a random model of config c, vocabulary text.
static void model_seeds(const char *tag, Config c, const char *text) {
    GPT g;
    Vocab v;
    build_vocab(&v, (const unsigned char *)text, strlen(text));
    c.vocab_size = v.size;
    char err[512];
    if (check_config(&c, err, sizeof(err)) != 0 || build_gpt(&g, &c) != 0) {
        fprintf(stderr, "fuzz_seeds: config %s: %s\n", tag, err);
        exit(1);
    }
    init_gpt_random(&g, 1337);
    size_t n;
    unsigned char *ckpt = serialize_checkpoint(&g, &v, &n);
    if (!ckpt) exit(1);
    char name[64];
    for (int mode = 0; mode <= 3; mode++) {
        snprintf(name, sizeof(name), "ckpt-%s-mode%d", tag, mode);
        put(ckpt_dir, name, mode, ckpt, n);
    }
    // the training state that pairs with it, with moments that are not all zero;
    // save_train_state writes a file, which is read back and removed
    TrainProgress p;
    if (build_train_progress(&p, g.n_params, 2, 7) != 0) exit(1);
    p.opt.step = 3;
    p.ckpt_sum = get_u64(ckpt + n - 8);
    for (size_t i = 0; i < g.n_params; i++) {
        p.opt.m[i] = 0.001f * (float)(i % 7);
        p.opt.v[i] = 1e-6f * (float)(i % 5);
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/state.tmp", ckpt_dir);
    size_t sn;
    unsigned char *state;
    if (save_train_state(&p, g.n_params, path, err, sizeof(err)) != 0 ||
        !(state = read_file(path, &sn, "state", "", err, sizeof(err)))) {
        fprintf(stderr, "fuzz_seeds: %s\n", err);
        exit(1);
    }
    unlink(path);
    for (int mode = 4; mode <= 5; mode++) {
        snprintf(name, sizeof(name), "state-%s-mode%d", tag, mode);
        put(ckpt_dir, name, mode, state, sn);
    }
    free(state);
    free(ckpt);
    free_train_progress(&p);
    free_gpt(&g);
}

// A command line for fuzz_args: mode, then the words, NUL-separated.
static void args_seed(int mode, int n_words, const char *const *words) {
    char body[1024], name[64];
    size_t n = 0;
    for (int i = 0; i < n_words; i++) {
        size_t len = strlen(words[i]) + 1; // the NUL separates it from the next word
        memcpy(body + n, words[i], len);
        n += len;
    }
    snprintf(name, sizeof(name), "args-mode%d-%d", mode, n_written);
    put(args_dir, name, mode, body, n);
}
#define ARGS(mode, ...) \
    args_seed(mode, (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(char *)), \
              (const char *[]){__VA_ARGS__})

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: fuzz_seeds CHECKPOINT_DIR ARGS_DIR\n");
        return 1;
    }
    ckpt_dir = argv[1];
    args_dir = argv[2];
    // the smallest config there is; one like the train test's; two heads and layers
    model_seeds("min", (Config){1, 1, 1, 2, 0, 4}, "a");
    model_seeds("tiny", (Config){1, 1, 8, 4, 0, 32}, "To be\n");
    model_seeds("two", (Config){2, 2, 4, 3, 0, 16}, "abcde");
    // parse_args and parse_beyond_args (mode 0 runs both): every option, each flag, and
    // values at their edges
    ARGS(0, "-p", "To be or not", "-n", "5", "-k", "3", "-t", "0.5", "-s", "42");
    ARGS(0, "--trace", "-m", "model.bin", "-i", "input.txt");
    ARGS(0, "--compare", "-t", "0", "-n", "10000000");
    ARGS(0, "--plain", "-t", "1e6", "-k", "4096");
    ARGS(0, "--top-p", "0.9", "-i", "input.txt", "--color");
    ARGS(0, "--no-color", "-p", "ROMEO:\n", "-k", "31");
    ARGS(0, "--selftest", "-s", "18446744073709551615");
    ARGS(0, "-h", "--help", "-p", "");
    ARGS(0, "--no-prompt", "--draft", "gpt", "--tree", "3,2,1,1", "--top-k", "5");
    ARGS(0, "--draft", "lookup", "--draft-p-min", "0.5", "--ffn-width", "16777216");
    ARGS(0, "--tree", "1,1,1,1", "-k", "4", "--top-k", "256", "--top-p", "1");
    ARGS(0, "-t", "1e-40");
    ARGS(0, "-n", "0x10");
    // train, eval and init: every option of each
    ARGS(1, "--iters", "1", "--layers", "1", "--heads", "1", "--embd", "8", "--block", "4",
         "--batch", "2", "--seed", "7", "-o", "x.bin");
    ARGS(1, "--resume", "--iters", "10", "-o", "x.bin");
    ARGS(1, "--resume", "--batch", "2");
    ARGS(2, "-m", "model.bin", "-i", "input.txt");
    ARGS(2, "-x");
    ARGS(5, "--seed", "7", "-o", "x.bin", "-i", "input.txt");
    ARGS(5, "-o", "x.bin");
    ARGS(5, "--seed", "18446744073709551615", "-o");
    // prompts: one the vocabulary takes, one it does not; a vocabulary and a prompt
    ARGS(3, "To be or not to be, that is the ");
    ARGS(3, "caf\xc3\xa9\n");
    ARGS(4, "hello world", "low door");
    printf("fuzz_seeds: wrote %d seeds to %s and %s\n", n_written, ckpt_dir, args_dir);
    return 0;
}
