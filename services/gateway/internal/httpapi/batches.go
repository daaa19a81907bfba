package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/record"
)

// BatchReader reads batches and messages (pkg/record).
type BatchReader interface {
	// Batch is record.FindBatch: the batch's status and counts from the
	// record, or from the stream for a batch no dispatcher has taken yet;
	// record.ErrNotFound when neither holds it.
	Batch(ctx context.Context, companyID int64, batchID string) (record.Batch, error)
	// ListBatches is record.ListBatches.
	ListBatches(ctx context.Context, companyID int64, f record.BatchFilter) (record.BatchPage, error)
	// FindMessage is record.FindMessage: a message either way, by Parley's
	// id or its wamid.
	FindMessage(ctx context.Context, companyID int64, key string) (record.Entry, error)
	// PhoneMessages is record.PhoneMessages.
	PhoneMessages(ctx context.Context, companyID int64, phone string, f record.PhoneFilter) (record.PhonePage, error)
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
	b, err := h.batches.Batch(c.Request.Context(), principal(c).CompanyID, id.String())
	switch {
	case errors.Is(err, record.ErrNotFound):
		abortDetail(c, http.StatusNotFound, "Batch not found")
		return
	case err != nil:
		h.log.Error("read batch", zap.Error(err))
		abortUnavailable(c)
		return
	}
	writeValue(c, http.StatusOK, b) // record.Batch's JSON is the API's
}
