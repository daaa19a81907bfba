package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/parleyhq/parley/services/gateway/internal/sends"
)

// problem is one item of a 422 body the gateway makes itself (idempotency,
// automation configuration), in the same shape as the schema's items.
type problem struct {
	Type  string `json:"type"`
	Loc   []any  `json:"loc"`
	Msg   string `json:"msg"`
	Input any    `json:"input"`
}

func fromSends(ps []sends.Problem) []problem {
	out := make([]problem, len(ps))
	for i, p := range ps {
		out[i] = problem{Type: p.Type, Loc: p.Loc, Msg: p.Msg, Input: p.Input}
	}
	return out
}

func abortProblems(c *gin.Context, ps []problem) {
	b, err := json.Marshal(struct {
		Detail []problem `json:"detail"`
	}{ps})
	if err != nil {
		abortDetail(c, http.StatusInternalServerError, msgInternal)
		return
	}
	writeJSON(c, http.StatusUnprocessableEntity, b)
	c.Abort()
}

func tooLargeMsg(max int64) string {
	return fmt.Sprintf("Request body too large: the limit is %d bytes", max)
}
