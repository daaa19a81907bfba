package whatsappsim_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/channel/whatsapp"
	"github.com/parleyhq/parley/pkg/channel/whatsapp/whatsappsim"
)

// BenchmarkSendLoopback measures whole sends per second through the real
// client and the simulator over loopback TCP (render, JSON, HTTP/1.1 with
// pooled connections, token and throughput checks, recording), with 128
// sends in flight; both ends share this machine's cores. It reports
// sends/s. Run:
//
//	go test -run '^$' -bench SendLoopback -benchtime 100000x ./channel/whatsapp/whatsappsim/
func BenchmarkSendLoopback(b *testing.B) {
	benchSends(b, whatsappsim.Config{Throughput: 100_000_000})
}

// BenchmarkSendLoopbackCallbacks is the same with status webhooks on
// (sent, delivered, read to a loopback receiver that verifies nothing).
func BenchmarkSendLoopbackCallbacks(b *testing.B) {
	var statuses atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		statuses.Add(1)
	}))
	defer rcv.Close()
	benchSends(b, whatsappsim.Config{Throughput: 100_000_000, Callbacks: whatsappsim.CallbackConfig{
		CallbackSettings: whatsappsim.CallbackSettings{URL: rcv.URL, AppSecret: "s"},
	}})
}

func benchSends(b *testing.B, cfg whatsappsim.Config) {
	e := start(b, cfg, 10*time.Second)
	to := whatsapp.Recipient{Phone: "+14155550123", FirstName: "Ann"}
	b.SetParallelism(64) // 64 x GOMAXPROCS goroutines
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	began := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := e.cl.SendTemplate(context.Background(), acct, tpl, to, whatsapp.Overrides{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	el := time.Since(began)
	cpu := cpuTime(b) - cpu0
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "sends/s")
	// CPU per send (client and simulator together, user + system) does not
	// depend on what else the machine runs; 2 cores divided by it is the
	// rate this machine reaches when the benchmark has it to itself.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/send")
	st := e.sim.Stats()
	if st.Accepted != int64(b.N) {
		b.Errorf("accepted %d of %d", st.Accepted, b.N)
	}
	b.ReportMetric(float64(st.Callbacks.DroppedQueueFull), "cb-dropped")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
