package config

import "testing"

// TestEffectiveStatusAppliers: the group commit leaves the requests a
// connection of a small pool instead of refusing to start.
func TestEffectiveStatusAppliers(t *testing.T) {
	for _, c := range []struct{ appliers, maxConns, want int }{{4, 10, 4}, {4, 4, 3}, {4, 2, 1}, {4, 1, 1}, {1, 10, 1}} {
		var cfg Config
		cfg.StatusAppliers, cfg.Postgres.MaxConns = c.appliers, int32(c.maxConns)
		if got := cfg.EffectiveStatusAppliers(); got != c.want {
			t.Errorf("%d appliers, %d connections: %d run, want %d", c.appliers, c.maxConns, got, c.want)
		}
	}
}
