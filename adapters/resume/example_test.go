package resume_test

import (
	"errors"
	"fmt"
	"net/http/httptest"

	"github.com/replaybus/replaybus/adapters/resume"
)

// A Last-Event-ID is a plain id or an epoch-qualified one; anything else is
// refused, naming the value.
func ExampleParseCursor() {
	for _, v := range []string{"", "42", "9f3c-42", "0x2a"} {
		c, err := resume.ParseCursor(v)
		var ce *resume.CursorError
		switch {
		case errors.As(err, &ce):
			fmt.Printf("%q: refused: %s\n", v, ce.Reason)
		case c == nil:
			fmt.Printf("%q: no cursor\n", v)
		default:
			fmt.Printf("%q: id %d, epoch %q (written back as %s)\n", v, c.ID, c.Epoch, resume.FormatID(c.ID, c.Epoch))
		}
	}
	// Output:
	// "": no cursor
	// "42": id 42, epoch "" (written back as 42)
	// "9f3c-42": id 42, epoch "9f3c" (written back as 9f3c-42)
	// "0x2a": refused: want decimal digits only, got 'x' at byte 1
}

// What both handlers make of a subscribe request: a cursor wins over
// replay=0 (a resume always replays), and a misspelt parameter is a 400
// naming it.
func ExampleParseRequest() {
	r := httptest.NewRequest("GET", "/session/s1/events?replay=0&scope=descendants", nil)
	r.Header.Set("Last-Event-ID", "E1-41")
	o, err := resume.ParseRequest(r, "s1", "E1", resume.QueryRules{})
	fmt.Println(err == nil, o.Scope, o.Cursor.ID, o.Cursor.Epoch, o.NoReplay)

	r = httptest.NewRequest("GET", "/session/s1/events?lastEventID=41", nil)
	_, err = resume.ParseRequest(r, "s1", "E1", resume.QueryRules{})
	var serr *resume.StatusError
	errors.As(err, &serr)
	fmt.Println(serr.Status, serr.Code)
	fmt.Println(serr.Message)
	// Output:
	// true descendants 41 E1 false
	// 400 unknown_query_parameter
	// unknown query parameter "lastEventID" (did you mean lastEventId? names are case-sensitive)
}
