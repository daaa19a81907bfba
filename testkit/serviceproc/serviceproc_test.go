package serviceproc

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func buildProbed(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "probed")
	if err := Build(context.Background(), "testdata/probed", bin, io.Discard); err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestStartAndStop(t *testing.T) {
	bin := buildProbed(t)
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PARLEY_FROM_THE_SHELL", "leaked")
	p, err := Start(context.Background(), Options{Name: "probed", Bin: bin,
		Env:   []string{"PROBED_ADDR=" + addr, "PARLEY_GIVEN=1"},
		Probe: "http://" + addr + "/healthz"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Get("http://" + addr + "/env")
	if err != nil {
		t.Fatal(err)
	}
	env, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if got := strings.TrimSpace(string(env)); got != "PARLEY_GIVEN=1" {
		t.Fatalf("the process sees PARLEY_* = %q, want only what it was given", got)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-p.Exited():
	default:
		t.Fatal("Stop returned before the process ended")
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("the port still answers after Stop")
	}
	if !strings.Contains(p.Logs(), "probed listening") {
		t.Fatalf("Logs = %q", p.Logs())
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
}

func TestKill(t *testing.T) {
	bin := buildProbed(t)
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(context.Background(), Options{Name: "probed", Bin: bin,
		Env: []string{"PROBED_ADDR=" + addr}, Probe: "http://" + addr + "/healthz"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Err(); err != nil {
		t.Fatalf("Err of a running process = %v", err)
	}
	p.Kill()
	select {
	case <-p.Exited():
	default:
		t.Fatal("Kill returned before the process ended")
	}
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("Err after Kill = %v, want killed", err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("the port still answers after Kill")
	}
	p.Kill() // a second Kill does nothing
	if err := p.Stop(); err == nil || !strings.Contains(err.Error(), "had already exited") {
		t.Fatalf("Stop after Kill = %v", err)
	}
}

func TestStartFailures(t *testing.T) {
	bin := buildProbed(t)
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Start(context.Background(), Options{Name: "probed", Bin: bin,
		Env: []string{"PROBED_FAIL=no database", "PROBED_ADDR=" + addr}, Probe: "http://" + addr + "/healthz"})
	if err == nil || !strings.Contains(err.Error(), "probed exited while starting") || !strings.Contains(err.Error(), "no database") {
		t.Fatalf("a process that dies at start: err = %v; want its name and its last words", err)
	}

	start := time.Now()
	_, err = Start(context.Background(), Options{Name: "probed", Bin: bin, Env: []string{"PROBED_ADDR=" + addr},
		Probe: "http://" + addr + "/missing", StartTimeout: 500 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "did not answer 200") {
		t.Fatalf("a probe that never answers 200: err = %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("gave up after %s", took)
	}
	// The process was stopped: its port is free again.
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("the timed-out process still listens")
	}

	if err := Build(context.Background(), "testdata/nowhere", filepath.Join(t.TempDir(), "x"), io.Discard); err == nil {
		t.Fatal("Build of a missing directory: want an error")
	}
}

// Every program BuildService knows is a main package where the table says
// (a service that moves must move its row), and an unknown name is an
// error rather than a build of something else.
func TestBuildServiceKnowsWhereEachProgramIs(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for name, dir := range programs {
		files, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
		found := false
		for _, f := range files {
			if src, err := os.ReadFile(f); err == nil && !strings.HasSuffix(f, "_test.go") && regexp.MustCompile(`(?m)^package main$`).Match(src) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s: no main package in %s", name, dir)
		}
	}
	if err := BuildService(context.Background(), "no-such-service", filepath.Join(t.TempDir(), "x"), io.Discard); err == nil || !strings.Contains(err.Error(), "no such service program") {
		t.Errorf("an unknown program: %v", err)
	}
}
