package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestPanicsBecome500WithoutDetails(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	core, logs := observer.New(zap.ErrorLevel)
	e := gin.New()
	e.Use(recoverPanics(zap.New(core)), secureHeaders)
	e.POST("/boom", func(*gin.Context) { panic("secret internal state") })

	w := httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/boom", strings.NewReader(`{"token":"x"}`)))
	if w.Code != http.StatusInternalServerError || w.Body.String() != `{"detail":"Internal server error"}` {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("security headers missing on a 500: %v", w.Header())
	}
	if logs.FilterMessage("panic in handler").Len() != 1 {
		t.Fatalf("the panic was not logged: %v", logs.All())
	}
}
