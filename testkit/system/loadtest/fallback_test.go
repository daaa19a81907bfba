package loadtest

import (
	"bufio"
	"strings"
	"testing"
)

func TestMetricByReason(t *testing.T) {
	text := `# HELP parley_ratelimit_fallback_total x
# TYPE parley_ratelimit_fallback_total counter
parley_ratelimit_fallback_total{reason="error"} 3
parley_ratelimit_fallback_total{reason="timeout"} 2
parley_ratelimit_fallback_totalx 100
parley_ratelimit_degraded 1
`
	n, err := metricByReason(bufio.NewScanner(strings.NewReader(text)), fallbackMetric)
	if err != nil || len(n) != 2 || n["error"] != 3 || n["timeout"] != 2 {
		t.Fatalf("by reason %v, %v; want error 3, timeout 2", n, err)
	}
	if _, err := metricByReason(bufio.NewScanner(strings.NewReader("parley_ratelimit_degraded 1\n")), fallbackMetric); err == nil {
		t.Fatal("a metric that is not exposed must be an error")
	}
}

func TestWrongAnswers(t *testing.T) {
	ok := Result{Requests: 10, Statuses: map[int]int{202: 10}}
	if err := ok.Wrong(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []Result{
		{Requests: 10, Statuses: map[int]int{202: 9, 429: 1}},
		{Requests: 10, Statuses: map[int]int{202: 10}, Errors: 1},
		{Requests: 10, Statuses: map[int]int{500: 10}},
	} {
		if err := r.Wrong(); err == nil || !strings.Contains(err.Error(), "not answered 202") {
			t.Errorf("%v: %v", r.Statuses, err)
		}
	}
	if err := (Load{Requests: 3, Statuses: map[int]int{202: 2, 401: 1}}).Wrong(); err == nil {
		t.Error("a 401 in a background load passed")
	}
}
