package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/delivery"
)

// BatchReader reads a batch's status and counts: RecordedBatch from
// PostgreSQL (pkg/delivery), PendingBatch from the stream for a batch no
// dispatcher has taken yet. Both answer delivery.ErrNotFound for a batch
// they do not hold.
type BatchReader interface {
	RecordedBatch(ctx context.Context, companyID int64, batchID string) (delivery.Batch, error)
	PendingBatch(ctx context.Context, companyID int64, batchID string) (delivery.Batch, error)
}

// findBatch looks in the record, then in the stream, then in the record
// again: a dispatcher commits a batch's record before it acks the stream's
// copy, so a batch accepted and moving from one to the other is always found.
func findBatch(ctx context.Context, r BatchReader, companyID int64, id string) (delivery.Batch, error) {
	b, err := r.RecordedBatch(ctx, companyID, id)
	if !errors.Is(err, delivery.ErrNotFound) {
		return b, err
	}
	b, err = r.PendingBatch(ctx, companyID, id)
	if !errors.Is(err, delivery.ErrNotFound) {
		return b, err
	}
	return r.RecordedBatch(ctx, companyID, id)
}

// batchStatus answers GET /api/batches/{batch_id}: the batch's lifecycle
// status and how many of its messages are in each state. Another company's
// batch, or an id that is not a batch id, is 404.
func (h *handlers) batchStatus(c *gin.Context) {
	id, err := uuid.Parse(c.Param("batch_id"))
	if err != nil {
		abortDetail(c, http.StatusNotFound, "Batch not found")
		return
	}
	b, err := findBatch(c.Request.Context(), h.batches, principal(c).CompanyID, id.String())
	switch {
	case errors.Is(err, delivery.ErrNotFound):
		abortDetail(c, http.StatusNotFound, "Batch not found")
		return
	case err != nil:
		h.log.Error("read batch", zap.Error(err))
		abortUnavailable(c)
		return
	}
	body, err := json.Marshal(b)
	if err != nil {
		abortDetail(c, http.StatusInternalServerError, msgInternal)
		return
	}
	writeJSON(c, http.StatusOK, body)
}
