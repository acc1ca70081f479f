#!/usr/bin/env bash
# What the repository tracks, run by test/run_tests.sh (or directly: bash test/repo_test.sh).
# A clone must hold the sources, the shipped checkpoints and the docs, and nothing a build
# or a download makes. Three checks on `git ls-files`:
#   1. the top level is specdec.c, beyond.c, Makefile, README.md, tinyshakespeare/, test/
#      and notes/ (and the dot-files .ci/ and .gitignore, which may be absent): each of the
#      seven is there, and nothing else is;
#   2. no tracked file is a compiled program: none starts with the ELF magic bytes
#      (0x7f 'E' 'L' 'F'), whatever its name (a test binary built by hand beside its .c
#      was once committed this way);
#   3. no tracked file is one that .gitignore names: a build output (./specdec,
#      test/build/, ...) or the corpus, tinyshakespeare/input.txt, which `make data`
#      fetches and checks and which is never committed.
# REPO_COMMIT=REV checks the files of another commit instead of the index, to show that
# a commit with a stray binary fails (notes/testing.md). One PASS/FAIL line per check;
# exit 1 if any failed.

set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

if [[ -n ${SPECDEC_BIN:-} ]]; then
    # run_tests.sh's second pass (a sanitizer build): the tracked files are the same
    echo "PASS repo: checked in the first pass"
    exit 0
fi

nfail=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; nfail=$((nfail + 1)); }

rev=${REPO_COMMIT:-}
if ! git rev-parse --git-dir >/dev/null 2>&1; then
    fail "repo: not a git checkout; run the tests from a clone (git clone, then make test)"
    exit 1
fi
# the tracked paths: the index's, or those of REPO_COMMIT's tree
if [[ -n $rev ]]; then
    mapfile -t files < <(git ls-tree -r --name-only "$rev")
else
    mapfile -t files < <(git ls-files)
fi
if ((${#files[@]} == 0)); then
    fail "repo: git lists no tracked files${rev:+ in $rev}"
    exit 1
fi

# 1. The top level: the names before the first slash, each once
mapfile -t top < <(printf '%s\n' "${files[@]}" | cut -d/ -f1 | sort -u)
allowed=" .ci .gitignore Makefile README.md beyond.c notes specdec.c test tinyshakespeare "
extra=""
for name in "${top[@]}"; do
    [[ $allowed == *" $name "* ]] || extra+=" $name"
done
missing=""
for name in specdec.c beyond.c Makefile README.md tinyshakespeare test notes; do
    printf '%s\n' "${top[@]}" | grep -qxF "$name" || missing+=" $name"
done
if [[ -z $extra && -z $missing ]]; then
    pass "repo: the top level is specdec.c, beyond.c, Makefile, README.md, tinyshakespeare/, test/, notes/ (and .ci/, .gitignore)"
else
    fail "repo: the top level has extra entries [${extra# }] and lacks [${missing# }]"
fi

# 2. No compiled program: the first four bytes of every tracked file
elf=""
for f in "${files[@]}"; do
    if [[ -n $rev ]]; then
        magic=$(git cat-file blob "$rev:$f" 2>/dev/null | head -c 4 | od -An -tx1 | tr -d ' \n')
    else
        magic=$(head -c 4 -- "$f" 2>/dev/null | od -An -tx1 | tr -d ' \n')
    fi
    [[ $magic == 7f454c46 ]] && elf+=" $f"
done
if [[ -z $elf ]]; then
    pass "repo: none of the ${#files[@]} tracked files is a compiled program (ELF)"
else
    fail "repo: compiled programs are tracked:$elf (git rm --cached them; make builds them)"
fi

# 3. Nothing .gitignore names: build outputs and the corpus
ignored=$(printf '%s\n' "${files[@]}" | git check-ignore --no-index --stdin | tr '\n' ' ')
if [[ -z $ignored ]]; then
    pass "repo: no tracked file is one that .gitignore names (build outputs, the corpus)"
else
    fail "repo: tracked files that .gitignore names: ${ignored% } (git rm --cached them)"
fi

exit $((nfail > 0))
