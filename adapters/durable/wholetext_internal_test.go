package durable

import (
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// Valid UTF-8 text cut anywhere into appends, arriving in any grouping, is
// sent by wholeText's rule (hold the appends that end inside a character,
// send them with the one that completes it) as chunks that are each valid
// UTF-8 and together the text.
func TestWholeTextNeverSplitsACharacter(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// ASCII, two-, three- and four-byte characters.
		text := []byte(rapid.StringOf(rapid.RuneFrom([]rune{'a', ' ', 'é', 'ß', '€', '中', '😀', '𝄞'})).Draw(t, "text"))
		var items []item
		for rest := text; len(rest) > 0; {
			n := rapid.IntRange(1, len(rest)).Draw(t, "cut")
			items = append(items, item{id: uint64(len(items) + 1), data: rest[:n]})
			rest = rest[n:]
		}
		var sent []byte
		var held []item
		for len(items) > 0 {
			k := rapid.IntRange(1, len(items)).Draw(t, "arrive")
			batch := append(held, items[:k]...)
			items = items[k:]
			n := wholeText(batch)
			var chunk []byte
			for _, it := range batch[:n] {
				chunk = append(chunk, it.data...)
			}
			require.True(t, utf8.Valid(chunk), "chunk %q", chunk)
			sent = append(sent, chunk...)
			held = append([]item(nil), batch[n:]...)
		}
		for _, it := range held {
			sent = append(sent, it.data...)
		}
		require.Empty(t, held, "valid text leaves nothing held at its end")
		require.Equal(t, string(text), string(sent))
	})
}

// A producer whose every append ends inside a character is held back at
// most maxHeldItems appends: then everything goes out.
func TestWholeTextHoldsBoundedly(t *testing.T) {
	var items []item
	for i := range maxHeldItems + 5 {
		items = append(items, item{id: uint64(i + 1), data: []byte("x\xe2")}) // a broken '€' each time
		if n := wholeText(items); n == len(items) {
			require.Equal(t, maxHeldItems, i, "sent after %d held appends", i)
			return
		}
	}
	t.Fatal("held without end")
}
