package httpapi

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/parleyhq/parley/services/gateway/internal/apidoc"
)

// serveDoc answers a document from memory, revalidated by its ETag and
// cacheable for five minutes (everyone gets the same bytes).
func serveDoc(doc *apidoc.Document, contentType string, body []byte, csp string) gin.HandlerFunc {
	return func(c *gin.Context) {
		h := c.Writer.Header()
		h.Set("Cache-Control", "public, max-age=300")
		h.Set("ETag", doc.ETag)
		if csp != "" {
			h.Set("Content-Security-Policy", csp)
		}
		if match := c.GetHeader("If-None-Match"); match != "" && match == doc.ETag {
			c.Status(http.StatusNotModified)
			return
		}
		h.Set("Content-Type", contentType)
		h.Set("Content-Length", strconv.Itoa(len(body)))
		c.Writer.WriteHeader(http.StatusOK)
		_, _ = c.Writer.Write(body)
	}
}

// docsCSP lets the page use its one inline style and nothing else: no
// script, no image, no font, no frame, no form.
func docsCSP(doc *apidoc.Document) string {
	return "default-src 'none'; style-src '" + doc.StyleHash + "'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
}
