package limits

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func TestHandlerAnswersPastTheLimitWithRetryAfterAndJSON(t *testing.T) {
	l := &Limits{Zone: "test-handler", Key: "{http.request.header.X-Who}", MaxInFlight: 1, RetryAfter: 7}
	if err := l.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	release, entered := make(chan struct{}), make(chan struct{})
	hold := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		close(entered)
		<-release
		w.WriteHeader(http.StatusOK)
		return nil
	})
	request := func(who string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		r.Header.Set("X-Who", who)
		repl := caddy.NewReplacer()
		repl.Map(func(key string) (any, bool) {
			if key == "http.request.header.X-Who" {
				return r.Header.Get("X-Who"), true
			}
			return nil, false
		})
		return r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, repl))
	}
	done := make(chan struct{})
	go func() {
		_ = l.ServeHTTP(httptest.NewRecorder(), request("a"), hold)
		close(done)
	}()
	<-entered
	w := httptest.NewRecorder()
	_ = l.ServeHTTP(w, request("a"), hold)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "7" {
		t.Fatalf("second request of a: %d Retry-After %q, want 429 and 7", w.Code, w.Header().Get("Retry-After"))
	}
	var body struct{ Error struct{ Type string } }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error.Type != "rate_limit_exceeded" {
		t.Fatalf("body %q is not an OpenAI-style error", w.Body.String())
	}
	ok := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error { return nil })
	w = httptest.NewRecorder()
	_ = l.ServeHTTP(w, request("b"), ok)
	if w.Code != http.StatusOK {
		t.Fatalf("another client was refused: %d", w.Code)
	}
	close(release)
	<-done
}

func TestValidateRefusesARateWithoutBurst(t *testing.T) {
	l := &Limits{Zone: "z", PerMinute: 60}
	_ = l.Provision(caddy.Context{})
	if l.Validate() == nil {
		t.Fatal("a rate with burst 0 would refuse every request")
	}
}
