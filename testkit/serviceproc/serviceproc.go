// Package serviceproc builds Parley's service programs and runs them as
// child processes, for the tests and load tests that need the real binary
// rather than its code in-process: several gateways beside one admin, a
// gateway beside a browser test. A process is started with the PARLEY_*
// variables it is given (never the caller's own, so that a developer's shell
// cannot change a measurement), is ready when its probe answers, and is
// stopped with SIGTERM, as an orchestrator stops it.
package serviceproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Build compiles the main package in dir (a service's module directory,
// such as services/gateway, or one of its commands, such as
// services/dispatcher/cmd/campaign-dispatcher) into the file out, with the
// go command on PATH.
// The build's output goes to log. It builds as make run and the images do
// (deploy/static-binaries.sh: CGO_ENABLED=0, -trimpath), so that the
// packages one of them compiled serve the others from the build cache.
func Build(ctx context.Context, dir, out string, log io.Writer) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("build %s: %w", dir, err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Dir = abs
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build in %s: %w", abs, err)
	}
	return nil
}

// programs are the service programs BuildService builds, by name: the
// folder of each one's main package, from the repository's root.
var programs = map[string]string{
	"admin":                 "services/admin",
	"automation-dispatcher": "services/dispatcher/cmd/automation-dispatcher",
	"campaign-dispatcher":   "services/dispatcher/cmd/campaign-dispatcher",
	"gateway":               "services/gateway",
	"parleyctl":             "services/admin/cmd/parleyctl",
	"provider-sim":          "services/provider-sim",
	"webhook-sender":        "services/webhook-sender",
}

// BuildService compiles the named service program (gateway,
// campaign-dispatcher, parleyctl...) of the repository that holds the
// working directory into the file out, wherever the caller runs from: the
// load tests and drills live outside the services they build.
func BuildService(ctx context.Context, name, out string, log io.Writer) error {
	dir, ok := programs[name]
	if !ok {
		return fmt.Errorf("build %s: no such service program", name)
	}
	root, err := RepoRoot()
	if err != nil {
		return fmt.Errorf("build %s: %w", name, err)
	}
	return Build(ctx, filepath.Join(root, dir), out, log)
}

// RepoRoot is the directory holding go.work, found from the working
// directory upwards (tests run in their package's folder, make runs the
// load tests from their module's).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory")
		}
		dir = parent
	}
}

// FreeAddr returns a loopback address (127.0.0.1:port) that nothing listens
// on at the moment of the call.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Options describe one process.
type Options struct {
	// Name labels errors and log lines.
	Name string
	Bin  string
	Args []string
	// Env is added to the caller's environment, from which every PARLEY_*
	// variable is removed first.
	Env []string
	// Probe is polled until it answers WantStatus (200 when zero).
	Probe      string
	WantStatus int
	// StartTimeout bounds the wait for the probe (30 s when zero).
	StartTimeout time.Duration
	// Output receives the process's stdout and stderr; nil keeps the last
	// 64 KiB in memory, for Logs.
	Output io.Writer
}

// Process is a started service.
type Process struct {
	name string
	cmd  *exec.Cmd
	tail *tailBuffer
	done chan struct{}
	err  error // the exit status, once done is closed
	once sync.Once
}

// Start runs the program and waits until its probe answers. A process that
// exits or does not answer in time is stopped, and the error carries the end
// of its output.
func Start(ctx context.Context, o Options) (*Process, error) {
	if o.WantStatus == 0 {
		o.WantStatus = http.StatusOK
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 30 * time.Second
	}
	p := &Process{name: o.Name, done: make(chan struct{})}
	cmd := exec.Command(o.Bin, o.Args...)
	cmd.Env = append(withoutParleyVars(os.Environ()), o.Env...)
	out := o.Output
	if out == nil {
		p.tail = &tailBuffer{max: 64 << 10}
		out = p.tail
	}
	cmd.Stdout, cmd.Stderr = out, out
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", o.Name, err)
	}
	p.cmd = cmd
	go func() { p.err = cmd.Wait(); close(p.done) }()

	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(o.StartTimeout)
	for {
		if res, err := client.Get(o.Probe); err == nil {
			_ = res.Body.Close()
			if res.StatusCode == o.WantStatus {
				return p, nil
			}
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited while starting (%v)%s", o.Name, p.err, p.logsSuffix())
		case <-ctx.Done():
			_ = p.Stop()
			return nil, fmt.Errorf("start %s: %w", o.Name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = p.Stop()
			return nil, fmt.Errorf("%s did not answer %d at %s within %s%s", o.Name, o.WantStatus, o.Probe, o.StartTimeout, p.logsSuffix())
		}
	}
}

// Stop sends SIGTERM and waits up to 15 s for the process to end, then
// kills it. It returns the exit error of a process that did not end cleanly
// on SIGTERM, and nil on later calls.
func (p *Process) Stop() error {
	var err error
	p.once.Do(func() {
		select {
		case <-p.done:
			err = fmt.Errorf("%s had already exited: %v", p.name, p.err)
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			if p.err != nil {
				err = fmt.Errorf("%s stopped with %v", p.name, p.err)
			}
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			err = fmt.Errorf("%s did not stop within 15s of SIGTERM and was killed", p.name)
		}
	})
	return err
}

// Kill ends the process with SIGKILL, as a crash or the OOM killer would:
// no shutdown at all. It waits until the process has ended and does nothing
// to one that already has.
func (p *Process) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Err is how the process ended (its exit error, nil for a clean exit) once
// Exited is closed, and nil while it runs.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Pid is the process id (to read its CPU time from /proc, for example).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has ended.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Logs returns the end of the process's output when Options.Output was nil.
func (p *Process) Logs() string {
	if p.tail == nil {
		return ""
	}
	return p.tail.String()
}

func (p *Process) logsSuffix() string {
	if l := strings.TrimSpace(p.Logs()); l != "" {
		return "; its output ends:\n" + l
	}
	return ""
}

func withoutParleyVars(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PARLEY_") {
			out = append(out, kv)
		}
	}
	return out
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if extra := b.buf.Len() - b.max; extra > 0 {
		b.buf.Next(extra)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
