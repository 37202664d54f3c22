#!/usr/bin/env bash
# scripts/install-deps.sh and the README agree: the README's table lists
# every group with exactly the packages the script installs for it, and the
# groups the test and demo commands install are those the README names.
# Runs no apt-get.
#
# usage: test-install-deps.sh SOURCE_DIR
set -euo pipefail
# The script under test returns at once when this is set (run-tests.sh
# passes it on when asked not to check the dependencies).
unset IVM_SKIP_DEPS

src=$1
deps=$src/scripts/install-deps.sh
readme=$src/README.md

fail() {
    echo "test-install-deps: FAIL: $*" >&2
    exit 1
}

# "build: a b c" lines from the script, "build: a b c" lines from the table.
script_groups=$(bash "$deps" --list | while read -r g pkgs; do
    echo "${g%:} $(echo $pkgs | tr ' ' '\n' | sort | tr '\n' ' ')"
done)
readme_groups=$(sed -n 's/^| `\([a-z]*\)` | \([^|]*\) | .*/\1 \2/p' "$readme" | while read -r g pkgs; do
    echo "$g $(echo "$pkgs" | tr -d ',' | tr ' ' '\n' | grep . | sort | tr '\n' ' ')"
done)
[ -n "$readme_groups" ] || fail "no group table found in README.md"
if [ "$script_groups" != "$readme_groups" ]; then
    diff <(echo "$script_groups") <(echo "$readme_groups") >&2 || true
    fail "README.md's table (right) and scripts/install-deps.sh --list (left) differ"
fi
echo "test-install-deps: $(echo "$script_groups" | wc -l) groups, the same in README.md and the script"

# The groups each set-up command installs, as the README says.
tests_groups=$(sed -n 's/^bash scripts\/install-deps.sh *\(.*\)$/\1/p' "$src/scripts/run-tests.sh")
demo_groups=$(sed -n 's/^bash scripts\/install-deps.sh *\(.*\)$/\1/p' "$src/scripts/run-demo.sh")
default=$(sed -n 's/^ *groups=(\([a-z ]*\))$/\1/p' "$deps")
[ -n "$tests_groups" ] || tests_groups=$default
grep -q "The test command installs \`$tests_groups\`, the demo \`$demo_groups\`" "$readme" ||
    fail "README.md does not say the test command installs '$tests_groups' and the demo '$demo_groups'"

# A bad group is refused with status 2, naming the groups.
set +e
out=$(bash "$deps" no-such-group 2>&1)
rc=$?
set -e
[ $rc = 2 ] || fail "an unknown group exited $rc, not 2"
echo "$out" | grep -q "build fuzz mpi slurm netns plots" || fail "the unknown group's message: $out"
echo "test-install-deps: OK"
