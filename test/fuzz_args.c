/*
 * test/fuzz_args.c: a libFuzzer target for the command lines: parse_args and
 * encode_prompt of ./specdec (specdec.c), parse_beyond_args of ./beyond (beyond.c), and the
 * option loops of tinyshakespeare/train, `tinyshakespeare/train eval` and
 * `tinyshakespeare/train init` (tinyshakespeare/train.c, which includes beyond.c, and so
 * specdec.c, whole).
 *
 * The command line is the program's other untrusted input. Whatever the words, each of
 * these must return without a crash, a hang or a read past an argument's end, and a
 * refusal must be one non-empty line (the project's rule: every bad input ends in one
 * line on stderr). What parse_args accepts is checked against its documented ranges
 * and rules.
 *
 * Input: the first byte chooses the mode (modulo 6); the rest is split on NUL bytes
 * into words, each copied into a buffer of exactly its own length (so ASan sees a read
 * past its terminator):
 *   0  parse_args({"specdec", words...}) and parse_beyond_args on the same words; an
 *      accepted prompt then goes through encode_prompt with Tiny Shakespeare's
 *      65-character vocabulary, as main does
 *   1  main_train({"tinyshakespeare/train", words..., "-i", "/dev/null"})
 *   2  main_eval({"tinyshakespeare/train", "eval", words..., "-m", "/dev/null"})
 *   3  encode_prompt(first word) with the Tiny Shakespeare vocabulary
 *   4  encode_prompt(second word) with the vocabulary build_vocab makes of the first
 *   5  main_init({"tinyshakespeare/train", "init", words..., "-i", "/dev/null"})
 * Modes 1, 2 and 5 must never train, write a file or read the corpus: the two words
 * appended last always win. Either they parse as a pair, and the corpus (train, init)
 * or checkpoint (eval) is /dev/null, which read_file refuses before anything else is
 * loaded or written; or the word before them takes "-i"/"-m" as its value and the
 * path is then an unknown option. The three report errors with fprintf to stderr,
 * which this target points at a memory stream for the call (glibc lets the stderr
 * variable be assigned) so that the message can be checked; the sanitizers write to
 * fd 2 and are not affected.
 *
 * Build and run: test/fuzz_test.sh (make fuzz; briefly in make test). Replay one input:
 *   test/build/fuzz_args FILE
 */
#define TESTING // leaves out the trainer's main, beyond.c's and specdec.c's
#include "../tinyshakespeare/train.c" // beyond.c, specdec.c, main_train, main_eval, main_init

#define MAX_WORDS 256
#define ERRLEN 512 // what main gives parse_args

// Tiny Shakespeare's vocabulary: the 65 distinct bytes of the corpus, fixed here so
// that no input reads the corpus from disk.
static const char SHAKESPEARE[] =
    "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

// Prints what broke and aborts: libFuzzer saves the input that did it.
static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_args: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

// Runs print(arg) with stderr caught in memory; returns what it wrote (malloc'd), *len.
static char *catch_stderr(void (*print)(const void *), const void *arg, size_t *len) {
    char *out = NULL;
    FILE *mem = open_memstream(&out, len);
    if (!mem) fail("open_memstream failed", NULL);
    FILE *saved = stderr;
    stderr = mem;
    print(arg);
    stderr = saved;
    fclose(mem);
    return out;
}

// What main does with a refusal's message: error_line("%s", err).
static void print_err(const void *err) { error_line("%s", (const char *)err); }

// A printed refusal: "specdec: ", then the reason, then one newline and no other.
static void check_line(const char *out, size_t len, const char *what) {
    if (len <= 9 || strncmp(out, "specdec: ", 9) != 0) fail(what, "no 'specdec: <reason>'");
    if (strlen(out) != len || out[len - 1] != '\n' || memchr(out, '\n', len - 1))
        fail(what, "not exactly one line");
}

// A refusal must say why, and print as one line however odd the words it quotes (a
// word may hold a newline: found by this target, fixed by error_line's escaping).
static void check_message(const char *err, size_t errlen) {
    size_t n = strnlen(err, errlen), len;
    if (n == 0) fail("refused without a message", NULL);
    if (n == errlen) fail("message is not NUL-terminated within errlen", NULL);
    char *out = catch_stderr(print_err, err, &len);
    check_line(out, len, "a refusal as main prints it");
    free(out);
}

// The prompt through encode_prompt: accepted means every byte is in the vocabulary
// and decodes back; refused means one line naming the first byte that is not.
static void check_prompt(const Vocab *v, const char *prompt) {
    size_t n = strlen(prompt);
    int *tokens = malloc((n ? n : 1) * sizeof(int));
    if (!tokens) return;
    char err[ERRLEN];
    err[0] = '\0';
    int rc = encode_prompt(v, prompt, tokens, err, sizeof(err));
    size_t bad; // the first byte outside the vocabulary, found here from v->chars alone
    for (bad = 0; bad < n; bad++) {
        int in = 0;
        for (int i = 0; i < v->size; i++) in |= v->chars[i] == (unsigned char)prompt[bad];
        if (!in) break;
    }
    if (rc == 0) {
        if (bad < n) fail("encode_prompt accepted a byte outside the vocabulary", NULL);
        for (size_t i = 0; i < n; i++)
            if (tokens[i] < 0 || tokens[i] >= v->size ||
                v->chars[tokens[i]] != (unsigned char)prompt[i])
                fail("a prompt token does not decode to its byte", NULL);
    } else {
        check_message(err, sizeof(err));
        char at[64];
        snprintf(at, sizeof(at), "at position %zu ", bad);
        if (bad == n || !strstr(err, at)) fail("encode_prompt named the wrong position", err);
    }
    free(tokens);
}

// True if s is one of the words (the very pointer), so an option points into argv.
static int is_word(const char *s, char **argv, int argc) {
    for (int i = 1; i < argc; i++)
        if (s == argv[i]) return 1;
    return 0;
}

// What an accepted command line promises of the options ./specdec and ./beyond share
// (tree: ./beyond was given --tree, whose depth stands for K, which then stays 0).
static void check_core_options(const Options *o, char **argv, int argc, int tree) {
    // every path and the prompt: the default or a word of argv, never a copy or a temporary
    if (strcmp(o->model_path, DEFAULT_MODEL) && !is_word(o->model_path, argv, argc))
        fail("-m does not point into argv", NULL);
    if (strcmp(o->corpus_path, DEFAULT_CORPUS) && !is_word(o->corpus_path, argv, argc))
        fail("-i does not point into argv", NULL);
    if (strcmp(o->prompt, DEFAULT_PROMPT) && !is_word(o->prompt, argv, argc))
        fail("-p does not point into argv", NULL);
    // the documented ranges
    if (o->max_new_tokens < 1 || o->max_new_tokens > MAX_NEW_TOKENS) fail("-n out of range accepted", NULL);
    if ((o->K < 1 && !(tree && o->K == 0)) || o->K > 4096) fail("-k out of range accepted", NULL);
    if (!isfinite(o->temperature) || o->temperature < 0.0f || o->temperature > 1e6f ||
        (o->temperature > 0.0f && o->temperature < FLT_MIN))
        fail("-t out of range accepted", NULL);
    // the combinations the parsers refuse
    if (o->plain && (o->compare || o->trace)) fail("--plain with --compare or --trace accepted", NULL);
    if (o->run_selftest && (o->trace || o->compare || o->plain))
        fail("two actions accepted in one run", NULL);
}

// Mode 0: parse_args (./specdec) and parse_beyond_args (./beyond) on the same words, then
// what an accepted command line promises.
static void fuzz_parse_args(int argc, char **argv) {
    Options o;
    char err[ERRLEN];
    err[0] = '\0';
    int rc = parse_args(argc, argv, &o, NULL, err, sizeof(err));
    Vocab v;
    build_vocab(&v, (const unsigned char *)SHAKESPEARE, sizeof(SHAKESPEARE) - 1);
    if (rc != 0) {
        if (rc != -1) fail("parse_args returned neither 0 nor -1", NULL);
        check_message(err, sizeof(err));
    } else {
        check_core_options(&o, argv, argc, 0);
        check_prompt(&v, o.prompt); // main's next step for a generation run
    }
    // ./beyond: every option of ./specdec, and its own
    BeyondOptions b;
    err[0] = '\0';
    rc = parse_beyond_args(argc, argv, &b, err, sizeof(err));
    if (rc != 0) {
        if (rc != -1) fail("parse_beyond_args returned neither 0 nor -1", NULL);
        check_message(err, sizeof(err));
        return;
    }
    check_core_options(&b.core, argv, argc, b.tree != NULL);
    if (strcmp(b.draft, "bigram") && !is_word(b.draft, argv, argc))
        fail("--draft does not point into argv", NULL);
    if (b.tree && !is_word(b.tree, argv, argc)) fail("--tree does not point into argv", NULL);
    if (b.color < -1 || b.color > 1) fail("colour neither on, off nor unset", NULL);
    if (b.top_p != 0.0f && !(b.top_p >= FLT_MIN && b.top_p <= 1.0f))
        fail("--top-p out of range accepted", NULL);
    if (b.top_k < 0 || b.top_k > 256) fail("--top-k out of range accepted", NULL);
    if (b.ffn_width < 0 || b.ffn_width > MAX_FFN_WIDTH) fail("--ffn-width out of range accepted", NULL);
    if (!(b.draft_p_min >= 0.0f && b.draft_p_min <= 1.0f) ||
        (b.draft_p_min > 0.0f && b.draft_p_min < FLT_MIN))
        fail("--draft-p-min out of range accepted", NULL);
    if (b.core.run_selftest && b.tree) fail("--selftest with --tree accepted", NULL);
    check_prompt(&v, b.core.prompt);
}

// Modes 1, 2 and 5: a trainer command's whole main, its stderr caught in memory; it
// must refuse (see the top comment for why it can never get further) with one line.
static void fuzz_subcommand(int (*sub)(int, char **), int argc, char **argv) {
    char *out = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&out, &len);
    if (!mem) fail("open_memstream failed", NULL);
    FILE *saved = stderr;
    stderr = mem;
    int rc = sub(argc, argv);
    stderr = saved;
    fclose(mem);
    if (rc != 1) fail("a subcommand did not refuse a command line that cannot run", NULL);
    check_line(out, len, "a subcommand's refusal");
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    int mode = data[0] % 6;
    // argv[0] and, for eval and init, the subcommand word that the trainer's main
    // dispatches on (main_train starts at argv[1], main_eval and main_init at argv[2])
    const char *fixed[2] = {"specdec", NULL};
    int n_fixed = 1;
    if (mode == 1 || mode == 2 || mode == 5) fixed[0] = "tinyshakespeare/train";
    if (mode == 2) fixed[n_fixed++] = "eval";
    if (mode == 5) fixed[n_fixed++] = "init";
    // argv: the fixed words, the input's words, the forced pair, NULL
    char *argv[2 + MAX_WORDS + 2 + 1];
    int argc = 0;
    for (int i = 0; i < n_fixed; i++) argv[argc++] = strdup(fixed[i]);
    // the words: NUL-separated; the last one ends at the end of the input
    size_t i = 1;
    while (i < size && argc < n_fixed + MAX_WORDS) {
        const uint8_t *end = memchr(data + i, 0, size - i);
        size_t len = end ? (size_t)(end - (data + i)) : size - i;
        char *w = malloc(len + 1);
        if (w) {
            memcpy(w, data + i, len);
            w[len] = '\0';
        }
        argv[argc++] = w;
        i += len + 1;
    }
    if (mode == 1 || mode == 5) { argv[argc++] = strdup("-i"); argv[argc++] = strdup("/dev/null"); }
    if (mode == 2) { argv[argc++] = strdup("-m"); argv[argc++] = strdup("/dev/null"); }
    argv[argc] = NULL;
    for (int j = 0; j < argc; j++)
        if (!argv[j]) goto done; // out of memory: nothing to test
    Vocab v;
    switch (mode) {
    case 0: fuzz_parse_args(argc, argv); break;
    case 1: fuzz_subcommand(main_train, argc, argv); break;
    case 2: fuzz_subcommand(main_eval, argc, argv); break;
    case 5: fuzz_subcommand(main_init, argc, argv); break;
    case 3:
        build_vocab(&v, (const unsigned char *)SHAKESPEARE, sizeof(SHAKESPEARE) - 1);
        check_prompt(&v, argc > 1 ? argv[1] : "");
        break;
    case 4:
        build_vocab(&v, (const unsigned char *)(argc > 1 ? argv[1] : ""),
                    argc > 1 ? strlen(argv[1]) : 0);
        check_prompt(&v, argc > 2 ? argv[2] : "");
        break;
    }
done:
    for (int j = 0; j < argc; j++) free(argv[j]);
    return 0;
}
