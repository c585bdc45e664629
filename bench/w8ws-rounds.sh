#!/bin/sh
# w8ws-rounds.sh BEFORE AFTER [ROUNDS] — W8 over WebSocket, before and after,
# alternated: ROUNDS (default 8) rounds of BEFORE then AFTER, each running
# replaybus and centrifuge at S = 10, 100, 1,000 twice (-runs 2), then the
# medians and ranges of the per-run ratios replaybus ÷ centrifuge (wall and
# CPU per delivery) for each binary, and of after ÷ before per round.
# BEFORE and AFTER are bench binaries built from two trees (docs/benchmarks.md,
# "W8 over WebSocket (issue 22.1)"). The runs' output stays in $OUT (default
# a new temporary directory).
set -eu
before=$1 after=$2 rounds=${3:-8}
out=${OUT:-$(mktemp -d)}
for r in $(seq 1 "$rounds"); do
	for b in before after; do
		eval bin=\$$b
		"$bin" -only W8ws -systems replaybus,centrifuge -runs 2 -s 10,100,1000 >"$out/$b-$r.out" 2>"$out/$b-$r.err"
	done
done
echo "runs in $out"
# One line per run: binary round S run system ns cpu allocs bad.
for f in "$out"/*.err; do
	n=$(basename "$f" .err)
	sed -n 's/^W8 S=\([0-9]*\) WS run \([0-9]*\) \([a-z]*\) *\([0-9.]*\) ns\/delivery cpu \([0-9.]*\) ns\/delivery \([0-9.]*\) allocs lost \([0-9]*\) reordered \([0-9]*\) skipped [0-9]* foreign \([0-9]*\)$/\1 \2 \3 \4 \5 \6 \7 \8 \9/p' "$f" |
		awk -v n="$n" '{ split(n, a, "-"); print a[1], a[2], $1, $2, $3, $4, $5, $6, $7 + $8 + $9 }'
done | awk '
function med(s, k,   i, j, t, v) { # median, min, max of the k values in s[1..k]
	for (i = 1; i <= k; i++) v[i] = s[i]
	for (i = 2; i <= k; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j+1] = v[j]; v[j+1] = t }
	return sprintf("%.2f (%.2f–%.2f)", (k % 2) ? v[(k+1)/2] : (v[k/2] + v[k/2+1]) / 2, v[1], v[k])
}
{ k = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4 SUBSEP $5; ns[k] = $6; cpu[k] = $7; al[k] = $8; bad[$1] += $9; S[$3] = 1; R[$2] = 1 }
END {
	for (s in S) {
		for (bi = 1; bi <= 2; bi++) {
			b = bi == 1 ? "before" : "after"; n = 0
			for (r in R) for (run = 1; run <= 2; run++) {
				x = b SUBSEP r SUBSEP s SUBSEP run
				if ((x SUBSEP "replaybus") in ns && (x SUBSEP "centrifuge") in ns) {
					n++; w[n] = ns[x SUBSEP "replaybus"] / ns[x SUBSEP "centrifuge"]; c[n] = cpu[x SUBSEP "replaybus"] / cpu[x SUBSEP "centrifuge"]
					rn[n] = ns[x SUBSEP "replaybus"]; rc[n] = cpu[x SUBSEP "replaybus"]; ra[n] = al[x SUBSEP "replaybus"]
					cn[n] = ns[x SUBSEP "centrifuge"]; cc[n] = cpu[x SUBSEP "centrifuge"]; ca[n] = al[x SUBSEP "centrifuge"]
				}
			}
			if (n) printf "S=%s %-6s %2d runs: replaybus ÷ centrifuge wall %s, CPU %s; replaybus ns %s CPU %s allocs %s; centrifuge ns %s CPU %s allocs %s\n", s, b, n, med(w, n), med(c, n), med(rn, n), med(rc, n), med(ra, n), med(cn, n), med(cc, n), med(ca, n)
		}
		n = 0
		for (r in R) {
			a1 = "after" SUBSEP r SUBSEP s SUBSEP 1 SUBSEP "replaybus"; a2 = "after" SUBSEP r SUBSEP s SUBSEP 2 SUBSEP "replaybus"
			b1 = "before" SUBSEP r SUBSEP s SUBSEP 1 SUBSEP "replaybus"; b2 = "before" SUBSEP r SUBSEP s SUBSEP 2 SUBSEP "replaybus"
			if (a1 in ns && a2 in ns && b1 in ns && b2 in ns) {
				n++; w[n] = (ns[a1] + ns[a2]) / (ns[b1] + ns[b2]); c[n] = (cpu[a1] + cpu[a2]) / (cpu[b1] + cpu[b2])
			}
		}
		if (n) printf "S=%s replaybus after ÷ before, %d rounds: wall %s, CPU %s\n", s, n, med(w, n), med(c, n)
	}
	printf "lost + reordered + foreign: before %d, after %d\n", bad["before"], bad["after"]
}' | sort -t= -k2 -n
