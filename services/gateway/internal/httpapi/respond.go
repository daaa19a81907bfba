package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
)

// The bodies of the spec's section 7, and the few the spec leaves to us.
const (
	msgInvalidKey      = "Invalid API key"
	msgSubscription    = "Subscription required"
	msgNotProvisioned  = "Workspace not provisioned: finish setting up your Parley workspace before using the API"
	msgInternal        = "Internal server error"
	msgUnavailable     = "Service temporarily unavailable: the send was not queued and nothing was accepted; retry with backoff"
	msgBadBody         = "There was an error parsing the body"
	msgNotFound        = "Not Found"
	msgMethod          = "Method Not Allowed"
	msgSegmentNotFound = "Segment not found"
)

var jsonContentType = []string{"application/json"}

// writeJSON writes a prepared body. The gateway's bodies are small and
// built by hand or by encoding/json; gin's renderers are not needed.
func writeJSON(c *gin.Context, status int, body []byte) {
	h := c.Writer.Header()
	h["Content-Type"] = jsonContentType
	h.Set("Content-Length", strconv.Itoa(len(body)))
	c.Writer.WriteHeader(status)
	_, _ = c.Writer.Write(body)
}

// abortDetail answers the ErrorResponse shape {"detail": "..."}.
func abortDetail(c *gin.Context, status int, detail string) {
	b, _ := json.Marshal(struct {
		Detail string `json:"detail"`
	}{detail})
	writeJSON(c, status, b)
	c.Abort()
}

// abortUnavailable answers 503 and tells the client when to retry.
func abortUnavailable(c *gin.Context) {
	c.Header("Retry-After", "1")
	abortDetail(c, http.StatusServiceUnavailable, msgUnavailable)
}

// writeAccepted answers 202 with the SendAcceptedResponse and Location, the
// batch's status URL.
func writeAccepted(c *gin.Context, batchID string, contacts int) {
	c.Writer.Header()["Location"] = []string{"/api/batches/" + batchID}
	writeJSON(c, http.StatusAccepted, appendAccepted(make([]byte, 0, 96), batchID, contacts))
}

// appendAccepted renders the SendAcceptedResponse without reflection.
func appendAccepted(dst []byte, batchID string, contacts int) []byte {
	dst = append(dst, `{"status":"accepted","batch_id":"`...)
	dst = append(dst, batchID...) // a UUID: nothing to escape
	dst = append(dst, `","contacts":`...)
	dst = strconv.AppendInt(dst, int64(contacts), 10)
	return append(dst, '}')
}
