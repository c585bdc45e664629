package textutil

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Quote quotes s as strconv.Quote does — non-ASCII as itself, invalid
// UTF-8 as \x escapes — cutting it first to limit bytes at a rune boundary
// and then saying how long it was: "abc…"(200 bytes). An answer thus never
// echoes a huge header, and a value that fits is quoted exactly.
func Quote(s string, limit int) string {
	if len(s) <= limit {
		return strconv.Quote(s)
	}
	cut := limit
	for cut > limit-utf8.UTFMax && cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d bytes)", strconv.Quote(s[:cut]), len(s))
}

// prefixes are the Go package names that [PublicMessage] drops from the
// front of an error's text.
var prefixes = []string{"eventbus", "sse", "ws", "resume", "scope", "replay", "nats", "config", "json", "url", "strconv", "http", "server"}

// PublicMessage is err's text for an HTTP answer: without the Go package
// prefixes ("eventbus: ", "json: ", …) that mean nothing to a client.
func PublicMessage(err error) string {
	msg := err.Error()
	for {
		i := strings.Index(msg, ": ")
		if i < 0 {
			return msg
		}
		known := false
		for _, p := range prefixes {
			known = known || msg[:i] == p
		}
		if !known {
			return msg
		}
		msg = msg[i+2:]
	}
}

// Distance is the edit distance between a and b in bytes: Levenshtein's,
// plus — when transpose is set — a swap of two neighbouring bytes counted
// as one edit (the optimal-string-alignment distance). It allocates only
// when b is over 64 bytes.
func Distance(a, b string, transpose bool) int {
	var small [3][65]int
	rows := [3][]int{small[0][:], small[1][:], small[2][:]}
	if len(b) > 64 {
		for i := range rows {
			rows[i] = make([]int, len(b)+1)
		}
	}
	prev2, prev, cur := rows[0], rows[1], rows[2]
	for j := 0; j <= len(b); j++ {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if transpose && i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
