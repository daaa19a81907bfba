package loadtest

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/gin-gonic/gin"
	"github.com/go-redis/redis_rate/v10"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
)

// Floor is the least a gateway does per request: read the body, one
// redis_rate Allow for the caller, one synchronous JetStream publish, a 202.
// It authenticates nothing and validates nothing.
type Floor struct {
	srv *http.Server
}

// NewFloor returns the floor's server, publishing to subject.
func NewFloor(rdb *redis.Client, js jetstream.JetStream, subject string) *Floor {
	gin.SetMode(gin.ReleaseMode)
	limiter := redis_rate.NewLimiter(rdb)
	var n atomic.Int64
	e := gin.New()
	e.POST("/api/campaigns/send", func(c *gin.Context) {
		body, err := io.ReadAll(c.Request.Body)
		if err != nil {
			c.AbortWithStatus(http.StatusBadRequest)
			return
		}
		res, err := limiter.Allow(c.Request.Context(), "floor:"+c.GetHeader("service-api-key"), redis_rate.PerSecond(10))
		if err != nil {
			c.AbortWithStatus(http.StatusServiceUnavailable)
			return
		}
		if res.Allowed == 0 {
			c.AbortWithStatusJSON(http.StatusTooManyRequests, gin.H{"error": "Rate limit exceeded: 10 per 1 second"})
			return
		}
		id := strconv.FormatInt(n.Add(1), 10)
		if _, err := js.Publish(c.Request.Context(), subject, body, jetstream.WithMsgID(id)); err != nil {
			c.AbortWithStatus(http.StatusServiceUnavailable)
			return
		}
		c.JSON(http.StatusAccepted, gin.H{"status": "accepted", "batch_id": id, "contacts": 10})
	})
	return &Floor{srv: &http.Server{Handler: e}}
}

// Serve serves on ln until ctx ends.
func (f *Floor) Serve(ctx context.Context, ln net.Listener) error {
	go func() { <-ctx.Done(); _ = f.srv.Close() }()
	if err := f.srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}
