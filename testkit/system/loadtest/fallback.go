package loadtest

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// fallbackMetric counts the rate-limit decisions a gateway made without
// Redis (pkg/ratelimit). A measured run during which it moves did not
// measure the real limiter.
const fallbackMetric = "parley_ratelimit_fallback_total"

// Fallbacks is parley_ratelimit_fallback_total on the gateway at addr, by
// reason (timeout, error, circuit_open, canceled).
func Fallbacks(ctx context.Context, addr string) (map[string]float64, error) {
	return readMetric(ctx, addr, fallbackMetric)
}

// readMetric is one metric of the gateway at addr, by reason label
// (metricByReason).
func readMetric(ctx context.Context, addr, name string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read %s: GET /metrics: status %d", name, res.StatusCode)
	}
	return metricByReason(bufio.NewScanner(res.Body), name)
}

// metricByReason reads the samples of one metric in Prometheus text format,
// keyed by their reason label ("" without one); a metric that is not
// exposed is an error, not 0.
func metricByReason(sc *bufio.Scanner, name string) (map[string]float64, error) {
	out := map[string]float64{}
	found := false
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", name, line, err)
		}
		reason := ""
		if _, after, ok := strings.Cut(rest, `reason="`); ok {
			reason, _, _ = strings.Cut(after, `"`)
		}
		out[reason] += v
		found = true
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%s is not exposed", name)
	}
	return out, nil
}

// fallbackGuard fails a measured run during which the gateway's limiter
// fell back.
type fallbackGuard struct {
	addr   string
	before map[string]float64
}

func guardFallbacks(ctx context.Context, addr string) (fallbackGuard, error) {
	n, err := Fallbacks(ctx, addr)
	return fallbackGuard{addr: addr, before: n}, err
}

func (g fallbackGuard) check(ctx context.Context) error {
	n, err := Fallbacks(ctx, g.addr)
	if err != nil {
		return err
	}
	var moved []string
	var total float64
	for _, reason := range slices.Sorted(maps.Keys(n)) {
		if d := n[reason] - g.before[reason]; d != 0 {
			moved = append(moved, fmt.Sprintf("%s %.0f", reason, d))
			total += d
		}
	}
	if len(moved) > 0 {
		return fmt.Errorf("the rate limiter fell back to its per-process limiter %.0f times during the run (%s by reason: %s): Redis was not measured",
			total, fallbackMetric, strings.Join(moved, ", "))
	}
	return nil
}

// groupMetric is the gateway's histogram of batches per stream message
// (the group commit of the gateway's internal/accept).
const groupMetric = "parley_gateway_group_batches"

// groupCounts are a gateway's batches and stream messages so far.
func groupCounts(ctx context.Context, addr string) (batches, msgs float64, err error) {
	sum, err := readMetric(ctx, addr, groupMetric+"_sum")
	if err != nil {
		return 0, 0, err
	}
	count, err := readMetric(ctx, addr, groupMetric+"_count")
	if err != nil {
		return 0, 0, err
	}
	return sum[""], count[""], nil
}
