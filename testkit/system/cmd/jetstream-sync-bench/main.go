// Command jetstream-sync-bench measures what JetStream's sync_interval
// costs (make bench-nats-sync): it starts the pinned nats-server binary
// (bin/, make tools) once with the default sync_interval (fsync every
// 2 minutes) and once with sync_interval: always (fsync before each
// acknowledgement), each on a file-storage stream in a fresh store
// directory, and publishes to it for a fixed time with 1 and with several
// concurrent publishers, each waiting for its acknowledgement as the
// gateway does. It prints messages per second and the p50/p99 publish
// latency of each case.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	server := flag.String("nats-server", "", "the nats-server binary (make passes bin/nats-server-<version>)")
	dir := flag.String("dir", "", "where the store directories go (default: a temporary directory; put it on the disk to measure)")
	duration := flag.Duration("duration", 4*time.Second, "how long each case publishes")
	size := flag.Int("size", 1024, "message size in bytes")
	concurrent := flag.Int("publishers", 16, "concurrent publishers of the second case")
	flag.Parse()
	if *server == "" {
		fmt.Fprintln(os.Stderr, "-nats-server is required")
		os.Exit(2)
	}
	if err := run(*server, *dir, *duration, *size, *concurrent); err != nil {
		fmt.Fprintln(os.Stderr, "jetstream-sync-bench:", err)
		os.Exit(1)
	}
}

func run(server, dir string, duration time.Duration, size, concurrent int) error {
	version, err := exec.Command(server, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s --version: %w", server, err)
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "jetstream-sync-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	fmt.Printf("%s, store in %s, %d-byte messages, %s per case, file storage, 1 replica\n",
		string(version[:len(version)-1]), dir, size, duration)
	fmt.Printf("%-14s %10s %10s %10s %10s\n", "sync_interval", "publishers", "msgs/s", "p50", "p99")
	for _, mode := range []string{"default", "always"} {
		for _, pubs := range []int{1, concurrent} {
			r, err := measure(server, filepath.Join(dir, fmt.Sprintf("%s-%d", mode, pubs)), mode, duration, size, pubs)
			if err != nil {
				return fmt.Errorf("sync_interval %s, %d publishers: %w", mode, pubs, err)
			}
			fmt.Printf("%-14s %10d %10.0f %10s %10s\n", mode, pubs, r.rate, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond))
		}
	}
	return nil
}

type result struct {
	rate     float64
	p50, p99 time.Duration
}

// measure starts a server with its own store directory and port, creates
// the stream and publishes for duration with pubs publishers.
func measure(server, store, mode string, duration time.Duration, size, pubs int) (result, error) {
	if err := os.MkdirAll(store, 0o755); err != nil {
		return result{}, err
	}
	port, err := freePort()
	if err != nil {
		return result{}, err
	}
	conf := fmt.Sprintf("listen: 127.0.0.1:%d\njetstream { store_dir: %q }\n", port, store)
	if mode == "always" {
		conf = fmt.Sprintf("listen: 127.0.0.1:%d\njetstream { store_dir: %q, sync_interval: always }\n", port, store)
	}
	confPath := filepath.Join(store, "nats.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return result{}, err
	}
	cmd := exec.Command(server, "--config", confPath)
	log, err := os.Create(filepath.Join(store, "nats.log"))
	if err != nil {
		return result{}, err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	var nc *nats.Conn
	for deadline := time.Now().Add(10 * time.Second); ; {
		if nc, err = nats.Connect(url); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return result{}, fmt.Errorf("nats-server at %s not up (log %s): %w", url, log.Name(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return result{}, err
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "BENCH", Subjects: []string{"bench.>"}, Storage: jetstream.FileStorage, Replicas: 1,
	}); err != nil {
		return result{}, err
	}

	payload := make([]byte, size)
	var (
		mu        sync.Mutex
		latencies []time.Duration
		firstErr  error
		wg        sync.WaitGroup
	)
	start := time.Now()
	end := start.Add(duration)
	for p := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			subject := fmt.Sprintf("bench.%d", p)
			var own []time.Duration
			for time.Now().Before(end) {
				t := time.Now()
				if _, err := js.Publish(ctx, subject, payload); err != nil {
					mu.Lock()
					firstErr = errors.Join(firstErr, err)
					mu.Unlock()
					return
				}
				own = append(own, time.Since(t))
			}
			mu.Lock()
			latencies = append(latencies, own...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return result{}, firstErr
	}
	if len(latencies) == 0 {
		return result{}, errors.New("no message published")
	}
	slices.Sort(latencies)
	pct := func(q float64) time.Duration { return latencies[int(q*float64(len(latencies)-1))] }
	return result{rate: float64(len(latencies)) / elapsed.Seconds(), p50: pct(0.50), p99: pct(0.99)}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
