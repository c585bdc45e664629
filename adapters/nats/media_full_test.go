//go:build reviewrepro

package nats_test

// A reproduction, not part of the suite (it fills the process's media type
// table for good): go test -tags reviewrepro -run TestByteEventOfNewTypeOnFullTable ./adapters/nats/

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/eventbus"
)

// A node whose process already knows 4,096 media types must not drop a
// byte event of a new type that another node (another process) stored:
// its subscribers get it, or a notice that they missed it.
func TestByteEventOfNewTypeOnFullTable(t *testing.T) {
	opts := append(uniqueStream(), rbnats.WithStream("RVFULL"), rbnats.WithSubjectPrefix("rvfull"))
	n := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	require.NoError(t, n.bus.CreateSession("s", ""))
	sub, err := n.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{NoReplay: true})
	require.NoError(t, err)
	defer sub.Close()
	for i := 0; ; i++ {
		if _, err := (eventbus.Event{}).WithContentType(fmt.Sprintf("application/x-fill-%d", i)); err != nil {
			break
		}
	}
	// What another node's PublishBytes("s", "blob", "image/x-new", {1,2}) stores (envelope version 2).
	env := []byte{0x02, 4}
	env = append(env, "blob"...)
	env = binary.BigEndian.AppendUint64(env, uint64(time.Now().UnixNano()))
	env = append(env, 0, byte(len("image/x-new")))
	env = append(env, "image/x-new"...)
	env = append(env, 1, 2)
	js, err := jetstream.New(n.nc)
	require.NoError(t, err)
	_, err = js.Publish(context.Background(), "rvfull.s", env)
	require.NoError(t, err)
	_, err = n.bus.Publish("s", "after", 1)
	require.NoError(t, err)
	first := next(t, sub)
	assert.NotEqual(t, "after", first.Type, "the byte event was skipped without a notice")
}
