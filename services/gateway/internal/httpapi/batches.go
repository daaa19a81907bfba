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

// BatchReader reads a batch's status and counts (pkg/delivery).
type BatchReader interface {
	BatchStatus(ctx context.Context, companyID int64, batchID string) (delivery.Batch, error)
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
	b, err := h.batches.BatchStatus(c.Request.Context(), principal(c).CompanyID, id.String())
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
