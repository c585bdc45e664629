package resume_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/resume"
	"github.com/replaybus/replaybus/eventbus"
)

func TestParseCursor(t *testing.T) {
	t.Parallel()
	good := []struct {
		in   string
		want *eventbus.Position
	}{
		{"", nil},
		{"0", &eventbus.Position{}},
		{"7", &eventbus.Position{ID: 7}},
		{"007", &eventbus.Position{ID: 7}},
		{"9007199254740991", &eventbus.Position{ID: resume.MaxID}},
		{"abc123-42", &eventbus.Position{ID: 42, Epoch: "abc123"}},
		{"A_z-0", &eventbus.Position{Epoch: "A_z"}},
		// Well-formed epochs this bus never issued: another incarnation's.
		{"e--5", &eventbus.Position{ID: 5, Epoch: "e-"}},
		{"550e8400-e29b-41d4-a716-446655440000-7", &eventbus.Position{ID: 7, Epoch: "550e8400-e29b-41d4-a716-446655440000"}},
		{"é-1", &eventbus.Position{ID: 1, Epoch: "é"}},
	}
	for _, tt := range good {
		c, err := resume.ParseCursor(tt.in)
		require.NoError(t, err, "%q", tt.in)
		assert.Equal(t, tt.want, c, "%q", tt.in)
	}
	bad := []string{
		"abc", "-1", "1.5", "0x3", " 7", "7 ", "+7", "1e3", "٣",
		"9007199254740992", "18446744073709551615", "18446744073709551616", "99999999999999999999999",
		"1\x00", "1\r", "1\n", "\r\n7", "-", "e-", "-5", "e-x", "e\x01f-1", "\xff-1", "e-+1",
		strings.Repeat("e", 65) + "-1",
	}
	for _, in := range bad {
		_, err := resume.ParseCursor(in)
		var ce *resume.CursorError
		require.ErrorAs(t, err, &ce, "%q", in)
		assert.Equal(t, in, ce.Value)
		assert.Contains(t, err.Error(), strconv.Quote(in)[:min(len(strconv.Quote(in)), 20)], "error names the value")
	}
}

func TestParseEpoch(t *testing.T) {
	t.Parallel()
	e, err := resume.ParseEpoch("")
	require.NoError(t, err)
	assert.Empty(t, e)
	e, err = resume.ParseEpoch("0123abcDEF_")
	require.NoError(t, err)
	assert.Equal(t, "0123abcDEF_", e)
	for _, in := range []string{"a\x00b", "a\x7f", "\xffab", "a\r\n", strings.Repeat("x", 65)} {
		_, err := resume.ParseEpoch(in)
		var ee *resume.EpochError
		require.ErrorAs(t, err, &ee, "%q", in)
	}
}

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "0", "42", "-1", "1.5", "0x3", " 7", "+7", "ab-12", "9007199254740992", "e-1-2", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := resume.ParseCursor(s)
		if err != nil {
			assert.Nil(t, c)
			assert.Contains(t, err.Error(), "invalid Last-Event-ID")
			return
		}
		if s == "" {
			assert.Nil(t, c)
			return
		}
		require.NotNil(t, c)
		assert.LessOrEqual(t, c.ID, uint64(resume.MaxID))
		assert.NotContains(t, s, "\x00")
		assert.NotContains(t, s, "\r")
		assert.NotContains(t, s, "\n")
		seqPart := s[strings.LastIndexByte(s, '-')+1:]
		n, perr := strconv.ParseUint(seqPart, 10, 64)
		require.NoError(t, perr, "%q accepted but not a decimal", s)
		assert.Equal(t, n, c.ID)
		// Round trip, modulo leading zeros.
		again, err := resume.ParseCursor(resume.FormatID(c.ID, c.Epoch))
		require.NoError(t, err)
		assert.Equal(t, c, again)
	})
}

// TestCursorErrorNamesTheByte: a refusal's "got X at byte N" points into
// the value it quotes. In the epoch-qualified form the offset was counted
// from the start of the seq, so "6cd4f878315ff2df-abc" read "got 'a' at
// byte 0", where the quoted value has '6'.
func TestCursorErrorNamesTheByte(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"0x3", `got 'x' at byte 1`},
		{"6cd4f878315ff2df-abc", `got 'a' at byte 17`},
		{"e-1x", `got 'x' at byte 3`},
		{"e-+1", `got '+' at byte 2`},
		{"550e8400-e29b-7.5", `got '.' at byte 15`},
		{"é-1٣", `got '٣' at byte 4`},
	} {
		_, err := resume.ParseCursor(tc.in)
		require.Error(t, err, "%q", tc.in)
		assert.Contains(t, err.Error(), tc.want, "%q", tc.in)
	}
}
