package ratelimit

import (
	"net/http"
	"testing"
	"time"
)

func TestLimitString(t *testing.T) {
	tests := []struct {
		lim  Limit
		want string
	}{
		{PerSecond(10), "10 per 1 second"},
		{PerSecond(20), "20 per 1 second"},
		{PerMinute(1), "1 per 1 minute"},
		{Every(1, 10*time.Second), "1 per 10 second"},
		{Every(3, 2*time.Minute), "3 per 2 minute"},
		{Every(5, 90*time.Second), "5 per 90 second"},
		{PerHour(100), "100 per 1 hour"},
		{Every(7, 48*time.Hour), "7 per 2 day"},
		{Every(1, 1500*time.Millisecond), "1 per 1500 millisecond"},
		{Every(1, 1500*time.Microsecond), "1 per 1.5ms"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.lim.String(); got != tt.want {
				t.Fatalf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLimitConstructors(t *testing.T) {
	tests := []struct {
		name string
		got  Limit
		want Limit
	}{
		{"PerSecond", PerSecond(10), Limit{Rate: 10, Burst: 10, Period: time.Second}},
		{"PerMinute", PerMinute(1), Limit{Rate: 1, Burst: 1, Period: time.Minute}},
		{"PerHour", PerHour(2), Limit{Rate: 2, Burst: 2, Period: time.Hour}},
		{"Every", Every(1, 10*time.Second), Limit{Rate: 1, Burst: 1, Period: 10 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Fatalf("got %+v, want %+v", tt.got, tt.want)
			}
			if err := tt.got.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

func TestLimitValidate(t *testing.T) {
	bad := []Limit{
		{},
		{Rate: 0, Burst: 1, Period: time.Second},
		{Rate: 1, Burst: 0, Period: time.Second},
		{Rate: 1, Burst: 1, Period: 0},
		{Rate: 10, Burst: 1, Period: 5 * time.Nanosecond},
	}
	for _, l := range bad {
		if l.Validate() == nil {
			t.Errorf("Validate(%+v) = nil, want an error", l)
		}
	}
}

func TestSetHeaders(t *testing.T) {
	tests := []struct {
		name string
		res  Result
		want map[string]string
	}{
		{
			name: "allowed",
			res:  Result{Allowed: true, Limit: PerSecond(10), Remaining: 7, ResetAfter: 300 * time.Millisecond},
			want: map[string]string{HeaderLimit: "10", HeaderRemaining: "7", HeaderReset: "1", HeaderRetryAfter: ""},
		},
		{
			name: "denied per minute",
			res:  Result{Limit: PerMinute(1), RetryAfter: 59*time.Second + 200*time.Millisecond, ResetAfter: 59*time.Second + 200*time.Millisecond},
			want: map[string]string{HeaderLimit: "1", HeaderRemaining: "0", HeaderReset: "60", HeaderRetryAfter: "60"},
		},
		{
			name: "denied, float noise above a whole second",
			res:  Result{Limit: Every(1, 10*time.Second), RetryAfter: 10*time.Second + 300, ResetAfter: 10*time.Second + 300},
			want: map[string]string{HeaderLimit: "1", HeaderRemaining: "0", HeaderReset: "10", HeaderRetryAfter: "10"},
		},
		{
			name: "denied for less than a millisecond still says 1",
			res:  Result{Limit: PerSecond(20), RetryAfter: 400 * time.Microsecond, ResetAfter: time.Second},
			want: map[string]string{HeaderLimit: "20", HeaderRemaining: "0", HeaderReset: "1", HeaderRetryAfter: "1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			tt.res.SetHeaders(h)
			for k, v := range tt.want {
				if got := h.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}
