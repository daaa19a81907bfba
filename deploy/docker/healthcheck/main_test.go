package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			w.WriteHeader(http.StatusOK)
		case "/slow":
			time.Sleep(500 * time.Millisecond)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":"shutting down"}`))
		}
	}))
	defer srv.Close()

	// A port that was free a moment ago refuses connections.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/readyz"
	ln.Close()

	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"ready", []string{srv.URL + "/readyz"}, ""},
		{"not ready", []string{srv.URL + "/other"}, "503 Service Unavailable {\"status\":\"shutting down\"}"},
		{"refused", []string{closed}, "connection refused"},
		{"too slow", []string{srv.URL + "/slow"}, "deadline exceeded"},
		{"no url", nil, "usage"},
		{"two urls", []string{srv.URL, srv.URL}, "usage"},
		{"bad url", []string{"http://[::1"}, "request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := check(context.Background(), tt.args, 200*time.Millisecond)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("check: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("check error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
