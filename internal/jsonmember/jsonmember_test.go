package jsonmember

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Find's contract: exact repeats at the top level always; in the objects
// read, repeats in any case and lone names in another case than the one
// read; the application's other objects pass as sent.
func TestFind(t *testing.T) {
	change := []Object{{Names: []string{"add", "remove"}}, {Path: "add[]", Names: []string{"session", "scope", "from"}}}
	tests := []struct {
		name string
		json string
		read []Object
		want Finding
		ok   bool
	}{
		{"none", `{"add":[{"session":"a"}],"remove":["b"]}`, change, Finding{}, false},
		{"top repeat, nothing read", `{"id":1,"id":2}`, nil, Finding{Name: "id", First: "id", At: 7}, true},
		{"top case, nothing read", `{"id":1,"ID":2}`, nil, Finding{}, false},
		{"lone case", `{"ADD":[]}`, change, Finding{Name: "ADD", First: "add", At: 0, Lone: true}, true},
		{"repeat in another case", `{"add":[],"Add":[]}`, change, Finding{Name: "Add", First: "add", At: 9}, true},
		{"in a list element", `{"add":[{"session":"a"},{"from":"1","from":"2"}]}`, change, Finding{Name: "from", First: "from", At: 35}, true},
		{"lone in a list element", `{"add":[{"Session":"a"}]}`, change, Finding{Name: "Session", First: "session", At: 8, Lone: true}, true},
		{"data not read", `{"add":[{"session":"a","meta":{"x":1,"x":2}}]}`, change, Finding{}, false},
		{"escaped name", `{"id":"a","\u0069d":"b"}`, nil, Finding{Name: "id", First: "id", At: 9}, true},
		{"names inside strings", `{"a":"{\"a\":1,\"a\":2}"}`, nil, Finding{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Find([]byte(tt.json), tt.read)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}
