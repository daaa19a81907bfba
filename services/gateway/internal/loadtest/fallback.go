package loadtest

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// fallbackMetric counts the rate-limit decisions a gateway made without
// Redis (pkg/ratelimit). A measured run during which it moves did not
// measure the real limiter.
const fallbackMetric = "parley_ratelimit_fallback_total"

// Fallbacks is the sum of parley_ratelimit_fallback_total over its reasons
// on the gateway at addr.
func Fallbacks(ctx context.Context, addr string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", fallbackMetric, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("read %s: GET /metrics: status %d", fallbackMetric, res.StatusCode)
	}
	return sumMetric(bufio.NewScanner(res.Body), fallbackMetric)
}

// sumMetric adds up the samples of one metric in Prometheus text format; a
// metric that is not exposed is an error, not 0.
func sumMetric(sc *bufio.Scanner, name string) (float64, error) {
	var sum float64
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
			return 0, fmt.Errorf("%s: %q: %w", name, line, err)
		}
		sum += v
		found = true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("%s is not exposed", name)
	}
	return sum, nil
}

// fallbackGuard fails a measured run during which the gateway's limiter
// fell back.
type fallbackGuard struct {
	addr   string
	before float64
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
	if n != g.before {
		return fmt.Errorf("the rate limiter fell back to its per-process limiter %.0f times during the run (%s moved from %.0f to %.0f): Redis was not measured",
			n-g.before, fallbackMetric, g.before, n)
	}
	return nil
}
