#!/bin/sh
# summary.sh LOG... - adds up the per-build lines of tests/run.sh and prints
# the closing line "N passed, N failed, N skipped"; fails if anything failed
# or a build reported nothing.
pass=0 fail=0 skip=0
for log in "$@"; do
    line=$(grep -E '^[a-z]+: [0-9]+ passed, [0-9]+ failed' "$log" 2>/dev/null | tail -1)
    if [ -z "$line" ]; then echo "summary: $log has no result line"; fail=$((fail + 1)); continue; fi
    set -- $line
    pass=$((pass + $2)); fail=$((fail + $4)); skip=$((skip + $6))
done
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
