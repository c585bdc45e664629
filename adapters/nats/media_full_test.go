package nats_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	rbnats "github.com/replaybus/replaybus/adapters/nats"
	"github.com/replaybus/replaybus/eventbus"
)

// fullTableEnv, set, makes TestByteEventOfNewTypeOnFullTable run its body:
// it fills the process's media type table for good, so the test runs it
// in a child process of the test binary.
const fullTableEnv = "REPLAYBUS_TEST_FULL_MEDIA_TABLE"

// A node whose process already knows 4,096 media types does not drop a
// byte event of a new type that another node (another process) stored: its
// subscribers get the event, bytes intact, as application/octet-stream
// (the type is lost on this node only), in order before the next event.
func TestByteEventOfNewTypeOnFullTable(t *testing.T) {
	if os.Getenv(fullTableEnv) != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestByteEventOfNewTypeOnFullTable$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), fullTableEnv+"=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "the child process:\n%s", out)
		require.Contains(t, string(out), "--- PASS: TestByteEventOfNewTypeOnFullTable", "the child ran the test:\n%s", out)
		return
	}
	opts := append(uniqueStream(), rbnats.WithStream("RVFULL"), rbnats.WithSubjectPrefix("rvfull"))
	n := newNode(t, shared.ClientURL(), eventbus.Options{}, opts...)
	require.NoError(t, n.bus.CreateSession("s", ""))
	sub, err := n.bus.Subscribe(context.Background(), "s", eventbus.SubscribeOptions{NoReplay: true})
	require.NoError(t, err)
	defer sub.Close()
	for i := 0; ; i++ {
		if _, err := (eventbus.Event{}).WithContentType(fmt.Sprintf("application/x-fill-%d", i)); err != nil {
			require.ErrorContains(t, err, "distinct media types (the limit)")
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
	require.Equal(t, "blob", first.Type, "the byte event is delivered, not skipped")
	require.Equal(t, []byte{1, 2}, []byte(first.Data), "its bytes are kept")
	require.Equal(t, "application/octet-stream", first.ContentType(), "its type, which this process cannot intern, falls back")
	require.False(t, first.IsJSON())
	require.Equal(t, "after", next(t, sub).Type)
}
