#!/usr/bin/env bash
# README figures test, run by test/run_tests.sh (or directly: bash test/readme_test.sh).
# The README quotes numbers a reader can check; this keeps five of them current:
#   - the parameter count ("209,729 parameters"), against what ./specdec itself counts
#     for its default model (the config line it prints) and against the lecture
#     model's size computed here from its shapes;
#   - the length of specdec.c ("`specdec.c` (N lines)"), against wc -l;
#   - the size of the bad-input catalogue ("catalogue of N bad inputs"), against the
#     number of cases in test/bad_inputs.txt;
#   - where specdec.c's reader meets draft_tokens ("meets `draft_tokens` at line N"),
#     against the line its definition starts on;
#   - the share of specdec.c's lines that carry a comment ("N% of the file's lines
#     carry a comment"), counted the way the project's checks count it (a line with
#     //, /* or a leading *), rounded down.
# Each number is read from README.md; a figure the README no longer states is a FAIL,
# not a skip. One PASS/FAIL line per check; exit 1 if any failed.

set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

if [[ -n ${SPECDEC_BIN:-} ]]; then
    # run_tests.sh's second pass (a sanitizer build): the README is the same file
    echo "PASS README figures: checked in the first pass"
    exit 0
fi

nfail=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; nfail=$((nfail + 1)); }
README=${README_FILE:-README.md} # README_FILE: another copy, to show a stale figure fails
# number_in PATTERN: the first number (commas removed) that README's sed pattern captures
number_in() { sed -n "s/$1/\1/p" "$README" | head -n 1 | tr -d ','; }

# 1. The parameter count: README, the program, and the lecture model's shapes
# (per layer: ln1, ln2 (2C each), query/key/value (C*C each), proj (C*C + C),
# ffwd (C*4C + 4C + 4C*C + C); plus token and position embeddings, ln_f and lm_head).
readme_params=$(number_in '.*[^0-9,]\([0-9][0-9,]*\) parameters.*')
program_params=$(./specdec -n 1 --plain 2>&1 >/dev/null |
                 sed -n 's/^config: .* -> \([0-9]*\) parameters$/\1/p')
L=4 C=64 S=32 V=65
shapes=$((V * C + S * C + L * (2 * C + 3 * C * C + C * C + C + 2 * C + C * 4 * C + 4 * C +
         4 * C * C + C) + 2 * C + C * V + V))
if [[ -z $readme_params ]]; then
    fail "README figures: README.md no longer states the parameter count (\"N parameters\")"
elif [[ $readme_params == "$program_params" && $program_params == "$shapes" ]]; then
    pass "README figures: parameter count $readme_params == ./specdec's $program_params == the lecture model's shapes $shapes"
else
    fail "README figures: README says $readme_params parameters, ./specdec counts '${program_params}', the shapes give $shapes (fix README.md or the model)"
fi

# 2. The line count of specdec.c
readme_lines=$(number_in '.*`specdec\.c` (\([0-9][0-9,]*\) lines).*')
actual_lines=$(wc -l <specdec.c | tr -d ' ')
if [[ -z $readme_lines ]]; then
    fail "README figures: README.md no longer states specdec.c's length (\"\`specdec.c\` (N lines)\")"
elif [[ $readme_lines == "$actual_lines" ]]; then
    pass "README figures: specdec.c has $actual_lines lines, as README says"
else
    fail "README figures: README says specdec.c has $readme_lines lines, wc -l counts $actual_lines (update README.md)"
fi

# 3. The bad-input catalogue: its cases are the lines that are neither blank nor comments
readme_cases=$(number_in '.*catalogue of \([0-9][0-9,]*\) bad inputs.*')
actual_cases=$(grep -cvE '^[[:space:]]*(#|$)' test/bad_inputs.txt)
if [[ -z $readme_cases ]]; then
    fail "README figures: README.md no longer states the size of the bad-input catalogue"
elif [[ $readme_cases == "$actual_cases" ]]; then
    pass "README figures: the bad-input catalogue has $actual_cases cases, as README says"
else
    fail "README figures: README says $readme_cases bad inputs, test/bad_inputs.txt has $actual_cases cases (update README.md)"
fi

# 4. Where draft_tokens starts
readme_draft=$(number_in '.*meets `draft_tokens` at line \([0-9][0-9,]*\).*')
actual_draft=$(grep -nE '^[a-z].*[ *]draft_tokens\(' specdec.c | head -n 1 | cut -d: -f1)
if [[ -z $readme_draft ]]; then
    fail "README figures: README.md no longer says where draft_tokens starts (\"meets \`draft_tokens\` at line N\")"
elif [[ $readme_draft == "$actual_draft" ]]; then
    pass "README figures: draft_tokens starts at line $actual_draft of specdec.c, as README says"
else
    fail "README figures: README says draft_tokens starts at line $readme_draft, specdec.c has it at line '${actual_draft}' (update README.md)"
fi

# 5. The comment share
readme_share=$(number_in ".*[^0-9]\([0-9][0-9]*\)% of the file's lines carry a comment.*")
commented=$(grep -cE '//|/\*|^[[:space:]]*\*' specdec.c)
actual_share=$((100 * commented / actual_lines))
if [[ -z $readme_share ]]; then
    fail "README figures: README.md no longer states the share of commented lines (\"N% of the file's lines carry a comment\")"
elif [[ $readme_share == "$actual_share" ]]; then
    pass "README figures: $commented of specdec.c's $actual_lines lines carry a comment ($actual_share%), as README says"
else
    fail "README figures: README says $readme_share% of specdec.c's lines carry a comment, the count gives $actual_share% ($commented of $actual_lines; update README.md)"
fi

((nfail == 0))
