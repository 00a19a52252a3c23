package limits

import (
	"context"
	"encoding/json"
	"errors"
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

func TestValidateRefusesWhatCouldNotMeanWhatItSays(t *testing.T) {
	for why, l := range map[string]*Limits{
		"a rate with burst 0 would refuse every request": {Zone: "z", PerMinute: 60},
		"ipv6_prefix 129 is no prefix length":            {Zone: "z", IPv6Prefix: 129},
	} {
		_ = l.Provision(caddy.Context{})
		if l.Validate() == nil {
			t.Fatal(why)
		}
	}
}

func TestIPv6AddressesCountByTheirNetwork(t *testing.T) {
	l := Limits{IPv6Prefix: 64}
	same := []string{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::1%eth0"}
	for _, a := range same {
		if got := l.group(a); got != "2001:db8:1:2::/64" {
			t.Fatalf("%s counts as %q, want its /64", a, got)
		}
	}
	if l.group("2001:db8:1:3::1") == l.group(same[0]) {
		t.Fatal("two /64 networks share one count")
	}
	for _, k := range []string{"192.0.2.7", "::ffff:192.0.2.7", "sk-key-id"} {
		if got := l.group(k); got != k {
			t.Fatalf("%q counts as %q: only IPv6 addresses are grouped", k, got)
		}
	}
	if got := (Limits{}).group(same[0]); got != same[0] {
		t.Fatalf("without ipv6_prefix the address is the key, got %q", got)
	}
}

func TestAnUnknownPlaceholderKeyIsAnErrorNotOneSharedBucket(t *testing.T) {
	l := &Limits{Zone: "test-unknown", Key: "{http.request.client_ip}", MaxInFlight: 1}
	_ = l.Provision(caddy.Context{})
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	r = r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer()))
	passed := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	err := l.ServeHTTP(httptest.NewRecorder(), r, passed)
	var herr caddyhttp.HandlerError
	if !errors.As(err, &herr) || herr.StatusCode != http.StatusInternalServerError {
		t.Fatalf("an unknown placeholder key: %v, want a 500 error", err)
	}
}
