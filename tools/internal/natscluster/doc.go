// Package natscluster runs a NATS cluster of nats-server child processes
// for the harnesses under tools/: each server in its own process with its
// own JetStream folder, so that a harness can SIGKILL one (the stream's
// leader, found through the JetStream API), start it again on the same
// ports and data, ask the stream's leader to step down, and cut one server
// off from the others.
//
// # Partitions
//
// Every route between two servers runs through a TCP relay of this package
// ([Link]), one per ordered pair (server i dialling server j), so that
// [Cluster.Isolate] can cut every route of one server while its clients
// stay connected: the situation of a stream leader left in a minority. The
// servers advertise route addresses that refuse connections, so that a
// route learnt by gossip (an implicit route) cannot bypass the relays.
//
// # Binaries
//
// [Build] compiles the nats-server binary from the module version this
// module requires (go build, no download of a release), once per call.
package natscluster
