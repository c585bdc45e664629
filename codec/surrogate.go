package codec

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// A producer that writes JSON from UTF-16 strings (JavaScript, Java) can
// cut a character outside the Basic Multilingual Plane between two text
// chunks: "\ud83d" in one, "\ude00" in the next (😀). Each chunk alone
// holds half a surrogate pair, which encoding/json turns into U+FFFD. The
// decoders keep such a half in [Part.Text] as its three-byte generalized
// UTF-8 form (WTF-8: ED A0–BF xx), and [TextJoin] pairs it with its other
// half across parts; a half that finds no partner becomes U+FFFD there (or
// when an encoder that does not join writes the text as JSON).

// unquote returns the text of JSON string literal lit as encoding/json
// does, except that a lone surrogate escape is kept in its three-byte
// WTF-8 form rather than turned into U+FFFD.
func unquote(lit []byte) (string, bool) {
	if !hasSurrogateEscape(lit) {
		var s string
		return s, json.Unmarshal(lit, &s) == nil
	}
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return "", false
	}
	c := lit[1 : len(lit)-1]
	var b strings.Builder
	seg := 0 // start of the run of c not yet decoded
	flush := func(end int) bool {
		if end == seg {
			return true
		}
		var s string
		if json.Unmarshal(append(append([]byte{'"'}, c[seg:end]...), '"'), &s) != nil {
			return false
		}
		b.WriteString(s)
		return true
	}
	for i := 0; i < len(c); i++ {
		if c[i] != '\\' {
			continue
		}
		if i+1 >= len(c) {
			return "", false
		}
		if c[i+1] != 'u' {
			i++ // a two-character escape: \" \\ \/ \b \f \n \r \t
			continue
		}
		r1, ok := hex4(c, i+2)
		if !ok {
			return "", false
		}
		if !utf16.IsSurrogate(r1) {
			i += 5
			continue
		}
		if r1 < 0xdc00 { // a high half: paired when a low half's escape follows
			if r2, ok := hex4(c, i+8); ok && i+7 < len(c) && c[i+6] == '\\' && c[i+7] == 'u' && r2 >= 0xdc00 && r2 <= 0xdfff {
				i += 11
				continue
			}
		}
		if !flush(i) {
			return "", false
		}
		b.WriteString(wtf8(r1))
		i += 5
		seg = i + 1
	}
	if !flush(len(c)) {
		return "", false
	}
	return b.String(), true
}

// hasSurrogateEscape reports whether lit may hold a \u escape of a
// surrogate (\ud800–\udfff, any case).
func hasSurrogateEscape(lit []byte) bool {
	for i := bytes.Index(lit, []byte(`\u`)); i >= 0 && i+2 < len(lit); {
		if c := lit[i+2]; c == 'd' || c == 'D' {
			return true
		}
		j := bytes.Index(lit[i+2:], []byte(`\u`))
		if j < 0 {
			return false
		}
		i += 2 + j
	}
	return false
}

// hex4 reads the four hex digits at c[i:].
func hex4(c []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(c) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(c[i:i+4]), 16, 16)
	return rune(v), err == nil
}

// wtf8 is surrogate r's three-byte generalized UTF-8 form.
func wtf8(r rune) string {
	return string([]byte{0xe0 | byte(r>>12), 0x80 | byte(r>>6)&0x3f, 0x80 | byte(r)&0x3f})
}

// surrogateAt returns the surrogate whose WTF-8 form starts s[i:], or 0.
func surrogateAt(s string, i int) rune {
	if i+3 > len(s) || s[i] != 0xed || s[i+1] < 0xa0 || s[i+1] > 0xbf || s[i+2] < 0x80 || s[i+2] > 0xbf {
		return 0
	}
	return rune(s[i]&0x0f)<<12 | rune(s[i+1]&0x3f)<<6 | rune(s[i+2]&0x3f)
}

// TextJoin joins the texts of one stream of text parts (Text or
// Reasoning, in order) as an encoder writes them: half a surrogate pair
// at the end of a text is held back and joined with the half that starts
// the next one into one character; every other half becomes U+FFFD. What
// Next returns is valid UTF-8 whenever the texts are UTF-8 apart from
// such halves. The zero value is ready; not safe for concurrent use.
type TextJoin struct {
	held rune // a high half held from the previous text, or 0
}

// Next returns text to write now: the held half joined with text's
// first half (or U+FFFD for it), text's halves resolved, and a high half
// at its end held for the next call.
func (j *TextJoin) Next(text string) string {
	if j.held == 0 && !strings.Contains(text, "\xed") {
		return text
	}
	var b strings.Builder
	held := j.held
	j.held = 0
	for i := 0; i < len(text); {
		r := surrogateAt(text, i)
		switch {
		case r == 0:
			if held != 0 {
				b.WriteRune(utf8.RuneError)
				held = 0
			}
			_, n := utf8.DecodeRuneInString(text[i:])
			b.WriteString(text[i : i+n])
			i += n
			continue
		case r >= 0xdc00 && held != 0:
			b.WriteRune(utf16.DecodeRune(held, r))
			held = 0
		case r >= 0xdc00:
			b.WriteRune(utf8.RuneError)
		default:
			if held != 0 {
				b.WriteRune(utf8.RuneError)
			}
			held = r
		}
		i += 3
	}
	j.held = held
	return b.String()
}

// Flush returns what a held half becomes when no text follows (U+FFFD),
// or "", and forgets it.
func (j *TextJoin) Flush() string {
	if j.held == 0 {
		return ""
	}
	j.held = 0
	return string(utf8.RuneError)
}
