// Package cluster holds the cluster drill (go test -tags drill: make
// drill-cluster): a three-node JetStream cluster, two gateways and two
// dispatchers of each kind as built binaries, with the stream's leader and
// then a dispatcher of each kind killed under load.
package cluster
