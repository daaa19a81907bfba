package ratelimit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// errTimeout is what a script call answers when Redis did not reply within
// the configured timeout.
var errTimeout = errors.New("redis: no reply within the rate-limit timeout")

// errClosed is what a script call answers after Close.
var errClosed = errors.New("redis: rate limiter closed")

const (
	// pipelineWorkers is how many batches may be on the wire at once. Two keep
	// one batch filling while the other is in flight; more only splits the
	// same callers into smaller batches (see BenchmarkAllow).
	pipelineWorkers = 2
	// maxBatch bounds one pipeline so that its replies fit the read timeout.
	maxBatch = 512
)

// autoPipeline implements the interface redis_rate.NewLimiter takes and
// sends the script calls of many goroutines to Redis as one pipeline: a
// caller queues its command and waits; a worker takes everything queued,
// sends it in one write and reads the replies in one pass. Batches form by
// themselves: while one is in flight the next callers queue up, so there is
// no timer and no added latency when traffic is light.
//
// Every key is prefixed with the configured prefix, so redis_rate's keys
// ("rate:...") land under it. Each call is bounded by the timeout and by its
// context; a call given up on is skipped if it has not been sent yet, and its
// reply is dropped if it has.
type autoPipeline struct {
	rdb     redis.UniversalClient
	prefix  string
	timeout time.Duration

	mu     sync.Mutex
	cond   sync.Cond
	queue  []*pipeCall
	closed bool
	wg     sync.WaitGroup

	calls sync.Pool

	// batches and sent count pipelines and the commands in them.
	batches, sent atomic.Int64
}

// Call states: a worker completes a pending call, a waiter abandons it.
const (
	callPending uint32 = iota
	callDone
	callAbandoned
)

// pipeCall is one queued command. It is pooled with its channel and timer
// so that a call costs no allocation beyond the command itself.
type pipeCall struct {
	cmd   *redis.Cmd
	state atomic.Uint32
	done  chan struct{}
	timer *time.Timer
}

func newAutoPipeline(rdb redis.UniversalClient, prefix string, timeout time.Duration) *autoPipeline {
	p := &autoPipeline{rdb: rdb, prefix: prefix, timeout: timeout}
	p.cond.L = &p.mu
	p.calls.New = func() any {
		t := time.NewTimer(time.Hour)
		t.Stop()
		return &pipeCall{done: make(chan struct{}, 1), timer: t}
	}
	p.wg.Add(pipelineWorkers)
	for range pipelineWorkers {
		go p.work()
	}
	return p
}

// Close stops the workers once the queue is empty.
func (p *autoPipeline) Close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
}

// Eval runs script through the pipeline.
func (p *autoPipeline) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return p.do(ctx, "eval", script, keys, args)
}

// EvalSha runs a loaded script through the pipeline.
func (p *autoPipeline) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return p.do(ctx, "evalsha", sha1, keys, args)
}

// EvalRO runs a read-only script through the pipeline.
func (p *autoPipeline) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return p.do(ctx, "eval_ro", script, keys, args)
}

// EvalShaRO runs a loaded read-only script through the pipeline.
func (p *autoPipeline) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return p.do(ctx, "evalsha_ro", sha1, keys, args)
}

// ScriptExists goes straight to Redis: it is rare and not latency-bound.
func (p *autoPipeline) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	return p.rdb.ScriptExists(ctx, hashes...)
}

// ScriptLoad goes straight to Redis.
func (p *autoPipeline) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	return p.rdb.ScriptLoad(ctx, script)
}

// Del deletes keys under the prefix, straight on Redis.
func (p *autoPipeline) Del(ctx context.Context, keys ...string) *redis.IntCmd {
	prefixed := make([]string, len(keys))
	for i, k := range keys {
		prefixed[i] = p.prefix + k
	}
	return p.rdb.Del(ctx, prefixed...)
}

// do queues one script command and waits for its reply, the timeout or the
// end of ctx, whichever comes first.
func (p *autoPipeline) do(ctx context.Context, name, script string, keys []string, args []any) *redis.Cmd {
	cmdArgs := make([]any, 0, 3+len(keys)+len(args))
	cmdArgs = append(cmdArgs, name, script, len(keys))
	for _, k := range keys {
		cmdArgs = append(cmdArgs, p.prefix+k)
	}
	cmdArgs = append(cmdArgs, args...)
	cmd := redis.NewCmd(ctx, cmdArgs...)
	if len(keys) > 0 {
		// The first key routes the command to its node in a cluster.
		cmd.SetFirstKeyPos(3)
	}
	if err := ctx.Err(); err != nil {
		cmd.SetErr(err)
		return cmd
	}

	c := p.calls.Get().(*pipeCall)
	c.cmd = cmd
	c.state.Store(callPending)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.cmd = nil
		p.calls.Put(c)
		cmd.SetErr(errClosed)
		return cmd
	}
	p.queue = append(p.queue, c)
	// Wake a worker only if the queue was empty: otherwise one was woken
	// already, or a busy worker will take the queue when its batch is done.
	if len(p.queue) == 1 {
		p.cond.Signal()
	}
	p.mu.Unlock()

	c.timer.Reset(p.timeout)
	var err error
	select {
	case <-c.done:
		c.timer.Stop()
		c.cmd = nil
		p.calls.Put(c)
		return cmd
	case <-c.timer.C:
		err = errTimeout
	case <-ctx.Done():
		c.timer.Stop()
		err = ctx.Err()
	}
	if !c.state.CompareAndSwap(callPending, callAbandoned) {
		// The reply arrived as we gave up: take it.
		<-c.done
		c.cmd = nil
		p.calls.Put(c)
		return cmd
	}
	// The worker still holds cmd and may write to it, so the caller gets a
	// fresh command carrying the error; the abandoned call is not pooled.
	failed := redis.NewCmd(ctx, cmdArgs...)
	failed.SetErr(err)
	return failed
}

func (p *autoPipeline) work() {
	defer p.wg.Done()
	batch := make([]*pipeCall, 0, maxBatch)
	cmds := make([]redis.Cmder, 0, maxBatch)
	pipe := p.rdb.Pipeline()
	for {
		p.mu.Lock()
		for len(p.queue) == 0 && !p.closed {
			p.cond.Wait()
		}
		if len(p.queue) == 0 {
			p.mu.Unlock()
			return
		}
		n := min(len(p.queue), maxBatch)
		batch = append(batch[:0], p.queue[:n]...)
		rest := copy(p.queue, p.queue[n:])
		clear(p.queue[rest:])
		p.queue = p.queue[:rest]
		if rest > 0 {
			// Leftovers beyond maxBatch: let the other worker start on them.
			p.cond.Signal()
		}
		p.mu.Unlock()

		cmds = cmds[:0]
		for _, c := range batch {
			if c.state.Load() != callAbandoned {
				cmds = append(cmds, c.cmd)
			}
		}
		if len(cmds) > 0 {
			// The error is also on each command, where its caller reads it:
			// go-redis stamps a transport failure on every command of the
			// batch and a Redis error on the command it belongs to.
			_ = pipe.BatchProcess(context.Background(), cmds...)
			_, _ = pipe.Exec(context.Background())
			p.batches.Add(1)
			p.sent.Add(int64(len(cmds)))
		}
		for i, c := range batch {
			if c.state.CompareAndSwap(callPending, callDone) {
				c.done <- struct{}{}
			}
			batch[i] = nil
		}
		clear(cmds)
	}
}
