package eventbus

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/internal/textutil"
)

// jsonPayload is a JSON object of n bytes shaped like an ACP
// agent_message_chunk update (bench/'s payload: the 256-byte one is W1's).
func jsonPayload(n int) []byte {
	const prefix = `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`
	const suffix = `"}}`
	text := strings.Repeat("the quick brown fox jumps over the lazy dog ", n/40+1)[:n-len(prefix)-len(suffix)]
	return []byte(prefix + text + suffix)
}

// nested is v inside depth arrays.
func nested(depth int, v string) string {
	return strings.Repeat("[", depth) + v + strings.Repeat("]", depth)
}

// validJSONCases are the inputs where a validator is most likely to part
// from encoding/json, each with encoding/json's answer: the spec of
// validJSON, and the fuzz test's seed corpus.
var validJSONCases = []struct {
	in   string
	want bool
}{
	// empty input and white space: only space, tab, CR, LF
	{"", false}, {" ", false}, {" \t\r\n{}\r\n\t ", true}, {"\v{}", false}, {"\f{}", false},
	{"\u00a0{}", false}, {"\u2028{}", false},
	// a byte-order mark is not white space
	{"\xef\xbb\xbf{}", false}, {"\xef\xbb\xbf\"x\"", false}, {"{}\xef\xbb\xbf", false},
	// literals
	{"null", true}, {"true", true}, {"false", true}, {"nul", false}, {"True", false}, {"nullx", false},
	{"NaN", false}, {"Infinity", false}, {"-Infinity", false}, {"undefined", false},
	// numbers: any size, any exponent; the grammar's leading zero, sign, point and exponent rules
	{"0", true}, {"-0", true}, {"01", false}, {"-01", false}, {"+1", false}, {"-", false}, {"1.", false},
	{".1", false}, {"1.e5", false}, {"1e", false}, {"1e+", false}, {"1E-5", true}, {"1e+05", true},
	{"0x10", false}, {"1_000", false}, {"1.5e308", true}, {"1e999999999", true}, {"-1.0e-999999999", true},
	{strings.Repeat("9", 400), true}, {"-" + strings.Repeat("1", 400) + "." + strings.Repeat("0", 400), true},
	// strings: escapes
	{`""`, true}, {`"a"`, true}, {`"\"\\\/\b\f\n\r\t"`, true}, {`"\u00e9"`, true}, {`"\u0000"`, true},
	{`"\x41"`, false}, {`"\'"`, false}, {`"\a"`, false}, {`"\u12"`, false}, {`"\u12G4"`, false},
	{`"\U0041"`, false}, {`"\"`, false}, {`"abc`, false}, {`'a'`, false},
	// lone and paired surrogates in \u escapes: all accepted
	{`"\ud800"`, true}, {`"\udc00"`, true}, {`"\ud83d\ude00"`, true}, {`"\ude00\ud83d"`, true}, {`"\uDBFF\uDFFF"`, true},
	// raw control characters inside strings: refused (U+007F is not one)
	{"\"\x00\"", false}, {"\"\x01\"", false}, {"\"\x1f\"", false}, {"\"\t\"", false}, {"\"\n\"", false},
	{"\"\r\"", false}, {"{\"a\x01\":1}", false}, {"\"\x7f\"", true}, {"\" \"", true},
	// invalid UTF-8 inside strings: encoding/json accepts it, validJSON refuses it (RFC 8259 §8.1); outside: refused
	{"\"\xff\"", true}, {"\"\xc3\"", true}, {"\"\xc3\x28\"", true}, {"\"\xed\xa0\x80\"", true},
	{"\"\xf4\x90\x80\x80\"", true}, {"\"\xc0\xaf\"", true}, {"{\"\xfe\":1}", true}, {"\xff", false}, {"[1]\xff", false},
	// objects and arrays
	{"{}", true}, {"[]", true}, {`{"a":1}`, true}, {`{"a":1,}`, false}, {`[1,]`, false}, {`[,1]`, false},
	{`{"a"}`, false}, {`{a:1}`, false}, {`{'a':1}`, false}, {`{"a":1 "b":2}`, false}, {`{"a":1,"a":2}`, true},
	{`{1:2}`, false}, {`{"a"::1}`, false}, {`[1 2]`, false}, {`[[]]`, true}, {`{"a":[{"b":null}]}`, true},
	{`[1,2,3`, false}, {`{"a":`, false}, {"[", false}, {"]", false}, {"{", false}, {"}", false}, {":", false}, {",", false},
	// trailing garbage and a second value
	{"{}x", false}, {"{}}", false}, {"{} {}", false}, {"1 2", false}, {"[1] ,", false}, {`"a"b`, false},
	{"{}\x00", false}, {"\x00{}", false}, {"{}/*c*/", false}, {"//c\n{}", false}, {"{}\n", true},
	// nesting: encoding/json refuses more than 10,000 levels
	{nested(1000, ""), true}, {nested(4097, "1"), true}, {nested(9999, `{"a":1}`), true}, {nested(10000, ""), true},
	{nested(10000, "[]"), false}, {nested(10001, ""), false}, {nested(100000, ""), false},
	{strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000), true},
	{strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001), false},
	{nested(10001, ""), false}, {nested(20, "") + "x", false},
	// the payloads W1 and the benchmarks publish
	{string(jsonPayload(256)), true}, {string(jsonPayload(4096)), true}, {string(jsonPayload(65536)), true},
	{string(jsonPayload(256)[:255]), false},
}

// validJSON is encoding/json's json.Valid on UTF-8 input and refuses any
// input that is not UTF-8, case by case: the table's answers are
// encoding/json's (checked here too), and validJSON gives each on UTF-8
// input and false otherwise.
func TestValidJSON(t *testing.T) {
	for i, c := range validJSONCases {
		name := strconv.Quote(c.in)
		if len(name) > 50 {
			name = name[:50] + "…(" + strconv.Itoa(len(c.in)) + " bytes)"
		}
		require.Equal(t, c.want, json.Valid([]byte(c.in)), "case %d %s: the table must hold encoding/json's answer", i, name)
		want := c.want && utf8.ValidString(c.in)
		require.Equal(t, want, validJSON([]byte(c.in)), "case %d %s: validJSON must agree with encoding/json on UTF-8 and refuse the rest", i, name)
	}
}

// FuzzValidAgreesWithEncodingJSON holds validJSON to encoding/json's
// json.Valid on any UTF-8 input, and to false on any other. Run it with
//
//	go test -run '^$' -fuzz FuzzValidAgreesWithEncodingJSON -fuzztime 4m -fuzzminimizetime 2s ./eventbus/
//
// (the default minimization, up to a minute per new input, stalls on the
// 20–60 KB nesting seeds).
func FuzzValidAgreesWithEncodingJSON(f *testing.F) {
	for _, c := range validJSONCases {
		// Larger seeds (the 100,000-deep array, the 64 KiB payload) would
		// slow every mutation: TestValidJSON checks them.
		if len(c.in) <= 32<<10 {
			f.Add([]byte(c.in))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want := json.Valid(data) && utf8.Valid(data)
		if got := validJSON(data); got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json's json.Valid && utf8.Valid = %v", data, got, want)
		}
	})
}

// Every path that takes a JSON payload decides as encoding/json does on
// UTF-8 and refuses the rest: Publish with a json.RawMessage, PublishJSON,
// PublishBytes under application/json and SendTo each accept what json.Valid
// accepts when it is UTF-8 and refuse, naming the value (and the offset of
// the first byte that is not UTF-8), what they refuse.
func TestEveryJSONPathValidatesAsEncodingJSON(t *testing.T) {
	b, err := New(Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	sub, err := b.Subscribe(t.Context(), "s", SubscribeOptions{NoReplay: true, MaxQueued: 1_000_000, MaxQueuedBytes: 1 << 30})
	require.NoError(t, err)
	paths := map[string]func(data []byte) error{
		"Publish(json.RawMessage)": func(d []byte) error { _, err := b.Publish("s", "m", json.RawMessage(d)); return err },
		"PublishJSON":              func(d []byte) error { _, err := b.PublishJSON("s", "m", d); return err },
		"PublishBytes(application/json)": func(d []byte) error {
			_, err := b.PublishBytes("s", "m", "application/json", d)
			return err
		},
		"SendTo(json.RawMessage)": func(d []byte) error { return b.SendTo("m", json.RawMessage(d), sub) },
	}
	for _, c := range []string{"\"\x01\"", "\xef\xbb\xbf{}", "{}x", nested(10001, ""), `{"a":1,}`,
		"\"\xff\"", "{\"a\":\"ok\xc3\x28\"}", "[\"\xed\xa0\x80\"]", `"\ud800"`, nested(10000, ""), "1e999999999",
		string(jsonPayload(256)), "\"é€😀\""} {
		want := json.Valid([]byte(c)) && utf8.ValidString(c)
		for name, publish := range paths {
			err := publish([]byte(c))
			if want {
				require.NoError(t, err, "%s(%.40q)", name, c)
				continue
			}
			require.ErrorIs(t, err, ErrInvalid, "%s(%.40q)", name, c)
			require.ErrorContains(t, err, "data is not valid JSON", "%s(%.40q)", name, c)
			require.ErrorContains(t, err, fmt.Sprintf("%.60q", c), "%s(%.40q): the error names the value", name, c)
			if at := textutil.InvalidUTF8At([]byte(c)); at < len(c) {
				require.ErrorContains(t, err, fmt.Sprintf("not UTF-8 at byte %d (0x%02x)", at, c[at]), "%s(%.40q): the error names the first bad byte", name, c)
			}
		}
	}
}

// BenchmarkValidJSON compares validJSON with encoding/json's json.Valid on
// the 256-byte agent payload W1 publishes, 4 KiB and 64 KiB:
//
//	go test -run '^$' -bench ValidJSON -benchtime 200ms -count 6 ./eventbus/
func BenchmarkValidJSON(b *testing.B) {
	for _, n := range []int{256, 4096, 65536} {
		p := jsonPayload(n)
		for _, v := range []struct {
			name  string
			valid func([]byte) bool
		}{{"encoding-json", json.Valid}, {"validJSON", validJSON}} {
			b.Run(strconv.Itoa(n)+"B/"+v.name, func(b *testing.B) {
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					if !v.valid(p) {
						b.Fatal("the payload is valid JSON")
					}
				}
			})
		}
	}
}
