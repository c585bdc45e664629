package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestFieldParsersReadEnvelopesAndPushes: the clients read a round or a
// publish time out of replaybus's envelopes and centrifuge's pushes alike,
// and the id out of an envelope.
func TestFieldParsersReadEnvelopesAndPushes(t *testing.T) {
	tests := []struct {
		name, data, key string
		want            int64
		ok              bool
	}{
		{"replaybus envelope", `{"v":1,"id":"ab-7","type":"msg","session":"s1","data":{"r":3}}`, `"r":`, 3, true},
		{"centrifuge push", `{"push":{"channel":"s1","pub":{"data":{"i":2,"t":1700000000123},"offset":5}}}`, `"t":`, 1700000000123, true},
		{"negative", `{"t":-5}`, `"t":`, -5, true},
		{"missing", `{"x":1}`, `"r":`, 0, false},
		{"not a number", `{"r":"x"}`, `"r":`, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := intField([]byte(tt.data), tt.key)
			assert.Equal(t, tt.ok, ok)
			if ok {
				assert.Equal(t, tt.want, got)
			}
		})
	}
	id, ok := stringField([]byte(`{"v":1,"id":"9f2c-41","type":"msg"}`), `"id":`)
	assert.True(t, ok)
	assert.Equal(t, "9f2c-41", id)
	id, ok = stringField([]byte(`{"v":1,"id":41,"type":"msg"}`), `"id":`)
	assert.True(t, ok)
	assert.Equal(t, "41", id)
	_, ok = stringField([]byte(`{"v":1}`), `"id":`)
	assert.False(t, ok)
}
