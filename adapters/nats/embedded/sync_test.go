package embedded

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSyncPolicyReachesJetStream: the sync policy of ServerConfig is the
// one the running JetStream uses (nats-server's defaults when unset).
func TestSyncPolicyReachesJetStream(t *testing.T) {
	tests := []struct {
		name         string
		cfg          ServerConfig
		wantAlways   bool
		wantInterval time.Duration
	}{
		{"default: every 2 minutes", ServerConfig{}, false, 2 * time.Minute},
		{"always", ServerConfig{SyncAlways: true}, true, 2 * time.Minute},
		{"interval", ServerConfig{SyncInterval: 250 * time.Millisecond}, false, 250 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Dir = t.TempDir()
			s, err := RunServer(tt.cfg)
			require.NoError(t, err)
			defer s.Shutdown()
			js := s.srv.JetStreamConfig()
			require.NotNil(t, js)
			assert.Equal(t, tt.wantAlways, js.SyncAlways)
			assert.Equal(t, tt.wantInterval, js.SyncInterval)
		})
	}
}

func TestNegativeSyncIntervalRefused(t *testing.T) {
	_, err := RunServer(ServerConfig{Dir: t.TempDir(), SyncInterval: -time.Second})
	require.EqualError(t, err, "embedded: SyncInterval -1s is negative")
}

// TestClusterServerNamesAndSync: a cluster's servers run the cluster's sync
// policy, and a server joining a cluster without a name gets one from the
// host name and its cluster port (unique across machines on the default
// ports).
func TestClusterServerNamesAndSync(t *testing.T) {
	c, err := StartCluster(ClusterConfig{Servers: 3, Dir: t.TempDir(), SyncAlways: true})
	require.NoError(t, err)
	defer c.Shutdown()
	for _, s := range c.Servers {
		assert.True(t, s.srv.JetStreamConfig().SyncAlways, s.cfg.Name)
	}

	port, err := FreePort()
	require.NoError(t, err)
	s, err := RunServer(ServerConfig{Dir: t.TempDir(), ClusterPort: port, Routes: []string{c.Servers[0].RouteURL()}})
	require.NoError(t, err)
	defer s.Shutdown()
	host, err := os.Hostname()
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("replaybus-%s-%d", host, port), s.srv.Name())
	assert.Equal(t, s.srv.Name(), s.Name())
	assert.Equal(t, "replaybus", s.srv.ClusterName())
}
