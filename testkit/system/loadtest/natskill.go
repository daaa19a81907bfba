package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/parleyhq/parley/pkg/bus"
	"github.com/parleyhq/parley/pkg/bus/sendsv1"
	"github.com/parleyhq/parley/testkit/serviceproc"
)

// NATSKillOptions are the knobs of make bench-gateway-nats-kill.
type NATSKillOptions struct {
	// NATSServer is the nats-server binary the private NATS runs.
	NATSServer string
	// PortBase: the private servers listen on PortBase+1..+4.
	PortBase  int
	Companies int
	Conns     int
	// Before is the load before the kill, Down how long nats-server stays
	// dead, After the load once it is back.
	Before, Down, After time.Duration
}

// natsKillLoad is what the load generator saw.
type natsKillLoad struct {
	mu       sync.Mutex
	accepted []string // batch ids answered 202
	statuses map[int]int
	errors   int
}

// NATSKill runs 10-contact campaign sends against the real gateway on a
// private nats-server (file storage, sync_interval always, as in
// production), SIGKILLs nats-server mid-run, restarts it on its store, and
// then reads the whole stream: every batch id the gateway answered 202 must
// be in it. It prints the 202s, the other answers by status and the
// found/missing counts, and fails when any 202 is missing.
func NATSKill(ctx context.Context, o NATSKillOptions, w io.Writer) error {
	srv, err := startPrivateServers(ctx, o.NATSServer, o.PortBase)
	if err != nil {
		return err
	}
	defer srv.stop()
	fmt.Fprintf(w, "private servers: nats-server %s (file storage, sync_interval always), redis-server %s, PostgreSQL on 127.0.0.1:%d\n",
		srv.natsURL, srv.redisAddr, srv.pgPort)
	sc, err := newScratchAt(ctx, "natskill", o.Companies, w, srv.pgAdminURL, srv.redisAddr, srv.natsURL)
	if err != nil {
		return err
	}
	defer sc.close()
	busCfg := sc.bus("natskill")
	if _, err := bus.EnsureStream(ctx, sc.js, busCfg); err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "parley-natskill-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "gateway")
	if err := serviceproc.BuildService(ctx, "gateway", bin, os.Stderr); err != nil {
		return err
	}
	addr, err := serviceproc.FreeAddr()
	if err != nil {
		return err
	}
	gw, err := serviceproc.Start(ctx, serviceproc.Options{Name: "gateway", Bin: bin,
		Env:   append(sc.env(busCfg), "PARLEY_GATEWAY_ADDR="+addr, "PARLEY_GATEWAY_ACCESS_LOG=false"),
		Probe: "http://" + addr + "/readyz"}) // its log (a 503 per refused request) is not shown
	if err != nil {
		return err
	}
	defer func() { _ = gw.Stop() }()

	// The load: every connection sends one request at a time, in a loop,
	// until the end; a 202's batch id is kept.
	reqs := CampaignRequests(sc.tenants, 10)
	load := &natsKillLoad{statuses: map[int]int{}}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: o.Conns, MaxConnsPerHost: o.Conns}}
	var wg sync.WaitGroup
	for i := range o.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := i; loadCtx.Err() == nil; j += o.Conns {
				load.send(loadCtx, client, "http://"+addr+"/api/campaigns/send", reqs[j%len(reqs)])
			}
		}()
	}
	fmt.Fprintf(w, "load: %d connections, 10 contacts per request, %d companies; kill after %s, nats-server down %s, load %s after the restart\n",
		o.Conns, o.Companies, o.Before, o.Down, o.After)
	sleep(ctx, o.Before)
	before := load.snapshot()
	if err := srv.killNATS(); err != nil {
		return fmt.Errorf("kill nats-server: %w", err)
	}
	fmt.Fprintf(w, "SIGKILL nats-server after %d 202s\n", before)
	sleep(ctx, o.Down)
	if err := srv.startNATS(); err != nil {
		return err
	}
	fmt.Fprintf(w, "nats-server restarted on its store\n")
	sleep(ctx, o.After)
	stopLoad()
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}

	// Read the whole stream (nobody consumes it) and match batch ids.
	inStream, msgs, err := streamBatchIDs(ctx, sc.js, busCfg.Stream)
	if err != nil {
		return err
	}
	var missing []string
	for _, id := range load.accepted {
		if !inStream[id] {
			missing = append(missing, id)
		}
	}
	others, byStatus := 0, map[int]int{}
	for s, n := range load.statuses {
		if s != http.StatusAccepted {
			others += n
			byStatus[s] = n
		}
	}
	fmt.Fprintf(w, "answers: %d 202s; %d others, by status %v; %d transport errors\n", len(load.accepted), others, byStatus, load.errors)
	fmt.Fprintf(w, "stream after the restart: %d batches in %d messages (group commit); of the %d batch ids answered 202: found %d, missing %d (%d batches in the stream were not answered 202: stored, but the answer was lost with the kill)\n",
		len(inStream), msgs, len(load.accepted), len(load.accepted)-len(missing), len(missing), len(inStream)-(len(load.accepted)-len(missing)))
	if len(load.accepted) == 0 {
		return fmt.Errorf("no request was answered 202")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%d batches answered 202 are not in the stream, e.g. %v", len(missing), missing[:min(10, len(missing))])
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (l *natsKillLoad) snapshot() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.accepted)
}

// send posts one request and records its answer. A request cut off by the
// end of the load is not counted (its answer is unknown, as a client's
// whose connection broke).
func (l *natsKillLoad) send(ctx context.Context, client *http.Client, url string, r Request) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(r.Body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("service-api-key", r.Key)
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			l.mu.Lock()
			l.errors++
			l.mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
		return
	}
	defer resp.Body.Close()
	var body struct {
		BatchID string `json:"batch_id"`
	}
	raw, err := io.ReadAll(resp.Body)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.errors++
		return
	}
	l.statuses[resp.StatusCode]++
	if resp.StatusCode == http.StatusAccepted {
		if err := json.Unmarshal(raw, &body); err != nil || body.BatchID == "" {
			l.errors++
			return
		}
		l.accepted = append(l.accepted, body.BatchID)
	}
}

// streamBatchIDs reads every message of the stream and returns the batch
// ids in it, decoded from each message (a group of batches or a batch
// alone); a batch stored twice is an error.
func streamBatchIDs(ctx context.Context, js jetstream.JetStream, stream string) (_ map[string]bool, msgs int, _ error) {
	var (
		s   jetstream.Stream
		err error
	)
	// The client reconnects to the restarted server on its own; JetStream
	// answers once the stream is recovered.
	for deadline := time.Now().Add(30 * time.Second); ; {
		if s, err = js.Stream(ctx, stream); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, 0, fmt.Errorf("stream %s after the restart: %w", stream, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, 0, err
	}
	out := make(map[string]bool, info.State.Msgs)
	if info.State.Msgs == 0 {
		return out, msgs, nil
	}
	// Nothing consumes the stream, so its sequences have no gaps; a
	// work-queue stream takes no ordered consumer, so each message is
	// fetched by its sequence (direct get).
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, 0, fmt.Errorf("stream message %d: %w", seq, err)
		}
		msgs++
		ids, err := batchIDsOf(m)
		if err != nil {
			return nil, 0, fmt.Errorf("stream message %d: %w", seq, err)
		}
		for _, id := range ids {
			if out[id] {
				return nil, 0, fmt.Errorf("batch %s is in the stream twice (again in message %d)", id, seq)
			}
			out[id] = true
		}
	}
	return out, msgs, nil
}

// batchIDsOf decodes the campaign batches of one stream message.
func batchIDsOf(m *jetstream.RawStreamMsg) ([]string, error) {
	datas := [][]byte{m.Data}
	if subj, err := bus.ParseSubject(m.Subject); err == nil && subj.Grouped {
		if datas, err = bus.DecodeGroup(m.Data); err != nil {
			return nil, err
		}
	}
	ids := make([]string, len(datas))
	for i, data := range datas {
		var b sendsv1.CampaignBatch
		if err := proto.Unmarshal(data, &b); err != nil {
			return nil, err
		}
		ids[i] = b.BatchId
	}
	return ids, nil
}
