// Package bustest gives tests a NATS server of their own: the real
// nats-server, embedded in the test process with JetStream on a temporary
// directory, as the NATS project tests its own client. Config gives tests
// on the shared local server a stream and subject prefix of their own.
package bustest

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/parleyhq/parley/pkg/bus"
)

// Server is an embedded nats-server that stops when the test ends.
type Server struct {
	t    testing.TB
	opts server.Options
	srv  *server.Server
}

// NewServer starts an embedded nats-server with JetStream on a random port.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, opts: server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}}
	s.Start()
	// Keep the port so that a restart comes back where clients reconnect.
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(s.Stop)
	return s
}

// URL is the client URL of the server.
func (s *Server) URL() string { return s.srv.ClientURL() }

// Stop shuts the server down (a NATS outage); Start brings it back on the
// same port with the same stored streams.
func (s *Server) Stop() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
	}
}

// Start starts (or restarts) the server.
func (s *Server) Start() {
	s.t.Helper()
	opts := s.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		s.t.Fatalf("bustest: new server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		s.t.Fatal("bustest: nats-server not ready after 10s")
	}
	s.srv = srv
}

// Config returns a bus configuration for url with a stream name and subject
// prefix no other test uses.
func Config(url string) bus.Config {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	return bus.Config{URL: url, Stream: "TEST_" + id, Prefix: "t" + id, StreamReplicas: 1}
}
