package main

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testLog sends the harness's progress to the test log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) { w.t.Logf("%s", p); return len(p), nil }

// TestFailoverShort is the harness's short run, for go test: three
// nats-server processes, two example-server nodes, two pipelined
// idempotent producers and a live subscriber per session on each node,
// while the stream's leader is SIGKILLed once, stepped down twice and cut
// off once (about 30 s). Every property of the checker must hold; the resume times are
// logged, not asserted (they are the full run's figures, docs/distributed.md).
// The seed is logged; FAILOVER_SEED replays one.
func TestFailoverShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five processes for about 30 s")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FAILOVER_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "FAILOVER_SEED")
	}
	t.Logf("seed %d (FAILOVER_SEED=%d replays this schedule)", seed, seed)
	bctx, bcancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer bcancel()
	cfg := Config{
		Seed: seed, Kills: 1, StepDowns: 2, Partitions: 1, Budget: 2 * time.Minute,
		Producers: 2, Window: 8, Subscribers: 1, Storage: "file",
		Dir: t.TempDir(), Log: testLog{t},
	}
	require.NoError(t, buildBinaries(bctx, &cfg)) // bounded apart: a cold build cache on a busy machine is slow
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	require.NoError(t, err)
	var out testLog = testLog{t}
	printReport(out, rep)
	assert.Empty(t, rep.Failed(), "seed %d", seed)
	done := map[string]int{}
	for _, f := range rep.Faults {
		assert.Empty(t, f.Err, "%s of %s", f.Kind, f.Server)
		done[f.Kind]++
	}
	assert.Equal(t, map[string]int{kindKill: 1, kindStepDown: 2, kindPartition: 1}, done)
	assert.Positive(t, rep.Verdict.Acked)
	assert.Equal(t, 2*rep.Verdict.Stored, rep.Verdict.Delivered, "every stored event reached both nodes' subscribers")
}
