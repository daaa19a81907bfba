package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/parleyhq/parley/pkg/bus"
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
	// FindMessage is record.MessageByID for a key of digits, else
	// record.MessageByWamid.
	FindMessage(ctx context.Context, companyID int64, key string) (record.Found, error)
	// PhoneMessages is record.PhoneMessages.
	PhoneMessages(ctx context.Context, companyID int64, phone string, f record.PhoneFilter) (record.PhonePage, error)
}

// batchSummaryJSON is a batch in GET /api/batches: what it sends (with the
// names of its campaign, automation and segment) and where it stands.
type batchSummaryJSON struct {
	ID             string        `json:"batch_id"`
	CompanyID      int64         `json:"company_id"`
	Kind           bus.BatchKind `json:"kind"`
	Source         bus.Source    `json:"source"`
	Status         string        `json:"status"`
	Error          string        `json:"error,omitempty"`
	CampaignID     *int64        `json:"campaign_id,omitempty"`
	CampaignName   string        `json:"campaign_name,omitempty"`
	AutomationID   *int64        `json:"automation_id,omitempty"`
	AutomationName string        `json:"automation_name,omitempty"`
	SegmentID      *int64        `json:"segment_id,omitempty"`
	SegmentName    string        `json:"segment_name,omitempty"`
	ContactCount   int           `json:"contacts"`
	IsForced       bool          `json:"is_forced"`
	ScheduledAt    *time.Time    `json:"scheduled_at,omitempty"`
	AcceptedAt     time.Time     `json:"accepted_at"`
	CompletedAt    *time.Time    `json:"completed_at,omitempty"`
	CancelledAt    *time.Time    `json:"cancelled_at,omitempty"`
}

// batchJSON is the public shape of a batch: GET /api/batches/{batch_id},
// and the batch in a cancel's answer: the summary and its messages counted.
type batchJSON struct {
	batchSummaryJSON
	// Counts has every message state, zero included.
	Counts map[record.State]int `json:"counts"`
}

func batchSummary(b record.Batch) batchSummaryJSON {
	return batchSummaryJSON{
		ID: b.ID, CompanyID: b.CompanyID, Kind: b.Kind, Source: b.Source, Status: string(b.Status), Error: b.Error,
		CampaignID: b.CampaignID, CampaignName: b.CampaignName, AutomationID: b.AutomationID, AutomationName: b.AutomationName,
		SegmentID: b.SegmentID, SegmentName: b.SegmentName,
		ContactCount: b.ContactCount, IsForced: b.IsForced, ScheduledAt: b.ScheduledAt, AcceptedAt: b.AcceptedAt,
		CompletedAt: b.CompletedAt, CancelledAt: b.CancelledAt,
	}
}

func batchBody(b record.Batch) batchJSON {
	return batchJSON{batchSummaryJSON: batchSummary(b), Counts: b.Counts}
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
	writeValue(c, http.StatusOK, batchBody(b))
}
