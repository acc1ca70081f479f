/*
 * test/check.h: the one-line PASS/FAIL report every C test prints (test/run_tests.sh
 * counts those lines). Include it after "../specdec.c".
 */
#include <stdarg.h>
#include <unistd.h> // dup, dup2: stderr_of sends stderr to a file for a while

// SANITIZED is 1 in an AddressSanitizer build: the forward pass runs 20-50x slower there,
// so the model-heavy tests run fewer tokens (the checks stay the same).
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static int n_passed, n_failed;

// Prints one PASS/FAIL line for a check and counts it; returns ok.
static int check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int check(int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs(ok ? "PASS " : "FAIL ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    if (ok) n_passed++;
    else n_failed++;
    return ok;
}

// What a printer writes to stderr: print(arg) runs with stderr sent to a temporary file, and
// the text comes back (malloc'd: the caller frees it), or NULL if it could not be caught.
typedef void (*StderrPrinter)(const void *arg);
static inline char *stderr_of(StderrPrinter print, const void *arg) {
    FILE *tmp = tmpfile();
    if (!tmp) return NULL;
    fflush(stderr);
    int saved = dup(2);
    if (saved < 0 || dup2(fileno(tmp), 2) < 0) {
        if (saved >= 0) close(saved);
        fclose(tmp);
        return NULL;
    }
    print(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    long n = ftell(tmp);
    char *text = n >= 0 ? calloc((size_t)n + 1, 1) : NULL;
    rewind(tmp);
    if (text && fread(text, 1, (size_t)n, tmp) != (size_t)n) {
        free(text);
        text = NULL;
    }
    fclose(tmp);
    return text;
}

// The line of text that starts with "\n  " + label, without its newline, into out ("" if none).
static inline void stats_line(const char *text, const char *label, char *out, size_t n) {
    char key[64];
    snprintf(key, sizeof(key), "\n  %s", label);
    const char *at = text ? strstr(text, key) : NULL;
    out[0] = '\0';
    if (at) snprintf(out, n, "%.*s", (int)strcspn(at + 1, "\n"), at + 1);
}
