package csvexport_test

import (
	"encoding/csv"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/parleyhq/parley/pkg/csvexport"
)

// serve answers every request with handler on a real server whose read
// and write timeouts are timeout.
func serve(t *testing.T, timeout time.Duration, handler http.HandlerFunc) *http.Response {
	t.Helper()
	srv := httptest.NewUnstartedServer(handler)
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = timeout, timeout
	srv.Start()
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestResponseHeaders: the status and headers go with the first record (a
// handler may still answer an error before it); an empty file is its
// header; the file name is made safe for the header.
func TestResponseHeaders(t *testing.T) {
	started := make(chan bool, 2)
	resp := serve(t, time.Minute, func(w http.ResponseWriter, _ *http.Request) {
		r := csvexport.NewResponse(w, `rapport "été"/2026.csv`, []string{"phone", "state"}, csvexport.Options{})
		started <- r.Started()
		if err := r.Close(); err != nil {
			t.Error(err)
		}
		started <- r.Started()
	})
	if before, after := <-started, <-started; before || !after {
		t.Fatalf("started before anything %v, after Close %v", before, after)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/csv; charset=utf-8" ||
		resp.Header.Get("Content-Disposition") != `attachment; filename="rapport___t___2026.csv"` || string(body) != "phone,state\r\n" {
		t.Fatalf("%d %v %q", resp.StatusCode, resp.Header, body)
	}
}

// TestResponseOutlivesTheWriteTimeout: records written slowly, for longer
// than the server's write timeout, all arrive, and each flush reaches the
// client before the next record is written.
func TestResponseOutlivesTheWriteTimeout(t *testing.T) {
	const rows = 5
	gap := csvexport.FlushEvery + 50*time.Millisecond
	read := make(chan int, rows)
	resp := serve(t, 400*time.Millisecond, func(w http.ResponseWriter, _ *http.Request) {
		r := csvexport.NewResponse(w, "slow.csv", []string{"n", "phone"}, csvexport.Options{BOM: true})
		for i := range rows {
			if i > 0 {
				select { // the client has the rows so far
				case <-read:
				case <-time.After(5 * time.Second):
					t.Errorf("row %d: the client did not get row %d", i, i-1)
					return
				}
				time.Sleep(gap)
			}
			if err := r.Write([]string{string(rune('0' + i)), "+390000000" + string(rune('0'+i))}); err != nil {
				t.Errorf("row %d: %v", i, err)
				return
			}
		}
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	cr := csv.NewReader(resp.Body)
	header, err := cr.Read()
	if err != nil || header[0] != "\ufeffn" {
		t.Fatalf("header %q, %v", header, err)
	}
	for i := range rows {
		rec, err := cr.Read()
		if err != nil || rec[1] != "'+390000000"+string(rune('0'+i)) {
			t.Fatalf("row %d: %q, %v", i, rec, err)
		}
		read <- i
	}
	if _, err := cr.Read(); err != io.EOF {
		t.Fatalf("after the rows: %v", err)
	}
}
