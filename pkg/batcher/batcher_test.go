package batcher_test

import (
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/batcher"
)

type log struct {
	mu      sync.Mutex
	batches [][]int
}

func (l *log) write(b []int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.batches = append(l.batches, append([]int(nil), b...))
	return nil
}

func (l *log) all() [][]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.batches
}

// TestSizeAndClose: a full batch is written at once, and Close writes the
// rest without waiting for the interval.
func TestSizeAndClose(t *testing.T) {
	var l log
	b := batcher.New(batcher.Config{Size: 3, Interval: time.Hour, Queue: 10}, batcher.Hooks[int]{Write: l.write})
	b.Start()
	for i := range 5 {
		b.Add(i)
	}
	b.Close()
	if want := [][]int{{0, 1, 2}, {3, 4}}; !reflect.DeepEqual(l.all(), want) {
		t.Fatalf("batches %v, want %v", l.all(), want)
	}
}

// TestRetryKeepsItems: a failed write is retried with what arrived
// meanwhile; nothing is lost and the recovery is reported.
func TestRetryKeepsItems(t *testing.T) {
	var l log
	var failures []int
	recovered := 0
	failed := make(chan struct{}, 10)
	b := batcher.New(batcher.Config{Size: 2, Interval: time.Hour, Queue: 10, GiveUp: time.Minute}, batcher.Hooks[int]{
		Write: func(batch []int) error {
			if len(batch) < 3 { // down until the item added after the failure is in
				return errors.New("connection refused")
			}
			return l.write(batch)
		},
		Failed:    func(_, n int, _ error) { failures = append(failures, n); failed <- struct{}{} },
		Recovered: func(n int) { recovered = n },
	})
	b.Start()
	b.Add(1)
	b.Add(2)
	<-failed
	b.Add(3)
	b.Close()
	if want := [][]int{{1, 2, 3}}; !reflect.DeepEqual(l.all(), want) {
		t.Fatalf("batches %v, want %v", l.all(), want)
	}
	if len(failures) == 0 || failures[0] != 1 || recovered != len(failures) {
		t.Fatalf("failures %v, recovered after %d", failures, recovered)
	}
}

// TestGiveUpAfterClose: a write that keeps failing is dropped once GiveUp
// has passed after Close, and the drop is reported.
func TestGiveUpAfterClose(t *testing.T) {
	gaveUp := -1
	b := batcher.New(batcher.Config{Size: 10, Interval: time.Hour, Queue: 10}, batcher.Hooks[int]{
		Write:  func([]int) error { return errors.New("down") },
		GaveUp: func(n int) { gaveUp = n },
	})
	b.Start()
	b.Add(1)
	b.Add(2)
	b.Close()
	if gaveUp != 2 {
		t.Fatalf("gave up on %d items, want 2", gaveUp)
	}
}
