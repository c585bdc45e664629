package turnstream_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replaybus/replaybus/adapters/internal/turnstream"
	"github.com/replaybus/replaybus/adapters/resume"
)

// ReadBody refuses a member given twice, also in another case, in the
// objects the route decodes (the paths read), and exactly twice at the top
// level whatever the paths: encoding/json matches names regardless of case
// and keeps the last, so {"threadId":"a","THREADID":"b"} ran on b where a
// proxy or a log reads a, and only exact names at the top level were
// checked. The objects it does not decode are the application's data,
// passed on as sent ("ID" and "id" may both be meant there).
func TestReadBodyRefusesAMemberGivenTwice(t *testing.T) {
	t.Parallel()
	objs := func(paths ...string) []turnstream.Object {
		var out []turnstream.Object
		for _, p := range paths {
			out = append(out, turnstream.Object{Path: p})
		}
		return out
	}
	read := []turnstream.Object{{Path: "", Names: []string{"threadId", "messages"}}, {Path: "messages[]", Names: []string{"id", "role"}}}
	many := func(last string) string { // 40 names, then last
		var sb strings.Builder
		sb.WriteString("{")
		for i := range 40 {
			fmt.Fprintf(&sb, `"k%d":0,`, i)
		}
		return sb.String() + `"` + last + `":1}`
	}
	for _, tc := range []struct {
		name, body, has string
		read            []turnstream.Object
	}{
		{"top level", `{"id":"dup","id":"dup2"}`, `at byte 11: member "id" given twice`, nil},
		{"another case", `{"threadId":"a","THREADID":"b"}`, `member "THREADID" given twice (as "threadId"`, objs("")},
		{"nested", `{"params":{"message":{"contextId":"a","contextID":"b"}}}`, `member "contextID" given twice (as "contextId"`, objs("", "params", "params.message")},
		{"in an array", `{"messages":[{"role":"user"},{"role":"user","role":"assistant"}]}`, `member "role" given twice`, objs("messages[]")},
		{"in another case in an array", `{"messages":[{"role":"user"},{"role":"user","Role":"assistant"}]}`, `member "Role" given twice (as "role"`, objs("messages[]")},
		{"in an array of arrays", `{"m":[[{"a":1,"A":2}]]}`, `member "A" given twice (as "a"`, objs("m[][]")},
		{"escaped name", `{"id":"a","\u0069d":"b"}`, `member "id" given twice`, nil},
		{"Kelvin sign", `{"key":"a","\u212aey":"b"}`, "given twice (as \"key\"", objs("")},
		{"long s", `{"s":"a","\u017f":"b"}`, "given twice (as \"s\"", objs("")},
		{"twice in data the route does not decode", `{"forwardedProps":{"x":1,"x":2}}`, "", objs("")},
		{"names in other cases in data the route does not decode", `{"forwardedProps":{"ID":1,"id":2},"state":[{"K":1,"k":2}]}`, "", objs("", "messages[]")},
		{"another case where nothing is decoded", `{"threadId":"a","THREADID":"b"}`, "", nil},
		{"names in strings and arrays are values", `{"a":"b","c":["a","a"],"d":{"a":"a"},"e":"\"a\":1"}`, "", objs("", "d")},
		{"same name in sibling objects", `{"m":[{"id":1},{"id":2}],"n":{"id":3}}`, "", objs("", "m[]", "n")},
		{"twice in a large object", many("k7"), `member "k7" given twice`, nil},
		{"another case in a large object", many("K7"), `member "K7" given twice (as "k7"`, objs("")},
		{"a large object", many("k40"), "", objs("")},
		{"a name read, in another case, alone", `{"THREADID":"b"}`, `at byte 0: member "THREADID" (member names are case-sensitive: want "threadId")`, read},
		{"a name read, in another case, in a message", `{"threadId":"a","messages":[{"id":"u","Role":"user"}]}`, `member "Role" (member names are case-sensitive: want "role")`, read},
		{"names not read, in any case", `{"threadId":"a","Extra":1,"messages":[{"id":"u","role":"user","Content":"x","META":{"ID":1}}]}`, "", read},
		{"names that differ", `{"id":"a","idx":"b","ID ":"c"}`, "", objs("")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tc.body))
			r.Header.Set("Content-Type", "application/json")
			b, err := turnstream.ReadBody(httptest.NewRecorder(), r, 1<<20, 0, tc.read...)
			if tc.has == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.body, string(b))
				return
			}
			var se *resume.StatusError
			require.True(t, errors.As(err, &se), "%v", err)
			assert.Equal(t, http.StatusBadRequest, se.Status)
			assert.Equal(t, resume.CodeInvalidJSON, se.Code)
			assert.Contains(t, se.Message, tc.has)
		})
	}
}
